// The wgmma tiled kernel with both operands by TMA copies, one of them raw (the ring).
#include "cuda/gemm/kernel_tiled.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

template <>
KernelInstance<TmaKernel> tiled_tma_kernel<TmaVariant::AB>() {
  return {structured_gemm_tma_kernel<ConfigTf32Wgmma, TmaVariant::AB>, "structured_gemm_tma_kernel", ConfigTf32Wgmma::kThreads, ConfigTf32Wgmma::kDynamicSmemTma};
}

}  // namespace sg::detail::cuda
