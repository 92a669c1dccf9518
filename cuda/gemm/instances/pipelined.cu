// The pipelined wgmma kernel: a producer warp and two consumer warpgroups, both operands from shared memory.
#include "cuda/gemm/kernel_pipelined.cuh"
#include "cuda/gemm/kernels.h"

namespace sg::detail::cuda {

KernelInstance<TmaKernel> pipelined_kernel() {
  return {structured_gemm_pipelined_kernel<ConfigTf32Wgmma>, "structured_gemm_pipelined_kernel", ConfigTf32Wgmma::kThreads + kProducerThreads, ConfigTf32Wgmma::kDynamicSmemTma};
}

}  // namespace sg::detail::cuda
