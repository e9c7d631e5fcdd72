// DDL_HOST_DEVICE marks a function that runs on both backends: compiled for
// the GPU by nvcc and as plain C++ by the host compiler. It is how one kernel
// body serves the CPU loop and the CUDA grid-stride loop.
#pragma once

#if defined(__CUDACC__)
#define DDL_HOST_DEVICE __host__ __device__
#else
#define DDL_HOST_DEVICE
#endif
