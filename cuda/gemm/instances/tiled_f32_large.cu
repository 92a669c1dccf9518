// FFMA on 128 × 128 tiles (exact float32 on large products without the FP64 tensor cores).
#include "cuda/gemm/kernel_tiled.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

template <>
KernelInstance<TiledKernel<float>> tiled_kernel<GemmTileConfig::Float32Large>() {
  return {structured_gemm_kernel<ConfigF32Large>, "structured_gemm_kernel", ConfigF32Large::kThreads, ConfigF32Large::kDynamicSmem};
}

}  // namespace sg::detail::cuda
