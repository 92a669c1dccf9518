// TF32 on wgmma with every tile staged through registers (small operands, no TMA maps).
#include "cuda/gemm/kernel_tiled.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

template <>
KernelInstance<TiledKernel<float>> tiled_kernel<GemmTileConfig::Float32Tf32Wgmma>() {
  return {structured_gemm_kernel<ConfigTf32Wgmma>, "structured_gemm_kernel", ConfigTf32Wgmma::kThreads, ConfigTf32Wgmma::kDynamicSmem};
}

}  // namespace sg::detail::cuda
