// The whole copy of a Symmetric matrix from its stored upper triangle, both triangles written
// (relayout.h: kSymCopyTile, kSymCopyThreads).
#pragma once

#include "cuda/gemm/arch/vector_access.cuh"
#include "cuda/gemm/relayout.h"

namespace sg::detail::cuda {

__global__ void __launch_bounds__(kSymCopyThreads)
    symmetric_copy_kernel(const float* s, int64_t ld, int32_t n, bool vector_ok, float* out, int64_t ldo) {
  __shared__ float tile[kSymCopyTile][kSymCopyTile + 1];
  const int bi = blockIdx.y, bj = blockIdx.x;
  if (bi > bj) return;  // (the pair's block is (bj, bi))
  const int r0 = bi * kSymCopyTile, c0 = bj * kSymCopyTile;
  const int row = threadIdx.x / kSymCopyVecsPerRow, col = (threadIdx.x % kSymCopyVecsPerRow) * 4;
  const bool whole = r0 + kSymCopyTile <= n && c0 + kSymCopyTile <= n;
  // Tile (bi, bj) of the storage. Its part below the diagonal (bi == bj) holds anything and is
  // loaded (in bounds) but never written out.
#pragma unroll
  for (int p = 0; p < kSymCopyTile / kSymCopyRowsPerPass; ++p) {
    const int r = row + p * kSymCopyRowsPerPass;
    float v[4];
    if (whole && vector_ok) {
      load_vec_global(s + static_cast<int64_t>(r0 + r) * ld + c0 + col, v);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        v[j] = r0 + r < n && c0 + col + j < n ? s[static_cast<int64_t>(r0 + r) * ld + c0 + col + j] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) tile[r][col + j] = v[j];
  }
  __syncthreads();
  // out rows are 16-byte aligned (ldo a multiple of 4, a fresh allocation): whole tiles store
  // vectors. Tile (bi, bj) as it lies (on the diagonal, element (r, c) with r > c from (c, r)),
  // then tile (bj, bi) as its transpose.
  auto store = [&](int o0, int k0, bool transposed) {
#pragma unroll
    for (int p = 0; p < kSymCopyTile / kSymCopyRowsPerPass; ++p) {
      const int r = row + p * kSymCopyRowsPerPass;
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = col + j;
        v[j] = transposed || (bi == bj && r > c) ? tile[c][r] : tile[r][c];
      }
      float* dst = out + static_cast<int64_t>(o0 + r) * ldo + k0 + col;
      if (whole) {
        *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (o0 + r < n && k0 + col + j < n) dst[j] = v[j];
      }
    }
  };
  store(r0, c0, false);
  if (bi != bj) store(c0, r0, true);
}

}  // namespace sg::detail::cuda
