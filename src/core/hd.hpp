// SCIPROXY_HD marks per-point math that both the CPU loops and the CUDA kernels call, so the
// CPU tests exercise the arithmetic the GPU runs.
#pragma once

#if defined(__CUDACC__)
#define SCIPROXY_HD __host__ __device__ __forceinline__
#else
#define SCIPROXY_HD inline
#endif

// Unrolls the next loop (short stencil loops) under both compilers.
#if defined(__CUDA_ARCH__)
#define SCIPROXY_UNROLL _Pragma("unroll")
#elif defined(__CUDACC__)
#define SCIPROXY_UNROLL  // nvcc's host pass: gcc warns on "unroll", nvcc's front end on "GCC
                         // unroll"
#else
#define SCIPROXY_UNROLL _Pragma("GCC unroll 8")
#endif
