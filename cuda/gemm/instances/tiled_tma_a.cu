// The wgmma tiled kernel with A by TMA copies, B staged through registers.
#include "cuda/gemm/kernel_tiled.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

template <>
KernelInstance<TmaKernel> tiled_tma_kernel<TmaVariant::A>() {
  return {structured_gemm_tma_kernel<ConfigTf32Wgmma, TmaVariant::A>, "structured_gemm_tma_kernel", ConfigTf32Wgmma::kThreads, ConfigTf32Wgmma::kDynamicSmemTma};
}

}  // namespace sg::detail::cuda
