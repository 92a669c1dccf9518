// The structured GEMM kernels' parameters: each operand seen as V(outer, k), and the output and
// work list (GemmArgs). Plain data, shared by the kernels, the launcher and the kernel selection.
#pragma once

#include <cstdint>

#include "cuda/gemm/tile_scheduler.h"
#include "ops/gemm_desc.h"

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
  Structure mask;
  bool c_vector_ok;
  const GemmWorkItem* items;
  int* counters;     // one arrival counter per split tile, 0 between launches
  T* partials;       // partial_tiles × kTile² workspace, of the config's accumulator type (Acc)
};

/// The view of an operand of `p`: A (is_b false, extent m) or B (extent n), over `data` with row
/// stride `ld`. Its storage holds its zeros (zeros_stored) only where the caller says so.
template <typename T>
OperandView<T> operand_view(const void* data, GemmOperand d, bool is_b, int64_t extent, int64_t ld) {
  OperandView<T> v;
  v.data = static_cast<const T*>(data);
  v.ld = ld;
  v.extent = static_cast<int32_t>(extent);
  // A: V(m, k) = op(A)[m][k] is A[m][k] (outer-major) or A[k][m] when transposed.
  // B: V(n, k) = op(B)[k][n] is B[k][n] (k-major) or B[n][k] when transposed.
  v.layout = (d.trans != is_b) ? Layout::KMajor : Layout::OuterMajor;
  v.pattern = is_b ? b_pattern(d) : a_pattern(d);
  constexpr int kVec = 16 / sizeof(T);
  v.vector_ok = reinterpret_cast<uintptr_t>(data) % 16 == 0 && ld % kVec == 0;
  v.zeros_stored = false;
  return v;
}

/// Which TMA maps a wgmma launch has (TmaMaps::has): per operand direct and raw, B's raw map as
/// one 3-D box per k-step, and C's map for TMA stores.
enum TmaMapBits : uint32_t { kADirect = 1, kARaw = 2, kBDirect = 4, kBRaw = 8, kBRawBlocks = 16, kCStore = 32 };

/// The tiled wgmma kernel with TMA copies (structured_gemm_tma_kernel): which operands come by TMA
/// (A, B or both), with a third shared buffer where both come by direct copies only (Deep), a
/// triangular operand's diagonal-crossing steps by TMA too (Diag), or both triangles of Symmetric
/// operands (Sym).
enum class TmaVariant : uint8_t { A, B, AB, ABDeep, ABDiag, ABDeepDiag, ABSym };

/// The tiled kernel's operand staging, the contract of its mainloop (kernel_tiled.cuh): which
/// operands' fast-path steps come by TMA, the shared buffers per operand, and which other steps come by
/// TMA too. RegisterStaging: every step through registers (every configuration without TMA maps).
struct RegisterStaging {
  static constexpr bool kTmaA = false, kTmaB = false;
  static constexpr int kStages = 2;
  static constexpr bool kDiag = false, kSym = false;
};
/// The staging of a TmaVariant.
template <TmaVariant kVariant>
struct TmaStaging {
  static constexpr bool kTmaA = kVariant != TmaVariant::B;
  static constexpr bool kTmaB = kVariant != TmaVariant::A;
  /// Three buffers per operand where both come by direct copies only (no raw ring: its space is a third).
  static constexpr int kStages = kVariant == TmaVariant::ABDeep || kVariant == TmaVariant::ABDeepDiag ? 3 : 2;
  /// A triangular operand's diagonal-crossing steps by TMA, their structural zeros written after the copy.
  static constexpr bool kDiag = kVariant == TmaVariant::ABDiag || kVariant == TmaVariant::ABDeepDiag;
  /// Both triangles of Symmetric operands by TMA (stored: directly, mirrored: raw).
  static constexpr bool kSym = kVariant == TmaVariant::ABSym;
};

/// Which operand a stager stages.
enum class Side : uint8_t { A, B };

/// Whether the tall kernel also writes op(A)ᵀ (GemmProblem::at): one instance each, so the one that
/// does not has no code for it.
enum class TransposedA : uint8_t { None, Written };

/// Which threads hold a tile's accumulators when the epilogue writes it: the whole block, or the
/// consumer warpgroups of a kernel with a producer warp (which has left by then).
enum class AccumulatorThreads : uint8_t { Block, Consumers };

}  // namespace sg::detail::cuda
