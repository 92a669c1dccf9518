// The wide kernel (128 × 256 tiles, both operands from shared memory).
#include "cuda/gemm/kernel_wide.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

KernelInstance<WideKernel> wide_kernel() {
  return {structured_gemm_wide_kernel, "structured_gemm_wide_kernel", WideConfig::kThreads + kProducerThreads, WideConfig::kDynamicSmem};
}

}  // namespace sg::detail::cuda
