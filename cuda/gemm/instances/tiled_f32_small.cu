// FFMA on 64 × 64 tiles (exact float32 on products too small for the large tiles).
#include "cuda/gemm/kernel_tiled.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

template <>
KernelInstance<TiledKernel<float>> tiled_kernel<GemmTileConfig::Float32Small>() {
  return {structured_gemm_kernel<ConfigF32Small>, "structured_gemm_kernel", ConfigF32Small::kThreads, ConfigF32Small::kDynamicSmem};
}

}  // namespace sg::detail::cuda
