// Error checks of the CUDA backend. A failed CUDA or cuBLASLt call inside a kernel is an
// invariant broken (a bad launch, an out-of-memory device, a lost GPU): it stops the process
// with the call, the error's name and text, and the place (core/check.h's fatal()), which ends
// the whole job. Calls that can fail on bad input return Status instead (device selection).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "core/check.h"

#define MS_CUDA_CHECK(expr)                                                                       \
  do {                                                                                            \
    const cudaError_t ms_cuda_error_ = (expr);                                                    \
    MS_CHECK(ms_cuda_error_ == cudaSuccess, #expr, " failed: ", cudaGetErrorName(ms_cuda_error_), \
             " (", cudaGetErrorString(ms_cuda_error_), ")");                                      \
  } while (0)

/// After a kernel launch: the launch's own error (bad configuration, no kernel image for the GPU).
#define MS_CUDA_CHECK_LAUNCH() MS_CUDA_CHECK(cudaGetLastError())

#define MS_CUBLAS_CHECK(expr)                                                              \
  do {                                                                                     \
    const cublasStatus_t ms_cublas_status_ = (expr);                                       \
    MS_CHECK(ms_cublas_status_ == CUBLAS_STATUS_SUCCESS, #expr, " failed: cuBLAS status ", \
             static_cast<int>(ms_cublas_status_));                                         \
  } while (0)
