// kernels.cu — the one translation unit that compiles the kernels of both swiglu headers (stb style):
// it defines each header's implementation macro before including it. Every other file includes the
// headers plainly and sees declarations only.
#define TSOPT_SWIGLU_SMALL_IMPLEMENTATION
#include "swiglu_small.cuh"
#define TSOPT_SWIGLU_LARGE_IMPLEMENTATION
#include "swiglu_large.cuh"
