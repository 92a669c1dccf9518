// The register-B wgmma kernel: the tile computed transposed, B from registers.
#include "cuda/gemm/kernel_pipelined.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

KernelInstance<TmaKernel> register_b_kernel() {
  return {structured_gemm_register_b_kernel<ConfigTf32Wgmma>, "structured_gemm_register_b_kernel", ConfigTf32Wgmma::kThreads, ConfigTf32Wgmma::kDynamicSmemTma};
}

}  // namespace sg::detail::cuda
