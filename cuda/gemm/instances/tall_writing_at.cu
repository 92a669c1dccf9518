// The tall kernel that also writes op(A)ᵀ, the second output a product's backward reads.
#include "cuda/gemm/kernel_tall.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

template <>
KernelInstance<TallKernel> tall_kernel<TransposedA::Written>() {
  return {structured_gemm_tall_kernel<TransposedA::Written>, "structured_gemm_tall_kernel", TallConfig::kThreads,
          TallConfig::kDynamicSmem};
}

}  // namespace sg::detail::cuda
