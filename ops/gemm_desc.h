// The structured-GEMM descriptors shared by every backend (docs/structured_gemm.md):
//   C[m×n] = alpha · op(A)[m×k] · op(B)[k×n],  op(X) = X or Xᵀ,
// where each operand says which structure op(X) has and the output says which part of C
// is computed. One kernel family (CPU blocked Eigen, CUDA tiled) serves every forward and
// backward product through these descriptors.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/structures.h"

namespace sg::detail {

/// The structure of op(X), as the kernel reads it (the table's Pattern for its side):
///  Dense:           every entry.
///  UpperTriangular: op(X)[i][j] == 0 for j < i; the zero triangle is never read (its values do not
///                   reach C), unless the operand says its storage holds the zeros (zeros_stored).
///  LowerTriangular: op(X)[i][j] == 0 for j > i (e.g. Uᵀ of an UpperTriangular U, trans = true).
///  Symmetric:       op(X) == op(X)ᵀ, read from the upper triangle of the storage only
///                   (S[i][j] = i <= j ? s[i][j] : s[j][i]); `trans` is irrelevant. Unless the
///                   operand says its storage holds the mirror too (mirror_stored): then a backend
///                   may read it as the Dense matrix it is, in either layout.
/// The output's structure says which part of C is computed:
///  Dense:           every entry of C.
///  UpperTriangular: entries i <= j; entries below the diagonal are written as exact zeros.
///  Symmetric:       entries i <= j are computed and mirrored bit for bit into j > i (valid only
///                   when the product is symmetric, e.g. gram(a) = a·aᵀ).
/// (A LowerTriangular C is computed as the transposed product: ops/matmul.cpp.)
struct GemmOperand {
  Structure structure = Structure::Dense;  ///< of op(X)
  bool trans = false;  ///< op(X) = Xᵀ: the storage is [k, m] (for A) or [n, k] (for B)
  /// Upper / Lower only: the caller vouches that the storage outside the structure holds exact
  /// zeros (an UpperTriangular tensor's invariant, docs/semantics.md), so a kernel that copies whole
  /// tiles may use those zeros instead of writing its own. False for a buffer read through a
  /// structure (an unprojected gradient): its other triangle holds anything.
  bool zeros_stored = false;
  /// Symmetric only: the caller vouches that the storage holds both triangles, s[i][j] == s[j][i]
  /// bit for bit (a Symmetric tensor's invariant, docs/semantics.md), so a kernel may read the operand as
  /// a Dense matrix, transposed or not, instead of redirecting its lower triangle to the upper.
  /// False for a buffer read through a structure (an unprojected gradient).
  bool mirror_stored = false;
};

/// A fully resolved product on raw row-major buffers (what a kernel receives).
/// Leading dimensions are the storage row strides, at least the row lengths (lda ≥ trans_a ? m : k,
/// ldb ≥ trans_b ? k : n); the library's tensors are packed, so it passes exactly those, and
/// the float64 reference and the CUDA kernels also take longer rows (the padded-row tests).
struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  GemmOperand a, b;
  Structure mask = Structure::Dense;  ///< the structure of C: which part is computed
  double alpha = 1.0;
  /// float32 only: the product may run on TF32 tensor cores (sg::set_matmul_precision);
  /// float64 ignores it, and so does the CPU backend.
  bool tf32 = false;
  const void* a_data = nullptr;
  const void* b_data = nullptr;
  void* c_data = nullptr;
  int64_t lda = 0, ldb = 0, ldc = 0;
  /// The batch (CUTLASS's L mode): `batch` products of these sizes, product i on a_data + i·batch_stride_a,
  /// b_data + i·batch_stride_b and c_data + i·batch_stride_c (strides in elements; 0 shares one operand
  /// across the batch, never C). One product: batch 1. Backends run a batch as batch_item says.
  int64_t batch = 1;
  int64_t batch_stride_a = 0, batch_stride_b = 0, batch_stride_c = 0;
  /// Upper mask only: the caller vouches that C's storage already holds exact zeros everywhere below
  /// the diagonal (the matmul op's pooled outputs: ops/output_pool.h), so a backend may leave those
  /// entries as they are; entries on and above the diagonal are written as always. The CUDA plans
  /// then leave out the tiles wholly below the diagonal.
  bool c_zeros_stored = false;
  /// Dense·Dense with a Full mask only: C += alpha·op(A)·op(B) instead of C = … (the blocked solves'
  /// and factorizations' updates).
  bool accumulate = false;
  /// Optional second output: op(A)ᵀ, for the backward's dB = op(A)ᵀ·G (A not transposed, Dense or
  /// Upper). Where a backend says it writes it for this problem (Backend::writes_transposed_a), the
  /// caller passes a packed buffer of k rows × m columns and the product also writes at[p·m + i] =
  /// op(A)[i][p], from the tiles of A it reads anyway. The buffer then holds every entry of op(A)ᵀ
  /// inside its structure and, for an Upper op(A), the zeros of each row p up to the end of the
  /// 256-aligned block of columns that holds p; the rest holds anything. A product that reads it as a
  /// Lower (or Dense) outer-major operand with its zeros vouched (zeros_stored), in tiles of 64, 128
  /// or 256 rows aligned to their size, reads only what it holds.
  void* at = nullptr;
};

/// Product i of the batch of `p` (GemmProblem::batch), a problem of batch 1; `element` is the dtype's size.
inline GemmProblem batch_item(const GemmProblem& p, int64_t i, size_t element) {
  GemmProblem q = p;
  auto at = [&](const void* data, int64_t stride) {
    return static_cast<const char*>(data) + static_cast<size_t>(i * stride) * element;
  };
  q.a_data = at(p.a_data, p.batch_stride_a);
  q.b_data = at(p.b_data, p.batch_stride_b);
  q.c_data = const_cast<char*>(at(p.c_data, p.batch_stride_c));
  q.batch = 1;
  q.batch_stride_a = q.batch_stride_b = q.batch_stride_c = 0;
  return q;
}

/// Whether the kernels compute an output of structure s directly (GemmProblem::mask): Dense,
/// UpperTriangular, and Symmetric for a product known to be symmetric. A LowerTriangular output is
/// computed as the transposed product's UpperTriangular one (ops/matmul.cpp).
inline bool is_output_mask(Structure s) {
  return s == Structure::Dense || s == Structure::UpperTriangular || s == Structure::Symmetric;
}

/// The patterns of op(A) as operand A and of op(B) as operand B (the structure table's).
inline Pattern a_pattern(const GemmOperand& a) { return traits(a.structure).as_a; }
inline Pattern b_pattern(const GemmOperand& b) { return traits(b.structure).as_b; }

/// Range of k in which both op(A)[row block] and op(B)[col block] can be non-zero, for the
/// output block rows [row0, row1) × cols [col0, col1), given the operands' patterns (a: outer = row,
/// b: outer = column). Upper·Upper: k in [row0, col1). Returns an empty range (k_end <= k_begin) when
/// the block of C is structurally zero.
struct KRange {
  int64_t begin, end;
};
#if defined(__CUDACC__)
__host__ __device__
#endif
inline KRange structured_k_range(Pattern a, Pattern b, int64_t row0, int64_t row1, int64_t col0, int64_t col1,
                                 int64_t k) {
  int64_t begin = 0, end = k;
  if (a == Pattern::KAtLeastOuter) begin = row0;                          // op(A)[i][p] != 0 needs p >= i
  if (a == Pattern::KAtMostOuter) end = row1 < end ? row1 : end;          // needs p <= i
  if (b == Pattern::KAtLeastOuter && col0 > begin) begin = col0;          // op(B)[p][j] != 0 needs p >= j
  if (b == Pattern::KAtMostOuter && col1 < end) end = col1;               // needs p <= j
  if (end < begin) end = begin;
  return {begin, end};
}

/// structured_k_range of the operands of `p`.
inline KRange structured_k_range(const GemmProblem& p, int64_t row0, int64_t row1, int64_t col0, int64_t col1) {
  return structured_k_range(a_pattern(p.a), b_pattern(p.b), row0, row1, col0, col1, p.k);
}

}  // namespace sg::detail
