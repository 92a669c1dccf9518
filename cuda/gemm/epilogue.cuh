// The epilogue: alpha, the output mask and the Symmetric mirror applied as a tile goes to C, by direct
// stores (write_tile) or TMA stores from swizzled boxes, and the split-K fix-up of tiles cut in k.
#pragma once

#include "cuda/gemm/arch/mbarrier.cuh"
#include "cuda/gemm/arch/tma.cuh"
#include "cuda/gemm/arch/vector_access.cuh"
#include "cuda/gemm/kernel_args.h"
#include "cuda/gemm/tile_config.cuh"
#include "cuda/gemm/tma_maps.h"
#include "cuda/gemm/zero_fill.cuh"

namespace sg::detail::cuda {

// =============================================================================================
// The end of a work item: a split tile's chunk stores its partial tile to the workspace and the
// last to arrive sums all of them in chunk order; then alpha, the output mask's zeros and the
// Symmetric mirror are applied as the tile is written to C.
// =============================================================================================

/// A barrier over the threads that hold accumulators: the whole block, or (kConsumersOnly) the
/// consumer warpgroups of the pipelined kernel, whose producer warp has left.
template <class Cfg, bool kConsumersOnly>
__device__ __forceinline__ void accumulator_threads_sync() {
  if constexpr (kConsumersOnly) named_barrier_sync(kConsumerBarrier, Cfg::kThreads);
  else __syncthreads();
}

/// A split tile's chunk: stores its partial tile to the workspace; the last chunk to arrive sums
/// every chunk's partial, in chunk order, into `acc`. True where this block writes the tile (the
/// last chunk, or an item that is not split). `last_chunk`: a shared int; tid: threadIdx.x.
template <class Cfg, bool kConsumersOnly = false>
__device__ __forceinline__ bool gather_split_tile(const GemmArgs<typename Cfg::Scalar>& args, const GemmWorkItem& item,
                                                  typename Cfg::Acc (&acc)[Cfg::kPerRow][Cfg::kPerCol],
                                                  int& last_chunk, int tid) {
  using Acc = typename Cfg::Acc;  // the partials keep the accumulators' precision
  constexpr int kTile = Cfg::kTile;
  constexpr int kVec = 16 / static_cast<int>(sizeof(Acc)), kPerRow = Cfg::kPerRow, kPerCol = Cfg::kPerCol;
  if (item.chunk_count > 1) {
    // Partial layout: vector e of thread tid at (e·kThreads + tid)·kVec, so a warp's stores and
    // loads are 512 contiguous bytes.
    // Vector e holds accumulators kVec·e … kVec·e + kVec − 1 in row-major order of acc.
    using V = typename Vec16<Acc>::type;
    static_assert(kPerRow * kPerCol % kVec == 0, "whole vectors");
    constexpr int kVecs = kPerRow * kPerCol / kVec;
    constexpr int kTileElems = kTile * Cfg::kTileN;
    Acc* tile_partials = reinterpret_cast<Acc*>(args.partials) + static_cast<int64_t>(item.partial_index) * kTileElems;
    V* mine = reinterpret_cast<V*>(tile_partials + static_cast<int64_t>(item.chunk) * kTileElems);
#pragma unroll
    for (int e = 0; e < kVecs; ++e) {
      Acc values[kVec];
#pragma unroll
      for (int q = 0; q < kVec; ++q) values[q] = acc[(e * kVec + q) / kPerCol][(e * kVec + q) % kPerCol];
      V v;
      memcpy(&v, values, sizeof(V));
      __stcg(mine + e * Cfg::kThreads + tid, v);
    }
    __threadfence();
    accumulator_threads_sync<Cfg, kConsumersOnly>();
    if (tid == 0) {
      const int arrived = atomicAdd(&args.counters[item.counter_index], 1);
      last_chunk = arrived == item.chunk_count - 1;
      if (last_chunk) {
        args.counters[item.counter_index] = 0;  // ready for the next launch
        __threadfence();
      }
    }
    accumulator_threads_sync<Cfg, kConsumersOnly>();
    if (!last_chunk) return false;
#pragma unroll
    for (int i = 0; i < kPerRow; ++i)
#pragma unroll
      for (int j = 0; j < kPerCol; ++j) acc[i][j] = Acc(0);
    for (int chunk = 0; chunk < item.chunk_count; ++chunk) {
      const V* part = reinterpret_cast<const V*>(tile_partials + static_cast<int64_t>(chunk) * kTileElems);
#pragma unroll
      for (int e = 0; e < kVecs; ++e) {
        const V v = __ldcg(part + e * Cfg::kThreads + tid);
        Acc values[kVec];
        memcpy(values, &v, sizeof(V));
#pragma unroll
        for (int q = 0; q < kVec; ++q) acc[(e * kVec + q) / kPerCol][(e * kVec + q) % kPerCol] += values[q];
      }
    }
  }

  return true;
}

// =============================================================================================
// Epilogue helper: a run of W consecutive outputs of one row, written with one vector store
// when whole, in bounds and aligned (W·sizeof(T) of 8 or 16 bytes), else element by element.
// =============================================================================================

template <typename T, int W>
__device__ __forceinline__ void store_segment(T* c, int64_t ldc, int row, int col, int n, bool vector_ok,
                                              const T (&value)[W], const bool (&write)[W]) {
  T* dst = c + static_cast<int64_t>(row) * ldc + col;
  bool all = col + W <= n;
#pragma unroll
  for (int j = 0; j < W; ++j) all = all && write[j];
  constexpr int kBytes = W * static_cast<int>(sizeof(T));
  if constexpr (kBytes == 16 || kBytes == 8) {
    using V = std::conditional_t<kBytes == 16, typename Vec16<T>::type,
                                 std::conditional_t<sizeof(T) == 4, float2, double>>;
    if (all && vector_ok) {
      V v;
      memcpy(&v, value, sizeof(V));
      *reinterpret_cast<V*>(dst) = v;
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < W; ++j)
    if (write[j] && col + j < n) dst[j] = value[j];
}

/// Writes work item `item`'s accumulators (tile at row0, col0), once a split tile's chunks are
/// summed (gather_split_tile). `last_chunk`: a shared int; tid: threadIdx.x.
template <class Cfg, bool kConsumersOnly = false>
__device__ __forceinline__ void write_tile(const GemmArgs<typename Cfg::Scalar>& args, const GemmWorkItem& item,
                                           int row0, int col0,
                                           typename Cfg::Acc (&acc)[Cfg::kPerRow][Cfg::kPerCol], int& last_chunk,
                                           int tid) {
  using T = typename Cfg::Scalar;
  constexpr int kPerRow = Cfg::kPerRow, kPerCol = Cfg::kPerCol;
  if (!gather_split_tile<Cfg, kConsumersOnly>(args, item, acc, last_chunk, tid)) return;
  // ---- epilogue: alpha and the output mask ----------------------------------------------
  // (alpha applied in the accumulators' precision, then one rounding to T)
  const typename Cfg::Acc alpha = args.alpha;
  const OutputMask mask = args.mask;
  const int row_base = row0 + Cfg::row_base(), col_base = col0 + Cfg::col_base();
  constexpr int kColGroup = Cfg::kColGroup;
#pragma unroll
  for (int i = 0; i < kPerRow; ++i) {
    const int row = row_base + Cfg::row_offset(i);
    if (row >= args.m) continue;
#pragma unroll
    for (int jg = 0; jg < kPerCol; jg += kColGroup) {
      const int col = col_base + Cfg::col_offset(jg);
      T value[kColGroup];
      bool write[kColGroup];
#pragma unroll
      for (int j = 0; j < kColGroup; ++j) {
        value[j] = static_cast<T>(alpha * acc[i][jg + j]);
        write[j] = true;
        if (mask == OutputMask::Upper && row > col + j) value[j] = T(0);
        if (mask == OutputMask::Symmetric && row > col + j) write[j] = false;
      }
      store_segment<T, kColGroup>(args.c, args.ldc, row, col, args.n, args.c_vector_ok, value, write);
    }
  }
  if (mask == OutputMask::Symmetric) {
    // Mirror: entry (row, col), row < col, also goes to (col, row). Where a thread's rows come
    // in runs of consecutive indices (the FMA layout), a run becomes one segment of row col.
    constexpr int kRun = Cfg::kRowElemStride == 1 ? Cfg::kRowGroup : 1;
#pragma unroll
    for (int j = 0; j < kPerCol; ++j) {
      const int col = col_base + Cfg::col_offset(j);
      if (col >= args.n) continue;
#pragma unroll
      for (int ig = 0; ig < kPerRow; ig += kRun) {
        const int row = row_base + Cfg::row_offset(ig);
        T value[kRun];
        bool write[kRun];
#pragma unroll
        for (int i = 0; i < kRun; ++i) {
          value[i] = static_cast<T>(alpha * acc[ig + i][j]);
          write[i] = row + i < col;
        }
        store_segment<T, kRun>(args.c, args.ldc, col, row, args.m, args.c_vector_ok, value, write);
      }
    }
  }
}

/// A tile split in two chunks that meet in C (the tall and register-B kernels' TMA epilogues):
/// thread 0 of a chunk counts its arrival on the tile's counter before writing. The first to
/// arrive stores its partial tile and then counts again once the stores have completed
/// (split_tile_stored); the second waits for that count and adds its own by TMA reductions. C
/// gets fl(P0 + P1) of the same two rounded partials whichever chunk ends first, so the result
/// does not depend on the order; the second resets the counter for the next launch. A chunk waits
/// only for one that has already arrived, so no block waits for one that has not started.
/// Returns true where this chunk adds.
__device__ __forceinline__ bool split_tile_arrive(int* counter) {
  const int arrived = atomicAdd(counter, 1);
  if (arrived == 0) return false;
  if (arrived == 1) {  // the first is storing: wait for its second count
    while (*reinterpret_cast<volatile int*>(counter) != 3) __nanosleep(100);
  }
  __threadfence();  // acquire: the first chunk's stores before this chunk's reductions
  fence_global_for_async_proxy();
  *counter = 0;  // both chunks are done with it
  return true;
}

/// The first chunk's second count, once its stores have completed (split_tile_arrive).
__device__ __forceinline__ void split_tile_stored(int* counter) {
  tma_store_wait_complete();
  __threadfence();  // release: the stores before the count
  atomicAdd(counter, 1);
}

/// The byte offset of output element (r, c) in consecutive boxes of 32 columns × box_bytes / 128
/// rows in the 128-byte swizzle, as the output maps' TMA stores read them (encode_output_map):
/// 16-byte chunk p of row r of box c / 32 at p ^ (r mod 8).
__device__ __forceinline__ int swizzled_out_offset(int r, int c, int box_bytes) {
  return (c >> 5) * box_bytes + r * 128 + ((((c >> 2) & 7) ^ (r & 7)) << 4) + (c & 3) * 4;
}

/// The register-B kernel's tile written by TMA stores (TmaMaps::kCStore). The threads put alpha ·
/// acc, with the Upper mask's zeros, into shared memory (the ring, free once both warpgroups are
/// done with it) as four boxes of 128 rows × 32 columns in the 128-byte swizzle (16-byte chunk p
/// of row r at p ^ (r mod 8)), and thread 0 stores the boxes; the copies clip at C's edges. An
/// empty item (no k-range) stores one box of zeros four times. The block leaves once the copies
/// have read shared memory. Measured against the accumulator layout's scattered 4-byte stores:
/// docs/structured_gemm.md, "The register-B kernel's epilogue by TMA". `counter`: for a chunk of a
/// tile split in two, the tile's arrival counter; the chunk then stores or adds its partial tile as
/// split_tile_arrive says (no partial tile in the workspace).
__device__ __forceinline__ void store_tile_by_tma(const GemmArgs<float>& args, const TmaMaps& maps,
                                                  const GemmWorkItem& item, int row0, int col0,
                                                  const float (&acc)[ConfigTf32WgmmaRegisterB::kPerRow]
                                                                    [ConfigTf32WgmmaRegisterB::kPerCol],
                                                  unsigned char* smem, int* counter = nullptr) {
  using Out = ConfigTf32WgmmaRegisterB;
  constexpr int kBoxBytes = Out::kTile * 32 * sizeof(float);
  static_assert(Out::kTile == 128, "four boxes of 128 × 32");
  const bool empty = item.k_begin >= item.k_end;
  __syncthreads();  // every warp is done with the ring
  if (empty) {
    zero_shared_box(smem);
  } else {
    const float alpha = args.alpha;
    const bool upper = args.mask == OutputMask::Upper;
    const int row_base = Out::row_base(), col_base = Out::col_base();
#pragma unroll
    for (int i = 0; i < Out::kPerRow; ++i) {
      const int r = row_base + Out::row_offset(i);
#pragma unroll
      for (int j = 0; j < Out::kPerCol; ++j) {
        const int c = col_base + Out::col_offset(j);
        const float value = upper && row0 + r > col0 + c ? 0.0f : alpha * acc[i][j];
        *reinterpret_cast<float*>(smem + swizzled_out_offset(r, c, kBoxBytes)) = value;
      }
    }
  }
  fence_shared_for_async_proxy();
  __syncthreads();
  if (threadIdx.x == 0) {
    if (counter != nullptr && split_tile_arrive(counter)) {  // a chunk of a tile split in two, adding
#pragma unroll
      for (int q = 0; q < 4; ++q) tma_store_tile(&maps.c, col0 + 32 * q, row0, smem + q * kBoxBytes, true);
      tma_store_wait_read();
      return;
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) tma_store_tile(&maps.c, col0 + 32 * q, row0, smem + (empty ? 0 : q * kBoxBytes));
    if (empty && item.mirror_zeros) {  // the mirror tile's zeros from the same box
#pragma unroll
      for (int q = 0; q < 4; ++q) tma_store_tile(&maps.c, row0 + 32 * q, col0, smem);
    }
    if (counter != nullptr) split_tile_stored(counter);
    else tma_store_wait_read();
  }
}

/// The zeros of the mirror tile (tile_col, tile_row) of a non-empty item (GemmWorkItem::
/// mirror_zeros), stored while the item's first copies are in flight: the threads zero `box` (one
/// 128 × 32 box of the ring, free until its stage is first loaded) and thread 0 stores it four
/// times. Thread 0 waits until the stores have read it before that load (consume_steps_register_b)
/// or, where it comes first, before the block leaves.
__device__ __forceinline__ void store_mirror_zeros(const TmaMaps& maps, int row0, int col0, float* box) {
  zero_shared_box(reinterpret_cast<unsigned char*>(box));
  fence_shared_for_async_proxy();
  named_barrier_sync(kConsumerBarrier, ConfigTf32WgmmaRegisterB::kThreads);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int q = 0; q < 4; ++q) tma_store_tile(&maps.c, row0 + 32 * q, col0, box);
    tma_store_commit();
  }
}

/// The tall kernel's tile written by TMA stores, in four rounds of 64 rows through the four boxes
/// at `out` (64 rows × 32 columns each, the 128-byte swizzle: 16-byte chunk p of row r at p ^ (r mod
/// 8)): thread 0 waits until the stores before have read the boxes, the threads write alpha · acc
/// with the Upper mask's zeros, and thread 0 stores the boxes (clipped at C's edges). The last
/// round's stores drain while the block goes on to its next item.
/// A chunk of a tile split in two (`counter`, its arrival counter; null for a whole tile) stores or
/// adds its partial tile (alpha applied) as split_tile_arrive says.
__device__ __forceinline__ void store_tall_tile(const GemmArgs<float>& args, const TmaMaps& maps, int row0, int col0,
                                                const float (&acc)[TallConfig::kPerRow][TallConfig::kPerCol],
                                                unsigned char* out, int* counter) {
  using Cfg = TallConfig;
  constexpr int kRowsPerRound = Cfg::kOutRows, kPerRound = Cfg::kPerRow * kRowsPerRound / Cfg::kTile;
  static_assert(Cfg::row_offset(kPerRound) == kRowsPerRound, "round r's accumulators are rows 64r … 64r + 63");
  const float alpha = args.alpha;
  const bool upper = args.mask == OutputMask::Upper;
  const int row_base = Cfg::row_base(), col_base = Cfg::col_base();
  // Thread 0's: this chunk of a split tile adds its partial tile (split_tile_arrive).
  const bool reduce = counter != nullptr && threadIdx.x == 0 && split_tile_arrive(counter);
#pragma unroll
  for (int round = 0; round < Cfg::kTile / kRowsPerRound; ++round) {
    if (threadIdx.x == 0) tma_store_wait_read();
    named_barrier_sync(kConsumerBarrier, Cfg::kThreads);
#pragma unroll
    for (int i = round * kPerRound; i < (round + 1) * kPerRound; ++i) {
      const int r = row_base + Cfg::row_offset(i) - round * kRowsPerRound;
#pragma unroll
      for (int j = 0; j < Cfg::kPerCol; ++j) {
        const int c = col_base + Cfg::col_offset(j);
        const float value = upper && row0 + round * kRowsPerRound + r > col0 + c ? 0.0f : alpha * acc[i][j];
        *reinterpret_cast<float*>(out + swizzled_out_offset(r, c, Cfg::kOutBoxBytes)) = value;
      }
    }
    fence_shared_for_async_proxy();
    named_barrier_sync(kConsumerBarrier, Cfg::kThreads);
    if (threadIdx.x == 0) {
#pragma unroll
      for (int q = 0; q < Cfg::kTileN / 32; ++q)
        tma_store_tile(&maps.c, col0 + 32 * q, row0 + round * kRowsPerRound, out + q * Cfg::kOutBoxBytes, reduce);
      tma_store_commit();
    }
  }
  if (counter != nullptr && threadIdx.x == 0 && !reduce) split_tile_stored(counter);
}

/// The wide kernel's tile written by TMA stores (TmaMaps::kCStore), in eight rounds of 32 columns
/// through the two boxes at `out` in turn (128 rows × 32 columns each, the 128-byte swizzle: 16-byte
/// chunk p of row r at p ^ (r mod 8)): thread 0 waits until the stores of the round before last
/// have read the box this round writes, the consumer threads write alpha · acc with the Upper
/// mask's zeros (a pair of adjacent columns per 8-byte store), and thread 0 stores the box (clipped
/// at C's edges). So a round's writes overlap the last round's stores reading the other box (until
/// the twenty-first session one 64-column round waited for the last to be read: measured in
/// docs/structured_gemm.md, "Two boxes in turn"). The last rounds' stores drain while the block
/// goes on to its next item.
/// A chunk of a tile split in two (`counter`, its arrival counter; null for a whole tile) stores or
/// adds its partial tile (alpha applied) as split_tile_arrive says. A chunk that stores gives its
/// second count later: `stored` (thread 0's) keeps its counter until the next call or the block's
/// end (wide_tile_stored), so the warpgroup does not wait for the stores to complete. A block gives
/// it before it waits for another chunk's, so no two blocks wait for each other.
__device__ __forceinline__ void wide_tile_stored(int*& stored) {
  if (stored != nullptr) split_tile_stored(stored);
  stored = nullptr;
}

__device__ __forceinline__ void store_wide_tile(const GemmArgs<float>& args, const TmaMaps& maps, int row0, int col0,
                                                const float (&acc)[WideConfig::kPerRow][WideConfig::kPerCol],
                                                unsigned char* out, int* counter, int*& stored) {
  using Cfg = WideConfig;
  constexpr int kPerRound = Cfg::kPerCol * Cfg::kOutCols / Cfg::kTileN;
  static_assert(Cfg::col_offset(kPerRound) == Cfg::kOutCols, "round q's accumulators are columns 32q … 32q + 31");
  static_assert(Cfg::kTileN / Cfg::kOutCols % 2 == 0, "an even count of rounds per tile: round q uses box q mod 2");
  static_assert(Cfg::col_offset(1) == 1 && kPerRound % 2 == 0, "acc[i][2t], acc[i][2t + 1]: adjacent columns");
  const float alpha = args.alpha;
  const bool upper = args.mask == OutputMask::Upper;
  const int row_base = Cfg::row_base(), col_base = Cfg::col_base();
  // Thread 0's: this chunk of a split tile adds its partial tile (split_tile_arrive).
  if (threadIdx.x == 0) wide_tile_stored(stored);
  const bool reduce = counter != nullptr && threadIdx.x == 0 && split_tile_arrive(counter);
#pragma unroll
  for (int round = 0; round < Cfg::kTileN / Cfg::kOutCols; ++round) {
    const int round_col0 = col0 + round * Cfg::kOutCols;
    unsigned char* const box = out + (round & 1) * Cfg::kOutBoxBytes;
    // The round before last stored from this box: its stores have read it (the last round's may
    // still be reading the other).
    if (threadIdx.x == 0) tma_store_wait_read_all_but_latest();
    named_barrier_sync(kConsumerBarrier, Cfg::kThreads);
#pragma unroll
    for (int i = 0; i < Cfg::kPerRow; ++i) {
      const int r = row_base + Cfg::row_offset(i);
#pragma unroll
      for (int j = round * kPerRound; j < (round + 1) * kPerRound; j += 2) {
        const int c = col_base + Cfg::col_offset(j) - round * Cfg::kOutCols;  // even: c, c + 1 in one chunk
        float2 value;
        value.x = upper && row0 + r > round_col0 + c ? 0.0f : alpha * acc[i][j];
        value.y = upper && row0 + r > round_col0 + c + 1 ? 0.0f : alpha * acc[i][j + 1];
        *reinterpret_cast<float2*>(box + swizzled_out_offset(r, c, Cfg::kOutBoxBytes)) = value;
      }
    }
    fence_shared_for_async_proxy();
    named_barrier_sync(kConsumerBarrier, Cfg::kThreads);
    if (threadIdx.x == 0) {
      tma_store_tile(&maps.c, round_col0, row0, box, reduce);
      tma_store_commit();
    }
  }
  if (counter != nullptr && threadIdx.x == 0 && !reduce) stored = counter;
}

}  // namespace sg::detail::cuda
