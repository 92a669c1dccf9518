// cuSOLVER inside the CUDA backend: a dense handle per (thread, device) bound to the current stream,
// and SG_CUSOLVER_CHECK. cuSOLVER runs a whole operation only where the choice table of
// cuda/linalg_choice.h, measured, says it is faster than our kernels.
#pragma once

#include <cusolverDn.h>

#include <structgrad/core/error.h>

namespace sg::detail::cuda {

/// A cuSOLVER dense handle for this thread and device, bound to stream(device). The caller passes
/// each call's workspace (from the caching allocator).
cusolverDnHandle_t cusolver_handle(int device);

}  // namespace sg::detail::cuda

#define SG_CUSOLVER_CHECK(call)                                                                       \
  do {                                                                                                \
    const cusolverStatus_t sg_st_ = (call);                                                           \
    if (sg_st_ != CUSOLVER_STATUS_SUCCESS)                                                            \
      SG_FAIL("cuSOLVER error: ", #call, " failed with status ", static_cast<int>(sg_st_), " at ", __FILE__, \
              ":", __LINE__);                                                                         \
  } while (0)
