/* calibrate/mock_cuda.c — a simulated CUDA driver and CUPTI in one shared library, for running
 * `tsopt calibrate` and `tsopt tune` end to end on a machine without a GPU (make builds it for the tests).
 * Device memory is host memory; `mock_kernel(seconds)` lets a stand-in kernel library (tests/tune/)
 * occupy the simulated stream like a launch does; `mock_fault()` is a kernel that faults (from then on
 * every call returns CUDA_ERROR_ILLEGAL_ADDRESS, 700: the context is poisoned, as on a GPU) and
 * `mock_hang()` one that never ends (the next synchronisation blocks forever). Like the real driver, it
 * refuses device calls in a process other than the one that called cuInit (3, CUDA_ERROR_NOT_INITIALIZED:
 * a forked child cannot use its parent's CUDA) and memory, launch and synchronisation calls before a
 * context is current (201, CUDA_ERROR_INVALID_CONTEXT).
 * Kernel durations follow t = c0 + work / rate with ±1% noise (4.1/4.0/3.9 TB/s read/write/copy,
 * 66 TFLOP/s FMA, 4.2 Tops/s exp2, 550 TFLOP/s mma, 33 us per wave of 132 blocks); CUPTI records are
 * written in the CUpti_ActivityKernel layout (kind at 0, start at 16, end at 24, 216 bytes each).
 *
 *   cc -O1 -shared -fPIC -o build/libmockcuda.so calibrate/mock_cuda.c -lm
 *   TSOPT_LIBCUDA=build/libmockcuda.so TSOPT_LIBCUPTI=build/libmockcuda.so build/tsopt calibrate --quick
 * (NVRTC is the real one: libnvrtc.so.13 must load.) */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>
typedef struct { const char *name; } fn;
static fn fns[16]; static int nfn;
static double clk_launch = 1.0, stream_end = 1.0; /* seconds */
static uint64_t rs[100000][2]; static size_t nr;
static void (*req)(uint8_t **, size_t *, size_t *); static void (*comp)(void *, uint32_t, uint8_t *, size_t, size_t);
static int enabled; static unsigned long long seed = 1;
static int sticky, hung; /* a faulted context's error; a kernel that never ends */
static pid_t init_pid; static int ctx_current;
static int usable(void){ return init_pid != getpid() ? 3 : !ctx_current ? 201 : sticky; }
#define INIT_CHECK if(init_pid != getpid()) return 3
#define CTX_CHECK do{ int u_=usable(); if(u_) return u_; }while(0)
static int wait_gpu(void){ int u=usable(); if(u) return u; while(hung) sleep(1); return sticky; }
static double noise(void){ seed = seed*6364136223846793005ull+1442695040888963407ull; return ((double)(seed>>11)/9007199254740992.0-0.5)*0.02; }
int cuInit(unsigned f){(void)f;init_pid=getpid();return 0;}
int cuDriverGetVersion(int *v){*v=13000;return 0;}
int cuDeviceGetCount(int *n){INIT_CHECK;*n=1;return 0;}
int cuDeviceGet(int *d,int i){INIT_CHECK;*d=i;return 0;}
int cuDeviceGetName(char *s,int n,int d){(void)d;snprintf(s,(size_t)n,"Mock H200");return 0;}
int cuDeviceGetAttribute(int *v,int a,int d){(void)d; switch(a){case 16:*v=132;break;case 75:*v=9;break;case 76:*v=0;break;case 38:*v=52428800;break;case 81:*v=233472;break;case 97:*v=232448;break;default:*v=0;} return 0;}
int cuDeviceTotalMem_v2(size_t *m,int d){(void)d;*m=(size_t)141<<30;return 0;}
int cuDevicePrimaryCtxRetain(void **c,int d){INIT_CHECK;(void)d;*c=(void*)1;return 0;}
int cuDevicePrimaryCtxRelease_v2(int d){(void)d;return 0;}
int cuCtxSetCurrent(void *c){INIT_CHECK;ctx_current=c!=NULL;return 0;}
int cuCtxSynchronize(void){return wait_gpu();}
int cuModuleLoadData(void **m,const void *img){(void)img;*m=(void*)2;return 0;}
int cuModuleUnload(void *m){(void)m;return 0;}
int cuModuleGetFunction(void **f,void *m,const char *name){(void)m;fns[nfn].name=name;*f=&fns[nfn++];return 0;}
int cuFuncSetAttribute(void *f,int a,int v){(void)f;(void)a;(void)v;return 0;}
int cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n,void *f,int b,size_t s){(void)f;(void)b;*n=s>100000?1:8;return 0;}
int cuMemAlloc_v2(unsigned long long *p,size_t n){CTX_CHECK;*p=(unsigned long long)(uintptr_t)malloc(n?n:1);return *p?0:2;}
int cuMemsetD8_v2(unsigned long long p,unsigned char v,size_t n){CTX_CHECK;memset((void*)(uintptr_t)p,v,n);return 0;}
int cuMemcpyHtoD_v2(unsigned long long d,const void *s,size_t n){CTX_CHECK;memcpy((void*)(uintptr_t)d,s,n);return 0;}
int cuMemcpyDtoH_v2(void *d,unsigned long long s,size_t n){int u=wait_gpu();if(u)return u;memcpy(d,(const void*)(uintptr_t)s,n);return 0;}
int cuMemGetInfo_v2(size_t *f,size_t *t){*f=*t=(size_t)141<<30;return 0;}
int cuMemFree_v2(unsigned long long p){free((void*)(uintptr_t)p);return 0;}
int cuMemsetD32_v2(unsigned long long p,unsigned v,size_t n){(void)p;(void)v;(void)n;return 0;}
int cuLaunchKernel(fn *f,unsigned gx,unsigned gy,unsigned gz,unsigned bx,unsigned by,unsigned bz,unsigned sm,void *st,void **p,void **x){
  (void)gy;(void)gz;(void)by;(void)bz;(void)sm;(void)st;(void)x;
  CTX_CHECK;
  const char *n=f->name; double d=0.6e-6, thr=(double)gx*bx;
  if(!strcmp(n,"dram_read")) d=2e-6+(double)(*(unsigned long long*)p[1])*16/4.1e12;
  else if(!strcmp(n,"dram_write")) d=1.5e-6+(double)(*(unsigned long long*)p[1])*16/4.0e12;
  else if(!strcmp(n,"dram_copy")) d=2.5e-6+(double)(*(unsigned long long*)p[2])*32/3.9e12;
  else if(!strcmp(n,"fma_loop")) d=3e-6+thr*(*(int*)p[1])*16/6.6e13;
  else if(!strcmp(n,"sfu_loop")) d=3e-6+thr*(*(int*)p[1])*8/4.2e12;
  else if(!strcmp(n,"mma_loop")) d=3e-6+thr/32*(*(int*)p[1])*8*4096/5.5e14;
  else if(!strcmp(n,"wave_block")) d=2e-6+ceil(gx/132.0)*33e-6;
  d*=1+noise();
  clk_launch+=4e-6*(1+noise()*10);
  double s=fmax(clk_launch,stream_end+0.3e-6), e=s+d; stream_end=e;
  if(enabled&&nr<100000){rs[nr][0]=(uint64_t)(s*1e9);rs[nr][1]=(uint64_t)(e*1e9);nr++;}
  return 0;}
/* A stand-in kernel of `d` seconds on the simulated stream (tests/tune/fake_candidate.c calls it). */
void mock_kernel(double d){
  clk_launch+=4e-6;
  double s=fmax(clk_launch,stream_end+0.3e-6), e=s+d; stream_end=e;
  if(enabled&&nr<100000){rs[nr][0]=(uint64_t)(s*1e9);rs[nr][1]=(uint64_t)(e*1e9);nr++;}}
void mock_fault(void){ sticky = 700; }
void mock_hang(void){ hung = 1; }
int cuEventCreate(double **e,unsigned f){(void)f;*e=malloc(sizeof(double));return 0;}
int cuEventRecord(double *e,void *s){(void)s;CTX_CHECK;*e=stream_end;return 0;}
int cuEventSynchronize(double *e){(void)e;return wait_gpu();}
int cuEventElapsedTime_v2(float *ms,double *a,double *b){*ms=(float)((*b-*a)*1e3);return 0;}
int cuEventDestroy_v2(double *e){free(e);return 0;}
int cuGetErrorString(int r,const char **s){*s=r==700?"an illegal memory access was encountered":"mock error";return 0;}
/* CUPTI */
int cuptiActivityRegisterCallbacks(void *a,void *b){memcpy(&req,&a,sizeof a);memcpy(&comp,&b,sizeof b);return 0;}
int cuptiActivityEnable(int k){enabled=(k==10);return 0;}
int cuptiActivityDisable(int k){(void)k;enabled=0;return 0;}
int cuptiActivityFlushAll(uint32_t f){(void)f; if(!nr) return 0; uint8_t *buf; size_t size,max; req(&buf,&size,&max);
  size_t v=0,i=0; for(;i<nr && v+216<=size;i++){memset(buf+v,0,216);uint32_t k=10;memcpy(buf+v,&k,4);memcpy(buf+v+16,&rs[i][0],8);memcpy(buf+v+24,&rs[i][1],8);v+=216;}
  memmove(rs,rs+i,(nr-i)*sizeof rs[0]); nr-=i; comp(NULL,0,buf,size,v); if(nr) return cuptiActivityFlushAll(f); return 0;}
int cuptiActivityGetNextRecord(uint8_t *buf,size_t valid,void **rec){ uint8_t *next = *rec ? (uint8_t*)*rec+216 : buf; if(next+216>buf+valid) return 3; *rec=next; return 0;}
int cuptiGetResultString(int r,const char **s){(void)r;*s="mock";return 0;}
