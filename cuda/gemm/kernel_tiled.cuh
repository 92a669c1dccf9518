// The tiled kernel: one block per work item of a plan (a tile over a k-range chunk), on the
// register-staged mainloops, with or without TMA copies of the operands.
#pragma once

#include "cuda/gemm/epilogue.cuh"
#include "cuda/gemm/mainloop_register_staged.cuh"

namespace sg::detail::cuda {

// =============================================================================================
// The kernel. One block = one work item: a kTile×kTile output tile over the k-range chunk
// [k_begin, k_end) (k_begin is a multiple of kKStep; only the last step may be partial).
//
// Output masks:
//   Full:      every entry of the tile.
//   Upper:     entries below the diagonal are written as exact zeros; tiles wholly below
//              the diagonal come as empty-range items and write only zeros.
//   Symmetric: only tiles with tile_row <= tile_col exist; entry (i, j), i <= j, is written
//              to C[i][j] and, when i < j, the very same value to C[j][i] (a bit-exact mirror
//              that does not rely on the arithmetic being symmetric).
// Split tiles: every chunk stores its partial tile to the workspace; the last to arrive
// (threadFenceReduction pattern: stores, __threadfence, one atomicAdd per block) sums all
// partials in chunk order — so the result does not depend on the arrival order — applies
// alpha and the mask, and resets the counter for the next launch. Except in the TMA epilogues
// of the register-B and tall kernels, where a tile split in exactly two chunks meets in C: the
// first to arrive stores, the second adds by TMA reductions (split_tile_arrive).
// =============================================================================================

/// The mainloop of one work item: stage step 0, then one main_loop_step per k-step, staged as
/// `Staging` says (RegisterStaging, or TmaStaging: the operands' fast-path steps by TMA, wgmma loop
/// only; its kStages: shared buffers per operand, 3 for the instance without a raw ring, its direct
/// copies two steps ahead).
template <class Cfg, class Staging>
__device__ __forceinline__ void k_loop(const GemmArgs<typename Cfg::Scalar>& args, const GemmWorkItem& item, int row0,
                                       int col0, typename Cfg::Scalar (*a_tiles)[Cfg::kKStep * Cfg::kStride],
                                       typename Cfg::Scalar (*b_tiles)[Cfg::kKStep * Cfg::kStride],
                                       typename Cfg::Acc (&acc)[Cfg::kPerRow][Cfg::kPerCol], const TmaMapsOf<Cfg>& maps,
                                       uint64_t* tma_bars, float* raw_tiles) {
  constexpr bool kTma = Staging::kTmaA || Staging::kTmaB;
  constexpr int kStages = Staging::kStages;
  uint32_t has = 0;  // which TMA maps the kernel has (TmaMaps::has)
  if constexpr (kTma) has = maps.has;
  OperandStager<Cfg, Staging, Side::A> stage_a(args.a, row0, item.k_begin, item.k_end, has & kADirect, has & kARaw);
  const OperandStager<Cfg, Staging, Side::B> stage_b(args.b, col0, item.k_begin, item.k_end, has & kBDirect,
                                                      has & kBRaw);
  if (stage_b.raw()) stage_a.give_up_raw(args.a, item.k_begin);  // the block's one raw ring goes to B
  StagedTile<Cfg> staged_a, staged_b;
  RawRing ring{raw_tiles, tma_bars + 2, 0};
  if constexpr (kTma) {
    issue_tma<Cfg>(maps, stage_a, stage_b, item.k_begin, a_tiles[0], b_tiles[0], tma_bars);
    if constexpr (kStages == 2) {
      issue_raw_tma<Cfg>(maps, stage_a, stage_b, item.k_begin, ring, 0);
      if (item.k_begin + Cfg::kKStep < item.k_end)
        issue_raw_tma<Cfg>(maps, stage_a, stage_b, item.k_begin + Cfg::kKStep, ring, 1);
    } else if (item.k_begin + Cfg::kKStep < item.k_end) {
      const int k1 = item.k_begin + Cfg::kKStep;
      issue_tma<Cfg>(maps, stage_a, stage_b, k1, a_tiles[1], b_tiles[1], tma_bars + 1);
    }
  }
  stage_a.fetch(args.a, item.k_begin, staged_a);
  stage_b.fetch(args.b, item.k_begin, staged_b);
  stage_a.store_at(args.a, item.k_begin, a_tiles[0], staged_a, ring, 0, tma_bars, 0);
  stage_b.store_at(args.b, item.k_begin, b_tiles[0], staged_b, ring, 0, tma_bars, 0);
  if constexpr (Cfg::kWgmma) fence_shared_for_async_proxy();
  __syncthreads();
  if constexpr (Cfg::kInner == InnerLoop::Fma || Cfg::kDmma) {
    fma_k_loop<Cfg>(args, item.k_begin, item.k_end, stage_a, stage_b, staged_a, staged_b, a_tiles, b_tiles, acc);
  } else {
    int k0 = item.k_begin;
    int buffer = 0;
    uint32_t tma_phase = 0;  // bit b: parity of buffer b's next TMA phase
#pragma unroll 1
    while (main_loop_step<Cfg, kStages>(args, k0, item.k_end, buffer, stage_a, stage_b, staged_a, staged_b, a_tiles,
                                        b_tiles, acc, maps, tma_bars, tma_phase, ring)) {
      buffer = kStages == 2 ? buffer ^ 1 : next_buffer<kStages>(buffer);
    }
  }
}

// The body of one block: the mainloop (k_loop) staged as `Staging` says, then the epilogue
// (write_tile). TmaStaging (wgmma config only): one kernel instance per variant, so each keeps its
// registers; its kStages = 3 (both operands with direct maps only): the raw ring's shared memory is a
// third buffer per operand.
template <class Cfg, class Staging>
__device__ __forceinline__ void gemm_block(const GemmArgs<typename Cfg::Scalar>& args, const TmaMapsOf<Cfg>& maps) {
  constexpr bool kTma = Staging::kTmaA || Staging::kTmaB;
  constexpr int kStages = Staging::kStages;
  using T = typename Cfg::Scalar;
  constexpr int kTile = Cfg::kTile, kKStep = Cfg::kKStep, kStride = Cfg::kStride;
  constexpr int kPerRow = Cfg::kPerRow, kPerCol = Cfg::kPerCol;

  T (*a_tiles)[kKStep * kStride];
  T (*b_tiles)[kKStep * kStride];
  float* raw_tiles = nullptr;  // the TMA kernels' raw ring (two tiles after the four wgmma tiles)
  if constexpr (Cfg::kDynamicSmem > 0) {
    extern __shared__ __align__(1024) unsigned char dynamic_smem[];
    unsigned char* base = dynamic_smem + ((1024 - (shared_address(dynamic_smem) & 1023)) & 1023);
    a_tiles = reinterpret_cast<T(*)[kKStep * kStride]>(base);
    b_tiles = reinterpret_cast<T(*)[kKStep * kStride]>(base + kStages * Cfg::kTileBytes);
    if constexpr (kTma && kStages == 2) raw_tiles = reinterpret_cast<float*>(base + 4 * Cfg::kTileBytes);
  } else {
    __shared__ __align__(16) T a_static[2][kKStep * kStride];
    __shared__ __align__(16) T b_static[2][kKStep * kStride];
    a_tiles = a_static;
    b_tiles = b_static;
  }
  __shared__ int last_chunk;
  __shared__ uint64_t tma_bars[4];  // wgmma loop: TMA completion, per wgmma buffer (direct) and raw slot

  const GemmWorkItem item = args.items[blockIdx.x];
  const int tid = threadIdx.x;
  const int row0 = item.tile_row * kTile, col0 = item.tile_col * kTile;

  typename Cfg::Acc acc[kPerRow][kPerCol];
#pragma unroll
  for (int i = 0; i < kPerRow; ++i)
#pragma unroll
    for (int j = 0; j < kPerCol; ++j) acc[i][j] = 0;

  if (item.k_begin < item.k_end) {
    if constexpr (kTma) {
      if (tid == 0)
        for (int b = 0; b < 4; ++b) mbarrier_init(tma_bars + b, 1);
      __syncthreads();
    }
    k_loop<Cfg, Staging>(args, item, row0, col0, a_tiles, b_tiles, acc, maps, tma_bars, raw_tiles);
  }

  write_tile<Cfg>(args, item, row0, col0, acc, last_chunk, tid);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    structured_gemm_kernel(const GemmArgs<typename Cfg::Scalar> args) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // The FP64 MMA configurations run on sm_90 code only (GemmFamily::dmma), and their 66–68 KiB of
  // static shared tiles exceed the 48 KB that the older targets of the default architecture list
  // allow a block's static arrays: their code of them is a trap.
  if constexpr (Cfg::kDmma) {
    __trap();
  } else {
    gemm_block<Cfg, RegisterStaging>(args, TmaMapsOf<Cfg>{});
  }
#else
  gemm_block<Cfg, RegisterStaging>(args, TmaMapsOf<Cfg>{});
#endif
}

// The wgmma config with TMA copies as `kVariant` stages them; the maps are a __grid_constant__
// parameter, as TMA requires (the other kernels keep the parameters they had).
template <class Cfg, TmaVariant kVariant>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    structured_gemm_tma_kernel(const GemmArgs<float> args, const __grid_constant__ TmaMaps maps) {
  gemm_block<Cfg, TmaStaging<kVariant>>(args, maps);
}

}  // namespace sg::detail::cuda
