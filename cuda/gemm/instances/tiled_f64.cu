// float64 on DFMA, 64 × 64 tiles.
#include "cuda/gemm/kernel_tiled.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

KernelInstance<TiledKernel<double>> tiled_f64_kernel() {
  return {structured_gemm_kernel<ConfigF64>, "structured_gemm_kernel", ConfigF64::kThreads, ConfigF64::kDynamicSmem};
}

}  // namespace sg::detail::cuda
