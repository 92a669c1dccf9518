// The structured-GEMM descriptors shared by every backend (DESIGN §5):
//   C[m×n] = alpha · op(A)[m×k] · op(B)[k×n],  op(X) = X or Xᵀ,
// where each operand says which structure op(X) has and the output says which part of C
// is computed. One kernel family (CPU blocked Eigen, CUDA tiled) serves every forward and
// backward product through these descriptors.
#pragma once

#include <cstdint>

namespace sg::detail {

/// Structure of op(X) as the kernel reads it.
///  Dense:     every entry.
///  Upper:     op(X)[i][j] == 0 for j < i; the zero triangle is never read (its values do not
///             reach C), unless the operand says its storage holds the zeros (zeros_stored).
///  Lower:     op(X)[i][j] == 0 for j > i (e.g. Uᵀ of an UpperTriangular U, trans = true).
///  Symmetric: op(X) == op(X)ᵀ, read from the upper triangle of the storage only
///             (S[i][j] = i <= j ? s[i][j] : s[j][i]); `trans` is irrelevant. Unless the
///             operand says its storage holds the mirror too (mirror_stored): then a backend
///             may read it as the Dense matrix it is, in either layout.
enum class OperandKind : uint8_t { Dense, Upper, Lower, Symmetric };

/// Upper or Lower: an operand with a zero triangle.
inline bool is_triangular(OperandKind kind) { return kind == OperandKind::Upper || kind == OperandKind::Lower; }

/// Which part of C is computed.
///  Full:      every entry of C.
///  Upper:     entries i <= j; entries below the diagonal are written as exact zeros.
///  Symmetric: entries i <= j are computed and mirrored bit for bit into j > i (valid only
///             when the product is symmetric, e.g. gram(a) = a·aᵀ).
enum class OutputMask : uint8_t { Full, Upper, Symmetric };

struct GemmOperand {
  OperandKind kind = OperandKind::Dense;
  bool trans = false;  ///< op(X) = Xᵀ: the storage is [k, m] (for A) or [n, k] (for B)
  /// Upper / Lower only: the caller vouches that the storage outside the structure holds exact
  /// zeros (an UpperTriangular tensor's invariant, DESIGN §1), so a kernel that copies whole
  /// tiles may use those zeros instead of writing its own. False for a buffer read through a
  /// structure (an unprojected gradient): its other triangle holds anything.
  bool zeros_stored = false;
  /// Symmetric only: the caller vouches that the storage holds both triangles, s[i][j] == s[j][i]
  /// bit for bit (a Symmetric tensor's invariant, DESIGN §1), so a kernel may read the operand as
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
  OutputMask mask = OutputMask::Full;
  double alpha = 1.0;
  /// float32 only: the product may run on TF32 tensor cores (sg::set_matmul_precision);
  /// float64 ignores it, and so does the CPU backend.
  bool tf32 = false;
  const void* a_data = nullptr;
  const void* b_data = nullptr;
  void* c_data = nullptr;
  int64_t lda = 0, ldb = 0, ldc = 0;
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

/// Range of k in which both op(A)[row block] and op(B)[col block] can be non-zero, for the
/// output block rows [row0, row1) × cols [col0, col1). Upper·Upper: k in [row0, col1).
/// Returns an empty range (k_end <= k_begin) when the block of C is structurally zero.
struct KRange {
  int64_t begin, end;
};
#if defined(__CUDACC__)
__host__ __device__
#endif
inline KRange structured_k_range(OperandKind a, OperandKind b, int64_t row0, int64_t row1,
                                 int64_t col0, int64_t col1, int64_t k) {
  int64_t begin = 0, end = k;
  if (a == OperandKind::Upper) begin = row0;                        // op(A)[i][p] != 0 needs p >= i
  if (a == OperandKind::Lower) end = row1 < end ? row1 : end;       // needs p <= i
  if (b == OperandKind::Lower && col0 > begin) begin = col0;        // op(B)[p][j] != 0 needs p >= j
  if (b == OperandKind::Upper && col1 < end) end = col1;            // needs p <= j
  if (end < begin) end = begin;
  return {begin, end};
}

}  // namespace sg::detail
