// Zero-fill: the structure predicate of an operand, the structural zeros written into the tiles that
// cross its diagonal (shared tiles, raw tiles, fragments), and zeroed boxes for the tiles of zeros.
#pragma once

#include "cuda/gemm/arch/mbarrier.cuh"
#include "cuda/gemm/arch/tma.cuh"
#include "cuda/gemm/arch/vector_access.cuh"
#include "cuda/gemm/kernel_args.h"
#include "cuda/gemm/tile_config.cuh"

namespace sg::detail::cuda {

__device__ __forceinline__ bool pattern_allows(Pattern pattern, int outer, int k) {
  return pattern == Pattern::KAtLeastOuter ? k >= outer : pattern == Pattern::KAtMostOuter ? k <= outer : true;
}

/// Whether the k-step tile at k0 of an operand (tile rows from outer0) crosses its diagonal,
/// that is holds structural zeros. (OperandStager::masked_step says the same in its own words:
/// written through this function, the instances that use it compiled to different code.)
template <class Cfg>
__device__ __forceinline__ bool crosses_diagonal(Pattern pattern, int outer0, int k0) {
  return pattern == Pattern::KAtLeastOuter   ? k0 < outer0 + Cfg::kTile - 1
         : pattern == Pattern::KAtMostOuter ? k0 + Cfg::kKStep - 1 > outer0
                                             : false;
}

/// Whether the k-step at k0 of an operand copied whole (tile rows from outer0) needs its
/// structural zeros written: it crosses the diagonal and the storage does not hold them.
template <class Cfg>
__device__ __forceinline__ bool needs_structural_zeros(const OperandView<float>& v, int outer0, int k0) {
  return !v.zeros_stored && crosses_diagonal<Cfg>(v.pattern, outer0, k0);
}

/// Writes the structural zeros into a wgmma tile that a direct copy brought whole (the storage
/// outside a structure holds anything), and with kLimitK zeros at k >= k_limit too (a k-range
/// that ends inside the step). Each of the kThreads threads rewrites 4 of the tile's 1024
/// 16-byte chunks (row q/8, chunk q mod 8 along k, q = tid + kThreads·c); 8 consecutive threads
/// cover one 128-byte row, conflict-free.
/// Zeros the elements of one 16-byte chunk of a tile in shared memory (4 consecutive k from k, at
/// outer index `outer`) that lie outside `pattern`, and with kLimitK those at k_limit and beyond.
template <bool kLimitK = false, class T>
__device__ __forceinline__ void zero_chunk_outside(T* chunk, Pattern pattern, int outer, int k, int k_limit = 0) {
  T value[4];
  load4_shared(chunk, value);
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (!pattern_allows(pattern, outer, k + j) || (kLimitK && k + j >= k_limit)) value[j] = T(0);
  store_vec_shared(chunk, value);
}

template <class Cfg, bool kLimitK = false>
__device__ __forceinline__ void zero_outside_structure(typename Cfg::Scalar* tile, Pattern pattern, int outer0, int k0,
                                                       int k_limit = 0) {
  static_assert(Cfg::kTile * Cfg::kKStep / 4 == 4 * Cfg::kThreads, "4 chunks per thread");
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int q = threadIdx.x + c * Cfg::kThreads;
    const int row = q >> 3, k = 4 * (q & 7);
    zero_chunk_outside<kLimitK>(wgmma_tile_chunk<Cfg>(tile, row, k), pattern, outer0 + row, k0 + k, k_limit);
  }
}

/// Writes the structural zeros into B's raw tile (the k-step at k0 of columns from col0), and zeros
/// at k >= k_limit: each thread rewrites 4 of its 1024 16-byte chunks (chunk position p of row k of
/// box q holds columns 32q + 4·(p ^ (k mod 8)) + 0…3).
template <class Cfg>
__device__ __forceinline__ void zero_raw_outside_structure(float* raw, Pattern pattern, int col0, int k0,
                                                           int k_limit) {
  static_assert(Cfg::kTile * Cfg::kKStep / 4 == 4 * Cfg::kThreads, "4 chunks per thread");
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int chunk = threadIdx.x + c * Cfg::kThreads;  // box chunk / 256, row (chunk / 8) mod 32
    const int box = chunk >> 8, k = (chunk >> 3) & 31, p = chunk & 7;
    float* at = raw + box * 32 * Cfg::kKStep + k * 32 + 4 * p;
    const int col = col0 + 32 * box + 4 * (p ^ (k & 7));
    float value[4];
    load4_shared(at, value);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (!pattern_allows(pattern, col + j, k0 + k) || k0 + k >= k_limit) value[j] = 0.0f;
    store_vec_shared(at, value);
  }
}

/// Zeros one 128 × 32 box of floats (16 KB) in shared memory: 4 of its 16-byte chunks per thread of
/// the register-B kernel's 256.
__device__ __forceinline__ void zero_shared_box(unsigned char* box) {
  static_assert(ConfigTf32WgmmaRegisterB::kTile == 128 && ConfigTf32WgmmaRegisterB::kThreads == 256,
                "one box of 128 × 32 floats, 4 chunks per thread");
  const float zeros[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int c = 0; c < 4; ++c) store_vec_shared(reinterpret_cast<float*>(box + 16 * (threadIdx.x + c * 256)), zeros);
}

/// The box of the tiles of zeros (the tall and wide kernels, after a block's other items): once
/// thread 0's stores have read the epilogue's buffer at `out`, the kThreads consumer threads zero its
/// first kBytes and fence them for the TMA stores that follow.
template <int kThreads, int kBytes>
__device__ __forceinline__ void zero_box_for_stores(unsigned char* out) {
  static_assert(kBytes % (16 * kThreads) == 0, "whole 16-byte chunks per thread");
  if (threadIdx.x == 0) tma_store_wait_read();
  named_barrier_sync(kConsumerBarrier, kThreads);
  const float z[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int c = 0; c < kBytes / 16 / kThreads; ++c)
    store_vec_shared(reinterpret_cast<float*>(out + 16 * (threadIdx.x + c * kThreads)), z);
  fence_shared_for_async_proxy();
  named_barrier_sync(kConsumerBarrier, kThreads);
}

/// B's structural zeros in the tall kernel's A fragments of one k-step (load_tall_fragments) at k0,
/// of the tile whose columns start at col0, where B's storage does not hold them (a gradient read
/// through C's structure): each element outside `pattern` becomes zero. Fragment i of slice s is
/// column col_base() + 4(i mod 2) at k = t + 4(i / 2) + 8s of the step (register_b_offsets).
__device__ __forceinline__ void zero_tall_fragments_outside(uint32_t (&frag)[4][4], Pattern pattern, int col0, int k0) {
  // The column minus the k of fragment 0 of slice 0; each other's differs by a constant.
  const int diff = col0 + TallConfig::col_base() - k0 - (threadIdx.x & 3);
  const bool at_most = pattern == Pattern::KAtMostOuter;  // k <= column; else k >= column
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int d = diff + 4 * (i & 1) - 4 * (i >> 1) - 8 * s;
      if (at_most ? d < 0 : d > 0) frag[s][i] = 0u;
    }
}

/// A's structural zeros in the wide kernel's A tile of the k-step at k0 (rows from row0), for the
/// 64 rows this thread's warpgroup multiplies, where A's storage does not hold them (a gradient read
/// through C's structure, as G of dA = triu(G·Bᵀ)): 4 of the 512 16-byte chunks per thread of the
/// warpgroup, as zero_outside_structure does for a whole tile. Then the proxy fence and the
/// warpgroup's own barrier: the other warpgroup reads none of these rows.
__device__ __forceinline__ void zero_wide_rows_outside(float* tile, Pattern pattern, int row0, int k0) {
  using Cfg = WideConfig;
  const int warpgroup = threadIdx.x >> 7;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int q = (threadIdx.x & 127) + c * 128;
    const int row = 64 * warpgroup + (q >> 3), k = 4 * (q & 7);
    zero_chunk_outside(wgmma_tile_chunk<Cfg>(tile, row, k), pattern, row0 + row, k0 + k);
  }
  fence_shared_for_async_proxy();
  if (warpgroup == 0) named_barrier_sync(kWideWarpgroupBarrier, 128);  // (ids known to ptxas)
  else named_barrier_sync(kWideWarpgroupBarrier + 1, 128);
}

}  // namespace sg::detail::cuda
