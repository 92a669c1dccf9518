// The CUDA structured GEMM: one tiled kernel template (FFMA/DFMA, FP64 and TF32 tensor-core
// inner loops) for every structured product
// C = alpha·op(A)·op(B) (DESIGN §5, semantics in ops/gemm_desc.h), the host planner that turns
// a problem into a heaviest-first list of (tile, k-range chunk) work items, and the launcher
// that caches each plan on the device. The design and its reasons: docs/structured_gemm.md.
#include "cuda/structured_gemm.h"

#include <cuda.h>  // CUtensorMap and the cuTensorMapEncodeTiled prototype (called through the runtime's entry point)

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <sstream>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "core/storage.h"
#include "cuda/check.h"
#include "cuda/runtime.h"

namespace sg::detail::cuda {

// =============================================================================================
// Operand views.
//
// The kernel sees each operand as V(outer, k): outer is m for A and n for B, and
//   A: V(m, k) = op(A)[m][k],   B: V(n, k) = op(B)[k][n],
// so both operands are staged the same way: a kTile (outer) × kKStep (k) tile per k-step,
// stored k-major in shared memory ([k][outer]), which is what the outer-product inner loop
// reads. In device memory an element lives at
//   outer-major: data[outer·ld + k]   (A not transposed, B transposed)
//   k-major:     data[k·ld + outer]   (A transposed,     B not transposed)
// Structure becomes a predicate on (outer, k):
//   A Upper (op(A)[m][k] != 0 needs k >= m) and B Lower (op(B)[k][n] needs k >= n): k >= outer
//   A Lower and B Upper:                                                           k <= outer
//   Symmetric: V(outer, k) = s[min(outer, k)][max(outer, k)] — outer-major in the stored
//   upper triangle (outer <= k), k-major in the mirrored part (outer > k).
// =============================================================================================

enum class Layout : int32_t { OuterMajor, KMajor };
enum class Pattern : int32_t { All, KAtLeastOuter, KAtMostOuter, Symmetric };

template <typename T>
struct OperandView {
  const T* data;
  int64_t ld;
  int32_t extent;    // outer indices [0, extent) exist
  Layout layout;     // for Dense / Upper / Lower (Symmetric chooses per tile)
  Pattern pattern;
  bool vector_ok;    // data 16-byte aligned and ld a multiple of the vector width
  // The storage holds zeros outside the structure near the diagonal (a relayout copy: within
  // kRelayoutZeroBand), so the pipelined kernel's diagonal-crossing steps need no zeroing.
  bool zeros_stored;
};

template <typename T>
struct GemmArgs {
  OperandView<T> a, b;
  T* c;
  int64_t ldc;
  int32_t m, n;
  T alpha;
  OutputMask mask;
  bool c_vector_ok;
  const GemmWorkItem* items;
  int* counters;     // one arrival counter per split tile, 0 between launches
  T* partials;       // partial_tiles × kTile² workspace, of the config's accumulator type (Acc)
};

/// The tall kernel's second output (GemmProblem::at_buffer): op(A)ᵀ outer-major, at[p·m + i] =
/// op(A)[i][p], written by TMA stores (`on`: the launch writes it). A kernel parameter of its own: in
/// GemmArgs, the tall kernel took 255 registers rather than 234 and ran 4–9 % slower.
struct TransposedOutput {
  CUtensorMap map;  // over at: k rows × m columns, boxes of 32 × 32 (the epilogue buffer's 8 boxes hold a step)
  const KRun* writes = nullptr;  // per item of the plan, the k-steps it writes (TallPlan::transposed_writes)
  bool on = false;
};

/// wgmma loop only: TMA maps of the operands, a separate kernel parameter (__grid_constant__,
/// as TMA requires) so the other configs' arguments keep their layout. Per operand:
///   direct: a kTile × kKStep box in the 128-byte swizzle over the outer-major storage — it lands
///           in the wgmma tile layout (A not transposed, B transposed, Symmetric's stored part);
///   raw:    a 32 × 32 box (32 outer × 32 k, the 128-byte swizzle) over the k-major storage (A
///           transposed, B not transposed, Symmetric's mirrored part), copied four at a time
///           into a raw tile that the threads transpose into the wgmma tile (TF32 wgmma reads
///           K-major tiles only).
/// `has` says which maps were made: bit 0 A direct, 1 A raw, 2 B direct, 3 B raw.
///   stored: a Symmetric operand's relayout copy that holds only its mirrored part (a mirror
///           copy, relayout_outer_major_kernel): the direct map over the operand's own storage,
///           from which the k-steps wholly in its stored triangle come (direct_map). `stored`
///           says which: bit 0 A, bit 1 B.
///   c:      the register-B kernel's output, written by TMA stores from shared memory in 128 × 32
///           boxes (bit kCStore of `has`; store_tile_by_tma).
struct TmaMaps {
  CUtensorMap a, b, a_raw, b_raw, a_stored, b_stored, c;
  uint32_t has;
  uint32_t stored;
};
enum TmaMapBits : uint32_t { kADirect = 1, kARaw = 2, kBDirect = 4, kBRaw = 8, kBRawBlocks = 16, kCStore = 32 };
/// The other configs' stand-in in the shared block body (their kernels take no maps).
struct NoTmaMaps {};
template <class Cfg>
using TmaMapsOf = std::conditional_t<Cfg::kWgmma, TmaMaps, NoTmaMaps>;

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

/// The inner loops of the one kernel: FFMA/DFMA outer products on CUDA cores; for exact float32
/// on compute capability 9.0, FP64 tensor-core MMAs (mma.sync m16n8k8 .f64: the float32 values
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
  // The accumulators: float64 for the FP64 MMA loop (its float32 tiles widened in registers),
  // else the element type.
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
  static constexpr int kStride = kWgmma ? kTile : kTile + (kMma || kDmma ? 8 : kVec);
  // The FP64 loop's tiles are swizzled: element (k, c) sits at column c ^ col_swizzle(k). The
  // outer-major staging map's scalar stores (a warp: 32 / kKStep·kVec outers × kKStep / kVec
  // groups of 4 k, rows 4 apart that the 8-word row stride puts on one bank) then hit 32
  // distinct banks, not 4 or 8 on each; the k-major map's 16-byte stores stay whole (the swizzle
  // moves groups of 4 columns), and the fragment loads stay conflict-free (the 4 rows a load
  // reads share one swizzle, which permutes the 8 columns it reads).
  __host__ __device__ static constexpr int col_swizzle(int k) {
    return kDmma ? ((k >> 2) % (kKStep / kVec)) * (32 / (kKStep / kVec)) : 0;
  }
  static constexpr int kMinBlocks = kMinBlocks_;
  // Two shared buffers per operand: step t is multiplied while step t+1 is stored. (A third
  // for wgmma, letting step t's MMAs run on past the barrier, measured 4 % slower on H100:
  // docs/structured_gemm.md.) The wgmma tiles live in dynamic shared memory (1024-byte aligned
  // for the swizzle, over the 48 KB static limit); the others in static arrays. The wgmma
  // kernels with TMA maps add two raw tiles (a ring for one k-major operand's raw copies), or,
  // where both operands come by direct copies only, a third buffer per operand instead.
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
  static_assert(!kDmma || (std::is_same<T, float>::value && kTile == 128 && kThreads == 256 && kPerRow == 8 &&
                           kPerCol == 8 && kKStep % 8 == 0),
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
// BK 16 once the tiles were swizzled (col_swizzle; docs/structured_gemm.md).
using ConfigF32Dmma = TileConfig<float, 128, 32, 256, 2, 1, InnerLoop::F64Mma>;
// TF32 mode on sm_90a: the 128 tile as two warpgroups' wgmma m64n128k8, BK 32 (four k8 slices
// per step, one 128-byte swizzled row per tile row), two blocks per SM.
using ConfigTf32Wgmma = TileConfig<float, 128, 32, 256, 1, 2, InnerLoop::Tf32Wgmma>;

template <typename T>
struct Vec16;
template <>
struct Vec16<float> {
  using type = float4;
};
template <>
struct Vec16<double> {
  using type = double2;
};

template <typename T, int N>
__device__ __forceinline__ void load_vec_global(const T* p, T (&out)[N]) {
  using V = typename Vec16<T>::type;
  static_assert(sizeof(V) == N * sizeof(T), "vector width");
  const V v = __ldg(reinterpret_cast<const V*>(p));
  memcpy(out, &v, sizeof(V));
}

template <typename T, int N>
__device__ __forceinline__ void store_vec_shared(T* p, const T (&in)[N]) {
  using V = typename Vec16<T>::type;
  V v;
  memcpy(&v, in, sizeof(V));
  *reinterpret_cast<V*>(p) = v;
}

// Four consecutive shared elements (one LDS.128 for float, two for double).
template <typename T>
__device__ __forceinline__ void load4_shared(const T* p, T* out) {
  using V = typename Vec16<T>::type;
  constexpr int kVec = 16 / sizeof(T);
#pragma unroll
  for (int q = 0; q < 4; q += kVec) {
    const V v = *reinterpret_cast<const V*>(p + q);
    memcpy(out + q, &v, sizeof(V));
  }
}

/// Rounds a float to TF32 (round to nearest, ties away; the low 13 mantissa bits cleared),
/// as the tensor cores read it. Applied once, when a tile is staged into shared memory.
__device__ __forceinline__ float round_to_tf32(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t bits;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(bits) : "f"(x));
  return __uint_as_float(bits);
#else
  return x;
#endif
}
__device__ __forceinline__ double round_to_tf32(double x) { return x; }

/// D = A·B + D for one m16n8k8 TF32 fragment (PTX ISA "mma.sync ... .tf32"): a[4], b[2] hold
/// TF32 bit patterns, d[4] the float32 accumulators.
__device__ __forceinline__ void mma_tf32_m16n8k8(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();  // the host never launches the MMA configuration below sm_80
#endif
}

/// D = A·B + D for one m16n8k8 float64 fragment (PTX ISA "mma.sync ... .f64", sm_90): the same
/// fragment layout as the TF32 shape above, with one float64 per element.
__device__ __forceinline__ void mma_f64_m16n8k8(double (&d)[4], const double (&a)[4], const double (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
#else
  __trap();  // the host launches the FP64 MMA configuration only on compute capability 9.0
#endif
}

// ---- wgmma (sm_90a) ------------------------------------------------------------------------
// The PTX ISA's asynchronous warpgroup MMA. Operands are described by 64-bit shared-memory
// matrix descriptors; the accumulators stay in registers and must not be touched between the
// issue and the wait (wgmma_fence_operands keeps the compiler from moving accesses across).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SG_HAS_WGMMA 1
#else
#define SG_HAS_WGMMA 0
#endif

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// Descriptor of a K-major operand tile in the 128-byte swizzle: rows of 128 bytes (32 TF32
/// values of k), 8-row swizzle atoms 1024 bytes apart (stride byte offset); the leading byte
/// offset is unused for swizzled K-major tiles (one wgmma reads 32 bytes of k, inside the
/// atom). `address` is the tile base (1024-byte aligned) plus the byte offset of the k8 slice.
__device__ __forceinline__ uint64_t wgmma_descriptor(uint32_t address) {
  return static_cast<uint64_t>((address & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() {
#if SG_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if SG_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_wait_all() {
#if SG_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}
/// Waits until at most one of this warpgroup's committed wgmma groups is still running (the
/// latest): the groups before it are complete, their shared-memory operands free.
__device__ __forceinline__ void wgmma_wait_all_but_latest() {
#if SG_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
#endif
}

/// Makes this thread's ordinary shared-memory stores visible to the tensor cores' (async
/// proxy) reads that follow the next barrier.
__device__ __forceinline__ void fence_shared_for_async_proxy() {
#if SG_HAS_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// ---- Programmatic dependent launch (sm_90) -------------------------------------------------
// The tall and wide kernels are launched with programmatic stream serialization
// (launch_after_previous): such a launch may begin once the blocks of the kernel before it in the
// stream have exited, before that grid has completed (its memory flushed), so the gap between the
// two kernels shrinks (measured: 2.7–3.2 µs to 1.4–1.5; docs/structured_gemm.md, "Launches that
// begin before the kernel before them ends"). Each block waits for that grid to complete before
// it reads or writes global memory. The kernels do not signal their dependents earlier
// (griddepcontrol.launch_dependents): the next kernel's blocks then wait on SMs as this one's
// leave, and ran 2–5 % slower.
/// Waits until the grids this one depends on have completed and their writes are visible (at once
/// where the launch was an ordinary one).
__device__ __forceinline__ void wait_for_previous_grid() {
#if SG_HAS_WGMMA
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// ---- TMA (sm_90): tile copies global → shared by the tensor memory accelerator --------------
// A copy completes on an mbarrier: one thread arms the barrier with the byte count
// (arrive.expect_tx, the barrier's only arrival) and issues the copies; every thread then waits
// for the phase. The copies bypass the load/store unit and the registers.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, int count) {
#if SG_HAS_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(count) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if SG_HAS_WGMMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
#if SG_HAS_WGMMA
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(shared_address(bar)), "r"(parity)
        : "memory");
  } while (!done);
#endif
}
/// One arrival on `bar` (no transaction bytes).
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
#if SG_HAS_WGMMA
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(bar)) : "memory");
#endif
}
/// Barrier `id` (1 … 15; 0 is __syncthreads') over the first `threads` threads of the block.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
/// Copies the box of `map` that starts at column `inner` (the contiguous dimension) of row
/// `row` into shared memory at `dst`, completing on `bar`.
__device__ __forceinline__ void tma_load_tile(void* dst, const CUtensorMap* map, int inner, int row, uint64_t* bar) {
#if SG_HAS_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          shared_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(row), "r"(shared_address(bar))
      : "memory");
#endif
}
/// Copies the box of `map` that starts at column `inner` of row `row` from shared memory at `src`
/// to global memory (a TMA store, in the thread's bulk async-group); with `add`, adds it to what
/// global memory holds instead (a TMA reduction, float32 add).
__device__ __forceinline__ void tma_store_tile(const CUtensorMap* map, int inner, int row, const void* src,
                                               bool add = false) {
#if SG_HAS_WGMMA
  const uint64_t tensor_map = reinterpret_cast<uint64_t>(map);
  if (add)
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                     tensor_map),
                 "r"(inner), "r"(row), "r"(shared_address(src))
                 : "memory");
  else
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(tensor_map),
                 "r"(inner), "r"(row), "r"(shared_address(src))
                 : "memory");
#endif
}
/// Closes the thread's bulk async-group (its stores so far).
__device__ __forceinline__ void tma_store_commit() {
#if SG_HAS_WGMMA
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
/// Waits until every bulk async-group of the thread but the latest has read its shared memory
/// (commits nothing: the caller's groups are its rounds).
__device__ __forceinline__ void tma_store_wait_read_all_but_latest() {
#if SG_HAS_WGMMA
  asm volatile("cp.async.bulk.wait_group.read 1;\n" ::: "memory");
#endif
}
/// Closes the thread's bulk async-group and waits until its stores have read their shared memory
/// (the block may then leave; the writes complete on their own).
__device__ __forceinline__ void tma_store_wait_read() {
  tma_store_commit();
#if SG_HAS_WGMMA
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}

/// Orders the thread's global accesses across the generic and async proxies: its earlier generic
/// ones (an acquire of a flag) before its later TMA operations, and its completed TMA writes before
/// its later generic ones (a release of a flag).
__device__ __forceinline__ void fence_global_for_async_proxy() {
#if SG_HAS_WGMMA
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
#endif
}
/// Closes the thread's bulk async-group and waits until its stores have completed: their writes
/// are performed, and (after the fence) ordered before the thread's later global accesses of the
/// generic proxy, such as a release of a flag.
__device__ __forceinline__ void tma_store_wait_complete() {
  tma_store_commit();
#if SG_HAS_WGMMA
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
  fence_global_for_async_proxy();
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

// The direct map of operand A (kIsB false) or B for its k-step at k0 of the tile whose outer
// indices start at outer0, kOuter of them (a multiple of 32, outer0 a multiple of it): the
// operand's own storage where the operand is a mirror copy (TmaMaps::stored) and the whole step
// lies in the stored triangle (k >= outer everywhere), else the copy or the operand's one map.
template <bool kIsB, int kOuter>
__device__ __forceinline__ const CUtensorMap* direct_map(const TmaMaps& maps, int k0, int outer0) {
  const bool stored = (maps.stored & (kIsB ? 2u : 1u)) && k0 >= outer0 + kOuter - 1;
  if constexpr (kIsB) return stored ? &maps.b_stored : &maps.b;
  else return stored ? &maps.a_stored : &maps.a;
}

template <int R, int C>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[R][C]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < C; ++j) asm volatile("" : "+f"(d[i][j])::"memory");
}

/// The 64 accumulator operands of an m64n128k8 wgmma, in the order of its D registers.
#define SG_WGMMA_N128_ACCUMULATORS(d) \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][2]), "+f"(d[1][3]), \
  "+f"(d[0][4]), "+f"(d[0][5]), "+f"(d[1][4]), "+f"(d[1][5]), "+f"(d[0][6]), "+f"(d[0][7]), "+f"(d[1][6]), "+f"(d[1][7]), \
  "+f"(d[0][8]), "+f"(d[0][9]), "+f"(d[1][8]), "+f"(d[1][9]), "+f"(d[0][10]), "+f"(d[0][11]), "+f"(d[1][10]), "+f"(d[1][11]), \
  "+f"(d[0][12]), "+f"(d[0][13]), "+f"(d[1][12]), "+f"(d[1][13]), "+f"(d[0][14]), "+f"(d[0][15]), "+f"(d[1][14]), "+f"(d[1][15]), \
  "+f"(d[0][16]), "+f"(d[0][17]), "+f"(d[1][16]), "+f"(d[1][17]), "+f"(d[0][18]), "+f"(d[0][19]), "+f"(d[1][18]), "+f"(d[1][19]), \
  "+f"(d[0][20]), "+f"(d[0][21]), "+f"(d[1][20]), "+f"(d[1][21]), "+f"(d[0][22]), "+f"(d[0][23]), "+f"(d[1][22]), "+f"(d[1][23]), \
  "+f"(d[0][24]), "+f"(d[0][25]), "+f"(d[1][24]), "+f"(d[1][25]), "+f"(d[0][26]), "+f"(d[0][27]), "+f"(d[1][26]), "+f"(d[1][27]), \
  "+f"(d[0][28]), "+f"(d[0][29]), "+f"(d[1][28]), "+f"(d[1][29]), "+f"(d[0][30]), "+f"(d[0][31]), "+f"(d[1][30]), "+f"(d[1][31])

/// D += A·B for one warpgroup: A 64×8 and B 128×8 (K-major, TF32 bit patterns in shared
/// memory), D 64×128 float32 in the m16n8 fragment layout (d[r][c]: row g + 8r of the warp's
/// 16, column 8·(c/2) + 2t + c%2).
__device__ __forceinline__ void wgmma_m64n128k8_tf32(float (&d)[2][32], uint64_t a_desc, uint64_t b_desc) {
#if SG_HAS_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, accumulate, 1, 1;\n"
      "}\n"
      : SG_WGMMA_N128_ACCUMULATORS(d)
      : "l"(a_desc), "l"(b_desc), "r"(1));
#else
  __trap();  // the host launches the wgmma configuration only on sm_90a code
#endif
}

/// The same with A from registers (the register-B kernel): a[4] this thread's TF32 bit patterns of
/// A (64 × 8, the m16n8k8 A fragment layout per warp: rows g and g + 8 of the warp's 16, k t and
/// t + 4, as a[0] (g, t), a[1] (g + 8, t), a[2] (g, t + 4), a[3] (g + 8, t + 4)), B K-major in
/// shared memory as above.
__device__ __forceinline__ void wgmma_m64n128k8_tf32_register_a(float (&d)[2][32], const uint32_t (&a)[4],
                                                                uint64_t b_desc) {
#if SG_HAS_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, accumulate, 1, 1;\n"
      "}\n"
      : SG_WGMMA_N128_ACCUMULATORS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
#else
  __trap();  // the host launches the register-B kernel only on sm_90a code
#endif
}

/// The same for n256 (the wide kernel's 64 × 256 warpgroup tile): d[0] rows g, d[1] rows g + 8, of
/// the 32 n8 blocks.
__device__ __forceinline__ void wgmma_m64n256k8_tf32(float (&d)[2][64], uint64_t a_desc, uint64_t b_desc) {
#if SG_HAS_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, accumulate, 1, 1;\n"
      "}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][2]), "+f"(d[1][3]),
        "+f"(d[0][4]), "+f"(d[0][5]), "+f"(d[1][4]), "+f"(d[1][5]), "+f"(d[0][6]), "+f"(d[0][7]), "+f"(d[1][6]), "+f"(d[1][7]),
        "+f"(d[0][8]), "+f"(d[0][9]), "+f"(d[1][8]), "+f"(d[1][9]), "+f"(d[0][10]), "+f"(d[0][11]), "+f"(d[1][10]), "+f"(d[1][11]),
        "+f"(d[0][12]), "+f"(d[0][13]), "+f"(d[1][12]), "+f"(d[1][13]), "+f"(d[0][14]), "+f"(d[0][15]), "+f"(d[1][14]), "+f"(d[1][15]),
        "+f"(d[0][16]), "+f"(d[0][17]), "+f"(d[1][16]), "+f"(d[1][17]), "+f"(d[0][18]), "+f"(d[0][19]), "+f"(d[1][18]), "+f"(d[1][19]),
        "+f"(d[0][20]), "+f"(d[0][21]), "+f"(d[1][20]), "+f"(d[1][21]), "+f"(d[0][22]), "+f"(d[0][23]), "+f"(d[1][22]), "+f"(d[1][23]),
        "+f"(d[0][24]), "+f"(d[0][25]), "+f"(d[1][24]), "+f"(d[1][25]), "+f"(d[0][26]), "+f"(d[0][27]), "+f"(d[1][26]), "+f"(d[1][27]),
        "+f"(d[0][28]), "+f"(d[0][29]), "+f"(d[1][28]), "+f"(d[1][29]), "+f"(d[0][30]), "+f"(d[0][31]), "+f"(d[1][30]), "+f"(d[1][31]),
        "+f"(d[0][32]), "+f"(d[0][33]), "+f"(d[1][32]), "+f"(d[1][33]), "+f"(d[0][34]), "+f"(d[0][35]), "+f"(d[1][34]), "+f"(d[1][35]),
        "+f"(d[0][36]), "+f"(d[0][37]), "+f"(d[1][36]), "+f"(d[1][37]), "+f"(d[0][38]), "+f"(d[0][39]), "+f"(d[1][38]), "+f"(d[1][39]),
        "+f"(d[0][40]), "+f"(d[0][41]), "+f"(d[1][40]), "+f"(d[1][41]), "+f"(d[0][42]), "+f"(d[0][43]), "+f"(d[1][42]), "+f"(d[1][43]),
        "+f"(d[0][44]), "+f"(d[0][45]), "+f"(d[1][44]), "+f"(d[1][45]), "+f"(d[0][46]), "+f"(d[0][47]), "+f"(d[1][46]), "+f"(d[1][47]),
        "+f"(d[0][48]), "+f"(d[0][49]), "+f"(d[1][48]), "+f"(d[1][49]), "+f"(d[0][50]), "+f"(d[0][51]), "+f"(d[1][50]), "+f"(d[1][51]),
        "+f"(d[0][52]), "+f"(d[0][53]), "+f"(d[1][52]), "+f"(d[1][53]), "+f"(d[0][54]), "+f"(d[0][55]), "+f"(d[1][54]), "+f"(d[1][55]),
        "+f"(d[0][56]), "+f"(d[0][57]), "+f"(d[1][56]), "+f"(d[1][57]), "+f"(d[0][58]), "+f"(d[0][59]), "+f"(d[1][58]), "+f"(d[1][59]),
        "+f"(d[0][60]), "+f"(d[0][61]), "+f"(d[1][60]), "+f"(d[1][61]), "+f"(d[0][62]), "+f"(d[0][63]), "+f"(d[1][62]), "+f"(d[1][63])
      : "l"(a_desc), "l"(b_desc), "r"(1));
#else
  __trap();  // the host launches the wide kernel only on sm_90a code
#endif
}

/// The same with A from registers (the tall kernel): a[4] this thread's TF32 bit patterns of A as in
/// wgmma_m64n128k8_tf32_register_a, B 256 × 8 K-major in shared memory, d as in wgmma_m64n256k8_tf32.
__device__ __forceinline__ void wgmma_m64n256k8_tf32_register_a(float (&d)[2][64], const uint32_t (&a)[4],
                                                                uint64_t b_desc) {
#if SG_HAS_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, accumulate, 1, 1;\n"
      "}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[0][4]), "+f"(d[0][5]), "+f"(d[1][4]), "+f"(d[1][5]), "+f"(d[0][6]), "+f"(d[0][7]), "+f"(d[1][6]), "+f"(d[1][7]), "+f"(d[0][8]), "+f"(d[0][9]), "+f"(d[1][8]), "+f"(d[1][9]), "+f"(d[0][10]), "+f"(d[0][11]), "+f"(d[1][10]), "+f"(d[1][11]), "+f"(d[0][12]), "+f"(d[0][13]), "+f"(d[1][12]), "+f"(d[1][13]), "+f"(d[0][14]), "+f"(d[0][15]), "+f"(d[1][14]), "+f"(d[1][15]), "+f"(d[0][16]), "+f"(d[0][17]), "+f"(d[1][16]), "+f"(d[1][17]), "+f"(d[0][18]), "+f"(d[0][19]), "+f"(d[1][18]), "+f"(d[1][19]), "+f"(d[0][20]), "+f"(d[0][21]), "+f"(d[1][20]), "+f"(d[1][21]), "+f"(d[0][22]), "+f"(d[0][23]), "+f"(d[1][22]), "+f"(d[1][23]), "+f"(d[0][24]), "+f"(d[0][25]), "+f"(d[1][24]), "+f"(d[1][25]), "+f"(d[0][26]), "+f"(d[0][27]), "+f"(d[1][26]), "+f"(d[1][27]), "+f"(d[0][28]), "+f"(d[0][29]), "+f"(d[1][28]), "+f"(d[1][29]), "+f"(d[0][30]), "+f"(d[0][31]), "+f"(d[1][30]), "+f"(d[1][31]), "+f"(d[0][32]), "+f"(d[0][33]), "+f"(d[1][32]), "+f"(d[1][33]), "+f"(d[0][34]), "+f"(d[0][35]), "+f"(d[1][34]), "+f"(d[1][35]), "+f"(d[0][36]), "+f"(d[0][37]), "+f"(d[1][36]), "+f"(d[1][37]), "+f"(d[0][38]), "+f"(d[0][39]), "+f"(d[1][38]), "+f"(d[1][39]), "+f"(d[0][40]), "+f"(d[0][41]), "+f"(d[1][40]), "+f"(d[1][41]), "+f"(d[0][42]), "+f"(d[0][43]), "+f"(d[1][42]), "+f"(d[1][43]), "+f"(d[0][44]), "+f"(d[0][45]), "+f"(d[1][44]), "+f"(d[1][45]), "+f"(d[0][46]), "+f"(d[0][47]), "+f"(d[1][46]), "+f"(d[1][47]), "+f"(d[0][48]), "+f"(d[0][49]), "+f"(d[1][48]), "+f"(d[1][49]), "+f"(d[0][50]), "+f"(d[0][51]), "+f"(d[1][50]), "+f"(d[1][51]), "+f"(d[0][52]), "+f"(d[0][53]), "+f"(d[1][52]), "+f"(d[1][53]), "+f"(d[0][54]), "+f"(d[0][55]), "+f"(d[1][54]), "+f"(d[1][55]), "+f"(d[0][56]), "+f"(d[0][57]), "+f"(d[1][56]), "+f"(d[1][57]), "+f"(d[0][58]), "+f"(d[0][59]), "+f"(d[1][58]), "+f"(d[1][59]), "+f"(d[0][60]), "+f"(d[0][61]), "+f"(d[1][60]), "+f"(d[1][61]), "+f"(d[0][62]), "+f"(d[0][63]), "+f"(d[1][62]), "+f"(d[1][63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
#else
  __trap();  // the host launches the tall kernel only on sm_90a code
#endif
}

__device__ __forceinline__ bool pattern_allows(Pattern pattern, int outer, int k) {
  return pattern == Pattern::KAtLeastOuter ? k >= outer : pattern == Pattern::KAtMostOuter ? k <= outer : true;
}

// =============================================================================================
// Staging one operand's k-step tile.
//
// Two maps from (thread, pass) to the 16-byte vector it fetches, v = tid + pass·256:
//   k-major map:     k = v / (kTile/kVec), outer = (v % (kTile/kVec))·kVec: a warp reads whole
//                    rows of k-major memory (coalesced) and stores one vector; for the wgmma
//                    loop a thread instead fetches a kVec (outer) × kLoads (k) block and
//                    transposes it in registers into kVec vectors along k for the K-major
//                    shared tile. Warp w, lane l: k block 4·(w mod 2) + (l/2 mod 4), outer
//                    block 8·(w/2) + l mod 2 + 2·(l/8), so a warp's pass reads 4 whole 128-byte
//                    rows (measured: 8 rows × 64 bytes, with the k block = l mod 8, ran Sym·Dense
//                    40 % slower) and the 8 lanes of a 16-byte store phase write 8 distinct
//                    swizzled chunks (no bank conflict, no register selects);
//   outer-major map: outer = v / (kKStep/kVec), k = (v % (kKStep/kVec))·kVec: a warp reads
//                    full 32-byte sectors of outer-major rows and stores kVec scalars.
// Per k-step the path is chosen uniformly for the block:
//   fast:    k0 in [fast_k_lo, fast_k_last] — the tile is in bounds, aligned and entirely in
//            the structure's non-zero part: vector loads from a running pointer, no masking;
//   general: vector loads plus masking of the structurally-zero elements when in bounds and
//            aligned (the zero triangle's values are loaded but never used), or the Symmetric
//            tile's region (stored upper: outer-major; mirrored: k-major); otherwise per
//            element with bounds, predicate and the symmetric redirection (edges,
//            diagonal-crossing symmetric tiles, unaligned operands).
// =============================================================================================

// ---- the wgmma tiles --------------------------------------------------------------------------
// Element (outer, k) of a wgmma tile ([kTile][kKStep], 128-byte rows in the 128-byte swizzle) at
// outer·kKStep + ((k/4) ^ (outer mod 8))·4 + k mod 4: the 16-byte chunk of 4 consecutive k.
template <class Cfg>
__device__ __forceinline__ typename Cfg::Scalar* wgmma_tile_chunk(typename Cfg::Scalar* tile, int outer, int k) {
  return tile + outer * Cfg::kKStep + (((k >> 2) ^ (outer & 7)) << 2);
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

/// Copies the 3-D box of `map` at (`x`, `y`, `z`) into shared memory at `dst`, completing on `bar`.
__device__ __forceinline__ void tma_load_box_3d(void* dst, const CUtensorMap* map, int x, int y, int z, uint64_t* bar) {
#if SG_HAS_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
          shared_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(shared_address(bar))
      : "memory");
#endif
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

template <class Cfg>
struct StagedTile {
  typename Cfg::Scalar value[Cfg::kLoads][Cfg::kVec];
  bool along_k;  // true: value[p] is kVec consecutive k at one outer (outer-major map)
};

/// The wgmma loop's ring of two raw tiles (TmaMaps: raw) for the one operand of a block whose
/// k-major fast-path steps come by raw TMA copies: slot s holds k-step t with t mod 2 = s,
/// copied two steps ahead and completing on bars[s].
struct RawRing {
  float* tiles;     // two raw tiles of one wgmma tile's size each
  uint64_t* bars;   // their completion barriers
  uint32_t phase;   // bit s: parity of slot s's next completion
  static constexpr int kTileFloats = ConfigTf32Wgmma::kTile * ConfigTf32Wgmma::kKStep;
  __device__ __forceinline__ float* tile(int slot) const { return tiles + slot * kTileFloats; }
  __device__ __forceinline__ void wait(int slot) {
    mbarrier_wait(bars + slot, (phase >> slot) & 1);
    phase ^= 1u << slot;
  }
};

/// How an operand's fast-path k-steps reach the wgmma tile (kTma stagers only).
enum class TmaCopy : uint8_t { None, Direct, Raw };

// kTma (wgmma loop, TMA maps made for the operand): the fast-path k-steps come by TMA — outer-
// major ones directly into the wgmma tile, k-major ones (when the block's raw ring is this
// operand's) into a raw tile that the threads transpose into it. The register fast path stays
// for k-major operands without the ring (fetch); the other steps are staged as usual. kDiag: a
// triangular operand's diagonal-crossing steps by TMA too (structural zeros written after the
// copy); kSym: a Symmetric operand's whole steps in both triangles by TMA (stored: directly,
// mirrored: raw, with the ring), not only the longer span's.
template <class Cfg, bool kTma = false, bool kDiag = false, bool kSym = false>
struct OperandStager {
  using T = typename Cfg::Scalar;
  static constexpr int kVec = Cfg::kVec, kLoads = Cfg::kLoads, kStride = Cfg::kStride;
  static constexpr int kKMajorPerRow = Cfg::kTile / kVec;
  static constexpr int kKMajorRowsPerPass = Cfg::kThreads / kKMajorPerRow;
  static constexpr int kOuterMajorPerRow = Cfg::kKStep / kVec;
  static constexpr int kOuterMajorRowsPerPass = Cfg::kThreads / kOuterMajorPerRow;
  // k between a thread's passes in the k-major map.
  static constexpr int kKMajorPassK = Cfg::kWgmma ? 1 : kKMajorRowsPerPass;

  int outer0;          // first outer index of the tile
  int k_end;           // end of this work item's k-range
  int fast_k_lo, fast_k_last;
  bool fast_outer_major;
  const char* fast_base;  // this thread's fast-path element at k = 0
  int fast_k_bytes;       // bytes between consecutive k in the fast layout (the host keeps ld·8 < 2^31)
  TmaCopy tma_copy;       // how the fast-path steps come (kTma only)
  uint8_t sym_regions;    // kSym, Symmetric operand: bit 0 its stored triangle's whole steps come
                          // directly, bit 1 its mirrored triangle's raw (both spans, not only the
                          // longer one that the fast range covers)

  __device__ __forceinline__ static int km_k() {
    if constexpr (Cfg::kWgmma) return (4 * ((threadIdx.x >> 5) & 1) + ((threadIdx.x >> 1) & 3)) * kLoads;
    else return threadIdx.x / kKMajorPerRow;
  }
  __device__ __forceinline__ static int km_outer() {
    if constexpr (Cfg::kWgmma) return (8 * (threadIdx.x >> 6) + (threadIdx.x & 1) + 2 * ((threadIdx.x >> 3) & 3)) * kVec;
    else return (threadIdx.x % kKMajorPerRow) * kVec;
  }
  __device__ __forceinline__ static int om_outer() { return threadIdx.x / kOuterMajorPerRow; }
  __device__ __forceinline__ static int om_k() { return (threadIdx.x % kOuterMajorPerRow) * kVec; }
  // The raw-tile map (wgmma loop): thread t transposes the 4 outer × 4 k block at outer
  // 32·(t/64) + 4·i, k 4·(i ^ 4·(i mod 2) ^ (t/8 mod 8)), i = t mod 8. In every 8-lane phase the
  // lanes' 16-byte reads of the raw tile (chunk i ^ (k mod 8) of row k of box t/64) and their
  // 16-byte writes of the wgmma tile (chunk k/4 ^ (outer mod 8) of row outer) fall on 8
  // distinct chunk positions — no bank conflicts (checked exhaustively) — and the 256 blocks
  // cover the tile once.
  __device__ __forceinline__ static int raw_outer() { return 32 * (threadIdx.x >> 6) + 4 * (threadIdx.x & 7); }
  __device__ __forceinline__ static int raw_k() {
    const int i = threadIdx.x & 7;
    return 4 * (i ^ (4 * (i & 1)) ^ ((threadIdx.x >> 3) & 7));
  }

  /// has_direct / has_raw: the operand's TMA maps (kTma only; has_raw also says the block's raw
  /// ring is free for this operand).
  __device__ __forceinline__ OperandStager(const OperandView<T>& v, int tile_outer0, int k_begin, int item_k_end,
                                           bool has_direct = false, bool has_raw = false) {
    outer0 = tile_outer0;
    k_end = item_k_end;
    int lo = 0, hi = 0;  // fast for k-steps inside [lo, hi); empty by default
    fast_outer_major = v.layout == Layout::OuterMajor;
    // The whole k-step tile is non-zero for k0 >= outer0 + kTile - 1 (k >= outer everywhere)
    // or for k0 + kKStep <= outer0 + 1 (k <= outer everywhere). A triangular operand whose
    // storage holds its zeros (zeros_stored) is read as it lies across the diagonal too, without
    // masking (the register-staged loops; the wgmma loop's copies have their own rule, kDiag).
    const bool as_stored = !Cfg::kWgmma && v.zeros_stored;
    if (v.vector_ok && outer0 + Cfg::kTile <= v.extent) {
      switch (v.pattern) {
        case Pattern::All: lo = k_begin, hi = k_end; break;
        case Pattern::KAtLeastOuter: lo = as_stored ? k_begin : max(k_begin, outer0 + Cfg::kTile - 1), hi = k_end; break;
        case Pattern::KAtMostOuter: lo = k_begin, hi = as_stored ? k_end : min(k_end, outer0 + 1); break;
        case Pattern::Symmetric: {
          // The longer of the two single-region spans gets the fast path.
          const int upper_lo = max(k_begin, outer0 + Cfg::kTile - 1);  // outer <= k: outer-major
          const int mirrored_hi = min(k_end, outer0 + 1);              // outer > k:  k-major
          fast_outer_major = k_end - upper_lo >= mirrored_hi - k_begin;
          lo = fast_outer_major ? upper_lo : k_begin;
          hi = fast_outer_major ? k_end : mirrored_hi;
          break;
        }
      }
    }
    fast_k_lo = lo;
    fast_k_last = hi - Cfg::kKStep;
    tma_copy = TmaCopy::None;
    if (kTma && fast_k_last >= fast_k_lo) {
      tma_copy = fast_outer_major ? (has_direct ? TmaCopy::Direct : TmaCopy::None)
                                  : (has_raw ? TmaCopy::Raw : TmaCopy::None);
      // A triangular operand copied by TMA takes its diagonal-crossing steps the same way, every
      // whole step of the item: the structural zeros are written after the copy (masked_step).
      if (kDiag && tma_copy != TmaCopy::None &&
          (v.pattern == Pattern::KAtLeastOuter || v.pattern == Pattern::KAtMostOuter)) {
        fast_k_lo = k_begin;
        fast_k_last = k_begin + (item_k_end - k_begin) / Cfg::kKStep * Cfg::kKStep - Cfg::kKStep;
      }
    }
    sym_regions = 0;
    if constexpr (kSym) {
      // The raw ring only where the item starts with a whole mirrored step (they come first).
      if (v.pattern == Pattern::Symmetric && v.vector_ok && outer0 + Cfg::kTile <= v.extent)
        sym_regions = (has_direct ? 1 : 0) |
                      (has_raw && k_begin + Cfg::kKStep <= outer0 && k_begin + Cfg::kKStep <= k_end ? 2 : 0);
    }
    const T* base = fast_outer_major ? v.data + static_cast<int64_t>(outer0 + om_outer()) * v.ld + om_k()
                                     : v.data + static_cast<int64_t>(km_k()) * v.ld + outer0 + km_outer();
    fast_base = reinterpret_cast<const char*>(base);
    fast_k_bytes = static_cast<int>(fast_outer_major ? sizeof(T) : sizeof(T) * v.ld);
  }

  /// Whether the k-step tile at k0 comes by TMA (uniform over the block), directly or raw.
  __device__ __forceinline__ bool by_tma(int k0) const {
    if constexpr (kSym) {
      if (sym_regions != 0) return by_direct_tma(k0) || by_raw_tma(k0);
    }
    return in_tma_range(k0);
  }
  __device__ __forceinline__ bool by_direct_tma(int k0) const {
    if constexpr (kSym) {
      // The whole step lies in the stored triangle (outer <= k everywhere).
      if (sym_regions != 0) return (sym_regions & 1) && k0 >= outer0 + Cfg::kTile - 1 && k0 + Cfg::kKStep <= k_end;
    }
    return in_tma_range(k0) && tma_copy == TmaCopy::Direct;
  }
  __device__ __forceinline__ bool by_raw_tma(int k0) const {
    if constexpr (kSym) {
      // The whole step lies in the mirrored triangle (outer > k everywhere).
      if (sym_regions != 0) return (sym_regions & 2) && k0 + Cfg::kKStep <= outer0 && k0 + Cfg::kKStep <= k_end;
    }
    return in_tma_range(k0) && tma_copy == TmaCopy::Raw;
  }
  // The fast-path steps' copies (every kTma stager but a kSym one's Symmetric operand).
  __device__ __forceinline__ bool in_tma_range(int k0) const {
    if constexpr (!kTma) return false;
    else return tma_copy != TmaCopy::None && k0 >= fast_k_lo && k0 <= fast_k_last;
  }
  __device__ __forceinline__ bool raw() const {
    if constexpr (kSym) {
      if (sym_regions != 0) return (sym_regions & 2) != 0;
    }
    return kTma && tma_copy == TmaCopy::Raw;
  }
  /// Leaves the raw ring to the other operand: the fast-path steps are staged through registers
  /// (the fast range back to the steps inside the structure's non-zero part).
  __device__ __forceinline__ void give_up_raw(const OperandView<T>& v, int k_begin) {
    if (!raw()) return;
    if constexpr (kSym) sym_regions &= ~2;  // (its mirrored steps then staged as before)
    if constexpr (kDiag) *this = OperandStager(v, outer0, k_begin, k_end);
    else tma_copy = TmaCopy::None;
  }

  /// Whether the k-step tile at k0 crosses the operand's diagonal (has structural zeros).
  __device__ __forceinline__ bool masked_step(const OperandView<T>& v, int k0) const {
    return v.pattern == Pattern::KAtLeastOuter   ? k0 < outer0 + Cfg::kTile - 1
           : v.pattern == Pattern::KAtMostOuter ? k0 + Cfg::kKStep - 1 > outer0
                                                 : false;
  }

  // Fetches the k-step tile at k0 (one IMAD.WIDE per fast-path address).
  __device__ __forceinline__ void fetch(const OperandView<T>& v, int k0, StagedTile<Cfg>& staged) const {
    if (by_tma(k0)) return;  // the block's TMA copy brings it
    // A kTma stager keeps the register fast path for k-major operands only (the raw ring is
    // the other operand's); its outer-major fast-path steps always come by TMA.
    if (k0 >= fast_k_lo && k0 <= fast_k_last && (!kTma || !fast_outer_major)) {
      // (A kTma stager addresses from the kernel parameters: two registers fewer to keep.)
      const T* first = kTma ? v.data + static_cast<int64_t>(k0 + km_k()) * v.ld + outer0 + km_outer()
                            : reinterpret_cast<const T*>(fast_base + static_cast<int64_t>(k0) * fast_k_bytes);
      const bool outer_major = !kTma && fast_outer_major;
      const int64_t pass_stride = (outer_major ? kOuterMajorRowsPerPass : kKMajorPassK) * v.ld;
#pragma unroll
      for (int p = 0; p < kLoads; ++p) load_vec_global(first + p * pass_stride, staged.value[p]);
      staged.along_k = outer_major;
    } else {
      fetch_general(v, k0, staged);
    }
  }

  // ---- the FMA loop's fast steps (fma_k_loop): no path logic -------------------------------
  /// Where this thread's fast-path loads of the k-step at k0 start.
  __device__ __forceinline__ const char* fast_address(int k0) const {
    return fast_base + static_cast<int64_t>(k0) * fast_k_bytes;
  }
  /// Bytes between this thread's fast-path loads within one k-step (its passes).
  __device__ __forceinline__ int64_t fast_pass_bytes(const OperandView<T>& v) const {
    return static_cast<int64_t>(fast_outer_major ? kOuterMajorRowsPerPass : kKMajorPassK) * v.ld *
           static_cast<int64_t>(sizeof(T));
  }
  /// Fetches a fast-path k-step tile from fast_address(k0) (the caller keeps k0 in the range).
  __device__ __forceinline__ void fetch_fast(const char* first, int64_t pass_bytes, StagedTile<Cfg>& staged) const {
    static_assert(!kTma, "the FMA loop's fast steps have no TMA copies");
#pragma unroll
    for (int p = 0; p < kLoads; ++p) load_vec_global(reinterpret_cast<const T*>(first + p * pass_bytes), staged.value[p]);
    staged.along_k = fast_outer_major;
  }

  __device__ __forceinline__ void fetch_general(const OperandView<T>& v, int k0, StagedTile<Cfg>& staged) const {
    Layout layout = v.layout;
    bool vector_path = v.vector_ok && outer0 + Cfg::kTile <= v.extent && k0 + Cfg::kKStep <= k_end;
    bool masked = false;
    if (v.pattern == Pattern::Symmetric) {
      if (k0 >= outer0 + Cfg::kTile - 1) {
        layout = Layout::OuterMajor;  // the whole tile lies in the stored upper triangle
      } else if (k0 + Cfg::kKStep - 1 < outer0) {
        layout = Layout::KMajor;  // the whole tile lies in the mirrored part
      } else {
        vector_path = false;  // crosses the diagonal: per element
      }
    } else {
      masked = v.pattern != Pattern::All;
    }
    staged.along_k = vector_path && layout == Layout::OuterMajor;
#pragma unroll
    for (int p = 0; p < kLoads; ++p) {
      T(&value)[kVec] = staged.value[p];
      if (vector_path && layout == Layout::OuterMajor) {
        const int outer = outer0 + om_outer() + p * kOuterMajorRowsPerPass, k = k0 + om_k();
        load_vec_global(v.data + static_cast<int64_t>(outer) * v.ld + k, value);
        if (masked) {
#pragma unroll
          for (int j = 0; j < kVec; ++j)
            if (!pattern_allows(v.pattern, outer, k + j)) value[j] = T(0);
        }
      } else if (vector_path) {
        const int outer = outer0 + km_outer(), k = k0 + km_k() + p * kKMajorPassK;
        load_vec_global(v.data + static_cast<int64_t>(k) * v.ld + outer, value);
        if (masked) {
#pragma unroll
          for (int j = 0; j < kVec; ++j)
            if (!pattern_allows(v.pattern, outer + j, k)) value[j] = T(0);
        }
      } else {  // per element, k-major map
        const int k = k0 + km_k() + p * kKMajorPassK;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const int outer = outer0 + km_outer() + j;
          T element = T(0);
          if (outer < v.extent && k < k_end && pattern_allows(v.pattern, outer, k)) {
            const bool outer_major =
                v.pattern == Pattern::Symmetric ? outer <= k : layout == Layout::OuterMajor;
            element = v.data[outer_major ? static_cast<int64_t>(outer) * v.ld + k
                                         : static_cast<int64_t>(k) * v.ld + outer];
          }
          value[j] = element;
        }
      }
    }
  }

  // Rounds the staged values to TF32 for the tensor cores, so each element is converted once per
  // block, not per use.
  __device__ __forceinline__ static void round_for_tensor_cores(StagedTile<Cfg>& staged) {
    if constexpr (Cfg::kWgmma) {
      // wgmma reads the top 19 bits of each float32 (the low 13 ignored): adding half a TF32
      // ulp first makes that round to nearest, ties away — cvt.rna.tf32.f32 in one integer add
      // instead of three instructions (infinities stay infinite: the carry lands in ignored
      // bits; the TF32 tests measure the same errors as with cvt.rna).
#pragma unroll
      for (int p = 0; p < kLoads; ++p)
#pragma unroll
        for (int j = 0; j < kVec; ++j)
          staged.value[p][j] = __uint_as_float(__float_as_uint(staged.value[p][j]) + 0x1000u);
    } else if constexpr (Cfg::kMma) {
#pragma unroll
      for (int p = 0; p < kLoads; ++p)
#pragma unroll
        for (int j = 0; j < kVec; ++j) staged.value[p][j] = round_to_tf32(staged.value[p][j]);
    }
  }

  // Writes the staged vectors into the shared tile: k-major [kKStep][kStride], or for the wgmma
  // loop outer-major [kTile][kKStep] in the 128-byte swizzle.
  __device__ __forceinline__ static void store(T* tile, StagedTile<Cfg>& staged) {
    round_for_tensor_cores(staged);
    if constexpr (Cfg::kWgmma) {
      store_swizzled(tile, staged, km_outer(), km_k());
    } else if (staged.along_k) {
      // (Rows om_k … om_k + 3 share one swizzle; the passes are a multiple of 32 outers apart.)
      const int outer = om_outer() ^ Cfg::col_swizzle(om_k());
#pragma unroll
      for (int p = 0; p < kLoads; ++p)
#pragma unroll
        for (int j = 0; j < kVec; ++j)
          tile[(om_k() + j) * kStride + outer + p * kOuterMajorRowsPerPass] = staged.value[p][j];
    } else {
#pragma unroll
      for (int p = 0; p < kLoads; ++p) {
        const int k = km_k() + p * kKMajorRowsPerPass;
        store_vec_shared(tile + k * kStride + (km_outer() ^ Cfg::col_swizzle(k)), staged.value[p]);
      }
    }
  }

  /// Stores the tile fetched for k0, unless it comes by TMA: a direct copy is in place already
  /// (on a diagonal-crossing step its structural zeros are written once it has landed: `bar`,
  /// `parity`); a raw copy (ring slot `slot`) is waited for, transposed through registers (masked
  /// on a diagonal-crossing step) and stored.
  __device__ __forceinline__ void store_at(const OperandView<T>& v, int k0, T* tile, StagedTile<Cfg>& staged,
                                           RawRing& ring, int slot, uint64_t* bar, uint32_t parity) const {
    if constexpr (kTma) {
      if (by_tma(k0)) {
        if (kSym ? by_raw_tma(k0) : tma_copy == TmaCopy::Raw) {
          ring.wait(slot);
          load_raw(ring.tile(slot), staged);
          if (kDiag && masked_step(v, k0)) {
#pragma unroll
            for (int p = 0; p < kLoads; ++p)
#pragma unroll
              for (int j = 0; j < kVec; ++j)
                if (!pattern_allows(v.pattern, outer0 + raw_outer() + j, k0 + raw_k() + p)) staged.value[p][j] = T(0);
          }
          round_for_tensor_cores(staged);
          store_swizzled(tile, staged, raw_outer(), raw_k());
        } else if (kDiag && masked_step(v, k0)) {
          mbarrier_wait(bar, parity);
          zero_outside_structure<Cfg>(tile, v.pattern, outer0, k0);
        }
        return;
      }
    }
    store(tile, staged);
  }

  // The raw tile: box q (outer 32q … 32q + 31) of 32 rows of k, each 128 bytes in the 128-byte
  // swizzle: element (k, outer) at q·1024 + k·32 + (((outer mod 32)/4) ^ (k mod 8))·4 + outer mod 4.
  // Reads this thread's block as the k-major fetch does: value[p][j] at k + p, outer + j.
  __device__ __forceinline__ static void load_raw(const T* raw, StagedTile<Cfg>& staged) {
    const int outer = raw_outer(), k = raw_k();
    const T* box = raw + (outer >> 5) * 32 * Cfg::kKStep;
#pragma unroll
    for (int p = 0; p < kLoads; ++p)
      load4_shared(box + (k + p) * 32 + ((((outer & 31) >> 2) ^ ((k + p) & 7)) << 2), staged.value[p]);
    staged.along_k = false;
  }

  __device__ __forceinline__ static T* swizzled_chunk(T* tile, int outer, int k) {
    return wgmma_tile_chunk<Cfg>(tile, outer, k);
  }
  // block_outer, block_k: the thread's block in the k-major case.
  __device__ __forceinline__ static void store_swizzled(T* tile, const StagedTile<Cfg>& staged, int block_outer,
                                                        int block_k) {
    static_assert(kVec == 4 && kLoads == 4, "a 4 × 4 block per thread");
    if (staged.along_k) {  // value[p]: 4 consecutive k at one outer
#pragma unroll
      for (int p = 0; p < kLoads; ++p)
        store_vec_shared(swizzled_chunk(tile, om_outer() + p * kOuterMajorRowsPerPass, om_k()), staged.value[p]);
      return;
    }
    // value[p][j]: k = block_k + p, outer = block_outer + j. Column j of the block is one chunk
    // of row block_outer + j. In the k-major fetch map (km_outer, km_k), a store phase (a
    // quarter warp: l/8 fixed) holds 4 k blocks (kb0 + 0…3, kb0 a multiple of 4) × 2 row
    // parities (l mod 2, so rows mod 8 are j and j + 4): chunk positions (kb0 + d) ^ (j + 4·parity)
    // are 8 distinct, conflict-free; the raw map is conflict-free too (raw_k).
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      T column[4];
#pragma unroll
      for (int p = 0; p < 4; ++p) column[p] = staged.value[p][j];
      store_vec_shared(swizzled_chunk(tile, block_outer + j, block_k), column);
    }
  }
};

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

// The wgmma loop's direct TMA copies of the k-step tiles at k0 (those the stagers say come
// directly), issued by thread 0 and completing on `bar`.
template <class Cfg, class StagerA, class StagerB>
__device__ __forceinline__ void issue_tma(const TmaMaps& maps, const StagerA& stage_a,
                                          const StagerB& stage_b, int k0, float* a_tile, float* b_tile,
                                          uint64_t* bar) {
  const bool a = stage_a.by_direct_tma(k0), b = stage_b.by_direct_tma(k0);
  if (threadIdx.x != 0 || !(a || b)) return;
  mbarrier_arrive_expect_tx(bar, (int(a) + int(b)) * Cfg::kTileBytes);
  if (a) tma_load_tile(a_tile, direct_map<false, Cfg::kTile>(maps, k0, stage_a.outer0), k0, stage_a.outer0, bar);
  if (b) tma_load_tile(b_tile, direct_map<true, Cfg::kTile>(maps, k0, stage_b.outer0), k0, stage_b.outer0, bar);
}

// The raw TMA copy of the k-step tile at k0 of the block's raw operand (at most one), four
// 32 × 32 boxes into ring slot `slot`, issued by thread 0.
template <class Cfg, class StagerA, class StagerB>
__device__ __forceinline__ void issue_raw_tma(const TmaMaps& maps, const StagerA& stage_a, const StagerB& stage_b,
                                              int k0, const RawRing& ring, int slot) {
  const bool a = stage_a.by_raw_tma(k0), b = stage_b.by_raw_tma(k0);
  if (threadIdx.x != 0 || !(a || b)) return;
  const CUtensorMap* map = b ? &maps.b_raw : &maps.a_raw;
  const int outer0 = b ? stage_b.outer0 : stage_a.outer0;
  mbarrier_arrive_expect_tx(ring.bars + slot, Cfg::kTileBytes);
#pragma unroll
  for (int q = 0; q < Cfg::kTile / 32; ++q)
    tma_load_tile(ring.tile(slot) + q * 32 * Cfg::kKStep, map, outer0 + 32 * q, k0, ring.bars + slot);
}

// One k-step's MMAs of this warpgroup as one committed wgmma group: four k8 slices of its rows of
// A (a_base: the A tile plus the warpgroup's 64 rows) by all of B (b_base); a k8 slice is 32 bytes
// further along each 128-byte row.
template <class Cfg>
__device__ __forceinline__ void issue_step_mmas(float (&acc)[Cfg::kPerRow][Cfg::kPerCol], uint32_t a_base,
                                                uint32_t b_base) {
  wgmma_fence_operands(acc);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < Cfg::kKStep; ks += 8)
    wgmma_m64n128k8_tf32(acc, wgmma_descriptor(a_base + ks * sizeof(float)),
                         wgmma_descriptor(b_base + ks * sizeof(float)));
  wgmma_commit();
}

/// One k-step of the mma.sync loops. Per k8 slice: the m16n8k8 fragments of the warp's kWarpRows/16
/// row blocks of A and kWarpCols/8 column blocks of B (fragment layouts of the PTX ISA; lane (g, t)
/// reads A[k = t, t+4][m = g, g+8] and B[k = t, t+4][n = g] from the k-major tiles), then one MMA
/// per pair: TF32 (the bit patterns, rounded when staged) or FP64 (each float32 widened exactly).
template <class Cfg>
__device__ __forceinline__ void mma_sync_step(const float* a_tile, const float* b_tile,
                                              typename Cfg::Acc (&acc)[Cfg::kPerRow][Cfg::kPerCol]) {
  using Acc = typename Cfg::Acc;
  using Frag = std::conditional_t<Cfg::kDmma, double, uint32_t>;
  constexpr int kStride = Cfg::kStride, kRowBlocks = Cfg::kWarpRows / 16, kColBlocks = Cfg::kWarpCols / 8;
  auto frag = [](float x) -> Frag {
    if constexpr (Cfg::kDmma) return static_cast<double>(x);
    else return __float_as_uint(x);
  };
  const int t = threadIdx.x & 3, g = (threadIdx.x & 31) >> 2;
  // Lane (g, t) reads rows k = ks + t and ks + t + 4 at columns x + g, x a multiple of 8: in the
  // swizzled tile (TileConfig::col_swizzle, the same for the 4 rows of each) column
  // (x ^ s) + (g ^ s mod 8), s = col_swizzle(k): a compile-time offset from the lane's base at
  // g or at g ^ 4.
  const int a_rows = Cfg::warp_row() * Cfg::kWarpRows + t * kStride;
  const int b_cols = Cfg::warp_col() * Cfg::kWarpCols + t * kStride;
  const float* a_lane[2] = {a_tile + a_rows + g, a_tile + a_rows + (g ^ 4)};
  const float* b_lane[2] = {b_tile + b_cols + g, b_tile + b_cols + (g ^ 4)};
  // Element (ks + t + 4·h, x + g) of the lane, x a multiple of 8 below 64.
  auto at = [](const float* const (&lane)[2], int ks, int h, int x) {
    const int s = Cfg::col_swizzle(ks + 4 * h);
    return lane[(s & 4) != 0][(ks + 4 * h) * kStride + (x ^ (s & ~7))];
  };
#pragma unroll
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
  const bool below_kept_diagonal = args.mask != OutputMask::Full && warp_row0 > warp_col0 + Cfg::kWarpCols - 1;
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

// =============================================================================================
// The end of a work item: a split tile's chunk stores its partial tile to the workspace and the
// last to arrive sums all of them in chunk order; then alpha, the output mask's zeros and the
// Symmetric mirror are applied as the tile is written to C.
// =============================================================================================

/// The named barrier of the consumer warpgroups of structured_gemm_pipelined_kernel.
constexpr int kConsumerBarrier = 1;

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

/// The k-loop of one work item: stage step 0, then one main_loop_step per k-step. kTmaA / kTmaB:
/// the operand's fast-path steps come by TMA (wgmma loop only); kStages: shared buffers per
/// operand (3: the TMA instance without a raw ring, its direct copies two steps ahead).
template <class Cfg, bool kTmaA, bool kTmaB, int kStages, bool kDiag, bool kSym>
__device__ __forceinline__ void k_loop(const GemmArgs<typename Cfg::Scalar>& args, const GemmWorkItem& item, int row0,
                                       int col0, typename Cfg::Scalar (*a_tiles)[Cfg::kKStep * Cfg::kStride],
                                       typename Cfg::Scalar (*b_tiles)[Cfg::kKStep * Cfg::kStride],
                                       typename Cfg::Acc (&acc)[Cfg::kPerRow][Cfg::kPerCol], const TmaMapsOf<Cfg>& maps,
                                       uint64_t* tma_bars, float* raw_tiles) {
  uint32_t has = 0;  // which TMA maps the kernel has (TmaMaps::has)
  if constexpr (kTmaA || kTmaB) has = maps.has;
  OperandStager<Cfg, kTmaA, kDiag, kSym> stage_a(args.a, row0, item.k_begin, item.k_end, has & kADirect, has & kARaw);
  const OperandStager<Cfg, kTmaB, kDiag, kSym> stage_b(args.b, col0, item.k_begin, item.k_end, has & kBDirect,
                                                        has & kBRaw);
  if (stage_b.raw()) stage_a.give_up_raw(args.a, item.k_begin);  // the block's one raw ring goes to B
  StagedTile<Cfg> staged_a, staged_b;
  RawRing ring{raw_tiles, tma_bars + 2, 0};
  if constexpr (kTmaA || kTmaB) {
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

// The body of one block. kTmaA / kTmaB (wgmma config only): the operand has a TMA map, and
// its outer-major fast-path k-steps come by TMA (one kernel instance per combination, so each
// keeps its registers). kStages = 3 (both operands with direct maps only): the raw ring's
// shared memory is a third buffer per operand.
template <class Cfg, bool kTmaA, bool kTmaB, int kStages = 2, bool kDiag = false, bool kSym = false>
__device__ __forceinline__ void gemm_block(const GemmArgs<typename Cfg::Scalar>& args, const TmaMapsOf<Cfg>& maps) {
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
    if constexpr ((kTmaA || kTmaB) && kStages == 2) raw_tiles = reinterpret_cast<float*>(base + 4 * Cfg::kTileBytes);
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
    if constexpr (kTmaA || kTmaB) {
      if (tid == 0)
        for (int b = 0; b < 4; ++b) mbarrier_init(tma_bars + b, 1);
      __syncthreads();
    }
    k_loop<Cfg, kTmaA, kTmaB, kStages, kDiag, kSym>(args, item, row0, col0, a_tiles, b_tiles, acc, maps, tma_bars,
                                                    raw_tiles);
  }

  write_tile<Cfg>(args, item, row0, col0, acc, last_chunk, tid);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    structured_gemm_kernel(const GemmArgs<typename Cfg::Scalar> args) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // The FP64 MMA configuration runs on sm_90 code only (dmma_usable), and its 69 KB of static
  // shared tiles exceed the 48 KB that the older targets of the default architecture list allow
  // a block's static arrays: their code of it is a trap.
  if constexpr (Cfg::kDmma) {
    __trap();
  } else {
    gemm_block<Cfg, false, false>(args, TmaMapsOf<Cfg>{});
  }
#else
  gemm_block<Cfg, false, false>(args, TmaMapsOf<Cfg>{});
#endif
}

// The wgmma config with TMA copies for A, B or both; the maps are a __grid_constant__
// parameter, as TMA requires (the other kernels keep the parameters they had).
template <class Cfg, bool kTmaA, bool kTmaB, int kStages = 2, bool kDiag = false, bool kSym = false>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    structured_gemm_tma_kernel(const GemmArgs<float> args, const __grid_constant__ TmaMaps maps) {
  gemm_block<Cfg, kTmaA, kTmaB, kStages, kDiag, kSym>(args, maps);
}

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

constexpr int kPipelineStages = 3;
constexpr int kProducerThreads = 32;

/// The ring of the pipelined and register-B kernels in dynamic shared memory, 1024-byte aligned
/// (the 128-byte swizzle's atoms): kPipelineStages tiles of A, then as many of B.
template <class Cfg>
struct PipelineRing {
  float (*a)[Cfg::kKStep * Cfg::kStride];
  float (*b)[Cfg::kKStep * Cfg::kStride];
};
template <class Cfg>
__device__ __forceinline__ PipelineRing<Cfg> pipeline_ring() {
  static_assert(Cfg::kWgmma && kPipelineStages * 2 * Cfg::kTileBytes + 1024 <= Cfg::kDynamicSmemTma,
                "the ring fits the TMA kernels' dynamic shared memory");
  using Tile = float[Cfg::kKStep * Cfg::kStride];
  extern __shared__ __align__(1024) unsigned char dynamic_smem[];
  unsigned char* base = dynamic_smem + ((1024 - (shared_address(dynamic_smem) & 1023)) & 1023);
  return {reinterpret_cast<Tile*>(base), reinterpret_cast<Tile*>(base + kPipelineStages * Cfg::kTileBytes)};
}

// The ring's mbarriers: full[s] completes with the producer's arrive.expect_tx and the copies'
// bytes, empty[s] with one arrival per consumer warpgroup.
__device__ __forceinline__ void init_pipeline_barriers(uint64_t* full, uint64_t* empty) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < kPipelineStages; ++s) {
      mbarrier_init(full + s, 1);
      mbarrier_init(empty + s, 2);
    }
  }
}

// One k-step's copies for the register-B kernel (below): A's direct tile, and B's step as it lies
// (k-major) in the raw tile layout of RawRing — one 3-D box of the column-block map
// (encode_raw_block_map) where maps.has says so, else four 32 × 32 boxes of the raw map. The one
// box halves the copies per step (five to two).
// B's part, 128 columns from col0, also the tall kernel's.
__device__ __forceinline__ void issue_raw_b_step(const TmaMaps& maps, int k0, int col0, float* b_raw, uint64_t* full) {
  constexpr int kKStep = ConfigTf32Wgmma::kKStep;
  if (maps.has & kBRawBlocks) {  // the four boxes as one (column block, k, column) box
    tma_load_box_3d(b_raw, &maps.b_raw, 0, k0, col0 / 32, full);
    return;
  }
#pragma unroll
  for (int q = 0; q < 4; ++q) tma_load_tile(b_raw + q * 32 * kKStep, &maps.b_raw, col0 + 32 * q, k0, full);
}
template <class Cfg>
__device__ __forceinline__ void issue_register_b_step(const TmaMaps& maps, int k0, int row0, int col0, float* a_tile,
                                                      float* b_raw, uint64_t* full) {
  static_assert(Cfg::kTile == 128, "B's raw step: four 32-column boxes");
  mbarrier_arrive_expect_tx(full, 2 * Cfg::kTileBytes);
  tma_load_tile(a_tile, direct_map<false, Cfg::kTile>(maps, k0, row0), k0, row0, full);
  issue_raw_b_step(maps, k0, col0, b_raw, full);
}

// The producer: thread 0 of the warp after the consumer warpgroups.
template <class Cfg>
__device__ __forceinline__ void produce_steps(const TmaMaps& maps, const GemmWorkItem& item, int row0, int col0,
                                              float (*a_tiles)[Cfg::kKStep * Cfg::kStride],
                                              float (*b_tiles)[Cfg::kKStep * Cfg::kStride], uint64_t* full,
                                              uint64_t* empty) {
  int stage = 0, round = 0;
#pragma unroll 1
  for (int k0 = item.k_begin; k0 < item.k_end; k0 += Cfg::kKStep) {
    // From the second round on, the buffer's previous step must have been released.
    if (round > 0) mbarrier_wait(empty + stage, (round - 1) & 1);
    mbarrier_arrive_expect_tx(full + stage, 2 * Cfg::kTileBytes);
    tma_load_tile(a_tiles[stage], direct_map<false, Cfg::kTile>(maps, k0, row0), k0, row0, full + stage);
    tma_load_tile(b_tiles[stage], direct_map<true, Cfg::kTile>(maps, k0, col0), k0, col0, full + stage);
    if (++stage == kPipelineStages) stage = 0, ++round;
  }
}

// The consumers: warpgroup w multiplies rows 64w … 64w + 63 of A by all of B, four k8 slices per
// step.
template <class Cfg>
__device__ __forceinline__ void consume_steps(const GemmArgs<float>& args, const GemmWorkItem& item, int row0,
                                              int col0, float (*a_tiles)[Cfg::kKStep * Cfg::kStride],
                                              float (*b_tiles)[Cfg::kKStep * Cfg::kStride], uint64_t* full,
                                              uint64_t* empty, float (&acc)[Cfg::kPerRow][Cfg::kPerCol]) {
  const uint32_t a_rows = (threadIdx.x >> 7) * 64 * Cfg::kKStep * sizeof(float);
  const bool signals = (threadIdx.x & 127) == 0;  // one arrival per warpgroup on empty[]
  int stage = 0, round = 0, released = -1;
#pragma unroll 1
  for (int k0 = item.k_begin; k0 < item.k_end; k0 += Cfg::kKStep) {
    mbarrier_wait(full + stage, round & 1);
    if (needs_structural_zeros<Cfg>(args.a, row0, k0) || needs_structural_zeros<Cfg>(args.b, col0, k0) ||
        k0 + Cfg::kKStep > item.k_end) {
      zero_outside_structure<Cfg, true>(a_tiles[stage], args.a.pattern, row0, k0, item.k_end);
      zero_outside_structure<Cfg, true>(b_tiles[stage], args.b.pattern, col0, k0, item.k_end);
      fence_shared_for_async_proxy();
      named_barrier_sync(kConsumerBarrier, Cfg::kThreads);
    }
    issue_step_mmas<Cfg>(acc, shared_address(a_tiles[stage]) + a_rows, shared_address(b_tiles[stage]));
    // The previous step's group is complete: its buffer goes back to the producer.
    wgmma_wait_all_but_latest();
    wgmma_fence_operands(acc);
    if (signals && released >= 0) mbarrier_arrive(empty + released);
    released = stage;
    if (++stage == kPipelineStages) stage = 0, ++round;
  }
  wgmma_wait_all();
  wgmma_fence_operands(acc);
}

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
// ptxas serializes the wgmma instructions; at 112, one block per SM (Nsight Compute, 2026-11-24:
// registers are allocated per SM sub-partition, 16384 each, room for four warps of 112, and two
// blocks of nine warps need five on some sub-partition).

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

/// The byte offset of output element (r, c) in consecutive boxes of 32 columns × box_bytes / 128
/// rows in the 128-byte swizzle, as the output maps' TMA stores read them (encode_output_map):
/// 16-byte chunk p of row r of box c / 32 at p ^ (r mod 8).
__device__ __forceinline__ int swizzled_out_offset(int r, int c, int box_bytes) {
  return (c >> 5) * box_bytes + r * 128 + ((((c >> 2) & 7) ^ (r & 7)) << 4) + (c & 3) * 4;
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

/// Zeros one 128 × 32 box of floats (16 KB) in shared memory: 4 of its 16-byte chunks per thread of
/// the register-B kernel's 256.
__device__ __forceinline__ void zero_shared_box(unsigned char* box) {
  static_assert(ConfigTf32WgmmaRegisterB::kTile == 128 && ConfigTf32WgmmaRegisterB::kThreads == 256,
                "one box of 128 × 32 floats, 4 chunks per thread");
  const float zeros[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int c = 0; c < 4; ++c) store_vec_shared(reinterpret_cast<float*>(box + 16 * (threadIdx.x + c * 256)), zeros);
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

/// Keeps the compiler from reusing a wgmma group's A fragment registers before the group is known
/// to be complete (the instruction reads them asynchronously).
__device__ __forceinline__ void keep_fragments(uint32_t (&frag)[2][4]) {
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(frag[s][i])::"memory");
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

/// Loads this thread's A fragments of k8 slices 2·half and 2·half + 1 from the raw tile `raw`,
/// rounded to TF32 (as round_for_tensor_cores does).
__device__ __forceinline__ void load_register_b(const float* raw, const int (&offset)[2][2], int half,
                                                uint32_t (&frag)[2][4]) {
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      frag[s][i] = __float_as_uint(raw[offset[i & 1][i >> 1] + (2 * half + s) * 8 * 32]) + 0x1000u;
}

/// offset[h][kk]: the index in a raw tile of B's k-step (RawRing's layout, four 32 × 32 boxes) of
/// this thread's output column ConfigTf32WgmmaRegisterB::col_base() + 4h at k = t + 4kk of k8
/// slice 0: where its A fragments come from in the register-B and tall kernels.
__device__ __forceinline__ void register_b_offsets(int (&offset)[2][2]) {
  constexpr int kKStep = ConfigTf32Wgmma::kKStep;
  const int t = threadIdx.x & 3, g = (threadIdx.x & 31) >> 2, col = ConfigTf32WgmmaRegisterB::col_base();
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      const int c = col + 4 * h, k = t + 4 * kk;
      offset[h][kk] = (c >> 5) * 32 * kKStep + k * 32 + ((((c & 31) >> 2) ^ k) << 2) + (g & 3);
      // Kept in a register through the loop. Left visible, the offsets were recomputed from
      // threadIdx.x in every k-step: about 45 of the step's 227 instructions (Nsight Compute,
      // docs/structured_gemm.md, "The register-B kernel's offsets").
      asm volatile("" : "+r"(offset[h][kk]));
    }
}

// The consumers of the register-B kernel: one k-step = two groups (half 0: slices 0, 1 from
// fragments f0; half 1: slices 2, 3 from f1). After issuing a group, each warpgroup waits for the
// one before it; after half 0 that is the previous step's last, so its buffer goes back.
template <class Cfg>
__device__ __forceinline__ void consume_steps_register_b(const GemmArgs<float>& args, const TmaMaps& maps,
                                                         const GemmWorkItem& item, int row0, int col0,
                                                         float (*a_tiles)[Cfg::kKStep * Cfg::kStride],
                                                         float (*b_raw)[Cfg::kKStep * Cfg::kStride], uint64_t* full,
                                                         uint64_t* empty, float (&acc)[2][32]) {
  const bool signals = (threadIdx.x & 127) == 0;
  const bool producer = threadIdx.x == 0;
  // The first kPipelineStages − 1 steps' copies; step t + 2's is issued during step t (below).
  if (producer) {
#pragma unroll 1
    for (int s = 0, k0 = item.k_begin; s < kPipelineStages - 1 && k0 < item.k_end; ++s, k0 += Cfg::kKStep)
      issue_register_b_step<Cfg>(maps, k0, row0, col0, a_tiles[s], b_raw[s], full + s);
  }
  if (item.mirror_zeros) store_mirror_zeros(maps, row0, col0, b_raw[kPipelineStages - 1]);
  int ahead_stage = kPipelineStages - 1, ahead_round = 0;  // the buffer of step t + 2
  int offset[2][2];
  register_b_offsets(offset);
  uint32_t f0[2][4] = {}, f1[2][4] = {};
  int stage = 0, round = 0, released = -1;
#pragma unroll 1
  for (int k0 = item.k_begin; k0 < item.k_end; k0 += Cfg::kKStep) {
    mbarrier_wait(full + stage, round & 1);
    const bool ends = k0 + Cfg::kKStep > item.k_end;
    const bool zero_a = needs_structural_zeros<Cfg>(args.a, row0, k0) || ends;
    const bool zero_b = needs_structural_zeros<Cfg>(args.b, col0, k0) || ends;
    if (zero_a || zero_b) {
      if (zero_a) zero_outside_structure<Cfg, true>(a_tiles[stage], args.a.pattern, row0, k0, item.k_end);
      if (zero_b) zero_raw_outside_structure<Cfg>(b_raw[stage], args.b.pattern, col0, k0, item.k_end);
      fence_shared_for_async_proxy();
      named_barrier_sync(kConsumerBarrier, Cfg::kThreads);
    }
    const uint32_t a_tile = shared_address(a_tiles[stage]);
    // Half 0.
    load_register_b(b_raw[stage], offset, 0, f0);
    wgmma_fence_operands(acc);
    wgmma_fence();
    wgmma_m64n128k8_tf32_register_a(acc, f0[0], wgmma_descriptor(a_tile));
    wgmma_m64n128k8_tf32_register_a(acc, f0[1], wgmma_descriptor(a_tile + 8 * sizeof(float)));
    wgmma_commit();
    wgmma_wait_all_but_latest();  // the previous step's half 1: its buffer and f1 are free
    wgmma_fence_operands(acc);
    keep_fragments(f1);
    if (signals && released >= 0) mbarrier_arrive(empty + released);
    released = stage;
    // Step t + 2 goes into the buffer of step t − 1, once both warpgroups have released it.
    const int k_ahead = k0 + (kPipelineStages - 1) * Cfg::kKStep;
    if (producer && k_ahead < item.k_end) {
      if (ahead_round > 0) mbarrier_wait(empty + ahead_stage, (ahead_round - 1) & 1);
      else if (item.mirror_zeros) tma_store_wait_read();  // the mirror's zeros have left b_raw[2]
      issue_register_b_step<Cfg>(maps, k_ahead, row0, col0, a_tiles[ahead_stage], b_raw[ahead_stage],
                                 full + ahead_stage);
    }
    if (++ahead_stage == kPipelineStages) ahead_stage = 0, ++ahead_round;
    // Half 1.
    load_register_b(b_raw[stage], offset, 1, f1);
    wgmma_fence_operands(acc);
    wgmma_fence();
    wgmma_m64n128k8_tf32_register_a(acc, f1[0], wgmma_descriptor(a_tile + 16 * sizeof(float)));
    wgmma_m64n128k8_tf32_register_a(acc, f1[1], wgmma_descriptor(a_tile + 24 * sizeof(float)));
    wgmma_commit();
    wgmma_wait_all_but_latest();  // half 0: f0 is free
    wgmma_fence_operands(acc);
    keep_fragments(f0);
    if (++stage == kPipelineStages) stage = 0, ++round;
  }
  wgmma_wait_all();
  wgmma_fence_operands(acc);
  keep_fragments(f1);
}

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
  write_tile<Cfg, true>(args, item, row0, col0, acc, last_chunk, threadIdx.x);
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
  if (item.k_begin < item.k_end)
    consume_steps_register_b<Cfg>(args, maps, item, row0, col0, a_tiles, b_raw, full, empty, acc);
  float acc_t[Cfg::kPerCol][Cfg::kPerRow];  // the transposed tile's accumulators
#pragma unroll
  for (int i = 0; i < Cfg::kPerRow; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::kPerCol; ++j) acc_t[j][i] = acc[i][j];
  if (maps.has & kCStore) {
    if (item.chunk_count == 2)  // the two chunks meet in C (split_tile_arrive)
      store_tile_by_tma(args, maps, item, row0, col0, acc_t, reinterpret_cast<unsigned char*>(a_tiles),
                        args.counters + item.counter_index);
    else if (gather_split_tile<ConfigTf32WgmmaRegisterB, true>(args, item, acc_t, last_chunk, threadIdx.x))
      store_tile_by_tma(args, maps, item, row0, col0, acc_t, reinterpret_cast<unsigned char*>(a_tiles));
    else if (item.mirror_zeros && threadIdx.x == 0)
      tma_store_wait_read();  // a chunk that leaves the tile to another: its mirror stores have read b_raw[2]
  } else {
    write_tile<ConfigTf32WgmmaRegisterB, true>(args, item, row0, col0, acc_t, last_chunk, threadIdx.x);
  }
}

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
// by a TMA store and a TMA reduction, store_tall_tile, with no partial tile in between). Items with an empty k-range are tiles of zeros, first in their
// block's list (the planner gives each to the least loaded block): thread 0 writes them by TMA
// stores of a zeroed box after the block's other items. A's storage must hold its structural zeros
// (Dense, GemmOperand::zeros_stored, or a relayout copy): no step is zeroed in shared memory. B's
// zeros, where its storage lacks them, are written into its fragments in the steps that cross its
// diagonal (zero_tall_fragments_outside).
// Measured: docs/structured_gemm.md, "The tall kernel".
// =============================================================================================

constexpr int kTallStages = 4;

/// The tall kernel's tile and accumulators: as ConfigTf32WgmmaRegisterB (acc_t[i][j] at output row
/// row_base() + row_offset(i), column col_base() + 4j), with 256 rows.
struct TallConfig : ConfigTf32WgmmaRegisterB {
  static constexpr int kTile = 256, kTileN = 128;  // output rows (A's direct copy), columns (B's raw copy)
  static constexpr int kPerRow = 64;
  static constexpr int kATileBytes = kTile * kKStep * 4, kBTileBytes = kTileN * kKStep * 4;
  // The epilogue's buffer: four boxes of 64 rows × 32 columns of the output map, a quarter of the
  // tile per round (store_tall_tile); its first box, zeroed at the end, the source of the tiles of zeros.
  static constexpr int kOutRows = 64, kOutBoxBytes = kOutRows * 32 * 4, kOutBytes = 4 * kOutBoxBytes;
  static constexpr int kDynamicSmem = kTallStages * (kATileBytes + kBTileBytes) + kOutBytes + 1024;
};
static_assert(TallConfig::kDynamicSmem <= 227 * 1024, "the tall ring fits an H100 block's shared memory");

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

/// The tall kernel's A fragments of one k-step: frag[s] those of k8 slice s, as load_register_b.
__device__ __forceinline__ void load_tall_fragments(const float* raw, const int (&offset)[2][2], uint32_t (&frag)[4][4]) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) frag[s][i] = __float_as_uint(raw[offset[i & 1][i >> 1] + s * 8 * 32]) + 0x1000u;
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

/// keep_fragments for a step's four slices.
__device__ __forceinline__ void keep_tall_fragments(uint32_t (&frag)[4][4]) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(frag[s][i])::"memory");
}

/// kWritesAt: the instance that also writes op(A)ᵀ (`transposed`; the other has no code for it).
template <bool kWritesAt>
__global__ void __launch_bounds__(TallConfig::kThreads, 1)
    structured_gemm_tall_kernel(const GemmArgs<float> args, const __grid_constant__ TmaMaps maps,
                                const int* offsets, const __grid_constant__ TransposedOutput transposed) {
  using Cfg = TallConfig;
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
    KRun writes{};
    if constexpr (kWritesAt) writes = transposed.writes[i];
    auto step = [&](int k0, uint32_t (&frag)[4][4], uint32_t (&other)[4][4]) {
      mbarrier_wait(full + stage, round & 1);
      const uint32_t a_tile = shared_address(a_tiles + stage * kAStage);
      const float* raw = b_raw + stage * kBStage;
      // Before this step's wgmma (the stage goes back only after every warp has issued it): its A
      // tile transposed into the epilogue's buffer, once the stores before have read it, and stored.
      if (kWritesAt && k0 >= writes.begin && k0 < writes.end) {
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
    store_tall_tile(args, maps, item.tile_row * Cfg::kTile, col0, acc_t, out,
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
  // The epilogue's buffer (store_wide_tile): two boxes of 128 rows × 32 columns of the output map,
  // one per round, in turn.
  static constexpr int kOutCols = 32, kOutBoxBytes = kTile * kOutCols * 4, kOutBytes = 2 * kOutBoxBytes;
  static constexpr int kDynamicSmem = kWideStages * (kATileBytes + kBTileBytes) + kOutBytes + 1024;
};
static_assert(WideConfig::kDynamicSmem <= 227 * 1024, "the wide ring fits an H100 block's shared memory");
static_assert(WideConfig::kTile == 128 && WideConfig::kTileN == 256, "tall_costs knows the wide kernel's plans by their tile");

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

__global__ void __launch_bounds__(WideConfig::kThreads + kProducerThreads, 1)
    structured_gemm_wide_kernel(const GemmArgs<float> args, const __grid_constant__ TmaMaps maps, const int* offsets) {
  using Cfg = WideConfig;
  extern __shared__ __align__(1024) unsigned char dynamic_smem[];
  unsigned char* base = dynamic_smem + ((1024 - (shared_address(dynamic_smem) & 1023)) & 1023);
  float* const a_tiles = reinterpret_cast<float*>(base);
  float* const b_tiles = reinterpret_cast<float*>(base + kWideStages * Cfg::kATileBytes);
  unsigned char* const out = base + kWideStages * (Cfg::kATileBytes + Cfg::kBTileBytes);  // store_wide_tile's boxes
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
  int* stored = nullptr;  // thread 0's: the split tile whose stores it has yet to count (store_wide_tile)
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
      store_wide_tile(args, maps, row0, item.tile_col * Cfg::kTileN, acc, out,
                      item.chunk_count > 1 ? args.counters + item.counter_index : nullptr, stored);
    else  // (the plan without split tiles: wide_tile_plan's, WideSplit::Never)
      write_tile<Cfg, true>(args, item, row0, item.tile_col * Cfg::kTileN, acc, last_chunk, threadIdx.x);
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

// =============================================================================================
// Relayout: a k-major or Symmetric operand of a wgmma product copied outer-major first.
//
// The wgmma loop's TF32 tiles must be K-major in shared memory, so its direct TMA copies
// take outer-major operands only; a k-major tile goes through the raw ring and a transposition
// in registers, a Symmetric operand's mirrored part too. Where that costs more than one pass
// over the operand, the launcher first writes out[o·ldo + k] = V(o, k) — the operand as an
// outer-major matrix — and runs the product on the copy. Structural zeros are written near the
// diagonal only (kRelayoutZeroBand): the diagonal-crossing k-steps that read them lie within one
// tile of it; the steps beyond are outside every k-range.
//
// A Symmetric operand whose storage takes direct TMA copies gets a mirror copy: only what the
// product reads from the copy (mirror_copy_holds) — the mirrored triangle and a band above the
// diagonal — while the k-steps wholly in the stored triangle come from the storage (direct_map).
// Otherwise its copy is whole.
constexpr int kRelayoutTile = 32, kRelayoutRows = 8;
constexpr int kRelayoutZeroBand = 256;
// The mirror copy's band: a tile kOuter wide (outer0 a multiple of kOuter, kOuter dividing the
// band) takes its k-steps below k0 = outer0 + kOuter − 1 from the copy, so their columns end
// before the band's end plus one k-step.
constexpr int kMirrorBand = 256;

/// Whether the mirror copy of an n × n Symmetric operand holds the 32 × 32 copy tile at (o0, k0):
/// within the band (every k-step not wholly in the stored triangle, for tiles up to kMirrorBand
/// wide) and the last k-step's columns if that step is partial (the stagers read it element by
/// element from the copy). The band also holds every row of a partial last tile (which the
/// stagers read element by element too): those rows start at e = n − n mod kTile, and the band
/// of their kMirrorBand block ends at e + kTile or later, past n.
__host__ __device__ constexpr bool mirror_copy_holds(int o0, int k0, int n) {
  return k0 < o0 / kMirrorBand * kMirrorBand + kMirrorBand + kRelayoutTile ||
         k0 + kRelayoutTile > n / ConfigTf32Wgmma::kKStep * ConfigTf32Wgmma::kKStep;
}
// A step inside an item's k-range reads structural zeros at most kTile − 1 from the diagonal (the
// k-ranges end at tile edges), which is what lets the pipelined kernel skip zeroing a copy's
// diagonal-crossing steps (OperandView::zeros_stored).
static_assert(kRelayoutZeroBand >= ConfigTf32Wgmma::kTile, "a copy's zeros cover every diagonal-crossing step");
static_assert(kMirrorBand % ConfigTf32Wgmma::kTile == 0 && kMirrorBand % WideConfig::kTileN == 0 &&
                  ConfigTf32Wgmma::kKStep <= kRelayoutTile,
              "a mirror copy holds every k-step that the kernels take from it (direct_map)");

__global__ void __launch_bounds__(kRelayoutTile * kRelayoutRows)
    relayout_outer_major_kernel(const OperandView<float> v, int32_t k_extent, float* out, int64_t ldo,
                                bool mirror_only) {
  __shared__ float tile[kRelayoutTile][kRelayoutTile + 1];
  const int o0 = blockIdx.y * kRelayoutTile, k0 = blockIdx.x * kRelayoutTile;
  const int tx = threadIdx.x, ty = threadIdx.y;
  constexpr int kLast = kRelayoutTile - 1;
  // The tile's distance from the non-zero part (positive: structural zeros only).
  const int zero_distance = v.pattern == Pattern::KAtLeastOuter  ? o0 - (k0 + kLast)
                            : v.pattern == Pattern::KAtMostOuter ? k0 - (o0 + kLast)
                                                                 : 0;
  if (zero_distance >= kRelayoutZeroBand) return;
  if (v.pattern == Pattern::Symmetric && o0 + kLast <= k0) {
    if (mirror_only && !mirror_copy_holds(o0, k0, k_extent)) return;
    // Wholly in the stored triangle: a straight copy, rows along k.
    for (int r = ty; r < kRelayoutTile; r += kRelayoutRows) {
      const int o = o0 + r, k = k0 + tx;
      if (o < v.extent && k < k_extent) out[static_cast<int64_t>(o) * ldo + k] = v.data[static_cast<int64_t>(o) * v.ld + k];
    }
    return;
  }
  // Transposed through shared memory: read along outer (k-major storage), write along k.
  for (int r = ty; r < kRelayoutTile; r += kRelayoutRows) {
    const int o = o0 + tx, k = k0 + r;
    float value = 0.0f;
    if (zero_distance <= 0 && o < v.extent && k < k_extent) {
      if (v.pattern == Pattern::Symmetric) {
        value = v.data[o > k ? static_cast<int64_t>(k) * v.ld + o : static_cast<int64_t>(o) * v.ld + k];
      } else if (pattern_allows(v.pattern, o, k)) {
        value = v.data[static_cast<int64_t>(k) * v.ld + o];
      }
    }
    tile[r][tx] = value;
  }
  __syncthreads();
  for (int r = ty; r < kRelayoutTile; r += kRelayoutRows) {
    const int o = o0 + r, k = k0 + tx;
    if (o < v.extent && k < k_extent) out[static_cast<int64_t>(o) * ldo + k] = tile[tx][r];
  }
}

// The whole copy of a Symmetric operand (the FP64 loop's k-major copies, and an outer-major
// copy that is not a mirror copy: both are the full matrix, a symmetric view being its own
// transpose): out[i·ldo + j] = S[min(i, j)][max(i, j)] for i, j < n. A block takes a pair of
// kSymCopyTile tiles, (bi, bj) and (bj, bi) with bi ≤ bj: it reads tile (bi, bj) of the stored
// upper triangle once and writes it twice, as it lies and transposed (the diagonal tile once,
// its lower half mirrored). relayout_outer_major_kernel, one 32 × 32 tile per block with a
// thread per element, read every stored element twice and ran at 64 % of the memory's peak
// (45 µs per 4096 operand, Nsight Compute, 2026-11-25; docs/structured_gemm.md).
constexpr int kSymCopyTile = 64, kSymCopyThreads = 256;
// Thread t covers rows t / 16 + 16·p (p < 4) and columns 4·(t mod 16) … + 3 of a tile.
constexpr int kSymCopyVecsPerRow = kSymCopyTile / 4, kSymCopyRowsPerPass = kSymCopyThreads / kSymCopyVecsPerRow;

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

// =============================================================================================
// Host planner.
//
// Tile costs are uneven: Upper·Upper tile (i, j) has a k-range of j − i + 1 tiles, so the
// top-right tiles are up to T times heavier than the diagonal ones. Two measures keep every
// SM busy to the end:
//   * heaviest first: the blocks are ordered by cost, so the hardware block scheduler (which
//     dispatches in blockIdx order as slots free up) runs a longest-processing-time-first list
//     schedule — the long tiles start at once and the short ones fill the gaps at the end,
//     instead of a long tile starting last and running alone;
//   * split-K, guided: a tile whose k-range is long compared with the work still to come
//     (remaining work / slots) is cut into chunks, so no single item is much longer than the
//     per-slot average and the last wave ends level. Chunks cost a partial-tile write and a
//     read-back, so the planner evaluates a few split granularities (and none) with a cost
//     model and an LPT simulation of the slots and keeps the cheapest.
// The model's constants are estimates (H100-like); they only rank candidate plans.
// =============================================================================================

namespace {

struct ConfigTraits {
  int tile, k_step, element_bytes;
  double fma_per_sm_cycle;  // FP32 or FP64 lanes per SM
  double efficiency;        // fraction of those lanes the kernel keeps busy (estimate)
  int min_chunk_steps;      // shortest split chunk, in k-steps
  double partial_scale = 1; // the partial-tile round trip of a split chunk, relative to the generic estimate
};

ConfigTraits traits_of(GemmTileConfig config) {
  switch (config) {
    case GemmTileConfig::Float32Large: return {ConfigF32Large::kTile, ConfigF32Large::kKStep, 4, 128, 0.85, 16};
    case GemmTileConfig::Float32Small: return {ConfigF32Small::kTile, ConfigF32Small::kKStep, 4, 128, 0.70, 8};
    // Tensor cores: about 4× the FFMA rate per SM in multiply-adds (an estimate that ranks plans).
    case GemmTileConfig::Float32Tf32: return {ConfigTf32::kTile, ConfigTf32::kKStep, 4, 512, 0.50, 8};
    // wgmma: about 1024 TF32 multiply-adds per SM cycle on H100, of which the loop keeps about
    // 0.3 busy (measured: a 128×128×32 step every ~3400 cycles with two blocks per SM). Its
    // steps are latency-bound, and so is a chunk's partial-tile store and read-back: charged
    // 6× the generic estimate (measured on H100, Upper·Upper TF32: 1×, 3×, 6×, 12× gave 0.236,
    // 0.231, 0.215, 0.214 ms at N = 4096 — no split is 0.215 — while 1024 and 2048 keep their
    // splits, 0.033 and 0.055 ms, and gram at 2048 stays at 0.081 ms up to 6×, 0.094 at 12×).
    case GemmTileConfig::Float32Tf32Wgmma:
      return {ConfigTf32Wgmma::kTile, ConfigTf32Wgmma::kKStep, 4, 1024, 0.30, 8, 6.0};
    case GemmTileConfig::Float64: return {ConfigF64::kTile, ConfigF64::kKStep, 8, 64, 0.85, 16};
    // FP64 tensor cores: 128 multiply-adds per SM cycle on H100, as many as the FFMA lanes. On
    // dense-shaped tiles the loop measured 54 TFLOP/s where the FFMA loop runs at 44.6 (H100,
    // docs/structured_gemm.md "Exact float32 on the FP64 tensor cores"), so on the FFMA configs'
    // scale (0.85) it is charged 0.85 · 54 / 44.6 ≈ 1.0; its partial tiles are float64 (2×).
    case GemmTileConfig::Float32Dmma: return {ConfigF32Dmma::kTile, ConfigF32Dmma::kKStep, 4, 128, 1.0, 16, 2.0};
  }
  return {};
}

struct TileWork {
  int row, col;
  int k_begin, k_end;
  int steps;  // k-steps of the k-range
};

struct CostModel {
  double step_cycles;     // one k-step of one block, with blocks_per_sm sharing the SM
  double fixed_cycles;    // launch latency of a block plus its tile store
  double partial_cycles;  // a chunk's partial store plus its share of the read-back
};

CostModel cost_model(const ConfigTraits& t, int blocks_per_sm) {
  const double tile_bytes = double(t.tile) * t.tile * t.element_bytes;
  CostModel model;
  model.step_cycles = double(t.tile) * t.tile * t.k_step / (t.fma_per_sm_cycle * t.efficiency / blocks_per_sm);
  model.fixed_cycles = 2000.0 + tile_bytes / (32.0 / blocks_per_sm);
  model.partial_cycles = 2.0 * tile_bytes / (64.0 / blocks_per_sm) * t.partial_scale;
  return model;
}

double item_cost(const GemmWorkItem& item, int k_step, const CostModel& model) {
  const int steps = (item.k_end - item.k_begin + k_step - 1) / k_step;
  return steps * model.step_cycles + model.fixed_cycles + (item.chunk_count > 1 ? model.partial_cycles : 0.0);
}

// Makespan of list scheduling in the given order over `slots` equal slots.
double simulate_makespan(const std::vector<GemmWorkItem>& items, int slots, int k_step, const CostModel& model) {
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int s = 0; s < slots; ++s) free_at.push(0.0);
  double makespan = 0;
  for (const GemmWorkItem& item : items) {
    const double start = free_at.top();
    free_at.pop();
    const double end = start + item_cost(item, k_step, model);
    makespan = std::max(makespan, end);
    free_at.push(end);
  }
  return makespan;
}

std::vector<TileWork> enumerate_tiles(const GemmProblem& p, int tile, int k_step, bool heaviest_first) {
  std::vector<TileWork> tiles;
  const int64_t tiles_m = (p.m + tile - 1) / tile, tiles_n = (p.n + tile - 1) / tile;
  for (int64_t ti = 0; ti < tiles_m; ++ti) {
    for (int64_t tj = 0; tj < tiles_n; ++tj) {
      const int64_t row0 = ti * tile, row1 = std::min<int64_t>(row0 + tile, p.m);
      const int64_t col0 = tj * tile, col1 = std::min<int64_t>(col0 + tile, p.n);
      if (p.mask == OutputMask::Symmetric && ti > tj) continue;  // written as the mirror of (tj, ti)
      TileWork w{static_cast<int>(ti), static_cast<int>(tj), 0, 0, 0};
      const bool below_diagonal = p.mask == OutputMask::Upper && row0 >= col1;  // only zeros
      if (!below_diagonal) {
        const KRange range = structured_k_range(p.a.kind, p.b.kind, row0, row1, col0, col1, p.k);
        if (range.end > range.begin) {
          w.k_begin = static_cast<int>(range.begin);
          w.k_end = static_cast<int>(range.end);
          w.steps = static_cast<int>((range.end - range.begin + k_step - 1) / k_step);
        }
      }
      tiles.push_back(w);
    }
  }
  // Heaviest first; ties in raster order (neighbouring tiles share panels in L2).
  if (heaviest_first)
    std::stable_sort(tiles.begin(), tiles.end(), [](const TileWork& x, const TileWork& y) { return x.steps > y.steps; });
  return tiles;
}

// The most chunks a tile is cut into.
constexpr int kMaxChunks = 16;

// Appends tile w as `chunks` items of about equal k-step counts, in k order.
void append_chunks(std::vector<GemmWorkItem>& items, const TileWork& w, int chunks, int k_step) {
  for (int c = 0; c < chunks; ++c) {
    GemmWorkItem item;
    item.tile_row = w.row;
    item.tile_col = w.col;
    const int first_step = static_cast<int>(int64_t(c) * w.steps / chunks);
    const int end_step = static_cast<int>(int64_t(c + 1) * w.steps / chunks);
    item.k_begin = w.k_begin + first_step * k_step;
    item.k_end = c + 1 == chunks ? w.k_end : w.k_begin + end_step * k_step;
    item.chunk = c;
    item.chunk_count = chunks;
    items.push_back(item);
  }
}

// Guided split: a tile is cut into chunks of about granularity·(remaining work)/slots
// k-steps (at least min_chunk_steps); granularity 0 splits nothing.
std::vector<GemmWorkItem> split_tiles(const std::vector<TileWork>& tiles, double granularity, int slots,
                                      const ConfigTraits& t) {
  double remaining = 0;
  for (const TileWork& w : tiles) remaining += w.steps;
  std::vector<GemmWorkItem> items;
  items.reserve(tiles.size());
  for (const TileWork& w : tiles) {
    int chunks = 1;
    if (granularity > 0 && w.steps >= 2 * t.min_chunk_steps) {
      const double target = std::max<double>(t.min_chunk_steps, granularity * remaining / slots);
      chunks = static_cast<int>(std::ceil(w.steps / target));
      chunks = std::min({chunks, kMaxChunks, w.steps / t.min_chunk_steps});
      chunks = std::max(chunks, 1);
    }
    remaining -= w.steps;
    append_chunks(items, w, chunks, t.k_step);
  }
  return items;
}

// Even split: every tile long enough cut into the same number of chunks, as many as fit the
// slots in one wave (`chunks` = slots / non-empty tiles) — for few, equal tiles (the dense-
// shaped products at N ≈ 1024 on 128 tiles) where the guided split leaves a ragged second wave.
std::vector<GemmWorkItem> split_tiles_evenly(const std::vector<TileWork>& tiles, int chunks, const ConfigTraits& t) {
  std::vector<GemmWorkItem> items;
  for (const TileWork& w : tiles)
    append_chunks(items, w, std::max(1, std::min(chunks, w.steps / t.min_chunk_steps)), t.k_step);
  return items;
}

// Capped split: only the tiles longer than the per-slot share of all the work (total k-steps /
// slots, the ideal makespan) are cut, each into as few chunks as bring it under the share — for
// skewed tile costs (Upper·Upper) where a few long tiles set the makespan and the guided split
// would also cut the many short tiles that list scheduling places whole. A candidate of the
// configs other than the wgmma loop's, whose plans split the tiles that would finish late
// instead (split_late_tiles). The mma.sync loop, register-staged throughout, gained from it on
// Upper·Upper's forward and both its gradients (H100, TF32, N = 4096, 2026-11-23: forward
// 0.343–0.344 ms → 0.307–0.311).
std::vector<GemmWorkItem> split_long_tiles(const std::vector<TileWork>& tiles, int slots, const ConfigTraits& t) {
  int64_t total = 0;
  for (const TileWork& w : tiles) total += w.steps;
  const int64_t share = std::max<int64_t>(t.min_chunk_steps, (total + slots - 1) / slots);
  std::vector<GemmWorkItem> items;
  items.reserve(tiles.size());
  for (const TileWork& w : tiles) {
    const int chunks = w.steps > share ? static_cast<int>((w.steps + share - 1) / share) : 1;
    append_chunks(items, w, std::max(1, std::min({chunks, kMaxChunks, w.steps / t.min_chunk_steps})), t.k_step);
  }
  return items;
}

// The plans of the wgmma loop (TF32 on sm_90a, schedule Balanced): the tiles in shared-panel
// order, the ones that would finish late split.
//
// Order. Heaviest first puts tiles of equal cost side by side; where the cost changes along both
// tile axes (Upper·Upper's forward: tile (i, j) runs k ∈ [128i, 128j + 128)) those are the tiles
// of one diagonal, which share no operand panel, so the blocks running at one time read most of
// both operands and their copies miss in L2 (Nsight Compute, 2026-11-24: DRAM reads 112 MB
// against 70 in raster order; a block's k-step 1.05 µs against 0.87 in the order below, timeline
// of 2026-11-25). Tiles that start at the same k of a shared panel read it in step instead, each
// panel step fetched from DRAM once for all of them. So: tiles by first k, heaviest first among
// equal first k, the empty tiles (zeros only) last. For Upper·Upper's forward that is row by
// row; where every tile starts at k = 0 (dB, the products with a Dense operand) it is heaviest
// first; for dA = triu(G·Bᵀ) (column j over k ∈ [128j, n)) column by column.
//
// Split. In that order a row's long tiles start only when the rows before it have been taken,
// so a long tile of a middle row can finish well after the rest (timeline of the Upper·Upper
// forward, 4096, 2026-11-25: tiles (11 … 17, 31), 60 … 84 k-steps, started 49 … 62 µs into a
// 112 µs launch). So list scheduling is simulated in that order, and each tile that would finish
// after `target` cycles is cut into as few chunks as end it by then (at most kMaxChunks, each
// at least min_chunk_steps long); its chunks go together at the tile's place, each to the next
// free slot. plan_in_panel_order tries targets from the mean load per slot up.
std::vector<GemmWorkItem> split_late_tiles(std::vector<TileWork> tiles, int slots, const ConfigTraits& t,
                                           const CostModel& model, double target) {
  std::stable_sort(tiles.begin(), tiles.end(), [](const TileWork& x, const TileWork& y) {
    const bool x_empty = x.steps == 0, y_empty = y.steps == 0;
    if (x_empty != y_empty) return y_empty;
    if (x.k_begin != y.k_begin) return x.k_begin < y.k_begin;
    return x.steps > y.steps;
  });
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int s = 0; s < slots; ++s) free_at.push(0.0);
  std::vector<GemmWorkItem> items;
  items.reserve(tiles.size());
  for (const TileWork& w : tiles) {
    const double start = free_at.top();
    auto cost = [&](int chunks) {
      return double(w.steps) / chunks * model.step_cycles + model.fixed_cycles +
             (chunks > 1 ? model.partial_cycles : 0.0);
    };
    const int most = std::min(kMaxChunks, w.steps / t.min_chunk_steps);
    int chunks = 1;
    while (chunks < most && start + cost(chunks) > target) ++chunks;
    const size_t first = items.size();
    append_chunks(items, w, chunks, t.k_step);
    for (size_t i = first; i < items.size(); ++i) {
      const double at = free_at.top();
      free_at.pop();
      free_at.push(at + item_cost(items[i], t.k_step, model));
    }
  }
  return items;
}

// The wgmma plan (split_late_tiles): unsplit, or split for a target from 1.00 to 1.60 times the
// mean load per slot, whichever the model gives the shortest makespan (a split must win by 2 %).
// Measured against the plans of then (guided, even and capped splits chosen in heaviest-first
// order, the shared-panel order for unsplit plans only): docs/structured_gemm.md, "Late tiles
// split in shared-panel order". Returns the modelled makespan.
double plan_in_panel_order(const std::vector<TileWork>& tiles, int slots, const ConfigTraits& t,
                           const CostModel& model, std::vector<GemmWorkItem>& items) {
  double load = 0;
  for (const TileWork& w : tiles) load += w.steps * model.step_cycles + model.fixed_cycles;
  load /= slots;
  items = split_late_tiles(tiles, slots, t, model, std::numeric_limits<double>::infinity());
  double best = simulate_makespan(items, slots, t.k_step, model);
  for (int percent = 100; percent <= 160; percent += 2) {
    std::vector<GemmWorkItem> split = split_late_tiles(tiles, slots, t, model, load * percent / 100.0);
    const double cycles = simulate_makespan(split, slots, t.k_step, model);
    if (cycles < 0.98 * best) {
      best = cycles;
      items = std::move(split);
    }
  }
  return best;
}



}  // namespace

const char* tile_config_name(GemmTileConfig config) {
  switch (config) {
    case GemmTileConfig::Float32Large: return "Float32Large";
    case GemmTileConfig::Float32Small: return "Float32Small";
    case GemmTileConfig::Float32Tf32: return "Float32Tf32";
    case GemmTileConfig::Float32Tf32Wgmma: return "Float32Tf32Wgmma";
    case GemmTileConfig::Float64: return "Float64";
    case GemmTileConfig::Float32Dmma: return "Float32Dmma";
  }
  return "?";
}

std::string GemmWorkPlan::summary() const {
  std::ostringstream out;
  out << tile_config_name(config) << " (" << tile << "x" << tile << ", BK " << k_step << "): " << items.size()
      << " items on " << slots << " slots, " << split_tiles << " split tiles, estimated balance "
      << (estimated_cycles > 0 ? useful_cycles / estimated_cycles : 1.0);
  return out.str();
}

GemmWorkPlan plan_structured_gemm(const GemmProblem& p, GemmTileConfig config, int slots, int blocks_per_sm,
                                  GemmSchedule schedule) {
  SG_CHECK(slots > 0 && blocks_per_sm > 0, "structured gemm: planning for ", slots, " slots");
  const ConfigTraits t = traits_of(config);
  const CostModel model = cost_model(t, blocks_per_sm);
  const bool heaviest_first = schedule != GemmSchedule::Raster;
  const std::vector<TileWork> tiles = enumerate_tiles(p, t.tile, t.k_step, heaviest_first);

  GemmWorkPlan best;
  best.config = config;
  best.tile = t.tile;
  best.k_step = t.k_step;
  best.slots = slots;
  double best_cycles = -1;
  if (config == GemmTileConfig::Float32Tf32Wgmma && schedule == GemmSchedule::Balanced)
    best_cycles = plan_in_panel_order(tiles, slots, t, model, best.items);
  // The other configs: no split, the guided split at three granularities, the even split that
  // fills one wave and the capped split of the long tiles, each in heaviest-first order.
  enum class Split { Guided, Even, Capped };
  struct Candidate {
    Split split;
    double value;  // Guided: granularity (0: no split); Even: chunks per tile
  };
  std::vector<Candidate> candidates;
  if (best_cycles < 0) candidates.push_back({Split::Guided, 0.0});
  if (best_cycles < 0 && schedule == GemmSchedule::Balanced) {
    for (const double granularity : {4.0, 2.0, 1.0}) candidates.push_back({Split::Guided, granularity});
    const int64_t busy = std::count_if(tiles.begin(), tiles.end(), [](const TileWork& w) { return w.steps > 0; });
    const int chunks = busy > 0 ? static_cast<int>(std::min<int64_t>(kMaxChunks, slots / busy)) : 0;
    if (chunks >= 2) candidates.push_back({Split::Even, double(chunks)});
    candidates.push_back({Split::Capped, 0.0});
  }
  for (const Candidate& candidate : candidates) {
    std::vector<GemmWorkItem> items =
        candidate.split == Split::Guided ? split_tiles(tiles, candidate.value, slots, t)
        : candidate.split == Split::Even ? split_tiles_evenly(tiles, static_cast<int>(candidate.value), t)
                                         : split_long_tiles(tiles, slots, t);
    // Chunks re-sorted among whole tiles; stable keeps a tile's chunks together.
    if (heaviest_first) std::stable_sort(items.begin(), items.end(), [&](const GemmWorkItem& x, const GemmWorkItem& y) {
      return item_cost(x, t.k_step, model) > item_cost(y, t.k_step, model);
    });
    const double cycles = simulate_makespan(items, slots, t.k_step, model);
    if (best_cycles < 0 || cycles < 0.98 * best_cycles) {  // a split must win clearly
      best_cycles = cycles;
      best.items = std::move(items);
    }
  }
  best.estimated_cycles = best_cycles;
  // Where C holds its zeros already (GemmProblem::c_zeros_stored), the tiles wholly below the
  // diagonal are left out of the deal made with them, which otherwise stays as it is: those tiles
  // have no k-steps, so they are never split, and the kernels that run this plan take an item per
  // block. (Planned without them, TF32 Upper·Upper at 2048 took 0.040–0.042 ms against 0.037–0.040
  // with them written: docs/structured_gemm.md, "Every plan leaves them out".)
  if (p.c_zeros_stored && p.mask == OutputMask::Upper) {
    best.items.erase(std::remove_if(best.items.begin(), best.items.end(),
                                    [&](const GemmWorkItem& item) {
                                      const int64_t row0 = int64_t(item.tile_row) * t.tile;
                                      const int64_t col1 = std::min<int64_t>(int64_t(item.tile_col + 1) * t.tile, p.n);
                                      return row0 >= col1;
                                    }),
                     best.items.end());
  }
  double total = 0;
  for (const GemmWorkItem& item : best.items) total += item_cost(item, t.k_step, model);
  best.useful_cycles = total / slots;

  // Arrival counters and workspace slots for the split tiles. After the cost sort a tile's
  // chunks are no longer adjacent (nor in chunk order), so they are found by tile.
  int64_t partial_tiles = 0;
  int split = 0;
  std::map<std::pair<int32_t, int32_t>, std::pair<int32_t, int64_t>> split_slots;  // tile -> counter, partials
  for (GemmWorkItem& item : best.items) {
    if (item.chunk_count == 1) continue;
    const auto [slot, first_seen] =
        split_slots.try_emplace({item.tile_row, item.tile_col}, split, partial_tiles);
    if (first_seen) {
      ++split;
      partial_tiles += item.chunk_count;
    }
    item.counter_index = slot->second.first;
    item.partial_index = static_cast<int32_t>(slot->second.second);
  }
  best.split_tiles = split;
  best.partial_tiles = partial_tiles;
  return best;
}

// The wide kernel's items go in groups of kWideGroupRows tile rows, column by column within a
// group. Its persistent blocks take items i, i + SMs, …, so the items in flight at once are one
// group's rows across about SMs / kWideGroupRows columns: on 132 SMs, 16 A row panels (128 rows
// each) and 8 B column panels (256 columns), which is about the fewest operand bytes for 132
// tiles (rows ≈ 2 × columns). In row-major order they were 4 rows across all 32 column panels at
// N = 8192 (272 MB of panels against 130), and the L2 (50 MB) served fewer of the reads. Measured
// (H100, TF32, 2026-11-24, docs/structured_gemm.md "Grouped order for the wide kernel"):
// 8192: gram 1.85–1.88 → 1.60–1.62 ms, Sym·Sym 4.0–4.3 → 3.3–3.5; 4096: Dense·Sym 0.41 → 0.39;
// 2048 within the spread.
constexpr int kWideGroupRows = 16;

std::vector<GemmWorkItem> wide_tile_items(const GemmProblem& p) {
  constexpr int kRows = WideConfig::kTile, kCols = WideConfig::kTileN;
  const int64_t tile_rows = (p.m + kRows - 1) / kRows, tile_cols = (p.n + kCols - 1) / kCols;
  std::vector<GemmWorkItem> items;
  items.reserve(static_cast<size_t>(tile_rows * tile_cols));
  for (int64_t group0 = 0; group0 < tile_rows; group0 += kWideGroupRows) {
    const int64_t group_rows = std::min<int64_t>(kWideGroupRows, tile_rows - group0);
    for (int64_t j = 0; j < tile_cols; ++j) {
      for (int64_t i = group0; i < group0 + group_rows; ++i) {
        // Wholly below the diagonal: a Symmetric mask's tile is the mirror's, an Upper mask's is
        // zeros (an empty k-range).
        const bool below = i * kRows > std::min(p.n, (j + 1) * kCols) - 1;
        if (below && p.mask == OutputMask::Symmetric) continue;
        GemmWorkItem item;
        item.tile_row = static_cast<int32_t>(i);
        item.tile_col = static_cast<int32_t>(j);
        item.k_begin = 0;
        item.k_end = below && p.mask == OutputMask::Upper ? 0 : static_cast<int32_t>(p.k);
        items.push_back(item);
      }
    }
  }
  return items;
}

// The model's cost of a wide item beyond its k-steps, in k-steps: its epilogue (128 KB of TMA
// stores from the consumers' accumulators, about 2 µs against 0.66 µs per k-step on the H100).
constexpr double kWideItemSteps = 3;
// Auto cuts the last round's tiles only where no block gets more than this many tails. Measured
// (H100, TF32, 2026-11-26; docs/structured_gemm.md, "The wide kernel's last round split"): one
// tail per block (3072) and two (8192) were faster, eight (4096, 116 tiles' tails on 16 blocks)
// slower by 2–7 %, though the model put it 2 % ahead.
constexpr int64_t kWideTailsMost = 2;

WidePlan wide_tile_plan(const GemmProblem& p, int sms, WideSplit split) {
  SG_CHECK(sms > 0, "wide_tile_plan: needs sms > 0, got ", sms);
  const std::vector<GemmWorkItem> tiles = wide_tile_items(p);
  const int64_t count = static_cast<int64_t>(tiles.size());
  const int blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(count, sms)));
  auto steps = [](const GemmWorkItem& item) {
    return std::max<int64_t>(0, (item.k_end - item.k_begin + WideConfig::kKStep - 1) / WideConfig::kKStep);
  };
  // Whole tiles, block b taking tiles b, b + blocks, …: the plan without split tiles.
  WidePlan whole;
  whole.offsets.push_back(0);
  std::vector<double> loads(static_cast<size_t>(blocks), 0.0);
  for (int b = 0; b < blocks; ++b) {
    for (int64_t i = b; i < count; i += blocks) {
      whole.items.push_back(tiles[static_cast<size_t>(i)]);
      loads[static_cast<size_t>(b)] += static_cast<double>(steps(tiles[static_cast<size_t>(i)])) + kWideItemSteps;
    }
    whole.offsets.push_back(static_cast<int32_t>(whole.items.size()));
  }
  whole.makespan = whole.unsplit_makespan = *std::max_element(loads.begin(), loads.end());

  // The last round split: where the tiles leave the last round part empty (rest of them), each of
  // its tiles is cut at k-step c. Block b < rest runs the head [0, c) of tile rounds·blocks + b, as
  // it would have run the whole tile; the tails [c, end) go to the blocks without a tile in that
  // round, dealt in turn. So the heads run together at the same k, as whole rounds do (the L2 serves
  // their operand panels to many blocks at once), and each tile is cut once: two chunks, which
  // meet in C. c balances a head against the most tails a block gets. (A first form laid the
  // last two rounds' k-steps end to end and gave each block an equal share: the blocks then ran at
  // unrelated k, and the L2 no longer held what they shared; 4096 took 1.8 times as long.)
  const int64_t rounds = count / blocks, rest = count % blocks;
  const bool same_range = count > 0 && std::all_of(tiles.begin(), tiles.end(), [&](const GemmWorkItem& t) {
    return t.k_begin == tiles[0].k_begin && t.k_end == tiles[0].k_end && t.k_end > t.k_begin;
  });
  const int64_t k_steps = count > 0 ? steps(tiles[0]) : 0;
  if (split == WideSplit::Never || !same_range || rest == 0 || rounds < 1 || k_steps < 2) return whole;
  const int64_t tails_most = (rest + (blocks - rest) - 1) / (blocks - rest);
  if (split == WideSplit::Auto && tails_most > kWideTailsMost) return whole;
  int64_t cut = 1;
  double last_round = std::numeric_limits<double>::infinity();
  for (int64_t c = 1; c < k_steps; ++c) {
    const double load = std::max(static_cast<double>(c) + kWideItemSteps,
                                 static_cast<double>(tails_most) * (static_cast<double>(k_steps - c) + kWideItemSteps));
    if (load < last_round) last_round = load, cut = c;
  }
  WidePlan plan;
  plan.unsplit_makespan = whole.makespan;
  plan.split_tiles = static_cast<int>(rest);
  plan.makespan = static_cast<double>(rounds) * (static_cast<double>(k_steps) + kWideItemSteps) + last_round;
  plan.offsets.push_back(0);
  const int32_t k_cut = static_cast<int32_t>(tiles[0].k_begin + cut * WideConfig::kKStep);
  for (int b = 0; b < blocks; ++b) {
    for (int64_t i = b; i < rounds * blocks; i += blocks) plan.items.push_back(tiles[static_cast<size_t>(i)]);
    auto chunk = [&](int64_t j, int part) {  // part 0 of tile rounds·blocks + j: its head; 1: its tail
      GemmWorkItem item = tiles[static_cast<size_t>(rounds * blocks + j)];
      (part == 0 ? item.k_end : item.k_begin) = k_cut;
      item.chunk = part;
      item.chunk_count = 2;
      item.counter_index = static_cast<int32_t>(j);
      plan.items.push_back(item);
    };
    if (b < rest) chunk(b, 0);
    else
      for (int64_t j = b - rest; j < rest; j += blocks - rest) chunk(j, 1);
    plan.offsets.push_back(static_cast<int32_t>(plan.items.size()));
  }
  // Auto: where the model's makespan is at least 2 % shorter for it, as the other planners' splits.
  if (split == WideSplit::Auto && plan.makespan > 0.98 * whole.makespan) return whole;
  return plan;
}

std::vector<GemmWorkItem> items_with_mirror_zeros(const GemmProblem& p, const GemmWorkPlan& plan) {
  SG_CHECK(p.mask == OutputMask::Upper && p.m == p.n,
           "items_with_mirror_zeros: needs a square product under an Upper mask, got ", p.m, "x", p.n);
  std::vector<GemmWorkItem> items;
  items.reserve(plan.items.size());
  for (const GemmWorkItem& item : plan.items) {
    // Square tiles on a square grid: tile (i, j) lies wholly below the diagonal exactly where i > j.
    if (item.tile_row > item.tile_col) {
      SG_CHECK(item.k_begin >= item.k_end, "items_with_mirror_zeros: tile (", item.tile_row, ", ", item.tile_col,
               ") below the diagonal has a k-range");
      continue;
    }
    items.push_back(item);
    // The mirror tile lies wholly below the diagonal: where C holds its zeros already, it stays as it is.
    items.back().mirror_zeros = item.tile_row < item.tile_col && item.chunk == 0 && !p.c_zeros_stored;
  }
  return items;
}

namespace {

double tall_item_cost(const GemmWorkItem& t, const TallCosts& costs) {
  constexpr int kStep = TallConfig::kKStep;
  return (t.k_end - t.k_begin + kStep - 1) / kStep + costs.item + (t.chunk_count > 1 ? costs.chunk : 0.0);
}

/// A tile cut into two chunks at `k_split`: chunk 0 the lower k, chunk 1 the rest, sharing arrival
/// counter `counter`.
std::pair<GemmWorkItem, GemmWorkItem> tall_chunks(GemmWorkItem t, int k_split, int counter) {
  t.chunk_count = 2;
  t.counter_index = counter;
  GemmWorkItem second = t;
  t.k_end = second.k_begin = k_split;
  second.chunk = 1;
  return {t, second};
}

/// The tiles with a k-range dealt in shared-panel order, each to the least loaded block (ties: the
/// lowest index): by the first k of the tile, heaviest first among equal first k, ties in raster
/// order. So the blocks start together the tiles that read one operand panel from the same k (for
/// Upper·Upper, one tile row), and read it in step; heaviest first alone starts the tiles of one
/// diagonal together, which share no panel (docs/structured_gemm.md, "The tall deal in
/// shared-panel order"). Where every tile starts at the same k (Dense·Upper) or the first k rises
/// as the cost falls (Upper·Dense), the order is heaviest first.
/// Two ways to cut a tile in two chunks: a tile longer than `cap` k-steps is halved before the deal
/// (both chunks at the tile's place in the order); a tile that would take its block's load past
/// `target` is cut where the block reaches it, the second chunk going to the next least loaded
/// block. Returns the model's makespan.
/// `cost`: an item's load (tall_item_cost, plus its transposed writes in a writing plan); `costs`:
/// the plan's (tall_costs).
template <class Cost>
double deal_tall_tiles(const std::vector<GemmWorkItem>& tiles, int sms, double cap, double target, const Cost& cost,
                       const TallCosts& costs, std::vector<std::vector<GemmWorkItem>>& per_block, int& split_tiles) {
  constexpr int kStep = TallConfig::kKStep;
  constexpr int kMinChunkSteps = 8;
  auto steps_of = [](const GemmWorkItem& t) { return (t.k_end - t.k_begin + kStep - 1) / kStep; };
  struct Dealt {
    int32_t first_k;  // the tile's (for a halved tile's chunks, the first chunk's)
    GemmWorkItem item;
  };
  std::vector<Dealt> items;
  split_tiles = 0;
  for (const GemmWorkItem& t : tiles) {
    const int steps = steps_of(t);
    if (steps < 2 || steps <= cap) {
      items.push_back({t.k_begin, t});
      continue;
    }
    const auto [first, second] = tall_chunks(t, t.k_begin + steps / 2 * kStep, split_tiles++);
    items.push_back({t.k_begin, first});
    items.push_back({t.k_begin, second});
  }
  std::stable_sort(items.begin(), items.end(), [&](const Dealt& x, const Dealt& y) {
    if (x.first_k != y.first_k) return x.first_k < y.first_k;
    return cost(x.item) > cost(y.item);
  });
  using Slot = std::pair<double, int>;
  std::priority_queue<Slot, std::vector<Slot>, std::greater<Slot>> slots;
  for (int b = 0; b < sms; ++b) slots.push({0.0, b});
  double makespan = 0;
  auto place = [&](const GemmWorkItem& t) {
    Slot slot = slots.top();
    slots.pop();
    per_block[static_cast<size_t>(slot.second)].push_back(t);
    slot.first += cost(t);
    makespan = std::max(makespan, slot.first);
    slots.push(slot);
  };
  for (const Dealt& dealt : items) {
    const GemmWorkItem& t = dealt.item;
    const int steps = steps_of(t);
    const double load = slots.top().first;
    const int room = static_cast<int>(std::min<double>(target - load - costs.item - costs.chunk, steps));
    if (t.chunk_count > 1 || load + cost(t) <= target || room < kMinChunkSteps ||
        steps - room < kMinChunkSteps) {
      place(t);
      continue;
    }
    const auto [first, second] = tall_chunks(t, t.k_begin + room * kStep, split_tiles++);
    place(first);
    place(second);
  }
  return makespan;
}

/// The k-steps of A that each tile with a k-range writes transposed where the launch writes op(A)ᵀ
/// (GemmProblem::at_buffer): per tile, [begin, end) in k, keyed by (tile row, tile column). A tile
/// row's tiles share its k-steps of A; each step must be written once, by a tile whose k-range
/// holds it. Each tile writes one run of steps, the runs laid end to end in the order of the tiles'
/// k-ranges (by first k, then last), their lengths in proportion to the tiles' k-steps, so that a
/// block's share of the writes follows its share of the steps (a writing step costs a block about
/// two and a half: docs/structured_gemm.md, "Writes dealt with the steps"). Where the runs cannot lie
/// so (a tile row whose k-ranges leave no such order), each step goes to the tile whose columns hold
/// its k, as the kernel's first form wrote them.
std::map<std::pair<int32_t, int32_t>, KRun> transposed_write_runs(const std::vector<GemmWorkItem>& tiles,
                                                                  int cols) {
  constexpr int kStep = TallConfig::kKStep;
  std::map<int32_t, std::vector<GemmWorkItem>> rows;
  for (const GemmWorkItem& t : tiles) rows[t.tile_row].push_back(t);
  std::map<std::pair<int32_t, int32_t>, KRun> runs;
  for (auto& [row, row_tiles] : rows) {
    std::sort(row_tiles.begin(), row_tiles.end(), [](const GemmWorkItem& x, const GemmWorkItem& y) {
      return x.k_begin != y.k_begin ? x.k_begin < y.k_begin : x.k_end < y.k_end;
    });
    const int32_t lo = row_tiles.front().k_begin;
    int32_t hi = lo;
    double total = 0;
    for (const GemmWorkItem& t : row_tiles) {
      hi = std::max(hi, t.k_end);
      total += (t.k_end - t.k_begin + kStep - 1) / kStep;
    }
    const int32_t steps = (hi - lo + kStep - 1) / kStep;
    std::vector<KRun> cut(row_tiles.size());
    bool fits = true;
    double done = 0;
    int32_t x = lo;
    for (size_t i = 0; i < row_tiles.size(); ++i) {
      const GemmWorkItem& t = row_tiles[i];
      done += (t.k_end - t.k_begin + kStep - 1) / kStep;
      int32_t next = i + 1 == row_tiles.size() ? hi : lo + kStep * static_cast<int32_t>(std::lround(steps * done / total));
      if (i + 1 < row_tiles.size()) next = std::max(next, row_tiles[i + 1].k_begin);  // no gap before the next
      next = std::min(std::max(next, x), hi);
      fits = fits && (next == x || (x >= t.k_begin && next <= t.k_end));
      cut[i] = {x, next};
      x = next;
    }
    for (size_t i = 0; i < row_tiles.size(); ++i) {
      const GemmWorkItem& t = row_tiles[i];
      const int32_t col0 = t.tile_col * cols;
      runs[{row, t.tile_col}] = fits ? cut[i] : KRun{std::max(col0, t.k_begin), std::min(col0 + cols, t.k_end)};
    }
  }
  return runs;
}

}  // namespace

TallPlan tall_tile_plan(const GemmProblem& p, int sms, int rows, int cols, double write_cost) {
  SG_CHECK(sms > 0 && p.mask != OutputMask::Symmetric && rows > 0 && cols > 0,
           "tall_tile_plan: needs sms > 0, tiles and a mask other than Symmetric");
  const int64_t tile_rows = (p.m + rows - 1) / rows, tile_cols = (p.n + cols - 1) / cols;
  std::vector<GemmWorkItem> tiles, zeros;
  for (int64_t i = 0; i < tile_rows; ++i) {
    for (int64_t j = 0; j < tile_cols; ++j) {
      const int64_t row0 = i * rows, row1 = std::min<int64_t>(row0 + rows, p.m);
      const int64_t col0 = j * cols, col1 = std::min<int64_t>(col0 + cols, p.n);
      const KRange range = p.mask == OutputMask::Upper && row0 >= col1
                               ? KRange{0, 0}  // only zeros
                               : structured_k_range(p.a.kind, p.b.kind, row0, row1, col0, col1, p.k);
      GemmWorkItem item;
      item.tile_row = static_cast<int32_t>(i);
      item.tile_col = static_cast<int32_t>(j);
      if (range.end > range.begin) {
        item.k_begin = static_cast<int32_t>(range.begin);
        item.k_end = static_cast<int32_t>(range.end);
      }
      if (range.end > range.begin)
        tiles.push_back(item);
      else if (!(p.c_zeros_stored && p.mask == OutputMask::Upper && row0 >= col1))
        zeros.push_back(item);  // C's zeros below the diagonal, where it holds them already, stay as they are
    }
  }
  TallPlan plan;
  plan.compute_tiles = static_cast<int64_t>(tiles.size());
  const TallCosts& costs = tall_costs(rows, cols);
  // Each tile's run of transposed writes; in a writing plan (write_cost > 0) an item's load counts
  // the steps of its run in its k-range, write_cost each on top.
  const auto runs = transposed_write_runs(tiles, cols);
  auto writes_of = [&](const GemmWorkItem& t) {
    const auto run = runs.find({t.tile_row, t.tile_col});
    if (run == runs.end()) return KRun{};
    const int32_t begin = std::max(run->second.begin, t.k_begin), end = std::min(run->second.end, t.k_end);
    return KRun{begin, std::max(begin, end)};
  };
  auto cost = [&](const GemmWorkItem& t) {
    if (write_cost == 0) return tall_item_cost(t, costs);
    const KRun w = writes_of(t);
    return tall_item_cost(t, costs) + write_cost * ((w.end - w.begin + TallConfig::kKStep - 1) / TallConfig::kKStep);
  };
  for (const GemmWorkItem& t : tiles) plan.mean_load += cost(t) / sms;
  // Whichever candidate the model gives the shortest makespan, ties to the fewest split tiles; a
  // split must win by 2 % over the unsplit deal (the first candidate).
  std::vector<std::vector<GemmWorkItem>> per_block;
  plan.makespan = std::numeric_limits<double>::infinity();
  double unsplit = plan.makespan;
  // Candidates: unsplit; the tiles longer than 1, 0.8 or 0.6 of the mean load halved; or each tile
  // that would take its block past a target (1 … 1.3 of the mean load, in steps of 0.01) cut where
  // the block reaches it (written as the target's negative fraction). In shared-panel order the
  // long tiles of a late panel need the higher targets (Upper·Upper at 3072: 1.15).
  std::vector<double> fractions{0.0, 1.0, 0.8, 0.6};
  for (int percent = 100; percent <= 130; ++percent) fractions.push_back(-percent / 100.0);
  for (const double fraction : fractions) {
    constexpr double kNone = std::numeric_limits<double>::infinity();
    const double cap = fraction > 0 ? fraction * plan.mean_load : kNone;
    const double target = fraction < 0 ? -fraction * plan.mean_load : kNone;
    std::vector<std::vector<GemmWorkItem>> blocks(static_cast<size_t>(sms));
    int split = 0;
    const double makespan = deal_tall_tiles(tiles, sms, cap, target, cost, costs, blocks, split);
    if (per_block.empty()) unsplit = makespan;  // the first candidate
    const bool better = makespan < plan.makespan || (makespan == plan.makespan && split < plan.split_tiles);
    if (per_block.empty() || (better && makespan < 0.98 * unsplit)) {
      plan.makespan = makespan;
      plan.split_tiles = split;
      per_block = std::move(blocks);
    }
  }
  // The tiles of zeros, each to the least loaded block (ties: the lowest index). They head its list,
  // and the kernel stores them after the block's other items.
  std::vector<double> loads;
  for (const auto& block : per_block) {
    loads.push_back(0.0);
    for (const GemmWorkItem& t : block) loads.back() += cost(t);
  }
  std::vector<std::vector<GemmWorkItem>> block_zeros(per_block.size());
  for (const GemmWorkItem& z : zeros) {
    const size_t b = static_cast<size_t>(std::min_element(loads.begin(), loads.end()) - loads.begin());
    block_zeros[b].push_back(z);
    loads[b] += costs.zero;
  }
  plan.offsets.reserve(static_cast<size_t>(sms) + 1);
  for (size_t b = 0; b < per_block.size(); ++b) {
    plan.offsets.push_back(static_cast<int32_t>(plan.items.size()));
    plan.items.insert(plan.items.end(), block_zeros[b].begin(), block_zeros[b].end());
    plan.items.insert(plan.items.end(), per_block[b].begin(), per_block[b].end());
  }
  plan.offsets.push_back(static_cast<int32_t>(plan.items.size()));
  // Each item's part of its tile's run of transposed writes (a chunk: the part in its k-range).
  plan.transposed_writes.reserve(plan.items.size());
  for (const GemmWorkItem& t : plan.items) plan.transposed_writes.push_back(writes_of(t));
  return plan;
}

// =============================================================================================
// Launcher: plan cache, workspace, launch.
// =============================================================================================

namespace {

template <class Cfg>
int blocks_per_sm_of() {
  // Dynamic shared memory over 48 KB needs the kernel's limit raised (per device; the plan of
  // every problem is built, on its device, before its first launch).
  int blocks = 0;
  if constexpr (Cfg::kDynamicSmem > 0) {
    SG_CUDA_CHECK(cudaFuncSetAttribute(structured_gemm_kernel<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       Cfg::kDynamicSmem));
    for (const void* kernel : {reinterpret_cast<const void*>(structured_gemm_tma_kernel<Cfg, true, false>),
                               reinterpret_cast<const void*>(structured_gemm_tma_kernel<Cfg, false, true>),
                               reinterpret_cast<const void*>(structured_gemm_tma_kernel<Cfg, true, true>),
                               reinterpret_cast<const void*>(structured_gemm_tma_kernel<Cfg, true, true, 3>),
                               reinterpret_cast<const void*>(structured_gemm_tma_kernel<Cfg, true, true, 2, true>),
                               reinterpret_cast<const void*>(structured_gemm_tma_kernel<Cfg, true, true, 3, true>),
                               reinterpret_cast<const void*>(structured_gemm_tma_kernel<Cfg, true, true, 2, false, true>),
                               reinterpret_cast<const void*>(structured_gemm_pipelined_kernel<Cfg>)}) {
      SG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kDynamicSmemTma));
      // The plan's slots: the fewest blocks per SM of any of the config's kernels.
      const bool pipelined = kernel == reinterpret_cast<const void*>(structured_gemm_pipelined_kernel<Cfg>);
      int tma_blocks = 0;
      SG_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &tma_blocks, kernel, Cfg::kThreads + (pipelined ? kProducerThreads : 0), Cfg::kDynamicSmemTma));
      blocks = blocks == 0 ? tma_blocks : std::min(blocks, tma_blocks);
    }
  }
  if constexpr (Cfg::kWgmma) {
    // The register-B kernel: two warpgroups, no producer warp.
    SG_CUDA_CHECK(cudaFuncSetAttribute(structured_gemm_register_b_kernel<Cfg>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kDynamicSmemTma));
    int register_b_blocks = 0;
    SG_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &register_b_blocks, structured_gemm_register_b_kernel<Cfg>, Cfg::kThreads, Cfg::kDynamicSmemTma));
    blocks = blocks == 0 ? register_b_blocks : std::min(blocks, register_b_blocks);
  }
  if constexpr (std::is_same<Cfg, ConfigTf32Wgmma>::value) {  // the wide and tall kernels run from the same plans
    SG_CUDA_CHECK(cudaFuncSetAttribute(structured_gemm_wide_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       WideConfig::kDynamicSmem));
    for (auto kernel : {structured_gemm_tall_kernel<false>, structured_gemm_tall_kernel<true>})
      SG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, TallConfig::kDynamicSmem));
  }
  int plain_blocks = 0;
  SG_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&plain_blocks, structured_gemm_kernel<Cfg>, Cfg::kThreads,
                                                              Cfg::kDynamicSmem));
  blocks = blocks == 0 ? plain_blocks : std::min(blocks, plain_blocks);
  SG_CHECK(blocks > 0, "structured gemm: the kernel cannot be resident on this device");
  return blocks;
}

int blocks_per_sm(GemmTileConfig config) {
  switch (config) {
    case GemmTileConfig::Float32Large: return blocks_per_sm_of<ConfigF32Large>();
    case GemmTileConfig::Float32Small: return blocks_per_sm_of<ConfigF32Small>();
    case GemmTileConfig::Float32Tf32: return blocks_per_sm_of<ConfigTf32>();
    case GemmTileConfig::Float32Tf32Wgmma: return blocks_per_sm_of<ConfigTf32Wgmma>();
    case GemmTileConfig::Float64: return blocks_per_sm_of<ConfigF64>();
    case GemmTileConfig::Float32Dmma: return blocks_per_sm_of<ConfigF32Dmma>();
  }
  return 1;
}

// The plan depends on sizes, kinds, transposition (the k-ranges), mask,
// dtype, device and schedule — not on pointers or alpha, so products of one shape share an entry.
using PlanKey = std::tuple<int64_t, int64_t, int64_t, int, int, int, int, int, int, int, int>;

std::atomic<int> current_schedule{static_cast<int>(GemmSchedule::Balanced)};
std::atomic<int> current_tf32_loop{static_cast<int>(Tf32Loop::Auto)};
std::atomic<int> current_relayout{static_cast<int>(OperandRelayout::Auto)};
std::atomic<int64_t> relayout_copy_count{0};
std::atomic<int64_t> mirror_copy_count{0};
std::atomic<bool> poison_relayout{false};
std::atomic<int64_t> pipelined_launch_count{0};
std::atomic<int> current_register_b{static_cast<int>(RegisterB::Auto)};
std::atomic<int64_t> register_b_launch_count{0};
std::atomic<int64_t> raw_block_map_launch_count{0};
std::atomic<int64_t> tma_store_launch_count{0};
std::atomic<int64_t> mirror_zero_launch_count{0};
std::atomic<int> current_wide_tiles{static_cast<int>(WideTiles::Auto)};
std::atomic<int> current_fp32_loop{static_cast<int>(Fp32Loop::Auto)};
std::atomic<int64_t> dmma_launch_count{0};
std::atomic<int64_t> wide_launch_count{0};
std::atomic<int64_t> wide_structured_launch_count{0};
std::atomic<bool> current_wide_tma_store{true};
std::atomic<int64_t> wide_tma_store_launch_count{0};
std::atomic<int> current_wide_split{static_cast<int>(WideSplit::Auto)};
std::atomic<int64_t> wide_split_launch_count{0};
std::atomic<int> current_tall_tiles{static_cast<int>(TallTiles::Auto)};
std::atomic<int64_t> tall_launch_count{0};
std::atomic<bool> transposed_a_output_on{true};
std::atomic<int64_t> transposed_a_output_count{0};
std::atomic<bool> dependent_launch_on{true};

/// Launches `kernel` as the stream's next kernel with programmatic stream serialization where
/// set_dependent_launch is on (the tall and wide kernels, which wait for the grid before them
/// before they touch global memory: wait_for_previous_grid), otherwise as an ordinary launch. The
/// launch may then begin when the kernel before it has no blocks left, before it completes.
template <class... Params, class... Args>
void launch_after_previous(void (*kernel)(Params...), unsigned grid, unsigned threads, size_t shared_bytes, int device,
                           const char* name, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream(device);
  config.attrs = &attribute;
  config.numAttrs = dependent_launch_on.load() ? 1 : 0;
  // A failed launch's error is also the last error, which the check reports with the kernel's name.
  (void)cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  SG_CUDA_CHECK_LAUNCH(name);
}

/// Whether product `p` has the tall kernel's shape (its plan gets a tall schedule): the
/// register-B kernel's (A not transposed, so outer-major; B not transposed, so k-major; neither
/// Symmetric; one of them Upper or Lower), a mask other than Symmetric (the tiles go out by TMA
/// stores), and at least one whole tile row.
bool tall_shape(const GemmProblem& p) {
  const bool dense_dense = p.a.kind == OperandKind::Dense && p.b.kind == OperandKind::Dense;
  return p.mask != OutputMask::Symmetric && p.a.kind != OperandKind::Symmetric &&
         p.b.kind != OperandKind::Symmetric && !p.a.trans && !p.b.trans &&
         (is_triangular(p.a.kind) || is_triangular(p.b.kind) || dense_dense) && p.m >= TallConfig::kTile;
}

/// Whether product `p` has the shape of the wide kernel's structured products (its plan gets their
/// schedule): both operands outer-major (A not transposed, B transposed), neither Symmetric, one
/// of them Upper or Lower (dA = triu(G·Bᵀ) and its kin), a mask other than Symmetric (the tiles go
/// out by TMA stores), and at least one whole tile row.
bool wide_structured_shape(const GemmProblem& p) {
  return p.mask != OutputMask::Symmetric && p.a.kind != OperandKind::Symmetric &&
         p.b.kind != OperandKind::Symmetric && !p.a.trans && p.b.trans &&
         (is_triangular(p.a.kind) || is_triangular(p.b.kind)) && p.m >= WideConfig::kTile;
}

/// Whether `loop` is the wgmma loop with every kind of TMA copy (direct, raw, diagonal-crossing,
/// both Symmetric triangles) and relayout: the default, and its ablation without the pipelined
/// kernel.
bool full_tma(Tf32Loop loop) { return loop == Tf32Loop::Auto || loop == Tf32Loop::WgmmaBarrierPerStep; }

/// A BlockPlan in the device table (cached_plan): its items, its offsets and its arrival counters
/// (zeroed, and 0 again after each launch); null where the plan has none.
struct DeviceBlockPlan {
  const GemmWorkItem* items = nullptr;
  const int* offsets = nullptr;
  int* counters = nullptr;
};

struct CachedPlan {
  GemmWorkPlan plan;
  std::unique_ptr<Storage> device_table;  // every item list, offsets and counters below (cached_plan)
  const GemmWorkItem* items = nullptr;
  int* counters = nullptr;
  // The wide kernel's tile count (wide_tile_items), for wgmma products whose operands are both
  // outer-major Dense; 0 otherwise. Its schedules (wide_tile_plan): `wide_split` with the split
  // setting's last round cut in k (run where C takes TMA stores), `wide_whole` without; the second
  // is left empty where the first has no split tile.
  size_t wide_tiles = 0;
  WidePlan wide_split, wide_whole;
  DeviceBlockPlan wide_split_on_device, wide_whole_on_device;
  // The wide kernel's schedule of a structured product (wide_structured_shape): tall_tile_plan's
  // deal in shared-panel order with 128 × 256 tiles; empty otherwise.
  TallPlan wide_structured;
  DeviceBlockPlan wide_structured_on_device;
  // The plan's items without the tiles below the diagonal (items_with_mirror_zeros), for wgmma
  // products under an Upper mask; empty otherwise.
  std::vector<GemmWorkItem> mirrored;
  const GemmWorkItem* mirrored_items = nullptr;
  // The tall kernel's schedule (tall_tile_plan), for wgmma products of the register-B kernel's
  // shape (tall_shape); empty otherwise.
  TallPlan tall;
  DeviceBlockPlan tall_on_device;
  // The tall schedule of a launch that writes op(A)ᵀ (GemmProblem::at_buffer): its items' loads count
  // their transposed writes (tall_tile_plan with kTallCosts.write); the runs they write on the device.
  TallPlan tall_writing;
  DeviceBlockPlan tall_writing_on_device;
  const KRun* tall_writing_runs = nullptr;
};

struct PlanCache {
  std::mutex mutex;
  std::map<PlanKey, std::unique_ptr<CachedPlan>> plans;
};

/// True when `device` has the TF32 MMA instructions (sm_80 and newer). Otherwise TF32 mode
/// runs the exact float32 kernel, and the first such product says so once on stderr.
bool tensor_cores_usable(int device) {
  if (compute_capability(device) >= 80) return true;
  static std::once_flag logged;
  std::call_once(logged, [device] {
    std::fprintf(stderr, "structgrad: cuda:%d has no TF32 tensor cores (compute capability below 8.0); "
                         "float32 products run in exact float32\n", device);
  });
  return false;
}

/// True when the wgmma loop can run on `device`: built for sm_90a (whose code runs on compute
/// capability 9.0 only) and the device is 9.0.
bool wgmma_usable(int device) {
#if defined(SG_CUDA_SM90A)
  return compute_capability(device) == 90;
#else
  (void)device;
  return false;
#endif
}

/// True when exact float32 products run on the FP64 tensor cores of `device` (Fp32Loop::Auto):
/// the sm_90a code is built (it holds the FP64 MMA loop) and the device is compute capability 9.0
/// with full-rate float64 (single- to double-precision ratio 2, as on H100 and H200; parts of that
/// compute capability with cut float64 keep the FFMA loop).
bool dmma_usable(int device) {
  if (fp32_loop() == Fp32Loop::Fma || !wgmma_usable(device)) return false;
  int ratio = 0;
  SG_CUDA_CHECK(cudaDeviceGetAttribute(&ratio, cudaDevAttrSingleToDoublePrecisionPerfRatio, device));
  return ratio <= 2;
}

PlanCache& plan_cache() {
  // Leaked on purpose: its device tables must not be freed during static destruction, after
  // the allocator and the CUDA runtime may be gone.
  static PlanCache* cache = new PlanCache;
  return *cache;
}

/// A new cache entry for `p`: its plans, uploaded into one device table.
std::unique_ptr<CachedPlan> build_cached_plan(const GemmProblem& p, DType dtype, int device, GemmSchedule schedule,
                                              bool tf32, bool wgmma, bool dmma) {
  const int sms = sm_count(device);
  auto plan_for = [&](GemmTileConfig config) {
    const int per_sm = blocks_per_sm(config);
    return plan_structured_gemm(p, config, sms * per_sm, per_sm, schedule);
  };
  auto entry = std::make_unique<CachedPlan>();
  if (dtype == DType::Float64) {
    entry->plan = plan_for(GemmTileConfig::Float64);
  } else if (tf32) {
    entry->plan = plan_for(wgmma ? GemmTileConfig::Float32Tf32Wgmma : GemmTileConfig::Float32Tf32);
  } else {
    // Both float32 configs are modelled in SM cycles; the small one wins where the large
    // tiles are too few (or too uneven) to fill every SM. The large tiles run on the FP64
    // tensor cores where they can (dmma_usable).
    GemmWorkPlan large = plan_for(dmma ? GemmTileConfig::Float32Dmma : GemmTileConfig::Float32Large);
    if (dmma && fp32_loop() == Fp32Loop::Dmma) {
      entry->plan = std::move(large);
    } else {
      GemmWorkPlan small = plan_for(GemmTileConfig::Float32Small);
      entry->plan = small.estimated_cycles < large.estimated_cycles ? std::move(small) : std::move(large);
    }
  }

  const GemmWorkPlan& plan = entry->plan;
  const bool both_outer_major_dense =
      p.a.kind == OperandKind::Dense && !p.a.trans && p.b.kind == OperandKind::Dense && p.b.trans;
  if (wgmma && both_outer_major_dense) {
    entry->wide_tiles = wide_tile_items(p).size();
    entry->wide_split = wide_tile_plan(p, sms, wide_split());
    if (entry->wide_split.split_tiles > 0) entry->wide_whole = wide_tile_plan(p, sms, WideSplit::Never);
  }
  if (wgmma && p.mask == OutputMask::Upper) entry->mirrored = items_with_mirror_zeros(p, plan);
  if (wgmma && tall_shape(p)) {
    entry->tall = tall_tile_plan(p, sms);
    entry->tall_writing = tall_tile_plan(p, sms, TallConfig::kTile, TallConfig::kTileN, kTallCosts.write);
  }
  if (wgmma && wide_structured_shape(p))
    entry->wide_structured = tall_tile_plan(p, sms, WideConfig::kTile, WideConfig::kTileN);

  // Upload once into one device table: the plan's items and counters (zeroed), then the other
  // lists. lay_out runs twice with the same calls: first to size the table (base null), then to
  // fill it. The host vectors stay in the entry, so they outlive the asynchronous copies.
  const cudaStream_t st = stream(device);
  char* base = nullptr;
  size_t used = 0;
  auto place = [&](const void* host, size_t bytes) -> void* {  // host null: zeros
    if (bytes == 0) return nullptr;
    const size_t at = used;
    used = (used + bytes + 15) / 16 * 16;
    if (base == nullptr) return nullptr;
    if (host == nullptr) SG_CUDA_CHECK(cudaMemsetAsync(base + at, 0, bytes, st));
    else SG_CUDA_CHECK(cudaMemcpyAsync(base + at, host, bytes, cudaMemcpyHostToDevice, st));
    return base + at;
  };
  auto items_of = [&](const std::vector<GemmWorkItem>& items) {
    return static_cast<const GemmWorkItem*>(place(items.data(), items.size() * sizeof(GemmWorkItem)));
  };
  auto counters_of = [&](int count) { return static_cast<int*>(place(nullptr, static_cast<size_t>(count) * sizeof(int))); };
  auto block_plan = [&](const BlockPlan& b) {
    DeviceBlockPlan on_device;
    on_device.items = items_of(b.items);
    on_device.offsets = static_cast<const int*>(place(b.offsets.data(), b.offsets.size() * sizeof(int32_t)));
    on_device.counters = counters_of(b.split_tiles);
    return on_device;
  };
  auto lay_out = [&] {
    entry->items = items_of(plan.items);
    entry->counters = counters_of(plan.split_tiles);
    entry->wide_split_on_device = block_plan(entry->wide_split);
    entry->wide_whole_on_device = block_plan(entry->wide_whole);
    entry->mirrored_items = items_of(entry->mirrored);
    entry->tall_on_device = block_plan(entry->tall);
    entry->tall_writing_on_device = block_plan(entry->tall_writing);
    entry->tall_writing_runs = static_cast<const KRun*>(
        place(entry->tall_writing.transposed_writes.data(), entry->tall_writing.transposed_writes.size() * sizeof(KRun)));
    entry->wide_structured_on_device = block_plan(entry->wide_structured);
  };
  lay_out();
  entry->device_table = std::make_unique<Storage>(used, Device(DeviceType::CUDA, device));
  base = static_cast<char*>(entry->device_table->data);
  used = 0;
  lay_out();
  return entry;
}

const CachedPlan& cached_plan(const GemmProblem& p, DType dtype, int device) {
  const GemmSchedule schedule = gemm_schedule();
  const bool tf32 = dtype == DType::Float32 && p.tf32 && tensor_cores_usable(device);
  const bool wgmma = tf32 && tf32_loop() != Tf32Loop::MmaSync && wgmma_usable(device);
  const bool dmma = dtype == DType::Float32 && !tf32 && dmma_usable(device);
  // Whether C holds its zeros changes the plans of an Upper mask only (their tiles of zeros).
  const bool zeros_matter = p.mask == OutputMask::Upper;
  auto key_of = [&](bool zeros_stored) {
    return PlanKey{p.m, p.n, p.k, int(p.a.kind), int(p.b.kind), 2 * int(p.a.trans) + int(p.b.trans), int(p.mask),
                   int(dtype), device, int(schedule),
                   int(tf32) + int(wgmma) + 4 * int(dmma) + 8 * int(fp32_loop() == Fp32Loop::Dmma) +
                       16 * int(wide_split()) + 32 * int(zeros_matter && zeros_stored)};
  };
  PlanCache& cache = plan_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto found = cache.plans.find(key_of(p.c_zeros_stored));
  if (found != cache.plans.end()) return *found->second;
  if (zeros_matter) {
    // Both entries at once: a training loop's first step writes its outputs' zeros, its later steps
    // find them in the blocks they get (GemmProblem::c_zeros_stored); neither then allocates.
    GemmProblem other = p;
    other.c_zeros_stored = !p.c_zeros_stored;
    if (cache.plans.find(key_of(other.c_zeros_stored)) == cache.plans.end())
      cache.plans.emplace(key_of(other.c_zeros_stored),
                          build_cached_plan(other, dtype, device, schedule, tf32, wgmma, dmma));
  }
  return *cache.plans.emplace(key_of(p.c_zeros_stored), build_cached_plan(p, dtype, device, schedule, tf32, wgmma, dmma))
              .first->second;
}

template <typename T>
OperandView<T> operand_view(const void* data, GemmOperand d, bool is_b, int64_t extent, int64_t ld) {
  OperandView<T> v;
  v.data = static_cast<const T*>(data);
  v.ld = ld;
  v.extent = static_cast<int32_t>(extent);
  // A: V(m, k) = op(A)[m][k] is A[m][k] (outer-major) or A[k][m] when transposed.
  // B: V(n, k) = op(B)[k][n] is B[k][n] (k-major) or B[n][k] when transposed.
  v.layout = (d.trans != is_b) ? Layout::KMajor : Layout::OuterMajor;
  switch (d.kind) {
    case OperandKind::Dense: v.pattern = Pattern::All; break;
    case OperandKind::Upper: v.pattern = is_b ? Pattern::KAtMostOuter : Pattern::KAtLeastOuter; break;
    case OperandKind::Lower: v.pattern = is_b ? Pattern::KAtLeastOuter : Pattern::KAtMostOuter; break;
    case OperandKind::Symmetric: v.pattern = Pattern::Symmetric; break;
  }
  constexpr int kVec = 16 / sizeof(T);
  v.vector_ok = reinterpret_cast<uintptr_t>(data) % 16 == 0 && ld % kVec == 0;
  v.zeros_stored = false;
  return v;
}

// ---- TMA maps for the wgmma loop ----------------------------------------------------------
using TensorMapEncoder = decltype(&cuTensorMapEncodeTiled);

/// The driver's cuTensorMapEncodeTiled, through the runtime (no link against libcuda); null
/// when the driver does not offer it (then every tile goes through the stagers).
TensorMapEncoder tensor_map_encoder() {
  static const TensorMapEncoder encoder = []() -> TensorMapEncoder {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();  // clear the (non-sticky) error it left; the stagers do the work
      return nullptr;
    }
    return reinterpret_cast<TensorMapEncoder>(fn);
  }();
  return encoder;
}

/// Encodes a TMA map over `v` in the 128-byte swizzle: the direct map — the wgmma tile box,
/// box_rows (kTile, or the wide kernel's 256 for its B) outer rows × kKStep k, over outer-major storage (V(outer, k) at data[outer·ld + k]) —
/// or the raw map — 32 × 32 boxes over k-major storage (V(outer, k) at data[k·ld + outer]).
void encode_tile_map(const OperandView<float>& v, int64_t k_extent, bool raw, CUtensorMap* map,
                     cuuint32_t box_rows = ConfigTf32Wgmma::kTile) {
  const cuuint64_t outer = static_cast<cuuint64_t>(v.extent), k = static_cast<cuuint64_t>(k_extent);
  const cuuint64_t dims[2] = {raw ? outer : k, raw ? k : outer};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(v.ld) * sizeof(float)};
  const cuuint32_t box[2] = {raw ? 32u : cuuint32_t{ConfigTf32Wgmma::kKStep}, raw ? 32u : box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result =
      tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float*>(v.data), dims, strides, box,
                           element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  SG_CHECK(result == CUDA_SUCCESS, "structured gemm: cuTensorMapEncodeTiled failed (CUresult ", static_cast<int>(result),
           ") for a ", v.extent, "x", k_extent, " operand with leading dimension ", v.ld);
}

/// Encodes `map` over k-major `v` (V(outer, k) at data[k·ld + outer]) as the 3-D tensor
/// (column c, k, column block q) ↦ data[k·ld + 32q + c], whose box {32, kKStep, kTile / 32} lands
/// in shared memory as the raw tile layout of four 32 × 32 boxes. Needs whole column blocks within
/// each row: ld at least the extent rounded up to 32 (the columns past the extent are then read
/// from the row's padding or the next row, and meet only output columns past n). False where
/// that does not hold.
bool encode_raw_block_map(const OperandView<float>& v, int64_t k_extent, CUtensorMap* map) {
  const int64_t blocks = (v.extent + 31) / 32;
  if (v.ld < 32 * blocks) return false;
  const cuuint64_t dims[3] = {32, static_cast<cuuint64_t>(k_extent), static_cast<cuuint64_t>(blocks)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(v.ld) * sizeof(float), 32 * sizeof(float)};
  const cuuint32_t box[3] = {32, ConfigTf32Wgmma::kKStep, ConfigTf32Wgmma::kTile / 32};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult result =
      tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, const_cast<float*>(v.data), dims, strides, box,
                           element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  SG_CHECK(result == CUDA_SUCCESS, "structured gemm: cuTensorMapEncodeTiled failed (CUresult ", static_cast<int>(result),
           ") for the column blocks of a ", v.extent, "x", k_extent, " operand with leading dimension ", v.ld);
  return true;
}

/// Whether rows of n floats at c, ldc apart, take TMA stores: 16-byte aligned, and ending on a 16-byte
/// boundary. TMA stores write whole 16-byte chunks, so with n not a multiple of 4 they wrote the floats
/// past n up to the boundary, in C rows padded to 16 bytes (the test
/// CudaGemmTmaStores.LeaveTheColumnsPastCsWidthAsTheyWere, H100, 2026-11-26; the same limit is
/// documented in triton-lang/triton#11893).
bool rows_take_tma_stores(const void* c, int64_t ldc, int64_t n) {
  return reinterpret_cast<uintptr_t>(c) % 16 == 0 && ldc % 4 == 0 && n % 4 == 0;
}

/// Whether C can take TMA stores: rows that do (rows_take_tma_stores), a mask other than Symmetric
/// (whose mirror the kernels write with their own stores), and the driver's tensor-map encoder.
bool output_map_possible(const GemmArgs<float>& args) {
  return rows_take_tma_stores(args.c, args.ldc, args.n) && args.mask != OutputMask::Symmetric &&
         tensor_map_encoder() != nullptr;
}

/// Encodes `map` over a row-major float32 matrix of rows × cols (row stride ld, 16-byte aligned) for
/// TMA stores: boxes of 32 columns × box_rows rows in the 128-byte swizzle. `what` names it in the error.
void encode_store_map(CUtensorMap* map, void* data, int64_t rows, int64_t cols, int64_t ld, cuuint32_t box_rows,
                      const char* what) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * sizeof(float)};
  const cuuint32_t box[2] = {32, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result =
      tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, data, dims, strides, box, element_strides,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  SG_CHECK(result == CUDA_SUCCESS, "structured gemm: cuTensorMapEncodeTiled failed (CUresult ", static_cast<int>(result),
           ") for a ", rows, "x", cols, " ", what, " with leading dimension ", ld);
}

/// Encodes `map` over the output C (m × n, row stride ldc) in boxes of box_rows (128, the tall
/// kernel's 64) rows × 32 columns with the 128-byte swizzle, for the TMA stores of C. False where C
/// cannot take them (output_map_possible).
bool encode_output_map(const GemmArgs<float>& args, CUtensorMap* map, cuuint32_t box_rows = ConfigTf32Wgmma::kTile) {
  if (!output_map_possible(args)) return false;
  encode_store_map(map, args.c, args.m, args.n, args.ldc, box_rows, "output");
  return true;
}

/// Which TMA maps an operand gets for the wgmma loop (1: direct, 2: raw). Outer-major operands
/// get the direct map, k-major ones the raw map, Symmetric ones both (a tile's fast path lies in
/// the stored or in the mirrored triangle); none for unaligned operands or where the driver has
/// no encoder, and none where no k-step can come by TMA (fewer than kTile outer indices or
/// kKStep k: the copies take whole tiles only), so small products launch without the host-side
/// encoding. outer_major_only (Tf32Loop::WgmmaTmaOuterMajor): the direct map of non-Symmetric
/// outer-major operands only.
uint32_t tile_maps_wanted(const OperandView<float>& v, int64_t k_extent, bool outer_major_only) {
  if (!v.vector_ok || v.extent < ConfigTf32Wgmma::kTile || k_extent < ConfigTf32Wgmma::kKStep ||
      tensor_map_encoder() == nullptr)
    return 0;
  const bool symmetric = v.pattern == Pattern::Symmetric;
  const bool want_direct = outer_major_only ? v.layout == Layout::OuterMajor && !symmetric
                                            : v.layout == Layout::OuterMajor || symmetric;
  const bool want_raw = !outer_major_only && (v.layout == Layout::KMajor || symmetric);
  return (want_direct ? 1u : 0u) | (want_raw ? 2u : 0u);
}

/// Encodes the maps `wanted` (tile_maps_wanted) of an operand; the direct map's box has
/// `direct_rows` outer rows.
void encode_tile_maps(const OperandView<float>& v, int64_t k_extent, uint32_t wanted, CUtensorMap* direct,
                      CUtensorMap* raw, cuuint32_t direct_rows) {
  if (wanted & 1u) encode_tile_map(v, k_extent, false, direct, direct_rows);
  if (wanted & 2u) encode_tile_map(v, k_extent, true, raw);
}

/// The wgmma kernel instance of a product whose operands have the TMA maps `has` (TmaMaps::has),
/// and its block size.
struct TmaKernel {
  void (*kernel)(const GemmArgs<float>, const TmaMaps);
  unsigned threads;
  const char* name;
  std::atomic<int64_t>* launches;  // the tests' launch counter of the kernel, if it has one
};

/// Whether the register-B kernel takes the products it applies to: on Auto and Always. Measured
/// (H100, TF32, 2026-11-24, `bench_gemm_cuda --tf32 --register-b always|never`, one binary, two
/// runs each, alternating), since the kernel fits two blocks per SM: it won or tied on every
/// product it takes at 512 … 8192 — Upper·Upper forward 0.76 of the time at 512, 0.88 at 4096
/// (0.131 against 0.150 ms), 0.92 at 8192; Upper·Dense 0.87–0.93; Dense·Upper 0.91–1.01; dB
/// 0.87–0.92 from 2048 on. docs/structured_gemm.md, "The register-B kernel".
bool register_b_on() { return register_b() != RegisterB::Never; }

template <class Cfg>
TmaKernel tma_kernel_for(const OperandView<float>& a, const OperandView<float>& b, uint32_t has, Tf32Loop loop) {
  auto triangular = [](const OperandView<float>& v) {
    return v.pattern == Pattern::KAtLeastOuter || v.pattern == Pattern::KAtMostOuter;
  };
  const bool a_tma = has & (kADirect | kARaw), b_tma = has & (kBDirect | kBRaw);
  const bool any_triangular = triangular(a) || triangular(b);
  // Both operands with direct copies only: no raw ring, its space a third buffer.
  const bool deep = has == (kADirect | kBDirect);
  // The pipelined kernel where both operands come directly and one is triangular (Upper or
  // Lower: short, uneven k-ranges and diagonal-crossing steps). Where both are Dense (gram, the
  // relaid Symmetric products; direct maps only exclude Symmetric operands, which always have a
  // raw map too) it measured 0–4 % slower than the barrier-per-step instance (H100, TF32, N = 2048
  // and 4096, 2026-11-23; docs/structured_gemm.md).
  if (deep && any_triangular && loop == Tf32Loop::Auto)
    return {structured_gemm_pipelined_kernel<Cfg>, Cfg::kThreads + kProducerThreads,
            "structured_gemm_pipelined_kernel", &pipelined_launch_count};
  // The register-B kernel where A comes directly and B, k-major, raw (neither Symmetric: those
  // have both maps).
  if (has == (kADirect | kBRaw) && any_triangular && loop == Tf32Loop::Auto && register_b_on())
    return {structured_gemm_register_b_kernel<Cfg>, Cfg::kThreads,
            "structured_gemm_register_b_kernel", &register_b_launch_count};
  // A triangular operand's diagonal-crossing steps by TMA too (kDiag), except where both operands
  // are k-major (one of them stays on the register stager; measured slower).
  const bool diag = any_triangular && full_tma(loop) && !(a.layout == Layout::KMajor && b.layout == Layout::KMajor);
  // Symmetric operands' both triangles by TMA (kSym): Symmetric·Symmetric only (H100, TF32,
  // N = 4096: 0.916–0.919 ms → 0.864–0.867; Sym·Dense, whose B takes the ring, went 0.889–0.914
  // → 0.926–0.932 with it).
  const bool sym = full_tma(loop) && a.pattern == Pattern::Symmetric && b.pattern == Pattern::Symmetric;
  auto kernel = deep && diag             ? structured_gemm_tma_kernel<Cfg, true, true, 3, true>
                : deep                   ? structured_gemm_tma_kernel<Cfg, true, true, 3>
                : a_tma && b_tma && diag ? structured_gemm_tma_kernel<Cfg, true, true, 2, true>
                : a_tma && b_tma && sym  ? structured_gemm_tma_kernel<Cfg, true, true, 2, false, true>
                : a_tma && b_tma         ? structured_gemm_tma_kernel<Cfg, true, true>
                : a_tma                  ? structured_gemm_tma_kernel<Cfg, true, false>
                                         : structured_gemm_tma_kernel<Cfg, false, true>;
  return {kernel, Cfg::kThreads, "structured_gemm_tma_kernel", nullptr};
}

/// Whether the wide kernel would run `cached`'s schedule with split tiles: it has one, and C takes
/// TMA stores (the split tiles meet in C by them).
bool wide_split_runs(const GemmArgs<float>& args, const CachedPlan& cached) {
  return cached.wide_split.split_tiles > 0 && wide_tma_store() && output_map_possible(args);
}

/// Whether product `p`, with `items` wide-tile items, runs on the wide kernel (where both
/// operands come directly and are Dense). Auto: where the persistent blocks' rounds of items
/// are at least 80 % full (items ≥ 0.8 · rounds · SMs) or its last round's tiles are cut (`split`,
/// wide_split_runs), and not under an Upper mask. Measured (H100, TF32, 1024 … 8192, 2026-11-23;
/// docs/structured_gemm.md, "The wide kernel"):
/// - it won wherever that holds;
/// - it lost where rounds were 55–69 % full: gram at 3072 and 4096, the Full products at 1024;
/// - under an Upper mask (the dA of products with a Dense operand) it lost from 2560 on;
/// - with the last round cut (2026-11-26, "The wide kernel's last round split"): the Full products
///   at 3072 (73 % full) 0.180 ms against 0.216–0.218 on the 128-tile kernels.
bool wide_tiles_pay(const GemmProblem& p, size_t items, bool split, int device) {
  const WideTiles setting = wide_tiles();
  if (tf32_loop() != Tf32Loop::Auto || setting == WideTiles::Never) return false;
  if (setting == WideTiles::Always) return true;
  if (p.mask == OutputMask::Upper) return false;
  const size_t sms = static_cast<size_t>(sm_count(device)), rounds = (items + sms - 1) / sms;
  return split || 10 * items >= 8 * rounds * sms;
}

/// Whether a structured product with both operands' direct maps (wide_structured_shape; views and
/// output in `args`) runs on the wide kernel from its panel-ordered schedule: B holds its
/// structural zeros (Dense, or zeros_stored; A's are written into its tile where the storage lacks
/// them, zero_wide_rows_outside), C takes TMA stores (the tiles of zeros and the split tiles go out
/// by them), on the default loop. Auto: at least one tile with a k-range per SM where both
/// operands are Upper or Lower (Upper·Upper's dA = triu(G·Bᵀ): from 3072 on), one per two SMs
/// where one is Dense (the dA = G·Uᵀ of Dense·Upper and Sym·Upper, the Upper·Sym forward with the
/// mirror stored: from 2048 on), as tall_pays. Measured: docs/structured_gemm.md, "dA on the wide
/// kernel".
bool wide_structured_pays(const GemmArgs<float>& args, const CachedPlan& cached, int device) {
  const WideTiles setting = wide_tiles();
  if (setting == WideTiles::Never || tf32_loop() != Tf32Loop::Auto || !wide_tma_store() ||
      cached.wide_structured_on_device.items == nullptr || !output_map_possible(args))
    return false;
  if (args.b.pattern != Pattern::All && !args.b.zeros_stored) return false;
  if (setting == WideTiles::Always) return true;
  const bool one_dense = args.a.pattern == Pattern::All || args.b.pattern == Pattern::All;
  return (one_dense ? 2 : 1) * cached.wide_structured.compute_tiles >= static_cast<int64_t>(sm_count(device));
}

/// Whether product `p` (operand views a, b with the register-B kernel's maps: A direct, B raw) runs
/// on the tall kernel: it has a tall schedule, A holds its structural zeros (Dense, or
/// zeros_stored; B's are written into its fragments where its storage lacks them, as in dB =
/// triu(Aᵀ·G) with G read through C's structure), C takes TMA stores (16-byte aligned rows of a
/// multiple of 4 floats), on the
/// default loop with the register-B kernel on. Auto, besides: with one operand Dense (the tiles run long k-ranges), at
/// least one tile with a k-range per two SMs (the plan splits long tiles in two where that balances
/// the blocks); with none (Upper·Upper), at least one per SM.
/// Measured (H100, TF32, 2026-11-25, `bench_gemm_cuda --tf32 --tall always|never`, one binary, two
/// runs each, alternating; docs/structured_gemm.md, "The tall kernel"):
/// - Dense·Upper 0.042–0.044 ms against 0.049–0.054 at 2048, 0.102 against 0.110–0.113 at 3072,
///   0.203 against 0.235–0.239 at 4096; Upper·Dense alike; 1536 (72 tiles) 0.036–0.037 against
///   0.038–0.039;
/// - slower at 1024 (32 tiles: 0.030–0.032 against 0.023–0.025) and 512.
/// Upper·Upper, since the deal in shared-panel order (2026-11-26, `--tall always|auto`, three runs
/// each, alternating; docs/structured_gemm.md, "The tall deal in shared-panel order"): 0.058–0.061
/// ms against 0.065–0.066 at 3072 (156 tiles for 132 SMs), 0.100–0.102 against 0.114–0.116 at
/// 4096, 0.652–0.655 against 0.914–0.927 at 8192; level at 2560 (110 tiles: 0.048–0.050 against
/// 0.049–0.050) and slower at 2048 (72 tiles: 0.041–0.042 against 0.038).
bool tall_pays(const GemmProblem& p, const OperandView<float>& a, const OperandView<float>& b, const CachedPlan& cached,
               int device) {
  const TallTiles setting = tall_tiles();
  if (setting == TallTiles::Never || tf32_loop() != Tf32Loop::Auto || !register_b_on() ||
      cached.tall_on_device.items == nullptr)
    return false;
  // B's zeros are written into its fragments where its storage lacks them; A's must be there.
  const bool zeros = a.pattern == Pattern::All || a.zeros_stored;
  if (!zeros || !rows_take_tma_stores(p.c_data, p.ldc, p.n)) return false;
  if (setting == TallTiles::Always) return true;
  const bool one_dense = a.pattern == Pattern::All || b.pattern == Pattern::All;
  return (one_dense ? 2 : 1) * cached.tall.compute_tiles >= static_cast<int64_t>(sm_count(device));
}

/// A relayout copy of one operand (relayout_operand): the allocation (it holds the copy's zeros
/// near the diagonal) and, for a mirror copy, the Symmetric operand's own storage, outer-major
/// over its stored triangle.
struct RelayoutCopy {
  std::unique_ptr<Storage> storage;
  const float* stored = nullptr;
  int64_t stored_ld = 0;
};

/// The view of a mirror copy's operand over its own storage: outer-major, as the copy (it is
/// read there only in the stored triangle's whole k-steps).
OperandView<float> stored_view(OperandView<float> copy_view, const RelayoutCopy* copy) {
  copy_view.data = copy->stored;
  copy_view.ld = copy->stored_ld;
  return copy_view;
}

/// Whether the tall launch of `p` also writes op(A)ᵀ (GemmProblem::at_buffer). Each k-step of A
/// that the launch reads is written by one item that reads it (TallPlan::transposed_writes; where the
/// plan falls back, the item whose column tile holds its k, so k must lie within C's column tiles).
/// A must be Upper (the tiles that an Upper mask leaves empty hold only A's zeros) or Dense under a
/// Full mask (every tile runs): then every k-step of A with entries of its structure, or an Upper
/// A's zeros from its tile rows' first k on, is read, so written. The packed buffer takes TMA stores
/// where m is a multiple of 4.
bool tall_writes_transposed_a(const GemmProblem& p, const OperandView<float>& a) {
  if (!p.at_buffer || !transposed_a_output_on.load() || p.m % 4 != 0) return false;
  const bool a_ok = a.pattern == Pattern::KAtLeastOuter || (a.pattern == Pattern::All && p.mask == OutputMask::Full);
  const int64_t column_tiles_end = (p.n + TallConfig::kTileN - 1) / TallConfig::kTileN * TallConfig::kTileN;
  return a_ok && p.k <= column_tiles_end;
}

/// a_copy, b_copy: the operand is a relayout copy (null: it is not).
template <class Cfg>
void launch_with(const GemmProblem& p, const CachedPlan& cached, int device, const RelayoutCopy* a_copy = nullptr,
                 const RelayoutCopy* b_copy = nullptr) {
  using T = typename Cfg::Scalar;
  GemmArgs<T> args;
  args.a = operand_view<T>(p.a_data, p.a, false, p.m, p.lda);
  args.b = operand_view<T>(p.b_data, p.b, true, p.n, p.ldb);
  // A relayout copy holds its zeros, and so does an operand whose caller vouches for them (an
  // UpperTriangular tensor: GemmOperand::zeros_stored); the kernels that copy whole tiles then
  // skip writing them (measured: docs/structured_gemm.md, "Stored zeros trusted").
  args.a.zeros_stored = a_copy != nullptr || p.a.zeros_stored;
  args.b.zeros_stored = b_copy != nullptr || p.b.zeros_stored;
  args.c = static_cast<T*>(p.c_data);
  args.ldc = p.ldc;
  args.m = static_cast<int32_t>(p.m);
  args.n = static_cast<int32_t>(p.n);
  args.alpha = static_cast<T>(p.alpha);
  args.mask = p.mask;
  args.c_vector_ok = reinterpret_cast<uintptr_t>(p.c_data) % 16 == 0 && p.ldc % Cfg::kVec == 0;
  TmaMaps maps{};
  bool wide = false;  // the wide kernel's 128 × 256 tiles (its B maps have 256-row boxes)
  bool tall = false;  // the tall kernel's 256 × 128 tiles (its A map has 256-row boxes)
  bool wide_structured = false;  // the wide kernel on a structured product's panel-ordered schedule
  if constexpr (Cfg::kWgmma) {
    const Tf32Loop loop = tf32_loop();
    if (full_tma(loop) || loop == Tf32Loop::WgmmaTmaOuterMajor) {
      const bool outer_major_only = loop == Tf32Loop::WgmmaTmaOuterMajor;
      const uint32_t a_wanted = tile_maps_wanted(args.a, p.k, outer_major_only);
      const uint32_t b_wanted = tile_maps_wanted(args.b, p.k, outer_major_only);
      maps.has = a_wanted | b_wanted << 2;
      wide = maps.has == (kADirect | kBDirect) && args.a.pattern == Pattern::All &&
             args.b.pattern == Pattern::All && cached.wide_split_on_device.items != nullptr &&
             wide_tiles_pay(p, cached.wide_tiles, wide_split_runs(args, cached), device);
      wide_structured = !wide && maps.has == (kADirect | kBDirect) && wide_structured_pays(args, cached, device);
      wide = wide || wide_structured;
      tall = maps.has == (kADirect | kBRaw) && tall_pays(p, args.a, args.b, cached, device);
      const cuuint32_t a_rows = tall ? TallConfig::kTile : Cfg::kTile;
      const cuuint32_t b_rows = wide ? WideConfig::kTileN : Cfg::kTile;
      encode_tile_maps(args.a, p.k, a_wanted, &maps.a, &maps.a_raw, a_rows);
      encode_tile_maps(args.b, p.k, b_wanted, &maps.b, &maps.b_raw, b_rows);
      // A mirror copy's stored triangle from the operand's storage (every relayout copy has its
      // direct map: 16-byte rows, and relayout_pays has checked the extents).
      if (a_copy != nullptr && a_copy->stored != nullptr && (maps.has & kADirect)) {
        encode_tile_map(stored_view(args.a, a_copy), p.k, false, &maps.a_stored, a_rows);
        maps.stored |= 1;
      }
      if (b_copy != nullptr && b_copy->stored != nullptr && (maps.has & kBDirect)) {
        encode_tile_map(stored_view(args.b, b_copy), p.k, false, &maps.b_stored, b_rows);
        maps.stored |= 2;
      }
    }
  }
  const bool a_tma = maps.has & (kADirect | kARaw), b_tma = maps.has & (kBDirect | kBRaw);
  args.items = cached.items;
  args.counters = cached.counters;
  // Partial tiles from the caching allocator; freeing at scope end is safe because the next
  // user of the block is queued behind this kernel on the same stream.
  const size_t workspace_bytes =
      tall ? 0 : static_cast<size_t>(cached.plan.partial_tiles) * Cfg::kTile * Cfg::kTile * sizeof(typename Cfg::Acc);
  Storage workspace(workspace_bytes, Device(DeviceType::CUDA, device));
  args.partials = static_cast<T*>(workspace.data);
  const unsigned blocks = static_cast<unsigned>(cached.plan.items.size());
  if constexpr (Cfg::kWgmma) {
    // The wide kernel from one of its block plans (persistent: one block per entry of its offsets).
    auto launch_wide = [&](const DeviceBlockPlan& on_device, const BlockPlan& plan) {
      args.items = on_device.items;
      args.counters = on_device.counters;
      const unsigned grid = static_cast<unsigned>(plan.offsets.size() - 1);
      launch_after_previous(structured_gemm_wide_kernel, grid, WideConfig::kThreads + kProducerThreads,
                            WideConfig::kDynamicSmem, device, "structured_gemm_wide_kernel", args, maps,
                            on_device.offsets);
      wide_launch_count.fetch_add(1, std::memory_order_relaxed);
    };
    if (wide_structured) {
      SG_CHECK(encode_output_map(args, &maps.c), "structured gemm: the wide kernel's output map");
      maps.has |= kCStore;
      launch_wide(cached.wide_structured_on_device, cached.wide_structured);
      wide_structured_launch_count.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (wide) {
      // The tiles by TMA stores where C takes them (measured: docs/structured_gemm.md, "The wide
      // kernel's epilogue by TMA").
      if (wide_tma_store() && encode_output_map(args, &maps.c)) {
        maps.has |= kCStore;
        wide_tma_store_launch_count.fetch_add(1, std::memory_order_relaxed);
      }
      // Split tiles meet in C by TMA stores and reductions; without those, the schedule without.
      const bool split = cached.wide_split.split_tiles > 0, whole = split && !(maps.has & kCStore);
      if (split && !whole) wide_split_launch_count.fetch_add(1, std::memory_order_relaxed);
      launch_wide(whole ? cached.wide_whole_on_device : cached.wide_split_on_device,
                  whole ? cached.wide_whole : cached.wide_split);
      return;
    }
    if (tall) {
      SG_CHECK(encode_output_map(args, &maps.c, TallConfig::kOutRows), "structured gemm: the tall kernel's output map");
      TransposedOutput transposed{};
      if (tall_writes_transposed_a(p, args.a)) {
        void* const at = p.at_buffer();
        SG_CHECK(at != nullptr && reinterpret_cast<uintptr_t>(at) % 16 == 0,
                 "structured gemm: the buffer for op(A)ᵀ is not 16-byte aligned");
        encode_store_map(&transposed.map, at, p.k, p.m, p.m, 32, "transposed A");
        transposed.writes = cached.tall_writing_runs;
        transposed.on = true;
        if (poison_relayout.load())  // NaN where the kernel writes nothing: a product reading there fails
          SG_CUDA_CHECK(cudaMemsetAsync(at, 0xFF, static_cast<size_t>(p.k * p.m) * sizeof(float), stream(device)));
        transposed_a_output_count.fetch_add(1, std::memory_order_relaxed);
      }
      maps.has |= kCStore;
      if (encode_raw_block_map(args.b, p.k, &maps.b_raw)) maps.has |= kBRawBlocks;
      const DeviceBlockPlan& on_device = transposed.on ? cached.tall_writing_on_device : cached.tall_on_device;
      args.items = on_device.items;
      args.counters = on_device.counters;
      const int sms = static_cast<int>(cached.tall.offsets.size()) - 1;
      launch_after_previous(transposed.on ? structured_gemm_tall_kernel<true> : structured_gemm_tall_kernel<false>,
                            static_cast<unsigned>(sms), TallConfig::kThreads, TallConfig::kDynamicSmem, device,
                            "structured_gemm_tall_kernel", args, maps, on_device.offsets, transposed);
      tall_launch_count.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (a_tma || b_tma) {
      const TmaKernel chosen = tma_kernel_for<Cfg>(args.a, args.b, maps.has, tf32_loop());
      // The register-B kernel copies B's k-step as one box where B's rows hold whole column
      // blocks (measured: docs/structured_gemm.md, "One box per k-step of B").
      if (chosen.launches == &register_b_launch_count && encode_raw_block_map(args.b, p.k, &maps.b_raw)) {
        maps.has |= kBRawBlocks;
        raw_block_map_launch_count.fetch_add(1, std::memory_order_relaxed);
      }
      // The register-B kernel writes its tiles by TMA stores where C takes them (measured:
      // docs/structured_gemm.md, "The register-B kernel's epilogue by TMA").
      unsigned grid = blocks;
      if (chosen.launches == &register_b_launch_count && encode_output_map(args, &maps.c)) {
        maps.has |= kCStore;
        tma_store_launch_count.fetch_add(1, std::memory_order_relaxed);
        // The tiles below the diagonal zeroed by their mirror tiles' blocks (measured:
        // docs/structured_gemm.md, "Zeros stored by the mirror tile").
        if (cached.mirrored_items != nullptr) {
          args.items = cached.mirrored_items;
          grid = static_cast<unsigned>(cached.mirrored.size());
          mirror_zero_launch_count.fetch_add(1, std::memory_order_relaxed);
        }
      }
      chosen.kernel<<<grid, chosen.threads, Cfg::kDynamicSmemTma, stream(device)>>>(args, maps);
      SG_CUDA_CHECK_LAUNCH(chosen.name);
      if (chosen.launches != nullptr) chosen.launches->fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  structured_gemm_kernel<Cfg><<<blocks, Cfg::kThreads, Cfg::kDynamicSmem, stream(device)>>>(args);
  SG_CUDA_CHECK_LAUNCH("structured_gemm_kernel");
}

// ---- relayout (wgmma products) -------------------------------------------------------------

/// Operands up to this extent and k relayout (the copy kernel's grid holds extent / 32 blocks
/// in y).
constexpr int64_t kRelayoutMaxExtent = int64_t(1) << 20;
/// The FP64 loop's k-major copies on Auto (k_major_copy_pays): Symmetric operands from this extent on.
constexpr int64_t kKMajorCopySymmetricFrom = 1024;

/// Whether the wgmma product `p` runs on an outer-major copy of operand A (is_b false) or B:
/// a k-major or Symmetric operand, large enough for TMA copies, under the default loop.
bool relayout_pays(const GemmProblem& p, bool is_b) {
  const OperandRelayout setting = operand_relayout();
  if (setting == OperandRelayout::Never || !full_tma(tf32_loop()) || tensor_map_encoder() == nullptr)
    return false;
  const GemmOperand d = is_b ? p.b : p.a;
  const int64_t extent = is_b ? p.n : p.m;
  const bool k_major = d.trans != is_b;  // operand_view's layout
  if (d.kind != OperandKind::Symmetric && !k_major) return false;  // direct copies already
  if (extent < ConfigTf32Wgmma::kTile || p.k < ConfigTf32Wgmma::kKStep || extent > kRelayoutMaxExtent ||
      p.k > kRelayoutMaxExtent)
    return false;
  if (setting == OperandRelayout::Always) return true;
  // Auto. The copy is one pass over the operand; it saves a transposition in every tile that
  // reads the operand, so it pays with reuse — the other extent (the tiles across) and k — and
  // most where the product's other operand needs a transposition too. The thresholds are
  // measured (H100, TF32, 512 … 8192, 2026-11-23; docs/structured_gemm.md, "Relayout").
  const GemmOperand other = is_b ? p.a : p.b;
  const int64_t reuse = std::min(is_b ? p.m : p.n, p.k);
  const bool other_outer_major = other.kind != OperandKind::Symmetric && other.trans != is_b;
  if (d.kind == OperandKind::Symmetric && other.kind == OperandKind::Symmetric) return true;  // 0.84 at 512
  if (!other_outer_major) return reuse >= 2048;  // dB = triu(Aᵀ·G), Sym·Dense, Sym·Upper
  // Upper·Upper forward: the copy puts it on the pipelined kernel; 0.90 at 2048 and 0.97 at 4096,
  // but 1.02 at 1024 and 1.13 at 8192 (with the barrier-per-step kernel it lost at every size).
  if (is_triangular(d.kind) && is_triangular(other.kind)) return reuse >= 2048 && reuse <= 4096;
  if (d.kind == OperandKind::Symmetric && other.kind == OperandKind::Dense) return reuse >= 2048;  // Dense·Sym
  // Sym·Dense with A's mirror stored (with_stored_mirrors_as_dense): A outer-major Dense, as the
  // Sym·Dense rule above had after A's copy.
  if (d.kind == OperandKind::Dense && other.kind == OperandKind::Dense) return reuse >= 2048;
  return reuse >= 4096;  // Dense·Upper, Upper·Dense, Upper·Sym
}

/// The view of W(o, k) = V(k, o): the same storage read the other way round (`k_extent`: V's k).
OperandView<float> transposed_view(OperandView<float> v, int64_t k_extent) {
  v.extent = static_cast<int32_t>(k_extent);
  v.layout = v.layout == Layout::OuterMajor ? Layout::KMajor : Layout::OuterMajor;
  if (v.pattern == Pattern::KAtLeastOuter) v.pattern = Pattern::KAtMostOuter;
  else if (v.pattern == Pattern::KAtMostOuter) v.pattern = Pattern::KAtLeastOuter;
  return v;  // (a Symmetric view is its own transpose)
}

/// Writes operand A (is_b false) or B of `p` outer-major (the wgmma loop's relayout) or, with
/// k_major, k-major (the FP64 loop's copies: the kernel run on the operand's transposed view) into
/// a new allocation, queued on the library stream, and points `q`'s operand at it (a Symmetric
/// operand becomes Dense). A Symmetric operand copied outer-major whose storage takes direct TMA
/// copies (16-byte aligned rows) gets a mirror copy: its stored triangle is then read from the
/// storage (RelayoutCopy::stored, direct_map).
RelayoutCopy relayout_operand(const GemmProblem& p, bool is_b, bool k_major, int device, GemmProblem& q) {
  const GemmOperand d = is_b ? p.b : p.a;
  const int64_t extent = is_b ? p.n : p.m;
  const OperandView<float> v = operand_view<float>(is_b ? p.b_data : p.a_data, d, is_b, extent, is_b ? p.ldb : p.lda);
  // The copy's rows and columns: outer × k, or k × outer (the kernel writing the transposed view).
  const int64_t rows = k_major ? p.k : extent, cols = k_major ? extent : p.k;
  const int64_t ldo = (cols + 3) / 4 * 4;  // 16-byte rows: the vector and TMA paths take them
  const size_t bytes = static_cast<size_t>(rows * ldo) * sizeof(float);
  RelayoutCopy copy;
  copy.storage = std::make_unique<Storage>(bytes, Device(DeviceType::CUDA, device));
  const bool mirror_only = !k_major && v.pattern == Pattern::Symmetric && v.vector_ok;
  if (mirror_only) {
    copy.stored = v.data;
    copy.stored_ld = v.ld;
  }
  if (poison_relayout.load()) SG_CUDA_CHECK(cudaMemsetAsync(copy.storage->data, 0xFF, bytes, stream(device)));  // NaN
  if (v.pattern == Pattern::Symmetric && !mirror_only) {
    // The whole matrix, k-major or outer-major alike (symmetric_copy_kernel).
    const unsigned tiles = static_cast<unsigned>((extent + kSymCopyTile - 1) / kSymCopyTile);
    symmetric_copy_kernel<<<dim3(tiles, tiles), kSymCopyThreads, 0, stream(device)>>>(
        v.data, v.ld, static_cast<int32_t>(extent), v.vector_ok, static_cast<float*>(copy.storage->data), ldo);
    SG_CUDA_CHECK_LAUNCH("symmetric_copy_kernel");
  } else {
    const dim3 grid(static_cast<unsigned>((cols + kRelayoutTile - 1) / kRelayoutTile),
                    static_cast<unsigned>((rows + kRelayoutTile - 1) / kRelayoutTile));
    relayout_outer_major_kernel<<<grid, dim3(kRelayoutTile, kRelayoutRows), 0, stream(device)>>>(
        k_major ? transposed_view(v, p.k) : v, static_cast<int32_t>(cols), static_cast<float*>(copy.storage->data),
        ldo, mirror_only);
    SG_CUDA_CHECK_LAUNCH("relayout_outer_major_kernel");
    if (mirror_only) mirror_copy_count.fetch_add(1, std::memory_order_relaxed);
  }
  relayout_copy_count.fetch_add(1, std::memory_order_relaxed);
  // Outer-major: A not transposed, B transposed; k-major the other way (operand_view). The kind
  // (op(X)'s structure) stays.
  (is_b ? q.b : q.a) = GemmOperand{d.kind == OperandKind::Symmetric ? OperandKind::Dense : d.kind, k_major != is_b};
  (is_b ? q.b_data : q.a_data) = copy.storage->data;
  (is_b ? q.ldb : q.lda) = ldo;
  return copy;
}

/// Whether the register-B kernel takes product `p` (A copied outer-major first where a_copied)
/// with B as it lies, so that B needs no copy: A outer-major and B k-major, neither Symmetric (a
/// copied Symmetric A is Dense), one of them Upper or Lower, both with TMA maps (16-byte aligned;
/// relayout_pays has checked the extents), on the default loop. Under forced relayout
/// (OperandRelayout::Always, for the tests and the benchmark) B is still copied, unless the kernel
/// is forced too (RegisterB::Always).
bool register_b_replaces_copy(const GemmProblem& p, bool a_copied) {
  const RegisterB setting = register_b();
  if (!register_b_on() || tf32_loop() != Tf32Loop::Auto) return false;
  if (operand_relayout() == OperandRelayout::Always && setting != RegisterB::Always) return false;
  auto aligned = [](const void* data, int64_t ld) { return reinterpret_cast<uintptr_t>(data) % 16 == 0 && ld % 4 == 0; };
  const OperandKind a_kind = a_copied && p.a.kind == OperandKind::Symmetric ? OperandKind::Dense : p.a.kind;
  const bool a_outer_major = a_copied || (p.a.kind != OperandKind::Symmetric && !p.a.trans && aligned(p.a_data, p.lda));
  const bool b_k_major = p.b.kind != OperandKind::Symmetric && !p.b.trans && aligned(p.b_data, p.ldb);
  return a_outer_major && b_k_major && (is_triangular(a_kind) || is_triangular(p.b.kind));
}

/// Whether the tall kernel runs Dense·Dense product `p` with B as it lies, k-major (a Sym·Dense
/// whose Symmetric operand's mirror is stored: with_stored_mirrors_as_dense; gram's backward), instead
/// of the wide kernel on B's outer-major copy: where it takes the product with A's direct map and B's
/// raw one (tall_pays), up to kTallForCopyRows rows. The copy's share of the time falls as the rows
/// that reuse it grow. Measured (H100, TF32, 2026-11-26; docs/structured_gemm.md, "Sym·Dense on the
/// tall kernel"): 8–21 % faster at 2048 … 4096; at 8192 level or slower (gram's backward 6 %).
constexpr int64_t kTallForCopyRows = 4096;
bool tall_replaces_copy(const GemmProblem& p, const CachedPlan& cached, int device) {
  if (p.a.kind != OperandKind::Dense || p.b.kind != OperandKind::Dense || p.a.trans || p.b.trans) return false;
  if (p.m > kTallForCopyRows && tall_tiles() != TallTiles::Always) return false;
  if (operand_relayout() == OperandRelayout::Always && tall_tiles() != TallTiles::Always) return false;
  const OperandView<float> a = operand_view<float>(p.a_data, p.a, false, p.m, p.lda);
  const OperandView<float> b = operand_view<float>(p.b_data, p.b, true, p.n, p.ldb);
  const uint32_t has = tile_maps_wanted(a, p.k, false) | tile_maps_wanted(b, p.k, false) << 2;
  return has == (kADirect | kBRaw) && tall_pays(p, a, b, cached, device);
}

/// The wgmma product, on outer-major copies of its operands where relayout_pays (B not where the
/// register-B or the tall kernel reads it as it lies). The copies go back to the caching allocator
/// at scope end, behind the product on the same stream.
void launch_wgmma(const GemmProblem& p, const CachedPlan& cached, int device) {
  const bool relayout_a = relayout_pays(p, false);
  const bool relayout_b = relayout_pays(p, true) && !register_b_replaces_copy(p, relayout_a) &&
                          !(!relayout_a && tall_replaces_copy(p, cached, device));
  if (!relayout_a && !relayout_b) return launch_with<ConfigTf32Wgmma>(p, cached, device);
  GemmProblem q = p;
  RelayoutCopy copy_a, copy_b;
  if (relayout_a) copy_a = relayout_operand(p, false, false, device, q);
  if (relayout_b) copy_b = relayout_operand(p, true, false, device, q);
  launch_with<ConfigTf32Wgmma>(q, cached_plan(q, DType::Float32, device), device, relayout_a ? &copy_a : nullptr,
                               relayout_b ? &copy_b : nullptr);
}

// ---- k-major copies (FP64 loop products) ---------------------------------------------------
//
// The FP64 loop stages k-major tiles with 16-byte stores; outer-major ones take four scalar
// stores per vector (conflict-free since the swizzle, but four times the instructions), and a
// Symmetric operand's steps go through the general path, a step's two triangles each its own way
// and the diagonal-crossing steps element by element. Where it pays, the launcher first copies
// such an operand k-major — out[k·ldo + o] = V(o, k): the relayout kernel run on the operand's
// transposed view — and runs the product on the copy, whose steps are all fast and k-major.
// Measured (H100, 2026-11-25; docs/structured_gemm.md, "The FP64 loop, thirteenth session"): a Symmetric operand's
// copy pays from 2048 on (Sym·Sym 2.88 → 2.70 ms at 4096) and breaks even at 1024; an outer-major
// operand's lost at every size (the copy costs more than the scalar stores it saves: Upper·Upper
// 0.578 → 0.617 ms, gram 1.66 → 1.72 at 4096), so Auto copies Symmetric operands only.

/// Whether the FP64 loop product `p` runs on a k-major copy of operand A (is_b false) or B: a
/// Symmetric or outer-major operand under OperandRelayout Always, a Symmetric one from
/// kKMajorCopySymmetricFrom on under Auto.
bool k_major_copy_pays(const GemmProblem& p, bool is_b) {
  const OperandRelayout setting = operand_relayout();
  if (setting == OperandRelayout::Never) return false;
  const GemmOperand d = is_b ? p.b : p.a;
  const int64_t extent = is_b ? p.n : p.m;
  const bool k_major = d.trans != is_b;  // operand_view's layout
  if ((d.kind != OperandKind::Symmetric && k_major) || extent < 1 || p.k < 1 || extent > kRelayoutMaxExtent ||
      p.k > kRelayoutMaxExtent)
    return false;  // (an empty copy would be an empty grid)
  if (setting == OperandRelayout::Always) return true;
  return d.kind == OperandKind::Symmetric && std::min(extent, p.k) >= kKMajorCopySymmetricFrom;
}

/// The FP64 loop product, on k-major copies of its operands where k_major_copy_pays. The plan of
/// `p` holds for the copies (the same op(A), op(B)); the copies go back to the caching allocator
/// at scope end, behind the product on the same stream.
void launch_dmma(const GemmProblem& p, const CachedPlan& cached, int device) {
  const bool copy_a = k_major_copy_pays(p, false), copy_b = k_major_copy_pays(p, true);
  GemmProblem q = p;
  RelayoutCopy copy_of_a, copy_of_b;
  if (copy_a) copy_of_a = relayout_operand(p, false, true, device, q);
  if (copy_b) copy_of_b = relayout_operand(p, true, true, device, q);
  launch_with<ConfigF32Dmma>(q, cached, device);
}

void check_problem(const GemmProblem& p) {
  constexpr int64_t kLimit = int64_t(1) << 28;  // int32 tile, k and byte-stride arithmetic stays exact
  SG_CHECK(p.m >= 0 && p.n >= 0 && p.k >= 0 && p.m < kLimit && p.n < kLimit && p.k < kLimit,
           "structured gemm: sizes m = ", p.m, ", n = ", p.n, ", k = ", p.k, " out of range");
  if (p.mask != OutputMask::Full)
    SG_CHECK(p.m == p.n, "structured gemm: a structured output mask needs a square result, got ", p.m, "x", p.n);
  if (p.a.kind == OperandKind::Symmetric) SG_CHECK(p.m == p.k, "structured gemm: symmetric A must be square");
  if (p.b.kind == OperandKind::Symmetric) SG_CHECK(p.k == p.n, "structured gemm: symmetric B must be square");
  const int64_t a_cols = p.a.kind == OperandKind::Symmetric ? p.k : (p.a.trans ? p.m : p.k);
  const int64_t b_cols = p.b.kind == OperandKind::Symmetric ? p.n : (p.b.trans ? p.k : p.n);
  SG_CHECK(p.lda >= a_cols && p.ldb >= b_cols && p.ldc >= p.n && p.lda < kLimit && p.ldb < kLimit,
           "structured gemm: leading dimensions lda = ", p.lda, ", ldb = ", p.ldb, ", ldc = ", p.ldc,
           " do not fit the operands");
}

/// `p` with each Symmetric operand whose storage holds its mirror (GemmOperand::mirror_stored: the
/// Symmetric tensors matmul passes) read as the Dense matrix it is, so that no kernel redirects
/// its lower triangle and no launcher copies it first (mirror copies, symmetric_copy_kernel). A
/// symmetric matrix is its own transpose, so either layout reads the same values: outer-major for
/// the TF32 loops (A not transposed, B transposed: the wgmma loop's direct TMA copies, and Sym·Sym
/// becomes a product for the wide kernel), k-major for the others (the layout the FP64 loop copies
/// Symmetric operands into). Measured: docs/structured_gemm.md, "Stored mirrors trusted".
GemmProblem with_stored_mirrors_as_dense(GemmProblem p, DType dtype, int device) {
  const bool outer_major = dtype == DType::Float32 && p.tf32 && tensor_cores_usable(device);
  if (p.a.kind == OperandKind::Symmetric && p.a.mirror_stored) p.a = GemmOperand{OperandKind::Dense, !outer_major};
  if (p.b.kind == OperandKind::Symmetric && p.b.mirror_stored) p.b = GemmOperand{OperandKind::Dense, outer_major};
  return p;
}

}  // namespace

void set_gemm_schedule(GemmSchedule schedule) { current_schedule.store(static_cast<int>(schedule)); }

GemmSchedule gemm_schedule() { return static_cast<GemmSchedule>(current_schedule.load()); }

void set_tf32_loop(Tf32Loop loop) { current_tf32_loop.store(static_cast<int>(loop)); }

Tf32Loop tf32_loop() { return static_cast<Tf32Loop>(current_tf32_loop.load()); }

void set_operand_relayout(OperandRelayout relayout) { current_relayout.store(static_cast<int>(relayout)); }

OperandRelayout operand_relayout() { return static_cast<OperandRelayout>(current_relayout.load()); }

int64_t relayout_copies() { return relayout_copy_count.load(); }

int64_t mirror_copies() { return mirror_copy_count.load(); }

void set_poison_relayout_copies(bool poison) { poison_relayout.store(poison); }

int64_t pipelined_launches() { return pipelined_launch_count.load(); }

void set_register_b(RegisterB setting) { current_register_b.store(static_cast<int>(setting)); }

RegisterB register_b() { return static_cast<RegisterB>(current_register_b.load()); }

int64_t register_b_launches() { return register_b_launch_count.load(); }

int64_t raw_block_map_launches() { return raw_block_map_launch_count.load(); }
int64_t tma_store_launches() { return tma_store_launch_count.load(); }
int64_t mirror_zero_launches() { return mirror_zero_launch_count.load(); }

void set_wide_tma_store(bool on) { current_wide_tma_store.store(on); }

bool wide_tma_store() { return current_wide_tma_store.load(); }

int64_t wide_tma_store_launches() { return wide_tma_store_launch_count.load(); }

void set_wide_split(WideSplit setting) { current_wide_split.store(static_cast<int>(setting)); }

WideSplit wide_split() { return static_cast<WideSplit>(current_wide_split.load()); }

int64_t wide_split_launches() { return wide_split_launch_count.load(); }

void set_wide_tiles(WideTiles setting) { current_wide_tiles.store(static_cast<int>(setting)); }

WideTiles wide_tiles() { return static_cast<WideTiles>(current_wide_tiles.load()); }

int64_t wide_launches() { return wide_launch_count.load(); }

int64_t wide_structured_launches() { return wide_structured_launch_count.load(); }

void set_tall_tiles(TallTiles setting) { current_tall_tiles.store(static_cast<int>(setting)); }

TallTiles tall_tiles() { return static_cast<TallTiles>(current_tall_tiles.load()); }

int64_t tall_launches() { return tall_launch_count.load(); }

void set_transposed_a_output(bool on) { transposed_a_output_on.store(on); }

void set_dependent_launch(bool on) { dependent_launch_on.store(on); }

bool dependent_launch() { return dependent_launch_on.load(); }

bool transposed_a_output() { return transposed_a_output_on.load(); }

int64_t transposed_a_outputs() { return transposed_a_output_count.load(); }

void set_fp32_loop(Fp32Loop loop) { current_fp32_loop.store(static_cast<int>(loop)); }

Fp32Loop fp32_loop() { return static_cast<Fp32Loop>(current_fp32_loop.load()); }

int64_t dmma_launches() { return dmma_launch_count.load(); }

const GemmWorkPlan& structured_gemm_plan(const GemmProblem& p, DType dtype, int device) {
  check_problem(p);
  DeviceGuard guard(device);
  return cached_plan(with_stored_mirrors_as_dense(p, dtype, device), dtype, device).plan;
}

void launch_structured_gemm(const GemmProblem& problem, DType dtype, int device) {
  check_problem(problem);
  if (problem.m == 0 || problem.n == 0) return;
  DeviceGuard guard(device);
  const GemmProblem p = with_stored_mirrors_as_dense(problem, dtype, device);
  const CachedPlan& cached = cached_plan(p, dtype, device);
  switch (cached.plan.config) {
    case GemmTileConfig::Float32Large: launch_with<ConfigF32Large>(p, cached, device); break;
    case GemmTileConfig::Float32Small: launch_with<ConfigF32Small>(p, cached, device); break;
    case GemmTileConfig::Float32Tf32: launch_with<ConfigTf32>(p, cached, device); break;
    case GemmTileConfig::Float32Tf32Wgmma: launch_wgmma(p, cached, device); break;
    case GemmTileConfig::Float64: launch_with<ConfigF64>(p, cached, device); break;
    case GemmTileConfig::Float32Dmma:
      launch_dmma(p, cached, device);
      dmma_launch_count.fetch_add(1, std::memory_order_relaxed);
      break;
  }
}

}  // namespace sg::detail::cuda
