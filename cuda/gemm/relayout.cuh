// The relayout kernel: one operand written outer-major (or k-major) before a product whose kernels
// read that layout faster; its geometry is relayout.h's.
#pragma once

#include "cuda/gemm/arch/vector_access.cuh"
#include "cuda/gemm/kernel_args.h"
#include "cuda/gemm/relayout.h"
#include "cuda/gemm/tile_config.cuh"
#include "cuda/gemm/zero_fill.cuh"

namespace sg::detail::cuda {

__global__ void __launch_bounds__(kRelayoutTile * kRelayoutRows)
    relayout_outer_major_kernel(const OperandView<float> v, int32_t k_extent, float* out, int64_t ldo,
                                bool mirror_only) {
  __shared__ float tile[kRelayoutTile][kRelayoutTile + 1];
  const int o0 = blockIdx.y * kRelayoutTile, k0 = blockIdx.x * kRelayoutTile;
  const int tx = threadIdx.x, ty = threadIdx.y;
  constexpr int kLast = kRelayoutTile - 1;
  // The tile's distance from the non-zero part (positive: structural zeros only).
  const int zero_distance = v.pattern == Pattern::KAtLeastOuter  ? o0 - (k0 + kLast)
                            : v.pattern == Pattern::KAtMostOuter ? k0 - (o0 + kLast)
                                                                 : 0;
  if (zero_distance >= kRelayoutZeroBand) return;
  if (v.pattern == Pattern::Symmetric && o0 + kLast <= k0) {
    if (mirror_only && !mirror_copy_holds(o0, k0, k_extent)) return;
    // Wholly in the stored triangle: a straight copy, rows along k.
    for (int r = ty; r < kRelayoutTile; r += kRelayoutRows) {
      const int o = o0 + r, k = k0 + tx;
      if (o < v.extent && k < k_extent) out[static_cast<int64_t>(o) * ldo + k] = v.data[static_cast<int64_t>(o) * v.ld + k];
    }
    return;
  }
  // Transposed through shared memory: read along outer (k-major storage), write along k.
  for (int r = ty; r < kRelayoutTile; r += kRelayoutRows) {
    const int o = o0 + tx, k = k0 + r;
    float value = 0.0f;
    if (zero_distance <= 0 && o < v.extent && k < k_extent) {
      if (v.pattern == Pattern::Symmetric) {
        value = v.data[o > k ? static_cast<int64_t>(k) * v.ld + o : static_cast<int64_t>(o) * v.ld + k];
      } else if (pattern_allows(v.pattern, o, k)) {
        value = v.data[static_cast<int64_t>(k) * v.ld + o];
      }
    }
    tile[r][tx] = value;
  }
  __syncthreads();
  for (int r = ty; r < kRelayoutTile; r += kRelayoutRows) {
    const int o = o0 + r, k = k0 + tx;
    if (o < v.extent && k < k_extent) out[static_cast<int64_t>(o) * ldo + k] = tile[tx][r];
  }
}

}  // namespace sg::detail::cuda
