// TF32 on mma.sync, 128 × 128 tiles (sm_80 and newer without wgmma).
#include "cuda/gemm/kernel_tiled.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

template <>
KernelInstance<TiledKernel<float>> tiled_kernel<GemmTileConfig::Float32Tf32>() {
  return {structured_gemm_kernel<ConfigTf32>, "structured_gemm_kernel", ConfigTf32::kThreads, ConfigTf32::kDynamicSmem};
}

}  // namespace sg::detail::cuda
