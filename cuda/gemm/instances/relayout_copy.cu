// One operand copied outer-major (the wgmma kernels' direct copies) or k-major (the FP64 loop's).
#include "cuda/gemm/kernels.h"
#include "cuda/gemm/relayout.cuh"

namespace sg::detail::cuda {

KernelInstance<RelayoutKernel> relayout_copy() {
  return {relayout_outer_major_kernel, "relayout_outer_major_kernel", kRelayoutTile * kRelayoutRows, 0};
}

}  // namespace sg::detail::cuda
