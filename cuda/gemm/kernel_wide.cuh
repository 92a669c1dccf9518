// The wide kernel: persistent blocks over 128 × 256 tiles with both operands from shared memory, a
// producer warp running ahead across items, TMA stores.
#pragma once

#include "cuda/gemm/arch/dependent_launch.cuh"
#include "cuda/gemm/epilogue.cuh"
#include "cuda/gemm/mainloop_wgmma.cuh"

namespace sg::detail::cuda {

// =============================================================================================
// The wide kernel: large products whose operands are both outer-major Dense with direct TMA
// maps (gram-shaped products, the Symmetric products relayout copied), in 128 × 256 tiles — a
// quarter less L2 traffic per multiply-add than 128 × 128 — one block per SM, persistent.
// Block b runs items b, b + gridDim.x, …; its producer warp runs ahead through them, so an
// item's first copies land while the consumers still write the previous item's tile. Two
// consumer warpgroups of 64 × 256 (wgmma m64n256k8, 128 accumulators per thread), a ring of
// kWideStages buffers of A (16 KB) and B (32 KB), the pipelined kernel's mbarrier protocol.
// Block b runs items offsets[b] … offsets[b + 1] − 1 of wide_tile_plan's schedule: whole tiles
// in rounds of one per block, and where the tiles leave the last round part empty, that round's
// tiles cut in k, the tails run by the blocks without a tile there (the two chunks meet in C by a
// TMA store and a TMA reduction, as the tall kernel's do; only where C takes TMA stores).
// Structured products (one or both operands Upper or Lower: Upper·Upper's dA = triu(G·Bᵀ)) run from
// tall_tile_plan's deal of 128 × 256 tiles in shared-panel order instead, with their k-ranges and
// tiles of zeros (stored from a zeroed box after the block's other items); B must hold its zeros,
// A's are written into its tile where its storage lacks them (zero_wide_rows_outside). Copies fill
// rows and k beyond the operands with zeros.
// =============================================================================================

__global__ void __launch_bounds__(WideConfig::kThreads + kProducerThreads, 1)
    structured_gemm_wide_kernel(const GemmArgs<float> args, const __grid_constant__ TmaMaps maps, const int* offsets) {
  using Cfg = WideConfig;
  extern __shared__ __align__(1024) unsigned char dynamic_smem[];
  unsigned char* base = dynamic_smem + ((1024 - (shared_address(dynamic_smem) & 1023)) & 1023);
  float* const a_tiles = reinterpret_cast<float*>(base);
  float* const b_tiles = reinterpret_cast<float*>(base + kWideStages * Cfg::kATileBytes);
  unsigned char* const out = base + kWideStages * (Cfg::kATileBytes + Cfg::kBTileBytes);  // the epilogue's boxes (store_tile_by_tma)
  constexpr int kAStage = Cfg::kATileBytes / 4, kBStage = Cfg::kBTileBytes / 4;  // floats per buffer
  __shared__ uint64_t full[kWideStages], empty[kWideStages];
  __shared__ int last_chunk;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kWideStages; ++s) {
      mbarrier_init(full + s, 1);   // the producer's arrive.expect_tx
      mbarrier_init(empty + s, 2);  // one arrival per consumer warpgroup
    }
  }
  wait_for_previous_grid();  // before any global memory (launch_after_previous)
  __syncthreads();  // the only block-wide barrier
  const int first = offsets[blockIdx.x], last = offsets[blockIdx.x + 1];
  int stage = 0, round = 0;
  if (threadIdx.x >= Cfg::kThreads) {
    if (threadIdx.x != Cfg::kThreads) return;
#pragma unroll 1
    for (int i = first; i < last; ++i) {
      const GemmWorkItem item = args.items[i];
      const int row0 = item.tile_row * Cfg::kTile, col0 = item.tile_col * Cfg::kTileN;
#pragma unroll 1
      for (int k0 = item.k_begin; k0 < item.k_end; k0 += Cfg::kKStep) {
        if (round > 0) mbarrier_wait(empty + stage, (round - 1) & 1);
        mbarrier_arrive_expect_tx(full + stage, Cfg::kATileBytes + Cfg::kBTileBytes);
        tma_load_tile(a_tiles + stage * kAStage, direct_map<false, Cfg::kTile>(maps, k0, row0), k0, row0,
                      full + stage);
        tma_load_tile(b_tiles + stage * kBStage, direct_map<true, Cfg::kTileN>(maps, k0, col0), k0, col0,
                      full + stage);
        if (++stage == kWideStages) stage = 0, ++round;
      }
    }
    return;
  }
  const uint32_t a_rows = (threadIdx.x >> 7) * 64 * Cfg::kKStep * sizeof(float);  // this warpgroup's rows
  const bool signals = (threadIdx.x & 127) == 0;
  int* stored = nullptr;  // thread 0's: the split tile whose stores it has yet to count (store_tile_by_tma)
  const bool tma_stores = maps.has & kCStore;
  bool zero_tiles = false;  // the block has tiles of zeros, stored after its other items
#pragma unroll 1
  for (int i = first; i < last; ++i) {
    const GemmWorkItem item = args.items[i];
    if (tma_stores && item.k_begin >= item.k_end) {
      zero_tiles = true;
      continue;
    }
    const int row0 = item.tile_row * Cfg::kTile;
    float acc[Cfg::kPerRow][Cfg::kPerCol];
#pragma unroll
    for (int r = 0; r < Cfg::kPerRow; ++r)
#pragma unroll
      for (int c = 0; c < Cfg::kPerCol; ++c) acc[r][c] = 0.0f;
    int released = -1;
#pragma unroll 1
    for (int k0 = item.k_begin; k0 < item.k_end; k0 += Cfg::kKStep) {
      mbarrier_wait(full + stage, round & 1);
      // A's diagonal-crossing steps where its storage does not hold the zeros (B's always does).
      if (needs_structural_zeros<Cfg>(args.a, row0, k0)) zero_wide_rows_outside(a_tiles + stage * kAStage, args.a.pattern, row0, k0);
      const uint32_t a_base = shared_address(a_tiles + stage * kAStage) + a_rows;
      const uint32_t b_base = shared_address(b_tiles + stage * kBStage);
      wgmma_fence_operands(acc);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < Cfg::kKStep; ks += 8)
        wgmma_m64n256k8_tf32(acc, wgmma_descriptor(a_base + ks * sizeof(float)),
                             wgmma_descriptor(b_base + ks * sizeof(float)));
      wgmma_commit();
      wgmma_wait_all_but_latest();  // the previous step's group is complete: its buffer goes back
      wgmma_fence_operands(acc);
      if (signals && released >= 0) mbarrier_arrive(empty + released);
      released = stage;
      if (++stage == kWideStages) stage = 0, ++round;
    }
    wgmma_wait_all();
    wgmma_fence_operands(acc);
    if (signals && released >= 0) mbarrier_arrive(empty + released);
    if (tma_stores)
      store_tile_by_tma<Cfg, WideStores>(args, maps, row0, item.tile_col * Cfg::kTileN, acc, out,
                                         item.chunk_count > 1 ? args.counters + item.counter_index : nullptr, &stored);
    else  // (the plan without split tiles: wide_tile_plan's, WideSplit::Never)
      write_tile<Cfg, AccumulatorThreads::Consumers>(args, item, row0, item.tile_col * Cfg::kTileN, acc, last_chunk,
                                                     threadIdx.x);
  }
  if (!tma_stores) return;
  if (threadIdx.x == 0) wide_tile_stored(stored);
  // The tiles of zeros (the Upper mask's tiles below the diagonal), from the first box of the
  // epilogue's buffer zeroed once the last stores have read it: eight stores of 128 × 32 each.
  if (zero_tiles) {
    zero_box_for_stores<Cfg::kThreads, Cfg::kOutBoxBytes>(out);
    if (threadIdx.x == 0) {
      for (int t = first; t < last; ++t) {
        const GemmWorkItem& item = args.items[t];
        if (item.k_begin < item.k_end) continue;
#pragma unroll
        for (int q = 0; q < Cfg::kTileN / Cfg::kOutCols; ++q)
          tma_store_tile(&maps.c, item.tile_col * Cfg::kTileN + Cfg::kOutCols * q, item.tile_row * Cfg::kTile, out);
      }
    }
  }
  if (threadIdx.x == 0) tma_store_wait_read();  // the boxes must outlive the stores' reads
}

}  // namespace sg::detail::cuda
