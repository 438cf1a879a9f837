// EPIGEMM_HOST_DEVICE marks functions that the CPU code and the CUDA kernels share, so that the
// epilogue math is written once (docs/conventions.md, "Epilogue math is written once").
#pragma once

#if defined(__CUDACC__)
#define EPIGEMM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define EPIGEMM_HOST_DEVICE inline
#endif
