// Tile configurations: the shape, threads, accumulator layout and shared memory of each kernel
// instance (TileConfig and the wgmma kernels' configs), and the layout of a wgmma tile.
#pragma once

#include <type_traits>

#include "cuda/gemm/kernel_args.h"
#include "cuda/gemm/tile_shapes.h"

namespace sg::detail::cuda {

// =============================================================================================
// Kernel configurations.
//
// The threads form a kThreadRows × kThreadCols grid; each thread owns kRowGroups × kColGroups
// blocks of 4×4 outputs, row blocks kRowSpacing apart and column blocks kColSpacing apart
// (the 128-tile float32 config: 128 threads, 16 × 8, each with 8 rows (r, r+64) × 16 columns
// (c, c+32, c+64, c+96)). Splitting keeps each thread's fragment reads 16-byte vectors at
// consecutive addresses across the warp (a warp is 4 thread rows × 8 thread columns), so
// every LDS.128 is conflict-free. Per k that config does 6 LDS.128 for 128 FFMA.
// Each thread stages kLoads 16-byte vectors per operand per k-step, double-buffered
// global → registers → shared so the loads of step t+1 are in flight during the FFMAs of
// step t; one __syncthreads per k-step.
// =============================================================================================

/// The inner loops of the one kernel: FFMA/DFMA outer products on CUDA cores; for float64 and exact
/// float32 on compute capability 9.0, FP64 tensor-core MMAs (mma.sync m16n8k8 .f64; float32 values
/// widened exactly, products exact, sums in float64, one rounding to float32 at the end); or TF32
/// tensor-core MMAs for float32 in TF32 mode — mma.sync m16n8k8 (sm_80 and newer, per warp,
/// fragments from shared memory through registers) or wgmma m64n128k8 (sm_90a, per warpgroup of 4
/// warps, both operands read by the tensor cores straight from shared memory).
enum class InnerLoop { Fma, F64Mma, Tf32Mma, Tf32Wgmma };

template <typename T, int kTile_, int kKStep_, int kThreads_, int kColGroups_, int kMinBlocks_,
          InnerLoop kInner_ = InnerLoop::Fma>
struct TileConfig {
  using Scalar = T;
  static constexpr InnerLoop kInner = kInner_;
  static constexpr bool kMma = kInner_ == InnerLoop::Tf32Mma;
  static constexpr bool kDmma = kInner_ == InnerLoop::F64Mma;
  static constexpr bool kWgmma = kInner_ == InnerLoop::Tf32Wgmma;
  static constexpr bool kTensorCores = kMma || kWgmma;  // operands rounded to TF32 when staged
  static constexpr bool kFragments = kTensorCores || kDmma;  // accumulators in the m16n8 fragment layout
  // The accumulators: float64 for the FP64 MMA loop (float32 tiles widened in registers), else
  // the element type.
  using Acc = std::conditional_t<kDmma, double, T>;
  static constexpr int kThreads = kThreads_;
  static constexpr int kTile = kTile_;                           // BM = BN
  static constexpr int kTileN = kTile_;                          // (the wide kernel's config: BN = 2·BM)
  static constexpr int kKStep = kKStep_;                         // BK
  static constexpr int kRowGroups = kTile / 64;                  // 4-row blocks per thread (FMA)
  static constexpr int kColGroups = kColGroups_;                 // 4-column blocks per thread (FMA)
  // Outputs per thread: the FMA and mma.sync loops as set by the groups; the wgmma loop as its
  // accumulator fragment (rows g, g + 8 of 16 n8 blocks: 2 × kTile/4). The mma.sync loops' warp
  // tiles: TF32 64 × 64 (4 warps), FP64 64 × 32 (8 warps; 64 float64 accumulators per thread).
  static constexpr int kPerRow = kWgmma ? 2 : 4 * kRowGroups;
  static constexpr int kPerCol = kWgmma ? kTile / 4 : 4 * kColGroups;
  static constexpr int kThreadRows = kTile / kPerRow;
  static constexpr int kThreadCols = kTile / kPerCol;
  static constexpr int kRowSpacing = 4 * kThreadRows;            // = kTile / kRowGroups
  static constexpr int kColSpacing = 4 * kThreadCols;
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte vector
  static constexpr int kLoads = kTile * kKStep / (kThreads * kVec);  // vectors per thread, operand and k-step
  // Shared tiles. FMA and mma.sync: k-major [kKStep][kStride], rows padded to stay 16-byte
  // aligned and spread accesses over the banks: by one vector for the FMA loop (the scalar
  // stores of the outer-major staging path then hit distinct banks), by 8 words for the MMA
  // loop (its fragment loads read rows t and columns g of a k-major tile, lanes 4t + g: a row
  // stride of 8 mod 32 words makes them conflict-free). wgmma: outer-major [kTile][kKStep]
  // (TF32 wgmma reads K-major operands only), 128-byte rows in the 128-byte swizzle of the
  // PTX ISA (16-byte chunk c of row r at chunk c ^ (r mod 8)); kStride = kTile keeps the
  // tile kTile·kKStep elements.
  // The FP64 loop on float64 tiles pads by 4 elements (8 words): a half-warp's 8-byte fragment loads
  // then read rows 8 words apart, 32 distinct banks.
  static constexpr int kStride =
      kWgmma ? kTile : kTile + (kMma || kDmma ? 32 / static_cast<int>(sizeof(T)) : kVec);
  // The FP64 loop's tiles are swizzled: element (k, c) sits at column c ^ col_swizzle(k). The
  // outer-major staging map's scalar stores (a warp: 32 / kKStep·kVec outers × kKStep / kVec
  // groups of 4 k, rows 4 apart that the 8-word row stride puts on one bank) then hit 32
  // distinct banks, not 4 or 8 on each (in float64 tiles, two lanes share each bank); the k-major
  // map's 16-byte stores stay whole (the swizzle moves groups of 4 columns), and the fragment
  // loads stay conflict-free (the 4 rows a load reads share one swizzle, which permutes the 8
  // columns it reads).
  __host__ __device__ static constexpr int col_swizzle(int k) {
    return kDmma ? ((k >> 2) % (kKStep / kVec)) * (32 / (kKStep / kVec)) : 0;
  }
  static constexpr int kMinBlocks = kMinBlocks_;
  // Two shared buffers per operand: step t is multiplied while step t+1 is stored. (A third
  // for wgmma, letting step t's MMAs run on past the barrier, measured 4 % slower on H100.) The
  // wgmma tiles live in dynamic shared memory (1024-byte aligned for the swizzle, over the 48 KB
  // static limit); the others in static arrays. The wgmma kernels with TMA maps add two raw tiles
  // (a ring for one k-major operand's raw copies), or, where both operands come by direct copies
  // only, a third buffer per operand instead.
  static constexpr int kTileBytes = kKStep * kStride * static_cast<int>(sizeof(T));
  static constexpr int kDynamicSmem = kWgmma ? 4 * kTileBytes + 1024 : 0;
  static constexpr int kDynamicSmemTma = kWgmma ? 6 * kTileBytes + 1024 : 0;
  static_assert(kLoads >= 1 && kLoads * kThreads * kVec == kTile * kKStep, "staging covers the tile exactly");
  static_assert(kThreads % (kTile / kVec) == 0 && kThreads % (kKStep / kVec) == 0, "staging maps");
  static_assert(kTile % 64 == 0 && kKStep % kVec == 0, "tile shape");
  static_assert(kInner_ != InnerLoop::Fma ||
                    (kThreadRows * kThreadCols == kThreads && kThreadCols % 8 == 0 && kThreadRows % 4 == 0),
                "thread grid: warps of 4 thread rows × 8 thread columns");

  // Where accumulator acc[i][j] lands in the tile: row row_base + (i / kRowGroup)·kRowGroupStride
  // + (i % kRowGroup)·kRowElemStride, and likewise for columns.
  //  FMA:   rows of a thread come in runs of 4 (kRowSpacing apart), columns in runs of 4.
  //  MMA:   a warp owns a 64×64 quarter of the 128 tile as 4×8 m16n8 fragments; a thread holds
  //         rows g and g + 8 of each (g = lane / 4) and columns 2t, 2t + 1 (t = lane % 4).
  //  wgmma: warpgroup w owns rows 64w … 64w + 63 and all kTile columns; warp q of it rows
  //         16q … 16q + 15, in the m16n8 fragment layout of each n8 block.
  static constexpr int kRowGroup = kFragments ? 2 : 4, kRowGroupStride = kFragments ? 16 : kRowSpacing,
                       kRowElemStride = kFragments ? 8 : 1;
  static constexpr int kColGroup = kFragments ? 2 : 4, kColGroupStride = kFragments ? 8 : kColSpacing;
  // The mma.sync loops' warp tiles: warp w at rows kWarpRows·warp_row(), columns
  // kWarpCols·warp_col().
  static constexpr int kWarpRows = 64, kWarpCols = kDmma ? 32 : 64, kWarpsPerRow = kTile / kWarpCols;
  __device__ __forceinline__ static int warp_row() { return (threadIdx.x >> 5) / kWarpsPerRow; }
  /// w mod kWarpsPerRow; in the FP64 loop's odd warp rows reversed, so that the two warps that
  /// share each of the SM's four schedulers (w and w + 4) own opposite column blocks and the steps
  /// that warps leave out (fma_k_loop: a B fragment column block wholly in structural zeros) fall
  /// on the four schedulers evenly.
  __device__ __forceinline__ static int warp_col() {
    const int warp = threadIdx.x >> 5, col = warp % kWarpsPerRow;
    return kDmma && warp_row() % 2 == 1 ? kWarpsPerRow - 1 - col : col;
  }
  static_assert(!kMma || (std::is_same<T, float>::value && kTile == 128 && kThreads == 128 && kPerRow == 8 &&
                          kPerCol == 16 && kKStep % 8 == 0),
                "the MMA loop: 4 warps of 64×64 over a 128 tile, k in steps of 8");
  static_assert(!kDmma || (kTile == 128 && kThreads == 256 && kPerRow == 8 && kPerCol == 8 && kKStep % 8 == 0),
                "the FP64 MMA loop: 8 warps of 64×32 over a 128 tile, k in steps of 8");
  static_assert(!kWgmma || (std::is_same<T, float>::value && kTile == 128 && kThreads == 256 && kKStep == 32 &&
                            kLoads == kVec && kThreads * kLoads == kTile * 8),
                "the wgmma loop: 2 warpgroups of 64×128 over a 128 tile, 128-byte rows of k, and a "
                "kVec × kLoads block per thread in the k-major staging map");
  /// Row and column of this thread's acc[0][0] inside the tile.
  __device__ __forceinline__ static int row_base() {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if constexpr (kWgmma) return warp * 16 + (lane >> 2);
    else if constexpr (kMma || kDmma) return warp_row() * kWarpRows + (lane >> 2);
    else return ((warp / (kThreadCols / 8)) * 4 + (lane >> 3)) * 4;
  }
  __device__ __forceinline__ static int col_base() {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if constexpr (kWgmma) return 2 * (lane & 3);
    else if constexpr (kMma || kDmma) return warp_col() * kWarpCols + 2 * (lane & 3);
    else return ((warp % (kThreadCols / 8)) * 8 + (lane & 7)) * 4;
  }
  __host__ __device__ static constexpr int row_offset(int i) {
    return (i / kRowGroup) * kRowGroupStride + (i % kRowGroup) * kRowElemStride;
  }
  __host__ __device__ static constexpr int col_offset(int j) { return (j / kColGroup) * kColGroupStride + j % kColGroup; }
};

// 128×128, BK 8, 128 threads with 8×16 outputs each (128 accumulators), two blocks per SM.
using ConfigF32Large = TileConfig<float, 128, 8, 128, 4, 2>;

// 64×64 with BK 16, 256 threads with 4×4 each: for problems with too few 128-tiles to fill
// the machine; several blocks per SM.
using ConfigF32Small = TileConfig<float, 64, 16, 256, 1, 3>;

using ConfigF64 = TileConfig<double, 64, 8, 256, 1, 2>;

// TF32 mode: the 128 tile on tensor cores, BK 16 (two k8 slices per step), two blocks per SM.
using ConfigTf32 = TileConfig<float, 128, 16, 128, 4, 2, InnerLoop::Tf32Mma>;

// Exact float32 on compute capability 9.0: the 128 tile on the FP64 tensor cores, BK 32 (four k8
// slices per step), 8 warps of 64×32 (64 float64 accumulators each), one block per SM (254
// registers per thread, no spill; 69 KB of shared tiles). BK 32 measured 4–10 % faster than
// BK 16 once the tiles were swizzled (col_swizzle).
using ConfigF32Dmma = TileConfig<float, 128, 32, 256, 2, 1, InnerLoop::F64Mma>;

// float64 on compute capability 9.0: the same tile and warps on the FP64 tensor cores, BK 16 (two
// k8 slices per step), so that its four shared tiles take about as many bytes as the float32 loop's
// (66 against 68 KiB).
using ConfigF64Dmma = TileConfig<double, 128, 16, 256, 2, 1, InnerLoop::F64Mma>;

// TF32 mode on sm_90a: the 128 tile as two warpgroups' wgmma m64n128k8, BK 32 (four k8 slices
// per step, one 128-byte swizzled row per tile row), two blocks per SM.
using ConfigTf32Wgmma = TileConfig<float, 128, 32, 256, 1, 2, InnerLoop::Tf32Wgmma>;

/// Each configuration's tile is the one the tile scheduler plans in (tile_shapes.h).
template <class Cfg>
constexpr bool has_tile_shape(GemmTileConfig config) {
  return Cfg::kTile == tile_shape(config).rows && Cfg::kTile == tile_shape(config).cols &&
         Cfg::kKStep == tile_shape(config).k_step;
}
static_assert(has_tile_shape<ConfigF32Large>(GemmTileConfig::Float32Large) &&
                  has_tile_shape<ConfigF32Small>(GemmTileConfig::Float32Small) &&
                  has_tile_shape<ConfigF64>(GemmTileConfig::Float64) &&
                  has_tile_shape<ConfigTf32>(GemmTileConfig::Float32Tf32) &&
                  has_tile_shape<ConfigF32Dmma>(GemmTileConfig::Float32Dmma) &&
                  has_tile_shape<ConfigF64Dmma>(GemmTileConfig::Float64Dmma) &&
                  has_tile_shape<ConfigTf32Wgmma>(GemmTileConfig::Float32Tf32Wgmma),
              "the device configurations and the tile scheduler agree on every tile");

// ---- the wgmma tiles --------------------------------------------------------------------------
// Element (outer, k) of a wgmma tile ([kTile][kKStep], 128-byte rows in the 128-byte swizzle) at
// outer·kKStep + ((k/4) ^ (outer mod 8))·4 + k mod 4: the 16-byte chunk of 4 consecutive k.
template <class Cfg>
__device__ __forceinline__ typename Cfg::Scalar* wgmma_tile_chunk(typename Cfg::Scalar* tile, int outer, int k) {
  return tile + outer * Cfg::kKStep + (((k >> 2) ^ (outer & 7)) << 2);
}

/// The named barrier of the consumer warpgroups of structured_gemm_pipelined_kernel.
constexpr int kConsumerBarrier = 1;

constexpr int kPipelineStages = 3;

constexpr int kProducerThreads = 32;

/// The register-B kernel's accumulators as write_tile sees them: the transposed tile,
/// acc_t[j][i] = the wgmma accumulator acc[i][j], whose wgmma row (see above) is output column
/// col_base() + 4i and whose wgmma column 8·(j/2) + 2t + j mod 2 is output row row_base() +
/// row_offset(j).
struct ConfigTf32WgmmaRegisterB : ConfigTf32Wgmma {
  static constexpr int kPerRow = 32, kPerCol = 2;
  static constexpr int kRowGroup = 2, kRowGroupStride = 8, kRowElemStride = 1;
  static constexpr int kColGroup = 1, kColGroupStride = 4;
  __device__ __forceinline__ static int row_base() { return 2 * (threadIdx.x & 3); }
  __device__ __forceinline__ static int col_base() {
    const int warp = (threadIdx.x >> 5) & 3, g = (threadIdx.x & 31) >> 2;
    return 64 * (threadIdx.x >> 7) + 32 * (warp >> 1) + 8 * (warp & 1) + 16 * (g >> 2) + (g & 3);
  }
  __host__ __device__ static constexpr int row_offset(int i) {
    return (i / kRowGroup) * kRowGroupStride + (i % kRowGroup) * kRowElemStride;
  }
  __host__ __device__ static constexpr int col_offset(int j) { return j * kColGroupStride; }
};

constexpr int kTallStages = 4;

/// The tall kernel's tile and accumulators: as ConfigTf32WgmmaRegisterB (acc_t[i][j] at output row
/// row_base() + row_offset(i), column col_base() + 4j), with 256 rows.
struct TallConfig : ConfigTf32WgmmaRegisterB {
  static constexpr int kTile = 256, kTileN = 128;  // output rows (A's direct copy), columns (B's raw copy)
  static constexpr int kPerRow = 64;
  static constexpr int kATileBytes = kTile * kKStep * 4, kBTileBytes = kTileN * kKStep * 4;
  // The epilogue's buffer: four boxes of 64 rows × 32 columns of the output map, a quarter of the
  // tile per round (store_tile_by_tma, TallStores); its first box, zeroed at the end, the source of the tiles of zeros.
  static constexpr int kOutRows = 64, kOutBoxBytes = kOutRows * 32 * 4, kOutBytes = 4 * kOutBoxBytes;
  static constexpr int kDynamicSmem = kTallStages * (kATileBytes + kBTileBytes) + kOutBytes + 1024;
};

static_assert(TallConfig::kDynamicSmem <= 227 * 1024, "the tall ring fits an H100 block's shared memory");
static_assert(TallConfig::kTile == kTallTile.rows && TallConfig::kTileN == kTallTile.cols &&
                  TallConfig::kKStep == kTallTile.k_step && TallConfig::kOutRows == kTallOutRows,
              "the tall kernel and the tile scheduler agree on its tile");

constexpr int kWideStages = 4;

// The wide kernel's per-warpgroup barriers (zero_wide_rows_outside): this and the next id.
constexpr int kWideWarpgroupBarrier = 2;

static_assert(kWideWarpgroupBarrier > kConsumerBarrier, "distinct from the consumers' barrier");

/// The wide kernel's tile: the wgmma config's accumulator layout and epilogue members, with
/// 256 columns (each thread's two rows over the 32 n8 blocks) and the wide ring's buffers.
struct WideConfig : ConfigTf32Wgmma {
  static constexpr int kTileN = 256;
  static constexpr int kPerCol = kTileN / 4;
  static constexpr int kATileBytes = kTile * kKStep * 4, kBTileBytes = kTileN * kKStep * 4;
  // The epilogue's buffer (store_tile_by_tma, WideStores): two boxes of 128 rows × 32 columns of the output map,
  // one per round, in turn.
  static constexpr int kOutCols = 32, kOutBoxBytes = kTile * kOutCols * 4, kOutBytes = 2 * kOutBoxBytes;
  static constexpr int kDynamicSmem = kWideStages * (kATileBytes + kBTileBytes) + kOutBytes + 1024;
};

static_assert(WideConfig::kDynamicSmem <= 227 * 1024, "the wide ring fits an H100 block's shared memory");

static_assert(WideConfig::kTile == kWideTile.rows && WideConfig::kTileN == kWideTile.cols &&
                  WideConfig::kKStep == kWideTile.k_step,
              "the wide kernel and the tile scheduler agree on its tile");

}  // namespace sg::detail::cuda
