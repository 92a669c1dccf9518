// The wgmma tiled kernel with both by TMA, a triangular operand's diagonal-crossing steps too.
#include "cuda/gemm/kernel_tiled.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

template <>
KernelInstance<TmaKernel> tiled_tma_kernel<TmaVariant::ABDiag>() {
  return {structured_gemm_tma_kernel<ConfigTf32Wgmma, TmaVariant::ABDiag>, "structured_gemm_tma_kernel", ConfigTf32Wgmma::kThreads, ConfigTf32Wgmma::kDynamicSmemTma};
}

}  // namespace sg::detail::cuda
