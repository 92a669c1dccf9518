// Exact float32 on the FP64 tensor cores, 128 × 128 tiles (sm_90).
#include "cuda/gemm/kernel_tiled.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

template <>
KernelInstance<TiledKernel<float>> tiled_kernel<GemmTileConfig::Float32Dmma>() {
  return {structured_gemm_kernel<ConfigF32Dmma>, "structured_gemm_kernel", ConfigF32Dmma::kThreads, ConfigF32Dmma::kDynamicSmem};
}

}  // namespace sg::detail::cuda
