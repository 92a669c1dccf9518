// The tall kernel: 256 × 128 tiles, B from registers, persistent.
#include "cuda/gemm/kernel_tall.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

template <>
KernelInstance<TallKernel> tall_kernel<TransposedA::None>() {
  return {structured_gemm_tall_kernel<TransposedA::None>, "structured_gemm_tall_kernel", TallConfig::kThreads,
          TallConfig::kDynamicSmem};
}

}  // namespace sg::detail::cuda
