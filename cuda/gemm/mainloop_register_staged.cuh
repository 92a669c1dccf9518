// Mainloops whose tiles are staged through registers: the FFMA and FP64-MMA loop (fma_k_loop) and the
// mma.sync and one-barrier-per-step wgmma loop (main_loop_step), double-buffered in shared memory.
#pragma once

#include "cuda/gemm/arch/mma_sync.cuh"
#include "cuda/gemm/arch/wgmma.cuh"
#include "cuda/gemm/mainloop_wgmma.cuh"
#include "cuda/gemm/operand_staging.cuh"

namespace sg::detail::cuda {

// =============================================================================================
// The main loop of the tensor-core configs, one k-step: fetch step t+1 into registers, multiply
// the shared tiles of step t (buffer `buffer`), store step t+1 into the other buffer, barrier.
// (The FMA configs run fma_k_loop, below: the same sequence with a shortcut for fast steps.)
// The loops are deliberately not unrolled across k-steps: one k-step of the FMA loop is already
// kKStep·kPerRow·kPerCol FFMAs, and a body twice that size overflows the instruction cache
// (measured: "no instruction" stalls on H100). Returns false after the last step.
// =============================================================================================

// The shared buffer after `buffer` in a ring of kStages.
template <int kStages>
__device__ __forceinline__ int next_buffer(int buffer) {
  return buffer + 1 == kStages ? 0 : buffer + 1;
}

/// One k-step of the mma.sync loops. Per k8 slice: the m16n8k8 fragments of the warp's kWarpRows/16
/// row blocks of A and kWarpCols/8 column blocks of B (fragment layouts of the PTX ISA; lane (g, t)
/// reads A[k = t, t+4][m = g, g+8] and B[k = t, t+4][n = g] from the k-major tiles), then one MMA
/// per pair: TF32 (the bit patterns, rounded when staged) or FP64 (float64 tiles as they are, float32
/// ones each value widened exactly).
template <class Cfg>
__device__ __forceinline__ void mma_sync_step(const typename Cfg::Scalar* a_tile, const typename Cfg::Scalar* b_tile,
                                              typename Cfg::Acc (&acc)[Cfg::kPerRow][Cfg::kPerCol]) {
  using T = typename Cfg::Scalar;
  using Acc = typename Cfg::Acc;
  using Frag = std::conditional_t<Cfg::kDmma, double, uint32_t>;
  constexpr int kStride = Cfg::kStride, kRowBlocks = Cfg::kWarpRows / 16, kColBlocks = Cfg::kWarpCols / 8;
  auto frag = [](T x) -> Frag {
    if constexpr (Cfg::kDmma) return static_cast<double>(x);
    else return __float_as_uint(x);
  };
  const int t = threadIdx.x & 3, g = (threadIdx.x & 31) >> 2;
  // Lane (g, t) reads rows k = ks + t and ks + t + 4 at columns x + g, x a multiple of 8: in the
  // swizzled tile (TileConfig::col_swizzle, the same for the 4 rows of each) column
  // (x ^ s) + (g ^ s mod 8), s = col_swizzle(k): an offset from the lane's base at g or at g ^ 4,
  // known at compile time where the slices are unrolled.
  const int a_rows = Cfg::warp_row() * Cfg::kWarpRows + t * kStride;
  const int b_cols = Cfg::warp_col() * Cfg::kWarpCols + t * kStride;
  const T* a_lane[2] = {a_tile + a_rows + g, a_tile + a_rows + (g ^ 4)};
  const T* b_lane[2] = {b_tile + b_cols + g, b_tile + b_cols + (g ^ 4)};
  // Element (ks + t + 4·h, x + g) of the lane, x a multiple of 8 below 64.
  auto at = [](const T* const (&lane)[2], int ks, int h, int x) {
    const int s = Cfg::col_swizzle(ks + 4 * h);
    return lane[(s & 4) != 0][(ks + 4 * h) * kStride + (x ^ (s & ~7))];
  };
  // Float64 tiles go one k8 slice at a time: with their two slices unrolled, the FP64 loop needs more
  // than 255 registers and spills.
  constexpr int kUnrolledSlices = sizeof(T) == 8 ? 1 : Cfg::kKStep / 8;
#pragma unroll(kUnrolledSlices)
  for (int ks = 0; ks < Cfg::kKStep; ks += 8) {
    Frag a_frag[kRowBlocks][4], b_frag[kColBlocks][2];
#pragma unroll
    for (int mi = 0; mi < kRowBlocks; ++mi) {
      a_frag[mi][0] = frag(at(a_lane, ks, 0, mi * 16));
      a_frag[mi][1] = frag(at(a_lane, ks, 0, mi * 16 + 8));
      a_frag[mi][2] = frag(at(a_lane, ks, 1, mi * 16));
      a_frag[mi][3] = frag(at(a_lane, ks, 1, mi * 16 + 8));
    }
#pragma unroll
    for (int ni = 0; ni < kColBlocks; ++ni) {
      b_frag[ni][0] = frag(at(b_lane, ks, 0, ni * 8));
      b_frag[ni][1] = frag(at(b_lane, ks, 1, ni * 8));
    }
#pragma unroll
    for (int mi = 0; mi < kRowBlocks; ++mi)
#pragma unroll
      for (int ni = 0; ni < kColBlocks; ++ni) {
        // c0, c1: row g, columns 2t, 2t+1; c2, c3: row g + 8 (see TileConfig::row_offset).
        Acc d[4] = {acc[2 * mi][2 * ni], acc[2 * mi][2 * ni + 1], acc[2 * mi + 1][2 * ni], acc[2 * mi + 1][2 * ni + 1]};
        if constexpr (Cfg::kDmma) mma_f64_m16n8k8(d, a_frag[mi], b_frag[ni]);
        else mma_tf32_m16n8k8(d, a_frag[mi], b_frag[ni]);
        acc[2 * mi][2 * ni] = d[0];
        acc[2 * mi][2 * ni + 1] = d[1];
        acc[2 * mi + 1][2 * ni] = d[2];
        acc[2 * mi + 1][2 * ni + 1] = d[3];
      }
  }
}

template <class Cfg, int kStages, class StagerA, class StagerB>
__device__ __forceinline__ bool main_loop_step(const GemmArgs<typename Cfg::Scalar>& args, int& k0, int k_end,
                                               int buffer, const StagerA& stage_a,
                                               const StagerB& stage_b, StagedTile<Cfg>& staged_a,
                                               StagedTile<Cfg>& staged_b,
                                               typename Cfg::Scalar (*a_tiles)[Cfg::kKStep * Cfg::kStride],
                                               typename Cfg::Scalar (*b_tiles)[Cfg::kKStep * Cfg::kStride],
                                               typename Cfg::Acc (&acc)[Cfg::kPerRow][Cfg::kPerCol],
                                               const TmaMapsOf<Cfg>& maps, uint64_t* tma_bars, uint32_t& tma_phase,
                                               RawRing& ring) {
  const bool has_next = k0 + Cfg::kKStep < k_end;
  const int next = kStages == 2 ? buffer ^ 1 : next_buffer<kStages>(buffer);
  if (has_next) {  // global loads in flight during this step's multiply-adds
    stage_a.fetch(args.a, k0 + Cfg::kKStep, staged_a);
    stage_b.fetch(args.b, k0 + Cfg::kKStep, staged_b);
    if constexpr (Cfg::kWgmma && kStages == 2) {
      // Buffer `next` was last read by step t-1's MMAs, done before its barrier.
      issue_tma<Cfg>(maps, stage_a, stage_b, k0 + Cfg::kKStep, a_tiles[next], b_tiles[next], tma_bars + next);
      // Raw copies run two steps ahead: slot `buffer` held step t, transposed during step t-1.
      if (k0 + 2 * Cfg::kKStep < k_end) issue_raw_tma<Cfg>(maps, stage_a, stage_b, k0 + 2 * Cfg::kKStep, ring, buffer);
    } else if constexpr (Cfg::kWgmma) {
      // Three buffers (no raw ring): the direct copies run two steps ahead, into the buffer
      // step t-1's MMAs released before its barrier.
      const int ahead = next_buffer<kStages>(next);
      if (k0 + 2 * Cfg::kKStep < k_end)
        issue_tma<Cfg>(maps, stage_a, stage_b, k0 + 2 * Cfg::kKStep, a_tiles[ahead], b_tiles[ahead], tma_bars + ahead);
    }
  }
  if constexpr (Cfg::kWgmma) {
    if (stage_a.by_direct_tma(k0) || stage_b.by_direct_tma(k0)) {  // this step's direct copies have landed
      mbarrier_wait(tma_bars + buffer, (tma_phase >> buffer) & 1);
      tma_phase ^= 1u << buffer;
    }
    // Four k8 slices on the tensor cores, asynchronously: the staging of step t+1 below runs
    // while they execute. Warpgroup w multiplies rows 64w … 64w + 63 of A (8 KB into the
    // tile) by all of B; a k8 slice is 32 bytes further along each 128-byte row.
    const uint32_t a_base = shared_address(a_tiles[buffer]) + (threadIdx.x >> 7) * 64 * Cfg::kKStep * sizeof(float);
    const uint32_t b_base = shared_address(b_tiles[buffer]);
    issue_step_mmas<Cfg>(acc, a_base, b_base);
    wgmma_fence_operands(acc);
    if (has_next) {
      // Buffer `next` was last read by the MMAs of step t-1, complete before its barrier.
      const uint32_t parity = (tma_phase >> next) & 1;  // of step t+1's direct copies
      stage_a.store_at(args.a, k0 + Cfg::kKStep, a_tiles[next], staged_a, ring, next, tma_bars + next, parity);
      stage_b.store_at(args.b, k0 + Cfg::kKStep, b_tiles[next], staged_b, ring, next, tma_bars + next, parity);
      fence_shared_for_async_proxy();
    }
    // This step's MMAs done before the barrier: after it, step t+2 is stored into their buffer.
    wgmma_wait_all();
    wgmma_fence_operands(acc);
  } else {
    static_assert(Cfg::kMma, "the FMA and FP64 MMA configs run fma_k_loop");
    mma_sync_step<Cfg>(a_tiles[buffer], b_tiles[buffer], acc);
    if (has_next) {
      // The other buffer was last read in the previous step, before its closing barrier.
      StagerA::store(a_tiles[next], staged_a);
      StagerB::store(b_tiles[next], staged_b);
    }
  }
  __syncthreads();
  k0 += Cfg::kKStep;
  return has_next;
}

// The FMA loop's k-loop (after step 0 is staged): per step t, fetch step t+1 into registers,
// multiply step t's shared tiles, store step t+1 into the other buffer, barrier.
//  - Fast steps: where step t+1 lies in both operands' fast ranges (in bounds, aligned, inside
//    the structure's non-zero part: most steps of a large product), it is fetched from each
//    operand's running address with no path logic. Elsewhere each stager picks its path as in
//    main_loop_step. The per-step path decisions had cost about a fifth of a step's cycles in
//    fixed-latency stalls (docs/structured_gemm.md, "The FMA loop's k-loop").
//  - One body of multiply-adds for both kinds of step: a second copy (a separate loop for the
//    fast steps) measured slower on products that alternate between them, the instruction
//    cache's limit again.
//  - The first k of step t+1 is read from shared memory right after the barrier, before the
//    multiply-adds of step t's last k, so its latency is hidden behind them.
// The FP64 MMA config (exact float32 on the FP64 tensor cores) runs the same loop with its MMAs
// (mma_sync_step) as the step's body: the fast steps' shortcut bought it what it bought FFMA
// (docs/structured_gemm.md, "Exact float32 on the FP64 tensor cores").
template <class Cfg, class StagerA, class StagerB>
__device__ __forceinline__ void fma_k_loop(const GemmArgs<typename Cfg::Scalar>& args, int k_begin, int k_end,
                                           const StagerA& stage_a, const StagerB& stage_b,
                                           StagedTile<Cfg>& staged_a, StagedTile<Cfg>& staged_b,
                                           typename Cfg::Scalar (*a_tiles)[Cfg::kKStep * Cfg::kStride],
                                           typename Cfg::Scalar (*b_tiles)[Cfg::kKStep * Cfg::kStride],
                                           typename Cfg::Acc (&acc)[Cfg::kPerRow][Cfg::kPerCol]) {
  using T = typename Cfg::Scalar;
  static_assert((Cfg::kInner == InnerLoop::Fma || Cfg::kDmma) && Cfg::kKStep >= 2, "the FMA loop");
  constexpr int kStride = Cfg::kStride, kLast = Cfg::kKStep - 1;
  // Step k0's next step is fast when k0 - fast_k0 (unsigned) <= fast_span; the fast loads then
  // start at a_next / b_next, which advance one k-step per step. Without fast steps, fast_k0 is
  // k_end: every k0 - k_end is negative, so no step passes.
  const int fast_lo = max(stage_a.fast_k_lo, stage_b.fast_k_lo);
  const int fast_last = min(stage_a.fast_k_last, stage_b.fast_k_last);
  const int fast_k0 = fast_lo <= fast_last ? fast_lo - Cfg::kKStep : k_end;
  const unsigned fast_span = fast_lo <= fast_last ? static_cast<unsigned>(fast_last - fast_lo) : 0u;
  const int64_t a_pass = stage_a.fast_pass_bytes(args.a), b_pass = stage_b.fast_pass_bytes(args.b);
  const char* a_next = stage_a.fast_address(k_begin + Cfg::kKStep);
  const char* b_next = stage_b.fast_address(k_begin + Cfg::kKStep);
  const int64_t a_step = static_cast<int64_t>(Cfg::kKStep) * stage_a.fast_k_bytes;
  const int64_t b_step = static_cast<int64_t>(Cfg::kKStep) * stage_b.fast_k_bytes;
  // k-fragments of a step: kPerRow values of A and kPerCol of B at one k (load_fragments).
  auto load_fragments = [](const T* a_tile, const T* b_tile, int kk, T (&a_frag)[Cfg::kPerRow],
                           T (&b_frag)[Cfg::kPerCol]) {
#pragma unroll
    for (int g = 0; g < Cfg::kRowGroups; ++g) load4_shared(a_tile + kk * kStride + g * Cfg::kRowSpacing, a_frag + 4 * g);
#pragma unroll
    for (int g = 0; g < Cfg::kColGroups; ++g) load4_shared(b_tile + kk * kStride + g * Cfg::kColSpacing, b_frag + 4 * g);
  };
  auto outer_product = [&acc](const T (&a_frag)[Cfg::kPerRow], const T (&b_frag)[Cfg::kPerCol]) {
#pragma unroll
    for (int i = 0; i < Cfg::kPerRow; ++i)
#pragma unroll
      for (int j = 0; j < Cfg::kPerCol; ++j) acc[i][j] = fma(a_frag[i], b_frag[j], acc[i][j]);
  };
  T a_first[Cfg::kPerRow], b_first[Cfg::kPerCol];  // k = 0 of the current step (FFMA)
  // The FP64 loop's warp: its first output row and column, and whether all its outputs lie below
  // the diagonal under an Upper or Symmetric mask.
  const int warp_row0 = stage_a.outer0 + Cfg::warp_row() * Cfg::kWarpRows;
  const int warp_col0 = stage_b.outer0 + Cfg::warp_col() * Cfg::kWarpCols;
  const bool below_kept_diagonal = args.mask != Structure::Dense && warp_row0 > warp_col0 + Cfg::kWarpCols - 1;
  if constexpr (!Cfg::kDmma)
    load_fragments(a_tiles[0] + Cfg::row_base(), b_tiles[0] + Cfg::col_base(), 0, a_first, b_first);
  int k0 = k_begin, buffer = 0;
#pragma unroll 1
  for (;;) {
    const int next = k0 + Cfg::kKStep;
    const bool has_next = next < k_end;  // (true wherever the next step is fast)
    // Step t+1's global loads, in flight during this step's multiply-adds.
    if (has_next) {
      if (static_cast<unsigned>(k0 - fast_k0) <= fast_span) {
        stage_a.fetch_fast(a_next, a_pass, staged_a);
        stage_b.fetch_fast(b_next, b_pass, staged_b);
      } else {
        stage_a.fetch(args.a, next, staged_a);
        stage_b.fetch(args.b, next, staged_b);
      }
    }
    T a_last[Cfg::kPerRow], b_last[Cfg::kPerCol];  // FFMA: the step's last k, multiplied after the barrier
    if constexpr (Cfg::kDmma) {
      // A warp whose rows of A or columns of B lie wholly in structural zeros over the step, or
      // whose outputs all lie below the diagonal that the mask keeps, leaves the step's MMAs out
      // (uniform per warp; its accumulators would only add exact zeros or be discarded).
      const int k_last = k0 + Cfg::kKStep - 1;
      const bool dead = (args.a.pattern == Pattern::KAtLeastOuter && k_last < warp_row0) ||
                        (args.a.pattern == Pattern::KAtMostOuter && k0 > warp_row0 + Cfg::kWarpRows - 1) ||
                        (args.b.pattern == Pattern::KAtLeastOuter && k_last < warp_col0) ||
                        (args.b.pattern == Pattern::KAtMostOuter && k0 > warp_col0 + Cfg::kWarpCols - 1) ||
                        below_kept_diagonal;
      if (!dead) mma_sync_step<Cfg>(a_tiles[buffer], b_tiles[buffer], acc);
      if (!has_next) return;
    } else {
      const T* a_tile = a_tiles[buffer] + Cfg::row_base();
      const T* b_tile = b_tiles[buffer] + Cfg::col_base();
      outer_product(a_first, b_first);
#pragma unroll
      for (int kk = 1; kk < kLast; ++kk) {
        T a_frag[Cfg::kPerRow], b_frag[Cfg::kPerCol];
        load_fragments(a_tile, b_tile, kk, a_frag, b_frag);
        outer_product(a_frag, b_frag);
      }
      load_fragments(a_tile, b_tile, kLast, a_last, b_last);
      if (!has_next) {
        outer_product(a_last, b_last);
        return;
      }
    }
    // The other buffer was last read in the previous step, before its closing barrier.
    StagerA::store(a_tiles[buffer ^ 1], staged_a);
    StagerB::store(b_tiles[buffer ^ 1], staged_b);
    __syncthreads();
    buffer ^= 1;
    if constexpr (!Cfg::kDmma) {
      load_fragments(a_tiles[buffer] + Cfg::row_base(), b_tiles[buffer] + Cfg::col_base(), 0, a_first, b_first);
      outer_product(a_last, b_last);
    }
    k0 = next;
    a_next += a_step;
    b_next += b_step;
  }
}

}  // namespace sg::detail::cuda
