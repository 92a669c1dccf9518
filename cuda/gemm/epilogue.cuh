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

/// A barrier over the threads that hold accumulators: the whole block, or the consumer warpgroups of
/// a kernel whose producer warp has left.
template <class Cfg, AccumulatorThreads kThreads>
__device__ __forceinline__ void accumulator_threads_sync() {
  if constexpr (kThreads == AccumulatorThreads::Consumers) named_barrier_sync(kConsumerBarrier, Cfg::kThreads);
  else __syncthreads();
}

/// A split tile's chunk: stores its partial tile to the workspace; the last chunk to arrive sums
/// every chunk's partial, in chunk order, into `acc`. True where this block writes the tile (the
/// last chunk, or an item that is not split). `last_chunk`: a shared int; tid: threadIdx.x.
template <class Cfg, AccumulatorThreads kThreads = AccumulatorThreads::Block>
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
    accumulator_threads_sync<Cfg, kThreads>();
    if (tid == 0) {
      const int arrived = atomicAdd(&args.counters[item.counter_index], 1);
      last_chunk = arrived == item.chunk_count - 1;
      if (last_chunk) {
        args.counters[item.counter_index] = 0;  // ready for the next launch
        __threadfence();
      }
    }
    accumulator_threads_sync<Cfg, kThreads>();
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
template <class Cfg, AccumulatorThreads kThreads = AccumulatorThreads::Block>
__device__ __forceinline__ void write_tile(const GemmArgs<typename Cfg::Scalar>& args, const GemmWorkItem& item,
                                           int row0, int col0,
                                           typename Cfg::Acc (&acc)[Cfg::kPerRow][Cfg::kPerCol], int& last_chunk,
                                           int tid) {
  using T = typename Cfg::Scalar;
  constexpr int kPerRow = Cfg::kPerRow, kPerCol = Cfg::kPerCol;
  if (!gather_split_tile<Cfg, kThreads>(args, item, acc, last_chunk, tid)) return;
  // ---- epilogue: alpha and the output mask ----------------------------------------------
  // (alpha applied in the accumulators' precision, then one rounding to T)
  const typename Cfg::Acc alpha = args.alpha;
  const Structure mask = args.mask;
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
        if (mask == Structure::UpperTriangular && row > col + j) value[j] = T(0);
        if (mask == Structure::Symmetric && row > col + j) write[j] = false;
      }
      store_segment<T, kColGroup>(args.c, args.ldc, row, col, args.n, args.c_vector_ok, value, write);
    }
  }
  if (mask == Structure::Symmetric) {
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

/// The second count of a split tile's chunk whose stores the wide kernel left to complete
/// (store_tile_by_tma's `deferred`): given before the block waits for another chunk's, or at its end,
/// so no two blocks wait for each other.
__device__ __forceinline__ void wide_tile_stored(int*& stored) {
  if (stored != nullptr) split_tile_stored(stored);
  stored = nullptr;
}

/// How a kernel's tiles go out by TMA stores (store_tile_by_tma): in kRounds rounds, each of
/// kRoundRows × kRoundCols outputs staged in shared memory as boxes of kRoundRows rows × 32 columns
/// (the output map's box; 128-byte swizzle), the rounds taking the tile's rows in turn (kSplitRows)
/// or its columns, through kBuffers buffers of a round's boxes in turn. The kernels' shapes:
///  - register-B: a 128 × 128 tile in one round, its block's ring as the buffer, whole-block barriers;
///  - tall: a 256 × 128 tile in four rounds of 64 rows through one buffer (the last round's stores
///    drain while the block goes on to its next item);
///  - wide: a 128 × 256 tile in eight rounds of 32 columns through two buffers, so that a round's
///    writes overlap the stores of the round before it ("Two boxes in turn"); adjacent columns
///    paired in 8-byte writes.
template <int kRounds_, int kRoundRows_, int kRoundCols_, int kBuffers_, bool kSplitRows_, bool kBlockBarrier_>
struct TmaStoreShape {
  static constexpr int kRounds = kRounds_, kRoundRows = kRoundRows_, kRoundCols = kRoundCols_, kBuffers = kBuffers_;
  static constexpr bool kSplitRows = kSplitRows_, kBlockBarrier = kBlockBarrier_;
  static constexpr int kBoxBytes = kRoundRows * 32 * static_cast<int>(sizeof(float));
  static constexpr int kRoundBytes = kRoundCols / 32 * kBoxBytes;
};
using RegisterBStores = TmaStoreShape<1, 128, 128, 1, true, true>;
using TallStores = TmaStoreShape<4, TallConfig::kOutRows, 128, 1, true, false>;
using WideStores = TmaStoreShape<8, 128, WideConfig::kOutCols, 2, false, false>;

/// The output's byte offset in a round's boxes of element (r, c) of the round (output_offset: 16-byte
/// chunk p of row r of box c / 32 at p ^ (r mod 8)).
template <class Shape>
__device__ __forceinline__ int round_offset(int r, int c) {
  return swizzled_out_offset(r, c, Shape::kBoxBytes);
}

/// The epilogue of the kernels that write C by TMA stores (TmaMaps::kCStore): per round, thread 0
/// waits until the stores that last read the round's buffer have read it, the threads write alpha ·
/// acc with the Upper mask's zeros into its boxes, and thread 0 stores them (clipped at C's edges).
/// Cfg: the accumulators' layout (row_base, row_offset, ...). Split-K fix-up in C: a chunk of a tile
/// split in two (`counter`, its arrival counter; null for a whole tile) stores or adds its partial tile
/// (alpha applied) as split_tile_arrive says; a chunk that stores counts its stores done at once, or,
/// with `deferred` (the wide kernel), leaves its counter there for wide_tile_stored, so its warpgroups
/// need not wait for the stores to complete.
template <class Cfg, class Shape>
__device__ __forceinline__ void store_tile_by_tma(const GemmArgs<float>& args, const TmaMaps& maps, int row0, int col0,
                                                  const float (&acc)[Cfg::kPerRow][Cfg::kPerCol], unsigned char* out,
                                                  int* counter, int** deferred = nullptr) {
  constexpr bool kPairs = Cfg::col_offset(1) == 1;  // acc[i][2t], acc[i][2t + 1]: adjacent columns
  constexpr int kRowsPerRound = Shape::kSplitRows ? Cfg::kPerRow / Shape::kRounds : Cfg::kPerRow;
  constexpr int kColsPerRound = Shape::kSplitRows ? Cfg::kPerCol : Cfg::kPerCol / Shape::kRounds;
  static_assert(!Shape::kSplitRows || Cfg::row_offset(kRowsPerRound) == Shape::kRoundRows || Shape::kRounds == 1,
                "round r's accumulators are its rows");
  static_assert(Shape::kSplitRows || Cfg::col_offset(kColsPerRound) == Shape::kRoundCols,
                "round q's accumulators are its columns");
  static_assert(!kPairs || kColsPerRound % 2 == 0, "whole pairs of columns per round");
  auto sync = [] {
    if constexpr (Shape::kBlockBarrier) __syncthreads();
    else named_barrier_sync(kConsumerBarrier, Cfg::kThreads);
  };
  const float alpha = args.alpha;
  const bool upper = args.mask == Structure::UpperTriangular;
  const int row_base = Cfg::row_base(), col_base = Cfg::col_base();
  // Thread 0's: this chunk of a split tile adds its partial tile (split_tile_arrive).
  if (deferred != nullptr && threadIdx.x == 0) wide_tile_stored(*deferred);
  const bool reduce = counter != nullptr && threadIdx.x == 0 && split_tile_arrive(counter);
#pragma unroll
  for (int round = 0; round < Shape::kRounds; ++round) {
    const int round_row0 = row0 + (Shape::kSplitRows ? round * Shape::kRoundRows : 0);
    const int round_col0 = col0 + (Shape::kSplitRows ? 0 : round * Shape::kRoundCols);
    unsigned char* const buffer = out + (round % Shape::kBuffers) * Shape::kRoundBytes;
    // The stores that last read this buffer are done reading it (with two buffers, the round before
    // last's: the last round's may still be reading the other).
    if (threadIdx.x == 0) {
      if constexpr (Shape::kBuffers == 2) tma_store_wait_read_all_but_latest();
      else if constexpr (!Shape::kBlockBarrier) tma_store_wait_read();
    }
    sync();
#pragma unroll
    for (int ii = 0; ii < kRowsPerRound; ++ii) {
      const int i = (Shape::kSplitRows ? round * kRowsPerRound : 0) + ii;
      const int r = row_base + Cfg::row_offset(i) - (round_row0 - row0);
#pragma unroll
      for (int jj = 0; jj < kColsPerRound; jj += kPairs ? 2 : 1) {
        const int j = (Shape::kSplitRows ? 0 : round * kColsPerRound) + jj;
        const int c = col_base + Cfg::col_offset(j) - (round_col0 - col0);
        if constexpr (kPairs) {  // c even: c, c + 1 in one chunk
          float2 value;
          value.x = upper && round_row0 + r > round_col0 + c ? 0.0f : alpha * acc[i][j];
          value.y = upper && round_row0 + r > round_col0 + c + 1 ? 0.0f : alpha * acc[i][j + 1];
          *reinterpret_cast<float2*>(buffer + round_offset<Shape>(r, c)) = value;
        } else {
          const float value = upper && round_row0 + r > round_col0 + c ? 0.0f : alpha * acc[i][j];
          *reinterpret_cast<float*>(buffer + round_offset<Shape>(r, c)) = value;
        }
      }
    }
    fence_shared_for_async_proxy();
    sync();
    if (threadIdx.x == 0) {
#pragma unroll
      for (int q = 0; q < Shape::kRoundCols / 32; ++q)
        tma_store_tile(&maps.c, round_col0 + 32 * q, round_row0, buffer + q * Shape::kBoxBytes, reduce);
      tma_store_commit();
    }
  }
  if (counter != nullptr && threadIdx.x == 0 && !reduce) {
    if (deferred != nullptr) *deferred = counter;
    else split_tile_stored(counter);  // (its stores complete: read too)
  } else if (Shape::kBlockBarrier && threadIdx.x == 0) {
    tma_store_wait_read();  // the block leaves: its shared memory must outlive the stores' reads
  }
}

/// The register-B kernel's tile of an empty item (no k-range: zeros) by TMA stores: one zeroed 128 ×
/// 32 box of its ring stored four times, and with mirror_zeros four times more, at the mirror tile.
__device__ __forceinline__ void store_zero_tile_by_tma(const TmaMaps& maps, const GemmWorkItem& item, int row0,
                                                       int col0, unsigned char* smem) {
  __syncthreads();  // every warp is done with the ring
  zero_shared_box(smem);
  fence_shared_for_async_proxy();
  __syncthreads();
  if (threadIdx.x == 0) {
#pragma unroll
    for (int q = 0; q < 4; ++q) tma_store_tile(&maps.c, col0 + 32 * q, row0, smem);
    if (item.mirror_zeros) {
#pragma unroll
      for (int q = 0; q < 4; ++q) tma_store_tile(&maps.c, row0 + 32 * q, col0, smem);
    }
    tma_store_wait_read();
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

}  // namespace sg::detail::cuda
