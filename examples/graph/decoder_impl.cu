// decoder_impl.cu — compiles the kernels of decoder_layer.cuh (the one translation unit that defines its
// implementation macro); main.c calls them through the C ABI, plain and as a CUDA graph.
#define TSOPT_DECODER_LAYER_IMPLEMENTATION
#include "decoder_layer.cuh"
