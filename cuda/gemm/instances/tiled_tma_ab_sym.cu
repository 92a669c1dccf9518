// The wgmma tiled kernel with both Symmetric operands' triangles by TMA (direct and raw).
#include "cuda/gemm/kernel_tiled.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

template <>
KernelInstance<TmaKernel> tiled_tma_kernel<TmaVariant::ABSym>() {
  return {structured_gemm_tma_kernel<ConfigTf32Wgmma, TmaVariant::ABSym>, "structured_gemm_tma_kernel", ConfigTf32Wgmma::kThreads, ConfigTf32Wgmma::kDynamicSmemTma};
}

}  // namespace sg::detail::cuda
