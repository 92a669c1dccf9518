// The pipelined and register-B wgmma kernels: one block per work item, a three-stage TMA ring, and
// wgmma with both operands from shared memory (pipelined) or B from registers (register-B).
#pragma once

#include "cuda/gemm/epilogue.cuh"
#include "cuda/gemm/mainloop_wgmma.cuh"

namespace sg::detail::cuda {

// =============================================================================================
// The pipelined wgmma kernel: products whose operands both come by direct TMA copies (outer-
// major Dense, Upper or Lower operands, 16-byte aligned) and one is triangular: dA = triu(G·Bᵀ),
// and the products with an Upper or Lower operand whose k-major operands were copied outer-major
// first by relayout (where both are Dense, the barrier-per-step instance measured faster).
//
// A producer warp (one thread) issues every k-step's two copies into a ring of kPipelineStages
// shared buffers, as soon as the consumers have released the buffer; the two consumer
// warpgroups wait for a step's copies, issue its wgmma group and wait only for the group before
// it, so the tensor cores always have the next group queued, and release that earlier group's
// buffer. No block-wide barrier per k-step: buffers change hands through mbarriers, full[s]
// (the copies' bytes landed) and empty[s] (both consumer warpgroups done with it).
// Every step comes by TMA, edge tiles too: the copies fill rows and k beyond the operand with
// zeros. A step that crosses an operand's diagonal gets its structural zeros written by the
// consumers once it has landed (zero_outside_structure; the storage outside a structure holds
// anything), as does a step that the item's k-range ends inside; then the proxy fence and the
// consumers' named barrier.
// =============================================================================================

// ---- the register-B kernel: the pipelined kernel's ring, the tile computed transposed -----------
// Products whose A comes by direct copies and whose B is k-major in memory (B not transposed:
// every forward product), one of them Upper or Lower. TF32 wgmma reads K-major operands only
// from shared memory, and a k-major B is not one; but wgmma's A operand may come from registers,
// which the threads can load in any order. So the block computes its tile transposed,
// Cᵀ = op(B)ᵀ·op(A)ᵀ: wgmma's A is op(B)ᵀ, loaded by the threads from B's raw copy (as it lies in
// memory) into registers, and wgmma's B is op(A)ᵀ — A's direct copy, K-major as it lies. No
// transposition through shared memory and no relayout copy of B. The write goes through
// ConfigTf32WgmmaRegisterB, which knows where the transposed accumulators land.
//
// Warpgroup u multiplies output columns 64u … 64u + 63 (its wgmma rows) by all 128 rows. Its wgmma
// row 16w + g + 8h (warp w, lane l, g = l/4, t = l mod 4) is output column
//   64u + 32·(w/2) + 8·(w mod 2) + 16·(g/4) + g mod 4 + 4h,
// a permutation chosen so that the fragment loads do not conflict: for one register, a warp's 32
// lanes read 4 rows k of one 32 × 32 raw box (t) × 8 columns in chunks c and c ^ 4 (g/4), which the
// 128-byte swizzle (chunk c of row k at c ^ (k mod 8), k mod 8 = t or t + 4) puts on 8 distinct
// chunk positions: 32 distinct banks.
// Each k-step is issued as two wgmma groups of two k8 slices, so that a thread keeps the
// fragments of at most two groups alive (16 registers beside the 64 accumulators).
// The kernel has no producer warp: thread 0 issues the copies, two steps ahead, from inside the
// consumer loop. The block is then the two warpgroups, eight warps, and two blocks fit per SM at
// up to 128 registers. With a ninth (producer) warp two blocks fit only at 96 registers, at which
// ptxas serializes the wgmma instructions; at 112, one block per SM (registers are allocated per SM
// sub-partition, 16384 each, room for four warps of 112, and two
// blocks of nine warps need five on some sub-partition).

template <class Cfg>
__global__ void __maxnreg__(96)
    structured_gemm_pipelined_kernel(const GemmArgs<float> args, const __grid_constant__ TmaMaps maps) {
  const PipelineRing<Cfg> ring = pipeline_ring<Cfg>();
  auto* a_tiles = ring.a;
  auto* b_tiles = ring.b;
  __shared__ uint64_t full[kPipelineStages], empty[kPipelineStages];
  __shared__ int last_chunk;

  const GemmWorkItem item = args.items[blockIdx.x];
  const int row0 = item.tile_row * Cfg::kTile, col0 = item.tile_col * Cfg::kTile;
  init_pipeline_barriers(full, empty);
  __syncthreads();  // the last block-wide barrier: the producer warp leaves after its copies
  if (threadIdx.x >= Cfg::kThreads) {
    if (threadIdx.x == Cfg::kThreads) produce_steps<Cfg>(maps, item, row0, col0, a_tiles, b_tiles, full, empty);
    return;
  }
  float acc[Cfg::kPerRow][Cfg::kPerCol];
#pragma unroll
  for (int i = 0; i < Cfg::kPerRow; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::kPerCol; ++j) acc[i][j] = 0.0f;
  if (item.k_begin < item.k_end) consume_steps<Cfg>(args, item, row0, col0, a_tiles, b_tiles, full, empty, acc);
  write_tile<Cfg, AccumulatorThreads::Consumers>(args, item, row0, col0, acc, last_chunk, threadIdx.x);
}

// The register-B kernel: the two consumer warpgroups only (thread 0 issues the copies), two blocks
// per SM.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 2)
    structured_gemm_register_b_kernel(const GemmArgs<float> args, const __grid_constant__ TmaMaps maps) {
  const PipelineRing<Cfg> ring = pipeline_ring<Cfg>();
  auto* a_tiles = ring.a;
  auto* b_raw = ring.b;  // B's steps as they lie (RawRing's tile layout)
  __shared__ uint64_t full[kPipelineStages], empty[kPipelineStages];
  __shared__ int last_chunk;

  const GemmWorkItem item = args.items[blockIdx.x];
  const int row0 = item.tile_row * Cfg::kTile, col0 = item.tile_col * Cfg::kTile;
  init_pipeline_barriers(full, empty);
  __syncthreads();
  float acc[Cfg::kPerRow][Cfg::kPerCol];
#pragma unroll
  for (int i = 0; i < Cfg::kPerRow; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::kPerCol; ++j) acc[i][j] = 0.0f;
  if (item.k_begin < item.k_end) {
    issue_first_register_b_steps<Cfg>(maps, item, row0, col0, a_tiles, b_raw, full);
    // The epilogue's stores of the mirror tile's zeros, while the first copies are in flight.
    if (item.mirror_zeros) store_mirror_zeros(maps, row0, col0, b_raw[kPipelineStages - 1]);
    consume_steps_register_b<Cfg>(args, maps, item, row0, col0, a_tiles, b_raw, full, empty, acc);
  }
  float acc_t[Cfg::kPerCol][Cfg::kPerRow];  // the transposed tile's accumulators
#pragma unroll
  for (int i = 0; i < Cfg::kPerRow; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::kPerCol; ++j) acc_t[j][i] = acc[i][j];
  if (maps.has & kCStore) {
    unsigned char* const ring = reinterpret_cast<unsigned char*>(a_tiles);  // free once both warpgroups are done
    using Out = ConfigTf32WgmmaRegisterB;
    if (item.k_begin >= item.k_end)
      store_zero_tile_by_tma(maps, item, row0, col0, ring);
    else if (item.chunk_count == 2)  // the two chunks meet in C (split_tile_arrive)
      store_tile_by_tma<Out, RegisterBStores>(args, maps, row0, col0, acc_t, ring, args.counters + item.counter_index);
    else if (gather_split_tile<Out, AccumulatorThreads::Consumers>(args, item, acc_t, last_chunk, threadIdx.x))
      store_tile_by_tma<Out, RegisterBStores>(args, maps, row0, col0, acc_t, ring, nullptr);
    else if (item.mirror_zeros && threadIdx.x == 0)
      tma_store_wait_read();  // a chunk that leaves the tile to another: its mirror stores have read b_raw[2]
  } else {
    write_tile<ConfigTf32WgmmaRegisterB, AccumulatorThreads::Consumers>(args, item, row0, col0, acc_t, last_chunk,
                                                                          threadIdx.x);
  }
}

}  // namespace sg::detail::cuda
