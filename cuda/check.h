// CUDA and cuBLAS call checking: every call goes through SG_CUDA_CHECK / SG_CUBLAS_CHECK,
// which throw sg::Error naming the call, the error, the file and the line.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <structgrad/core/error.h>

namespace sg::detail::cuda {
const char* cublas_status_name(cublasStatus_t status);
}

#define SG_CUDA_CHECK(call)                                                                  \
  do {                                                                                       \
    cudaError_t sg_err_ = (call);                                                            \
    if (sg_err_ != cudaSuccess) {                                                            \
      (void)cudaGetLastError();                                                              \
      SG_FAIL("CUDA error: ", #call, " failed with ", cudaGetErrorName(sg_err_), " (",       \
              cudaGetErrorString(sg_err_), ") at ", __FILE__, ":", __LINE__);                \
    }                                                                                        \
  } while (0)

/// Checks the launch that just happened (configuration errors, not asynchronous faults).
#define SG_CUDA_CHECK_LAUNCH(kernel_name)                                                    \
  do {                                                                                       \
    cudaError_t sg_err_ = cudaGetLastError();                                                \
    if (sg_err_ != cudaSuccess)                                                              \
      SG_FAIL("CUDA error: launch of ", kernel_name, " failed with ", cudaGetErrorName(sg_err_), \
              " (", cudaGetErrorString(sg_err_), ") at ", __FILE__, ":", __LINE__);          \
  } while (0)

#define SG_CUBLAS_CHECK(call)                                                                \
  do {                                                                                       \
    cublasStatus_t sg_st_ = (call);                                                          \
    if (sg_st_ != CUBLAS_STATUS_SUCCESS)                                                     \
      SG_FAIL("cuBLAS error: ", #call, " failed with ",                                      \
              ::sg::detail::cuda::cublas_status_name(sg_st_), " at ", __FILE__, ":", __LINE__); \
  } while (0)
