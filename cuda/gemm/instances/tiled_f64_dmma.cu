// float64 on the FP64 tensor cores, 128 × 128 tiles (sm_90).
#include "cuda/gemm/kernel_tiled.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

KernelInstance<TiledKernel<double>> tiled_f64_dmma_kernel() {
  return {structured_gemm_kernel<ConfigF64Dmma>, "structured_gemm_kernel", ConfigF64Dmma::kThreads,
          ConfigF64Dmma::kDynamicSmem};
}

}  // namespace sg::detail::cuda
