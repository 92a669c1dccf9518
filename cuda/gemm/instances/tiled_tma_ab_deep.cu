// The wgmma tiled kernel with both operands by direct TMA copies, three buffers each.
#include "cuda/gemm/kernel_tiled.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

template <>
KernelInstance<TmaKernel> tiled_tma_kernel<TmaVariant::ABDeep>() {
  return {structured_gemm_tma_kernel<ConfigTf32Wgmma, TmaVariant::ABDeep>, "structured_gemm_tma_kernel", ConfigTf32Wgmma::kThreads, ConfigTf32Wgmma::kDynamicSmemTma};
}

}  // namespace sg::detail::cuda
