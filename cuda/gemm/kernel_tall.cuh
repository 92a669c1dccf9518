// The tall kernel: persistent blocks over 256 × 128 tiles with B from registers (the register-B
// products at scale), a four-stage ring filled across items, TMA stores, op(A)ᵀ as a second output.
#pragma once

#include "cuda/gemm/arch/dependent_launch.cuh"
#include "cuda/gemm/epilogue.cuh"
#include "cuda/gemm/mainloop_wgmma.cuh"

namespace sg::detail::cuda {

// =============================================================================================
// The tall kernel: the register-B kernel's products (A direct, B k-major as it lies, the tile
// computed transposed) in tiles of 256 rows × 128 columns, persistent, one block per SM — the wide
// kernel's trade (a quarter less L2 traffic per multiply-add than 128 × 128 tiles: 48 KB per
// k-step for twice the multiply-adds of a 32 KB step) with a four-stage ring (A 32 KB + B 16 KB per
// stage) that thread 0 fills three k-steps ahead across items. Each warpgroup computes 64 output
// columns × all 256 rows, wgmma m64n256k8 with its A (op(B)ᵀ) from registers, loaded from B's raw
// tile as the register-B kernel loads it (the same column permutation, register_b_offsets); its B
// operand is A's direct copy of 256 rows. No producer warp: a ninth warp caps the block at 168
// registers, at which ptxas spills and serializes the wgmmas.
// Block b runs items offsets[b] … offsets[b + 1] − 1 of a host-made schedule (tall_tile_plan:
// tiles dealt in shared-panel order (by first k, heaviest first among equal first k) to the least
// loaded block, long ones cut into two chunks where that balances the blocks; the chunks meet in C
// by a TMA store and a TMA reduction, store_tile_by_tma, with no partial tile in between). Items with an empty k-range are tiles of zeros, first in their
// block's list (the planner gives each to the least loaded block): thread 0 writes them by TMA
// stores of a zeroed box after the block's other items. A's storage must hold its structural zeros
// (Dense, GemmOperand::zeros_stored, or a relayout copy): no step is zeroed in shared memory. B's
// zeros, where its storage lacks them, are written into its fragments in the steps that cross its
// diagonal (zero_tall_fragments_outside).
// Measured: docs/structured_gemm.md, "The tall kernel".
// =============================================================================================

/// The tall kernel's second output (TransposedOutput): the transpose of the A tile of one k-step (256
/// rows × 32 k in the 128-byte swizzle, wgmma_tile_chunk) into the epilogue's buffer `out` as 8 boxes
/// of 32 k-rows × 32 columns of the map over at (the 128-byte swizzle, swizzled_out_offset), which
/// thread 0 then stores. A warp's pass covers 8 rows × 16 k: lane l reads rows 4(l / 16) … + 3 at k =
/// l mod 16 (four scalar loads: the 8 rows' swizzles spread the 4 k chunks over all 32 banks) and
/// writes them as one 16-byte vector (8 lanes of a phase: 8 k, 8 distinct chunks). Warp w takes rows
/// 32w … 32w + 31 in 8 passes.
__device__ __forceinline__ void transpose_a_step(const float* tile, unsigned char* out) {
  using Cfg = TallConfig;
  constexpr int kBoxBytes = 32 * 32 * 4;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int kk = lane & 15, quad = 4 * (lane >> 4);
#pragma unroll 4
  for (int pass = 0; pass < 8; ++pass) {
    const int r = 32 * warp + 8 * (pass >> 1) + quad, k = kk + 16 * (pass & 1);
    float v[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) v[q] = tile[(r + q) * Cfg::kKStep + ((((k >> 2) ^ ((r + q) & 7)) << 2) | (k & 3))];
    store_vec_shared(reinterpret_cast<float*>(out + swizzled_out_offset(k, r, kBoxBytes)), v);
  }
}

/// kOutput: whether the instance also writes op(A)ᵀ (`transposed`; the other has no code for it).
template <TransposedA kOutput>
__global__ void __launch_bounds__(TallConfig::kThreads, 1)
    structured_gemm_tall_kernel(const GemmArgs<float> args, const __grid_constant__ TmaMaps maps,
                                const int* offsets, const __grid_constant__ TransposedOutput transposed) {
  using Cfg = TallConfig;
  constexpr bool kWritesAt = kOutput == TransposedA::Written;
  extern __shared__ __align__(1024) unsigned char dynamic_smem[];
  unsigned char* base = dynamic_smem + ((1024 - (shared_address(dynamic_smem) & 1023)) & 1023);
  float* const a_tiles = reinterpret_cast<float*>(base);
  float* const b_raw = reinterpret_cast<float*>(base + kTallStages * Cfg::kATileBytes);
  unsigned char* const out = base + kTallStages * (Cfg::kATileBytes + Cfg::kBTileBytes);  // the epilogue's boxes
  constexpr int kAStage = Cfg::kATileBytes / 4, kBStage = Cfg::kBTileBytes / 4;  // floats per buffer
  __shared__ uint64_t full[kTallStages], empty[kTallStages];
  if (threadIdx.x == 0) {
    for (int s = 0; s < kTallStages; ++s) {
      mbarrier_init(full + s, 1);   // thread 0's arrive.expect_tx
      mbarrier_init(empty + s, 2);  // one arrival per warpgroup
    }
  }
  wait_for_previous_grid();  // before any global memory (launch_after_previous)
  const int first = offsets[blockIdx.x], last = offsets[blockIdx.x + 1];
  // The block's tiles of zeros head its list; it stores them after its other items (below). Stored
  // first, their 128 KB each held back the first copies of every block that had some: 8 µs of a
  // 107 µs Upper·Upper launch at 4096 (docs/structured_gemm.md, "Tiles of zeros last").
  const int zeros_end = [&] {
    int z = first;
    while (z < last && args.items[z].k_begin >= args.items[z].k_end) ++z;
    return z;
  }();
  int i = zeros_end;
  __syncthreads();  // the barriers' initialization
  // Thread 0 issues the copies kTallStages − 1 steps ahead of the step the warpgroups multiply,
  // across items: its cursor (item, k) runs through the block's items on its own.
  int issue_item = i, issue_k = 0, issue_k_end = 0, issue_row0 = 0, issue_col0 = 0, issue_stage = 0, issue_round = 0;
  auto load_cursor = [&] {
    if (issue_item >= last) return;
    const GemmWorkItem& next = args.items[issue_item];
    issue_k = next.k_begin;
    issue_k_end = next.k_end;
    issue_row0 = next.tile_row * Cfg::kTile;
    issue_col0 = next.tile_col * Cfg::kTileN;
  };
  auto issue_step = [&] {
    if (issue_item >= last) return;
    if (issue_round > 0) mbarrier_wait(empty + issue_stage, (issue_round - 1) & 1);
    mbarrier_arrive_expect_tx(full + issue_stage, Cfg::kATileBytes + Cfg::kBTileBytes);
    // (A may be a mirror copy: its stored triangle's whole steps come from the storage.)
    tma_load_tile(a_tiles + issue_stage * kAStage, direct_map<false, Cfg::kTile>(maps, issue_k, issue_row0), issue_k,
                  issue_row0, full + issue_stage);
    issue_raw_b_step(maps, issue_k, issue_col0, b_raw + issue_stage * kBStage, full + issue_stage);
    if (++issue_stage == kTallStages) issue_stage = 0, ++issue_round;
    issue_k += Cfg::kKStep;
    if (issue_k >= issue_k_end) {
      ++issue_item;
      load_cursor();
    }
  };
  const bool issuer = threadIdx.x == 0;
  if (issuer) {
    load_cursor();
    for (int s = 0; s < kTallStages - 1; ++s) issue_step();
  }
  const bool signals = (threadIdx.x & 127) == 0;
  int offset[2][2];
  register_b_offsets(offset);
  int stage = 0, round = 0;
#pragma unroll 1
  for (; i < last; ++i) {
    const GemmWorkItem item = args.items[i];
    const int col0 = item.tile_col * Cfg::kTileN;
    float acc[2][64];
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int c = 0; c < 64; ++c) acc[r][c] = 0.0f;
    // One wgmma group per k-step (its four k8 slices); the fragments of two steps are live, the
    // step's own and those of the group still running.
    uint32_t f0[4][4] = {}, f1[4][4] = {};
    int released = -1;
    // The steps whose A tile this item writes transposed (`transposed`): its run of the plan's
    // (TallPlan::transposed_writes), so each step of A that the launch reads is written once.
    int writes_begin = 0, writes_end = 0;  // (k < 2^28: the launcher's limit)
    if constexpr (kWritesAt) {
      const KRange writes = transposed.writes[i];
      writes_begin = static_cast<int>(writes.begin);
      writes_end = static_cast<int>(writes.end);
    }
    auto step = [&](int k0, uint32_t (&frag)[4][4], uint32_t (&other)[4][4]) {
      mbarrier_wait(full + stage, round & 1);
      const uint32_t a_tile = shared_address(a_tiles + stage * kAStage);
      const float* raw = b_raw + stage * kBStage;
      // Before this step's wgmma (the stage goes back only after every warp has issued it): its A
      // tile transposed into the epilogue's buffer, once the stores before have read it, and stored.
      if (kWritesAt && k0 >= writes_begin && k0 < writes_end) {
        if (issuer) tma_store_wait_read();
        named_barrier_sync(kConsumerBarrier, Cfg::kThreads);
        transpose_a_step(a_tiles + stage * kAStage, out);
        fence_shared_for_async_proxy();
        named_barrier_sync(kConsumerBarrier, Cfg::kThreads);
        if (issuer) {
#pragma unroll
          for (int q = 0; q < Cfg::kTile / 32; ++q)
            tma_store_tile(&transposed.map, item.tile_row * Cfg::kTile + 32 * q, k0, out + q * 32 * 32 * 4);
          tma_store_commit();
        }
      }
      load_tall_fragments(raw, offset, frag);
      // B's diagonal-crossing steps where its storage does not hold the zeros (A's always does).
      if (needs_structural_zeros<ConfigTf32WgmmaRegisterB>(args.b, col0, k0))
        zero_tall_fragments_outside(frag, args.b.pattern, col0, k0);
      wgmma_fence_operands(acc);
      wgmma_fence();
#pragma unroll
      for (int s = 0; s < 4; ++s)
        wgmma_m64n256k8_tf32_register_a(acc, frag[s], wgmma_descriptor(a_tile + 8 * s * sizeof(float)));
      wgmma_commit();
      wgmma_wait_all_but_latest();  // the previous step's group: its buffer and fragments are free
      wgmma_fence_operands(acc);
      keep_tall_fragments(other);
      if (signals && released >= 0) mbarrier_arrive(empty + released);
      released = stage;
      // The step kTallStages − 1 ahead goes into the buffer just released (both warpgroups).
      if (issuer) issue_step();
      if (++stage == kTallStages) stage = 0, ++round;
    };
    int k0 = item.k_begin;
#pragma unroll 1
    for (; k0 + Cfg::kKStep < item.k_end; k0 += 2 * Cfg::kKStep) {
      step(k0, f0, f1);
      step(k0 + Cfg::kKStep, f1, f0);
    }
    if (k0 < item.k_end) step(k0, f0, f1);
    wgmma_wait_all();
    wgmma_fence_operands(acc);
    keep_tall_fragments(f0);
    keep_tall_fragments(f1);
    if (signals) mbarrier_arrive(empty + released);
    float acc_t[Cfg::kPerRow][Cfg::kPerCol];  // the transposed tile's accumulators
#pragma unroll
    for (int r = 0; r < Cfg::kPerCol; ++r)
#pragma unroll
      for (int c = 0; c < Cfg::kPerRow; ++c) acc_t[c][r] = acc[r][c];
    store_tile_by_tma<Cfg, TallStores>(args, maps, item.tile_row * Cfg::kTile, col0, acc_t, out,
                                       item.chunk_count > 1 ? args.counters + item.counter_index : nullptr);
  }
  // The tiles of zeros, from a box of the epilogue's buffer zeroed once its last stores have read it.
  if (zeros_end > first) {
    zero_box_for_stores<Cfg::kThreads, Cfg::kOutBoxBytes>(out);
    if (issuer) {
      for (int t = first; t < zeros_end; ++t) {
        const int row0 = args.items[t].tile_row * Cfg::kTile, col0 = args.items[t].tile_col * Cfg::kTileN;
#pragma unroll
        for (int h = 0; h < Cfg::kTile / Cfg::kOutRows; ++h)
#pragma unroll
          for (int q = 0; q < Cfg::kTileN / 32; ++q) tma_store_tile(&maps.c, col0 + 32 * q, row0 + Cfg::kOutRows * h, out);
      }
    }
  }
  if (issuer) tma_store_wait_read();  // the epilogue's boxes must outlive the stores' reads
}

}  // namespace sg::detail::cuda
