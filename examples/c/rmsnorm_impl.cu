// rmsnorm_impl.cu — compiles the kernels of rmsnorm.cuh (the one translation unit that defines its
// implementation macro); the C program main.c calls them through the C ABI.
#define TSOPT_RMSNORM_IMPLEMENTATION
#include "rmsnorm.cuh"
