// Operand staging: how each k-step tile of A and B reaches shared memory (loads through registers,
// TMA copies straight into the wgmma tile or raw and transposed by the threads), and the register-B
// kernels' A fragments loaded from B's raw tiles.
#pragma once

#include "cuda/gemm/arch/mbarrier.cuh"
#include "cuda/gemm/arch/mma_sync.cuh"
#include "cuda/gemm/arch/tma.cuh"
#include "cuda/gemm/arch/vector_access.cuh"
#include "cuda/gemm/kernel_args.h"
#include "cuda/gemm/tile_config.cuh"
#include "cuda/gemm/tma_maps.h"
#include "cuda/gemm/zero_fill.cuh"

namespace sg::detail::cuda {

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
template <class Cfg, class Staging = RegisterStaging, Side kSide = Side::A>
struct OperandStager {
  using T = typename Cfg::Scalar;
  static constexpr bool kTma = kSide == Side::A ? Staging::kTmaA : Staging::kTmaB;
  static constexpr bool kDiag = Staging::kDiag, kSym = Staging::kSym;
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

/// Keeps the compiler from reusing a wgmma group's A fragment registers before the group is known
/// to be complete (the instruction reads them asynchronously).
__device__ __forceinline__ void keep_fragments(uint32_t (&frag)[2][4]) {
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(frag[s][i])::"memory");
}

/// The tall kernel's A fragments of one k-step: frag[s] those of k8 slice s, as load_register_b.
__device__ __forceinline__ void load_tall_fragments(const float* raw, const int (&offset)[2][2], uint32_t (&frag)[4][4]) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) frag[s][i] = __float_as_uint(raw[offset[i & 1][i >> 1] + s * 8 * 32]) + 0x1000u;
}

/// keep_fragments for a step's four slices.
__device__ __forceinline__ void keep_tall_fragments(uint32_t (&frag)[4][4]) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(frag[s][i])::"memory");
}

}  // namespace sg::detail::cuda
