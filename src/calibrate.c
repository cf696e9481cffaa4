/* calibrate.c — `tsopt calibrate` (see calibrate.h): least-squares fits with GSL, the cost-model writer,
 * and the GPU driver: libcuda, NVRTC and CUPTI opened with dlopen, microbenchmarks from
 * calibrate/kernels.cu, kernel durations from CUPTI activity records (CUDA events as the fallback). */
#include "calibrate.h"
#include "home.h"

#include <errno.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "costmodel.h"
#include "gpu.h"
#include "util.h"
#include "version.h"

/* ---- fitting ----------------------------------------------------------------------------------- */

int ts_fit_linear(const char *name, const char *model, const double *X, const double *y, int n, int p, bool relative,
                  ts_fit *f, char **err) {
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->model = model;
    f->n = n;
    f->p = p;
    *err = NULL;
    if (p < 1 || p > TS_FIT_MAXP) {
        *err = ts_strfmt("%s: %d parameters; 1 to %d supported", name, p, TS_FIT_MAXP);
        return -1;
    }
    if (n < p + 1) {
        *err = ts_strfmt("%s: %d sample%s for %d parameters; at least %d needed", name, n, n == 1 ? "" : "s", p, p + 1);
        return -1;
    }
    double scale[TS_FIT_MAXP] = {0};
    for (int i = 0; i < n; i++) {
        if (!isfinite(y[i]) || (relative && !(y[i] > 0))) {
            *err = ts_strfmt("%s: sample %d has time %g; times must be finite%s", name, i, y[i], relative ? " and positive" : "");
            return -1;
        }
        for (int j = 0; j < p; j++) {
            double x = X[(size_t)i * (size_t)p + (size_t)j];
            if (!isfinite(x)) {
                *err = ts_strfmt("%s: sample %d has a non-finite size", name, i);
                return -1;
            }
            scale[j] = fmax(scale[j], fabs(x));
        }
    }
    for (int j = 0; j < p; j++)
        if (!(scale[j] > 0)) {
            *err = ts_strfmt("%s: column %d of the design is all zero: the samples cannot determine %d parameters", name, j, p);
            return -1;
        }

    /* Columns scaled to [-1, 1] so that the rank test compares like with like (bytes reach 1e9). */
    gsl_matrix *A = gsl_matrix_alloc((size_t)n, (size_t)p);
    gsl_vector *yv = gsl_vector_alloc((size_t)n), *w = gsl_vector_alloc((size_t)n), *c = gsl_vector_alloc((size_t)p);
    gsl_matrix *cov = gsl_matrix_alloc((size_t)p, (size_t)p);
    gsl_multifit_linear_workspace *work = gsl_multifit_linear_alloc((size_t)n, (size_t)p);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < p; j++)
            gsl_matrix_set(A, (size_t)i, (size_t)j, X[(size_t)i * (size_t)p + (size_t)j] / scale[j]);
        gsl_vector_set(yv, (size_t)i, y[i]);
        gsl_vector_set(w, (size_t)i, relative ? 1.0 / (y[i] * y[i]) : 1.0);
    }
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    double chisq = 0;
    size_t rank = 0;
    int st = relative ? gsl_multifit_wlinear_tsvd(A, w, yv, 1e-9, c, cov, &chisq, &rank, work)
                      : gsl_multifit_linear_tsvd(A, yv, 1e-9, c, cov, &chisq, &rank, work);
    gsl_set_error_handler(old);
    int rc = 0;
    if (st != GSL_SUCCESS) {
        *err = ts_strfmt("%s: least squares failed: %s", name, gsl_strerror(st));
        rc = -1;
    } else if (rank < (size_t)p) {
        *err = ts_strfmt("%s: the samples determine only %zu of %d parameters: the sizes must vary", name, rank, p);
        rc = -1;
    } else {
        for (int j = 0; j < p; j++) f->coef[j] = gsl_vector_get(c, (size_t)j) / scale[j];
        double mean = 0, ss_res = 0, ss_tot = 0, rel2 = 0, relmax = 0, absmean = 0;
        for (int i = 0; i < n; i++) mean += y[i] / n, absmean += fabs(y[i]) / n;
        for (int i = 0; i < n; i++) {
            double fit = 0;
            for (int j = 0; j < p; j++) fit += f->coef[j] * X[(size_t)i * (size_t)p + (size_t)j];
            double r = y[i] - fit, rel = relative ? r / y[i] : (absmean > 0 ? r / absmean : 0);
            ss_res += r * r;
            ss_tot += (y[i] - mean) * (y[i] - mean);
            rel2 += rel * rel;
            relmax = fmax(relmax, fabs(rel));
        }
        f->r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : (ss_res == 0 ? 1 : 0);
        f->resid_rms = sqrt(rel2 / n);
        f->resid_max = relmax;
    }
    gsl_multifit_linear_free(work);
    gsl_matrix_free(cov);
    gsl_vector_free(c);
    gsl_vector_free(w);
    gsl_vector_free(yv);
    gsl_matrix_free(A);
    return rc;
}

int ts_fit_rate(const char *name, const char *model, const double *work, const double *time, int n, ts_fit *f,
                char **err) {
    double *X = ts_xmalloc(sizeof *X * 2 * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) X[2 * i] = 1, X[2 * i + 1] = work[i];
    int rc = ts_fit_linear(name, model, X, time, n, 2, true, f, err);
    free(X);
    if (rc == 0 && !(f->coef[1] > 0)) {
        *err = ts_strfmt("%s: the fitted rate is not positive (the time does not grow with the work)", name);
        rc = -1;
    }
    return rc;
}

/* ---- the cost-model file ----------------------------------------------------------------------- */

static void put_quoted(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', out);
        fputc((unsigned char)*s >= 0x20 ? *s : ' ', out);
    }
    fputc('"', out);
}

void ts_calib_write_fit(FILE *out, const ts_fit *f) {
    fprintf(out, "  %s: {model: ", f->name);
    put_quoted(out, f->model ? f->model : "");
    fprintf(out, ", coef: [");
    for (int j = 0; j < f->p; j++) fprintf(out, "%s%.6g", j ? ", " : "", f->coef[j]);
    fprintf(out, "], r2: %.6f, resid_rms: %.4g, resid_max: %.4g, samples: %d}\n", f->r2, f->resid_rms, f->resid_max,
            f->n);
}

int ts_calib_parse_date(const char *s, time_t *out) {
    int y, mo, d, used = 0;
    if (sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &used) != 3 || s[used] || used != 10 || mo < 1 || mo > 12 || d < 1 ||
        d > 31 || y < 1970)
        return -1;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d};
    *out = timegm(&tm);
    return 0;
}

bool ts_calib_measures(const char *coefficient) {
    static const char *const measured[] = {"launch_s", "dram_bytes_per_s", "tensor_flops_per_s", "fma_flops_per_s",
                                           "sfu_ops_per_s", "sms", "l2_bytes"};
    for (size_t i = 0; i < sizeof measured / sizeof *measured; i++)
        if (strcmp(coefficient, measured[i]) == 0) return true;
    return false;
}

/* One `coefficients:` line: measured ones always, kept ones when present (0: absent, the loader fills it). */
static void write_coefficient(FILE *out, const char *name, double value) {
    if (ts_calib_measures(name)) {
        bool count = strcmp(name, "sms") == 0 || strcmp(name, "l2_bytes") == 0;
        fprintf(out, count ? "  %s: %.0f\n" : "  %s: %.5g\n", name, value);
    } else if (value > 0) {
        fprintf(out, "  %s: %.5g  # not measured: kept\n", name, value);
    }
}

int ts_calib_write_yaml(FILE *out, const ts_calib_result *r, time_t when) {
    struct tm tm;
    char date[32];
    gmtime_r(&when, &tm);
    strftime(date, sizeof date, "%Y-%m-%d", &tm);
    fprintf(out, "# The analytic cost model's coefficients for the %s (%s, %.0f SMs, %.0f MB L2), CALIBRATED:\n", r->gpu,
            r->arch, r->sms, r->l2_bytes / 1e6);
    fprintf(out, "# fitted by `tsopt calibrate` (tsopt %s) on %s UTC to microbenchmark kernel durations\n", TS_VERSION, date);
    fprintf(out, "# (calibrate/kernels.cu; timer: %s),\n", r->timer);
    fprintf(out, "# least squares with GSL (the `fit:` section). Every kernel's time is predicted as\n");
    fprintf(out, "#   launch_s + max(tensor FLOPs / (tensor_flops_per_s · efficiency · wave efficiency),\n");
    fprintf(out, "#                  FMA FLOPs / fma_flops_per_s, special-function ops / sfu_ops_per_s,\n");
    fprintf(out, "#                  DRAM bytes / dram_bytes_per_s)\n");
    fprintf(out, "# launch_s: %s spacing of back-to-back empty kernels; dram_bytes_per_s: the\n",
            isfinite(r->empty_kernel_s) ? "median start-to-start" : "mean (CUDA events)");
    fprintf(out, "# copy fit (bytes read + written, L2 flushed before each kernel); tensor_flops_per_s: mma.sync\n");
    fprintf(out, "# m16n8k16 fp16 with fp32 accumulation (what templates/ use); sms and l2_bytes: the device's.\n");
    fprintf(out, "# The template efficiencies (gemm_, attention_, reduce_, map_, row_efficiency) are NOT measured by the\n");
    fprintf(out, "# microbenchmarks: kept at their values from %s (fitting them needs template-instance\n", r->efficiencies_from);
    fprintf(out, "# timings, which come from `tsopt tune`, a later step).\n");
    fputs("gpu: ", out);
    put_quoted(out, r->gpu);
    fputs("\ncalibrated: true\ndriver: ", out);
    put_quoted(out, r->driver);
    fprintf(out, "\ndate: %s\ntimer: ", date);
    put_quoted(out, r->timer);
    fputs("\nsource: ", out);
    char *src = ts_strfmt("tsopt calibrate %s: microbenchmarks on %s, fitted with GSL", TS_VERSION, r->gpu);
    put_quoted(out, src);
    free(src);
    fprintf(out, "\ncoefficients:\n");
#define TS_X_COEF_LINE(name, same_as, fallback) write_coefficient(out, #name, r->name);
    TS_COSTMODEL_COEFFICIENTS(TS_X_COEF_LINE)
#undef TS_X_COEF_LINE
    fprintf(out, "# Each fit: the model, its coefficients (in the model's order), R² on the times, the residual\n");
    fprintf(out, "# spread (RMS and max of |measured - fitted| / measured; for the launch fit relative to the mean)\n");
    fprintf(out, "# and the number of samples. `measured:` holds figures read directly, not fitted.\n");
    fprintf(out, "fit:\n");
    for (int i = 0; i < r->nfits; i++) ts_calib_write_fit(out, &r->fit[i]);
    fprintf(out, "measured:\n");
    if (isfinite(r->empty_kernel_s)) fprintf(out, "  empty_kernel_s: %.5g\n", r->empty_kernel_s);
    if (isfinite(r->launch_gap_mean_s)) fprintf(out, "  launch_gap_mean_s: %.5g\n", r->launch_gap_mean_s);
    if (isfinite(r->occupancy_blocks_per_sm)) fprintf(out, "  wave_blocks_per_sm: %.0f\n", r->occupancy_blocks_per_sm);
    if (isfinite(r->wave_s)) fprintf(out, "  wave_s: %.5g\n", r->wave_s);
    if (isfinite(r->fractional_r2))
        fprintf(out, "  wave_fractional_r2: %.6f   # R² of the same sweep fitted without wave quantization\n",
                r->fractional_r2);
    return ferror(out) ? -1 : 0;
}

/* The GPU libraries' types and loaders are gpu.h's. */
typedef ts_cuda cuda_api;
typedef ts_nvrtc nvrtc_api;
typedef ts_cupti cupti_api;

/* ---- NVRTC ------------------------------------------------------------------------------------- */

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = ts_xmalloc(cap + 1);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) buf = ts_xrealloc(buf, (cap *= 2) + 1);
    }
    bool bad = ferror(f) != 0;
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

/* Compiles src for sm_<arch>; returns the cubin (and its size), or NULL with *err (the log) set. */
static char *nvrtc_compile(const nvrtc_api *nv, const char *src, const char *arch, size_t *size, char **err) {
    nvrtcProgram prog = NULL;
    nvrtcResult r = nv->nvrtcCreateProgram(&prog, src, "kernels.cu", 0, NULL, NULL);
    if (r != 0) {
        *err = ts_strfmt("nvrtcCreateProgram: %s", nv->nvrtcGetErrorString(r));
        return NULL;
    }
    char *archopt = ts_strfmt("--gpu-architecture=sm_%s", arch);
    const char *opts[] = {archopt, "--std=c++17"};
    r = nv->nvrtcCompileProgram(prog, 2, opts);
    free(archopt);
    char *cubin = NULL;
    if (r != 0) {
        size_t loglen = 0;
        nv->nvrtcGetProgramLogSize(prog, &loglen);
        char *log = ts_xmalloc(loglen + 1);
        log[0] = '\0';
        if (loglen) nv->nvrtcGetProgramLog(prog, log);
        log[loglen] = '\0';
        *err = ts_strfmt("NVRTC could not compile the kernels for sm_%s (%s):\n%s", arch, nv->nvrtcGetErrorString(r), log);
        free(log);
    } else if ((r = nv->nvrtcGetCUBINSize(prog, size)) != 0 || *size == 0) {
        *err = ts_strfmt("nvrtcGetCUBINSize: %s", r ? nv->nvrtcGetErrorString(r) : "empty cubin");
    } else {
        cubin = ts_xmalloc(*size);
        if ((r = nv->nvrtcGetCUBIN(prog, cubin)) != 0) {
            *err = ts_strfmt("nvrtcGetCUBIN: %s", nv->nvrtcGetErrorString(r));
            free(cubin);
            cubin = NULL;
        }
    }
    nv->nvrtcDestroyProgram(&prog);
    return cubin;
}

int ts_calib_compile_check(const char *kernels_path, const char *arch, char **err) {
    nvrtc_api nv = {0};
    *err = NULL;
    if (ts_gpu_load_nvrtc(&nv, err) != 0) return 1;
    size_t len;
    char *src = read_file(kernels_path, &len);
    int rc = -1;
    if (!src) {
        *err = ts_strfmt("cannot read %s: %s", kernels_path, strerror(errno));
    } else {
        size_t size = 0;
        char *cubin = nvrtc_compile(&nv, src, arch, &size, err);
        rc = cubin ? 0 : -1;
        free(cubin);
    }
    free(src);
    /* NVRTC stays loaded: unloading it would take its libstdc++ (and that library's exception pool) along */
    return rc;
}

/* ---- the GPU session --------------------------------------------------------------------------- */

typedef struct {
    cuda_api cu;
    nvrtc_api nv;
    cupti_api cp;
    bool have_cupti, cupti_on;
    char *cupti_why;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    int sms, cc_major, cc_minor, l2, smem_per_sm, smem_optin;
    size_t total_mem;
    char err[1024];
    /* the batch in flight: per launch its sample (-1: not measured) */
    int *ids, nids, idcap;
    CUevent *ev;
    int nev, evcap;
    int nsamples;
    double *dur, *start; /* per sample, seconds; start relative to the batch's first kernel (CUPTI only) */
    /* progress */
    long done, total;
    int stride; /* progress counts every stride-th sample (the launch benchmark's 2000 are short) */
    const char *phase;
    bool tty;
} gpu;

static int cu_check(gpu *g, CUresult r, const char *what) {
    if (r == 0) return 0;
    const char *s = NULL;
    if (g->cu.cuGetErrorString) g->cu.cuGetErrorString(r, &s);
    snprintf(g->err, sizeof g->err, "%s failed: %s (CUresult %d)", what, s ? s : "unknown error", r);
    return -1;
}
#define CU(g, call) cu_check((g), (g)->cu.call, #call)

static void progress(gpu *g) {
    if (g->total <= 0) return;
    int pct = (int)(100 * g->done / g->total), w = 32, fill = (int)((long)w * g->done / g->total);
    if (g->tty) {
        char bar[40];
        for (int i = 0; i < w; i++) bar[i] = i < fill ? '#' : '-';
        bar[w] = '\0';
        fprintf(stderr, "\rcalibrate [%s] %3d%%  %-28s", bar, pct, g->phase);
        fflush(stderr);
    }
}

static void begin_phase(gpu *g, const char *phase) {
    g->phase = phase;
    if (!g->tty) fprintf(stderr, "calibrate: %3d%%  %s\n", g->total ? (int)(100 * g->done / g->total) : 0, phase);
    progress(g);
}

static int batch_begin(gpu *g, int nsamples) {
    g->nids = g->nev = 0;
    g->nsamples = nsamples;
    free(g->dur);
    free(g->start);
    g->dur = ts_xmalloc(sizeof *g->dur * (size_t)(nsamples > 0 ? nsamples : 1));
    g->start = ts_xmalloc(sizeof *g->start * (size_t)(nsamples > 0 ? nsamples : 1));
    for (int i = 0; i < nsamples; i++) g->dur[i] = g->start[i] = NAN;
    if (CU(g, cuCtxSynchronize()) != 0) return -1;
    if (g->cupti_on) ts_cupti_clear();
    return 0;
}

static int new_event(gpu *g, CUevent *e) {
    if (CU(g, cuEventCreate(e, 0)) != 0) return -1;
    TS_GROW(g->ev, g->nev, g->evcap);
    g->ev[g->nev++] = *e;
    return 0;
}

/* Launches f; sample >= 0 is measured into g->dur[sample]. */
static int launch(gpu *g, CUfunction f, unsigned grid, unsigned block, unsigned smem, void **params, int sample) {
    CUevent e0 = NULL, e1 = NULL;
    bool timed = sample >= 0 && !g->cupti_on;
    if (timed && (new_event(g, &e0) != 0 || new_event(g, &e1) != 0 || CU(g, cuEventRecord(e0, NULL)) != 0)) return -1;
    if (CU(g, cuLaunchKernel(f, grid, 1, 1, block, 1, 1, smem, NULL, params, NULL)) != 0) return -1;
    if (timed && CU(g, cuEventRecord(e1, NULL)) != 0) return -1;
    TS_GROW(g->ids, g->nids, g->idcap);
    g->ids[g->nids++] = timed ? -2 - sample : sample; /* -2-s: timed by the events pair just made */
    if (sample >= 0 && sample % g->stride == 0 && (++g->done & 7) == 0) progress(g);
    return 0;
}

/* Waits for the batch and fills g->dur (and g->start with CUPTI). */
static int batch_end(gpu *g) {
    if (CU(g, cuCtxSynchronize()) != 0) return -1;
    int rc = 0;
    if (g->cupti_on) {
        uint64_t *start = NULL, *end = NULL;
        size_t n = ts_cupti_collect((size_t)g->nids, &start, &end);
        if (n != (size_t)g->nids) {
            snprintf(g->err, sizeof g->err,
                     "CUPTI returned %zu kernel records for %d launches (%s); `--events` times with CUDA events", n,
                     g->nids, g->phase);
            rc = -1;
        } else {
            for (size_t i = 0; i < n; i++) {
                int s = g->ids[i];
                if (s < 0) continue;
                g->dur[s] = (double)(end[i] - start[i]) * 1e-9;
                g->start[s] = (double)(start[i] - start[0]) * 1e-9;
            }
        }
        free(start);
        free(end);
        ts_cupti_clear();
    } else {
        int e = 0;
        for (int i = 0; i < g->nids && rc == 0; i++) {
            if (g->ids[i] > -2) continue;
            float ms = 0;
            rc = CU(g, cuEventElapsedTime(&ms, g->ev[e], g->ev[e + 1]));
            g->dur[-2 - g->ids[i]] = (double)ms * 1e-3;
            e += 2;
        }
    }
    for (int i = 0; i < g->nev; i++) g->cu.cuEventDestroy(g->ev[i]);
    g->nev = 0;
    for (int i = 0; i < g->nsamples && rc == 0; i++)
        if (!(g->dur[i] > 0)) {
            snprintf(g->err, sizeof g->err, "sample %d of %s has no duration", i, g->phase);
            rc = -1;
        }
    return rc;
}

/* ---- the microbenchmarks ----------------------------------------------------------------------- */

typedef struct {
    double *work, *time;
    int n;
} samples;

static void samples_init(samples *s, int n) {
    s->work = ts_xcalloc((size_t)n, sizeof *s->work);
    s->time = ts_xcalloc((size_t)n, sizeof *s->time);
    s->n = n;
}
static void samples_free(samples *s) {
    free(s->work);
    free(s->time);
}

typedef struct {
    CUfunction empty, read, write, copy, fma, sfu, mma, wave;
    CUdeviceptr a, b, flush, out;
    size_t big, flush_bytes;
    int reps;
} bench;

static int get_function(gpu *g, CUfunction *f, const char *name) {
    CUresult r = g->cu.cuModuleGetFunction(f, g->mod, name);
    if (r == 0) return 0;
    char what[96];
    snprintf(what, sizeof what, "cuModuleGetFunction(%s)", name);
    return cu_check(g, r, what);
}

static unsigned stream_grid(const gpu *g, size_t n4) {
    size_t blocks = (n4 + 255) / 256, cap = (size_t)g->sms * 8;
    return (unsigned)(blocks < cap ? blocks : cap ? cap : 1);
}

/* Writes 2x the L2 (not measured), so that the next kernel reads from DRAM. */
static int flush_l2(gpu *g, bench *b) {
    unsigned long long n4 = b->flush_bytes / 16;
    float v = 1.5f;
    void *p[] = {&b->flush, &n4, &v};
    return launch(g, b->write, stream_grid(g, n4), 256, 0, p, -1);
}

enum { DRAM_SIZES = 11 }; /* 1 MiB .. 1 GiB */

static int bench_dram(gpu *g, bench *b, int which, samples *s) {
    static const char *names[] = {"DRAM read", "DRAM write", "DRAM copy"};
    begin_phase(g, names[which]);
    int n = DRAM_SIZES * b->reps;
    samples_init(s, n);
    if (batch_begin(g, n) != 0) return -1;
    float v = 0.75f;
    int k = 0;
    for (int rep = -1; rep < b->reps; rep++)         /* rep -1: warm-up, not measured */
        for (int i = 0; i < DRAM_SIZES; i++) {
            size_t bytes = ((size_t)1 << 20) << i;
            if (bytes > b->big) bytes = b->big;
            unsigned long long n4 = bytes / 16;
            void *pr[] = {&b->a, &n4, &b->out}, *pw[] = {&b->b, &n4, &v}, *pc[] = {&b->a, &b->b, &n4};
            CUfunction f = which == 0 ? b->read : which == 1 ? b->write : b->copy;
            int id = rep >= 0 ? k : -1;
            if (flush_l2(g, b) != 0 || launch(g, f, stream_grid(g, n4), 256, 0, which == 0 ? pr : which == 1 ? pw : pc, id) != 0)
                return -1;
            if (id >= 0) s->work[k++] = (double)(n4 * 16) * (which == 2 ? 2 : 1);
        }
    if (batch_end(g) != 0) return -1;
    memcpy(s->time, g->dur, sizeof *s->time * (size_t)n);
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : NAN;
}

/* Back-to-back empty kernels. CUPTI: spacing of start timestamps (median; a line fitted through them) and
 * the kernel's own duration. Events: the mean spacing over the whole run. */
static int bench_launch(gpu *g, bench *b, ts_calib_result *r, ts_fit *fit, bool *have_fit, char **ferr) {
    begin_phase(g, "launch overhead");
    int n = b->reps >= 5 ? 2000 : 400;
    *have_fit = false;
    if (batch_begin(g, 0) != 0) return -1;
    for (int i = 0; i < 50; i++)
        if (launch(g, b->empty, 1, 32, 0, NULL, -1) != 0) return -1;
    if (batch_end(g) != 0 || batch_begin(g, g->cupti_on ? n : 0) != 0) return -1;
    CUevent e0 = NULL, e1 = NULL;
    if (!g->cupti_on && (new_event(g, &e0) != 0 || new_event(g, &e1) != 0 || CU(g, cuEventRecord(e0, NULL)) != 0))
        return -1;
    g->stride = 40;
    for (int i = 0; i < n; i++)
        if (launch(g, b->empty, 1, 32, 0, NULL, g->cupti_on ? i : -1) != 0) return -1;
    g->stride = 1;
    if (!g->cupti_on) {
        float ms = 0;
        if (CU(g, cuEventRecord(e1, NULL)) != 0 || CU(g, cuEventSynchronize(e1)) != 0 ||
            CU(g, cuEventElapsedTime(&ms, e0, e1)) != 0)
            return -1;
        if (batch_end(g) != 0) return -1;
        g->done += n / 40;
        r->launch_s = r->launch_gap_mean_s = (double)ms * 1e-3 / n;
        r->empty_kernel_s = NAN;
        return 0;
    }
    if (batch_end(g) != 0) return -1;
    double *gap = ts_xmalloc(sizeof *gap * (size_t)n), *X = ts_xmalloc(sizeof *X * 2 * (size_t)n);
    for (int i = 0; i + 1 < n; i++) gap[i] = g->start[i + 1] - g->start[i];
    for (int i = 0; i < n; i++) X[2 * i] = 1, X[2 * i + 1] = i;
    r->launch_gap_mean_s = (g->start[n - 1] - g->start[0]) / (n - 1);
    r->launch_s = median(gap, n - 1);
    double *durs = ts_xmalloc(sizeof *durs * (size_t)n);
    memcpy(durs, g->dur, sizeof *durs * (size_t)n);
    r->empty_kernel_s = median(durs, n);
    *have_fit = ts_fit_linear("launch", "start_i = c0 + i * c1 (c1 = mean start-to-start spacing, s)", X, g->start, n, 2,
                              false, fit, ferr) == 0;
    free(durs);
    free(gap);
    free(X);
    return 0;
}

/* A compute loop swept over its depth: which 0 FMA, 1 SFU (ex2), 2 mma.sync. */
static int bench_compute(gpu *g, bench *b, int which, samples *s) {
    static const char *names[] = {"FMA throughput", "exp2 (SFU) throughput", "tensor core (mma.sync)"};
    static const int depth0[] = {256, 64, 128};
    begin_phase(g, names[which]);
    enum { DEPTHS = 7 };
    int n = DEPTHS * b->reps;
    samples_init(s, n);
    unsigned grid = (unsigned)g->sms * (which == 2 ? 4u : 8u), block = 256;
    double threads = (double)grid * block;
    CUfunction f = which == 0 ? b->fma : which == 1 ? b->sfu : b->mma;
    if (batch_begin(g, n) != 0) return -1;
    float x = 0.999f, y = 1e-3f;
    int k = 0;
    for (int rep = -1; rep < b->reps; rep++)
        for (int i = 0; i < DEPTHS; i++) {
            int iters = depth0[which] << i;
            void *pf[] = {&b->out, &iters, &x, &y}, *ps[] = {&b->out, &iters};
            int id = rep >= 0 ? k : -1;
            if (launch(g, f, grid, block, 0, which == 0 ? pf : ps, id) != 0) return -1;
            if (id < 0) continue;
            s->work[k++] = which == 0   ? threads * iters * 8 * 2
                           : which == 1 ? threads * iters * 8
                                        : threads / 32 * iters * 8 * 4096.0;
        }
    if (batch_end(g) != 0) return -1;
    memcpy(s->time, g->dur, sizeof *s->time * (size_t)n);
    return 0;
}

/* A fixed-work block, one per SM (shared memory reserved), launched with 1 .. 4 x SMs blocks. Fills s with
 * (waves, time) and frac with (blocks / (SMs x occupancy), time). */
static int bench_waves(gpu *g, bench *b, ts_calib_result *r, samples *s, samples *frac) {
    begin_phase(g, "waves and tail");
    int smem = g->smem_per_sm / 2 + 4096;
    if (smem > g->smem_optin) smem = g->smem_optin;
    if (smem < 0) smem = 0;
    if (CU(g, cuFuncSetAttribute(b->wave, CU_FUNC_MAX_DYNAMIC_SMEM, smem)) != 0) return -1;
    int occ = 0;
    if (g->cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&occ, b->wave, 256, (size_t)smem) != 0 || occ < 1) occ = 1;
    r->occupancy_blocks_per_sm = occ;
    int S = g->sms;
    int blocks[] = {1, S / 2, S, S + 1, 3 * S / 2, 2 * S, 2 * S + 1, 5 * S / 2, 3 * S, 3 * S + 1, 7 * S / 2, 4 * S};
    enum { NB = sizeof blocks / sizeof *blocks };
    int reps = b->reps < 3 ? b->reps : 3, n = NB * reps;
    samples_init(s, n);
    samples_init(frac, n);
    if (batch_begin(g, n) != 0) return -1;
    int iters = 4096;
    float x = 0.999f, y = 1e-3f;
    void *p[] = {&b->out, &iters, &x, &y};
    int k = 0;
    for (int rep = -1; rep < reps; rep++)
        for (int i = 0; i < NB; i++) {
            int id = rep >= 0 ? k : -1;
            if (launch(g, b->wave, (unsigned)(blocks[i] > 0 ? blocks[i] : 1), 256, (unsigned)smem, p, id) != 0) return -1;
            if (id < 0) continue;
            double per_wave = (double)S * occ;
            s->work[k] = ceil((blocks[i] > 0 ? blocks[i] : 1) / per_wave);
            frac->work[k++] = (blocks[i] > 0 ? blocks[i] : 1) / per_wave;
        }
    if (batch_end(g) != 0) return -1;
    memcpy(s->time, g->dur, sizeof *s->time * (size_t)n);
    memcpy(frac->time, g->dur, sizeof *s->time * (size_t)n);
    return 0;
}

/* ---- the driver -------------------------------------------------------------------------------- */

static char *find_kernels(const char *given, char **path_out) {
    if (given) {
        *path_out = ts_strdup(given);
        return read_file(given, NULL);
    }
    char *text = read_file("calibrate/kernels.cu", NULL);
    if (text) {
        *path_out = ts_strdup("calibrate/kernels.cu");
        return text;
    }
    *path_out = ts_data_path("calibrate/kernels.cu");
    if ((text = read_file(*path_out, NULL))) return text;
    free(*path_out);
    *path_out = ts_data_path("calibrate/kernels.cu"); /* the error names the data folder's */
    return NULL;
}

/* The display driver's version (/proc/driver/nvidia/version), else "" . */
static void kernel_module_version(char *buf, size_t n) {
    buf[0] = '\0';
    char *text = read_file("/proc/driver/nvidia/version", NULL);
    if (!text) return;
    const char *p = strstr(text, "Kernel Module");
    if (p) { /* "...Kernel Module for x86_64  580.159.04  ...": the first token that starts with a digit */
        p += strlen("Kernel Module");
        while (*p && *p != '\n' && !(*p >= '0' && *p <= '9' && (p[-1] == ' ' || p[-1] == '\t'))) p++;
        size_t k = 0;
        while (p[k] && p[k] != ' ' && p[k] != '\n' && k + 1 < n) k++;
        snprintf(buf, n, "%.*s", (int)k, p);
    }
    free(text);
}

static int open_device(gpu *g, ts_calib_result *r) {
    int count = 0, ver = 0;
    if (CU(g, cuInit(0)) != 0) return -1;
    if (CU(g, cuDeviceGetCount(&count)) != 0) return -1;
    if (count < 1) {
        snprintf(g->err, sizeof g->err, "the CUDA driver sees no GPU");
        return -1;
    }
    if (CU(g, cuDeviceGet(&g->dev, 0)) != 0 || CU(g, cuDeviceGetName(r->gpu, (int)sizeof r->gpu, g->dev)) != 0 ||
        CU(g, cuDriverGetVersion(&ver)) != 0 || CU(g, cuDeviceTotalMem(&g->total_mem, g->dev)) != 0)
        return -1;
    struct {
        int *v, attr;
    } attrs[] = {{&g->sms, CU_ATTR_SMS},           {&g->cc_major, CU_ATTR_CC_MAJOR},
                 {&g->cc_minor, CU_ATTR_CC_MINOR}, {&g->l2, CU_ATTR_L2},
                 {&g->smem_per_sm, CU_ATTR_SMEM_PER_SM}, {&g->smem_optin, CU_ATTR_SMEM_OPTIN}};
    for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++)
        if (CU(g, cuDeviceGetAttribute(attrs[i].v, attrs[i].attr, g->dev)) != 0) return -1;
    char km[64];
    kernel_module_version(km, sizeof km);
    snprintf(r->driver, sizeof r->driver, "%s%sCUDA %d.%d", km, km[0] ? ", " : "", ver / 1000, ver % 1000 / 10);
    snprintf(r->arch, sizeof r->arch, "sm_%d%d", g->cc_major, g->cc_minor);
    r->sms = g->sms;
    r->l2_bytes = g->l2;
    if (CU(g, cuDevicePrimaryCtxRetain(&g->ctx, g->dev)) != 0) return -1;
    if (CU(g, cuCtxSetCurrent(g->ctx)) != 0) return -1;
    return 0;
}

static void start_cupti(gpu *g) {
    char *why = NULL;
    if (ts_gpu_load_cupti(&g->cp, &why) != 0) {
        g->cupti_why = why;
        return;
    }
    g->have_cupti = true;
    if (ts_cupti_start(&g->cp, &why) != 0) {
        g->cupti_why = why;
        return;
    }
    g->cupti_on = true;
}

static void print_fit(FILE *out, const ts_fit *f, const char *what, double value, const char *unit) {
    fprintf(out, "  %-12s %-26s %12.4g %-9s R² %.5f  resid rms %.2f%% max %.2f%%  n=%d\n", f->name, what, value, unit,
            f->r2, 100 * f->resid_rms, 100 * f->resid_max, f->n);
}

/* Runs the benchmarks and fits into r. Returns 0, or -1 with g->err (GPU) or *fit_err (a fit) set. */
static int measure(gpu *g, bench *b, ts_calib_result *r, char **fit_err) {
    samples dram[3] = {{0}}, comp[3] = {{0}}, wave = {0}, frac = {0};
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++) rc = bench_dram(g, b, i, &dram[i]);
    ts_fit lf;
    bool have_lf = false;
    char *lerr = NULL;
    if (rc == 0) rc = bench_launch(g, b, r, &lf, &have_lf, &lerr);
    for (int i = 0; i < 3 && rc == 0; i++) rc = bench_compute(g, b, i, &comp[i]);
    if (rc == 0) rc = bench_waves(g, b, r, &wave, &frac);
    g->done = g->total;
    g->phase = "fitting";
    progress(g);
    if (g->tty) fputc('\n', stderr);
    if (rc != 0) goto done;

    static const char *dram_names[] = {"dram_read", "dram_write", "dram_copy"};
    static const char *dram_models[] = {"t = c0 + bytes * c1 (c1 = 1 / read bandwidth)",
                                        "t = c0 + bytes * c1 (c1 = 1 / write bandwidth)",
                                        "t = c0 + bytes * c1 (bytes read + written; c1 = 1 / bandwidth)"};
    for (int i = 0; i < 3 && rc == 0; i++)
        rc = ts_fit_rate(dram_names[i], dram_models[i], dram[i].work, dram[i].time, dram[i].n, &r->fit[r->nfits++], fit_err);
    if (rc == 0) r->dram_bytes_per_s = ts_fit_rate_of(&r->fit[2]);
    if (have_lf) r->fit[r->nfits++] = lf;
    else if (lerr) fprintf(stderr, "calibrate: note: the launch line was not fitted: %s\n", lerr);
    free(lerr);
    static const char *comp_names[] = {"fma", "sfu_exp2", "mma_f16"};
    static const char *comp_models[] = {"t = c0 + flops * c1 (fp32 FMA = 2 FLOPs; c1 = 1 / rate)",
                                        "t = c0 + ops * c1 (ex2.approx.ftz.f32; c1 = 1 / rate)",
                                        "t = c0 + flops * c1 (mma.sync m16n8k16 f16 -> f32; c1 = 1 / rate)"};
    double *rates[] = {&r->fma_flops_per_s, &r->sfu_ops_per_s, &r->tensor_flops_per_s};
    for (int i = 0; i < 3 && rc == 0; i++) {
        ts_fit *f = &r->fit[r->nfits++];
        rc = ts_fit_rate(comp_names[i], comp_models[i], comp[i].work, comp[i].time, comp[i].n, f, fit_err);
        if (rc == 0) *rates[i] = ts_fit_rate_of(f);
    }
    if (rc == 0) {
        double *X = ts_xmalloc(sizeof *X * 2 * (size_t)wave.n);
        for (int i = 0; i < wave.n; i++) X[2 * i] = 1, X[2 * i + 1] = wave.work[i];
        ts_fit *f = &r->fit[r->nfits++];
        rc = ts_fit_linear("waves", "t = c0 + waves * c1 (waves = ceil(blocks / (SMs x blocks per SM)))", X, wave.time,
                           wave.n, 2, true, f, fit_err);
        if (rc == 0) r->wave_s = f->coef[1];
        for (int i = 0; i < frac.n; i++) X[2 * i + 1] = frac.work[i];
        ts_fit ff;
        char *e = NULL;
        if (rc == 0 && ts_fit_linear("waves_fractional", "", X, frac.time, frac.n, 2, true, &ff, &e) == 0)
            r->fractional_r2 = ff.r2;
        free(e);
        free(X);
    }
done:
    for (int i = 0; i < 3; i++) samples_free(&dram[i]), samples_free(&comp[i]);
    samples_free(&wave);
    samples_free(&frac);
    return rc;
}

static int alloc_buffers(gpu *g, bench *b) {
    b->big = (size_t)1 << 30;
    while (b->big > ((size_t)64 << 20) && 2 * b->big + ((size_t)512 << 20) > g->total_mem / 2) b->big /= 2;
    b->flush_bytes = ((size_t)2 * (size_t)g->l2 + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    if (b->flush_bytes < ((size_t)64 << 20)) b->flush_bytes = (size_t)64 << 20;
    if (CU(g, cuMemAlloc(&b->a, b->big)) != 0 || CU(g, cuMemAlloc(&b->b, b->big)) != 0 ||
        CU(g, cuMemAlloc(&b->flush, b->flush_bytes)) != 0 || CU(g, cuMemAlloc(&b->out, (size_t)1 << 20)) != 0)
        return -1;
    /* never zeros: 1.0000001f and 0.5f bit patterns */
    if (CU(g, cuMemsetD32(b->a, 0x3f800001u, b->big / 4)) != 0 || CU(g, cuMemsetD32(b->b, 0x3f000000u, b->big / 4)) != 0 ||
        CU(g, cuMemsetD32(b->flush, 0x3f000000u, b->flush_bytes / 4)) != 0 ||
        CU(g, cuMemsetD32(b->out, 0x3f000000u, ((size_t)1 << 20) / 4)) != 0)
        return -1;
    return CU(g, cuCtxSynchronize());
}

static void print_summary(FILE *out, const ts_calib_result *r) {
    fprintf(out, "%s (%s, %.0f SMs, %.0f MB L2), driver %s, timer: %s\n", r->gpu, r->arch, r->sms, r->l2_bytes / 1e6,
            r->driver, r->timer);
    for (int i = 0; i < r->nfits; i++) {
        const ts_fit *f = &r->fit[i];
        if (strncmp(f->name, "dram_", 5) == 0) print_fit(out, f, "bandwidth", ts_fit_rate_of(f) / 1e12, "TB/s");
        else if (strcmp(f->name, "launch") == 0) print_fit(out, f, "mean start spacing", f->coef[1] * 1e6, "us");
        else if (strcmp(f->name, "sfu_exp2") == 0) print_fit(out, f, "rate", ts_fit_rate_of(f) / 1e12, "Tops/s");
        else if (strcmp(f->name, "waves") == 0) print_fit(out, f, "time per wave", f->coef[1] * 1e6, "us");
        else print_fit(out, f, "rate", ts_fit_rate_of(f) / 1e12, "TFLOP/s");
    }
    fprintf(out, "  launch_s %.3g s (%s)", r->launch_s,
            isfinite(r->empty_kernel_s) ? "median start-to-start spacing" : "mean spacing, CUDA events");
    if (isfinite(r->empty_kernel_s)) fprintf(out, ", empty kernel %.3g s", r->empty_kernel_s);
    if (isfinite(r->fractional_r2)) fprintf(out, "; waves: R² %.4f quantized vs %.4f fractional", r->fit[r->nfits - 1].r2, r->fractional_r2);
    fputc('\n', out);
}

/* Writes the file (atomically when a path is given). */
static int write_result(const ts_calib_opts *o, const ts_calib_result *r) {
    if (!o->out_path) return ts_calib_write_yaml(stdout, r, o->when) == 0 && fflush(stdout) == 0 ? 0 : -1;
    char *tmp = ts_strfmt("%s.tmp", o->out_path);
    FILE *f = fopen(tmp, "w");
    int rc = -1;
    if (f) {
        rc = ts_calib_write_yaml(f, r, o->when);
        if (fclose(f) != 0) rc = -1;
        if (rc == 0 && rename(tmp, o->out_path) != 0) rc = -1;
        if (rc != 0) remove(tmp);
    }
    if (rc != 0) fprintf(stderr, "tsopt: error: cannot write %s: %s\n", o->out_path, strerror(errno));
    free(tmp);
    return rc;
}

/* Every coefficient the microbenchmarks do not measure, from the base model (or a few built-in defaults). */
static void keep_unmeasured(const ts_calib_opts *o, ts_calib_result *r) {
    const char *base = o->base_path ? o->base_path : "costmodel/h200.yaml";
    ts_costmodel m;
    ts_diags d;
    if (ts_costmodel_load(&m, base, &d) == 0) {
#define TS_X_KEEP(name, same_as, fallback) \
    if (!ts_calib_measures(#name)) r->name = m.name;
        TS_COSTMODEL_COEFFICIENTS(TS_X_KEEP)
#undef TS_X_KEEP
        snprintf(r->efficiencies_from, sizeof r->efficiencies_from, "%s", base);
    } else {
        fprintf(stderr, "calibrate: note: cannot load %s; the template efficiencies keep built-in defaults\n", base);
        ts_diags_print(&d, stderr);
        r->gemm_efficiency = 0.75, r->attention_efficiency = 0.5, r->reduce_efficiency = 0.6, r->map_efficiency = 0.8;
        r->row_efficiency = 0.8, r->epilogue_efficiency = 0.8;
        snprintf(r->efficiencies_from, sizeof r->efficiencies_from, "built-in defaults");
    }
    ts_diags_free(&d);
    ts_costmodel_free(&m);
}

int ts_calibrate(const ts_calib_opts *o) {
    gpu *g = ts_xcalloc(1, sizeof *g);
    ts_calib_result *r = ts_xcalloc(1, sizeof *r);
    r->empty_kernel_s = r->launch_gap_mean_s = r->occupancy_blocks_per_sm = r->wave_s = r->fractional_r2 = NAN;
    g->tty = isatty(2);
    g->stride = 1;
    int rc = TS_CALIB_OK;
    char *why_cuda = NULL, *why_nvrtc = NULL, *kpath = NULL, *ktext = NULL, *cubin = NULL, *ferr = NULL;
    bench b = {.reps = o->quick ? 2 : 5};

    /* 1. the libraries: every missing one is named before anything else happens */
    bool cuda_ok = ts_gpu_load_cuda(&g->cu, &why_cuda) == 0;
    bool nvrtc_ok = ts_gpu_load_nvrtc(&g->nv, &why_nvrtc) == 0;
    if (!cuda_ok || !nvrtc_ok) {
        if (!cuda_ok)
            fprintf(stderr, "tsopt: error: calibrate needs the CUDA driver (a GPU machine): %s\n", why_cuda);
        if (!nvrtc_ok) fprintf(stderr, "tsopt: error: calibrate needs NVRTC from CUDA 13: %s\n", why_nvrtc);
        fprintf(stderr, "      = hint: run `tsopt calibrate` on the GPU machine (calibrate/run.sh); nothing was written\n");
        rc = TS_CALIB_NO_GPU;
        goto out;
    }
    if (!(ktext = find_kernels(o->kernels, &kpath))) {
        fprintf(stderr, "tsopt: error: cannot read the microbenchmark kernels %s: %s\n", kpath, strerror(errno));
        rc = TS_CALIB_INPUT;
        goto out;
    }
    keep_unmeasured(o, r);

    /* 2. timing: CUPTI if it loads and enables (tried before the context exists, as CUPTI's samples do, and
     * once more after), else CUDA events */
    if (!o->events) start_cupti(g);

    /* 3. the device, the kernels */
    if (open_device(g, r) != 0) {
        rc = TS_CALIB_NO_GPU;
        goto gpu_error;
    }
    if (g->have_cupti && !g->cupti_on && g->cp.cuptiActivityEnable(CUPTI_KIND_CONCURRENT_KERNEL) == 0) {
        g->cupti_on = true;
    }
    if (g->cupti_on) {
        snprintf(r->timer, sizeof r->timer, "CUPTI kernel activity records");
    } else {
        snprintf(r->timer, sizeof r->timer, "CUDA events (%s)", o->events ? "--events" : "CUPTI unavailable");
        fprintf(stderr, "calibrate: note: timing with CUDA events, not CUPTI (%s): event pairs around each kernel,\n"
                        "  the launch overhead as the mean spacing of back-to-back empty kernels; the empty kernel's\n"
                        "  own duration is not measured\n",
                o->events ? "--events was given" : g->cupti_why ? g->cupti_why : "?");
    }
    char arch[16];
    snprintf(arch, sizeof arch, "%d%d", g->cc_major, g->cc_minor);
    size_t cubin_size = 0;
    fprintf(stderr, "calibrate: %s (%s, %d SMs, %.0f MB L2); compiling %s with NVRTC\n", r->gpu, r->arch, g->sms,
            g->l2 / 1e6, kpath);
    if (!(cubin = nvrtc_compile(&g->nv, ktext, arch, &cubin_size, &ferr))) {
        fprintf(stderr, "tsopt: error: %s\n", ferr);
        rc = TS_CALIB_INPUT;
        goto out;
    }
    if (CU(g, cuModuleLoadData(&g->mod, cubin)) != 0 || get_function(g, &b.empty, "empty") != 0 ||
        get_function(g, &b.read, "dram_read") != 0 || get_function(g, &b.write, "dram_write") != 0 ||
        get_function(g, &b.copy, "dram_copy") != 0 || get_function(g, &b.fma, "fma_loop") != 0 ||
        get_function(g, &b.sfu, "sfu_loop") != 0 || get_function(g, &b.mma, "mma_loop") != 0 ||
        get_function(g, &b.wave, "wave_block") != 0 || alloc_buffers(g, &b) != 0) {
        rc = TS_CALIB_NO_GPU;
        goto gpu_error;
    }
    g->total = (long)b.reps * (3 * DRAM_SIZES + 3 * 7) + (b.reps >= 5 ? 2000 : 400) / 40 + 12L * (b.reps < 3 ? b.reps : 3);

    /* 4. measure and fit */
    if (measure(g, &b, r, &ferr) != 0) {
        if (ferr) {
            fprintf(stderr, "tsopt: error: calibrate: %s\n", ferr);
            rc = TS_CALIB_INPUT;
            goto out;
        }
        rc = TS_CALIB_NO_GPU;
        goto gpu_error;
    }
    print_summary(o->out_path ? stdout : stderr, r);
    if (!(r->launch_s > 0) || !(r->dram_bytes_per_s > 0)) {
        fprintf(stderr, "tsopt: error: calibrate: a measured coefficient is not positive; nothing written\n");
        rc = TS_CALIB_INPUT;
    } else if (write_result(o, r) != 0) {
        rc = TS_CALIB_INPUT;
    } else if (o->out_path) {
        printf("wrote %s\n", o->out_path);
    }
    goto out;

gpu_error:
    if (g->tty) fputc('\n', stderr);
    fprintf(stderr, "tsopt: error: calibrate: %s\n", g->err);
out:
    ts_cupti_stop();
    if (g->ctx) {
        if (b.a) g->cu.cuMemFree(b.a);
        if (b.b) g->cu.cuMemFree(b.b);
        if (b.flush) g->cu.cuMemFree(b.flush);
        if (b.out) g->cu.cuMemFree(b.out);
        if (g->mod) g->cu.cuModuleUnload(g->mod);
        g->cu.cuDevicePrimaryCtxRelease(g->dev);
    }
    free(why_cuda);
    free(why_nvrtc);
    free(kpath);
    free(ktext);
    free(cubin);
    free(ferr);
    free(g->cupti_why);
    free(g->ids);
    free(g->ev);
    free(g->dur);
    free(g->start);
    free(g);
    free(r);
    return rc;
}
