// A tensor seen as a batch of matrices: its trailing two dimensions are each matrix's rows and
// columns, its leading ones the batch (as torch.matmul and torch.linalg see [..., m, n]). Every matrix
// op computes this view once, for its checks and its output shapes; its batch strides and
// matrix_stride() are what a batched product's GemmProblem takes (its L mode). Internal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <structgrad/core/tensor.h>

namespace sg::detail {

struct MatrixBatch {
  Shape batch_shape;                   ///< the leading dimensions ([] for one matrix)
  std::vector<int64_t> batch_strides;  ///< elements between neighbours along each; 0 where broadcast
  int64_t rows = 0, cols = 0;
  int64_t row_stride = 0;              ///< elements between a matrix's rows (packed: cols)

  /// The number of matrices (1 for one matrix, 0 for an empty batch).
  int64_t count() const { return shape_numel(batch_shape); }
  /// True for a single matrix: no batch dimensions at all.
  bool single() const { return batch_shape.empty(); }
  bool square() const { return rows == cols; }
  /// The elements between matrix i and i + 1 where the batch flattens to one uniform step (packed
  /// matrices: rows · cols; one matrix shared by the batch: 0), or −1 where it does not.
  int64_t matrix_stride() const;
  /// The shape of a tensor of this batch whose matrices are rows × cols: batch_shape + [rows, cols].
  Shape shape_with(int64_t rows, int64_t cols) const;
};

/// The view of `t` ([..., rows, cols], packed); `op` and `what` ("T", "the input"; null for an op's one
/// operand) name it in the error when t has fewer than two dimensions: "solve_triangular: expected T to
/// be a matrix or a batch of matrices, got shape [3]", "triu: expected a matrix or a batch of ...".
MatrixBatch matrix_batch(const char* op, const char* what, const Tensor& t);

/// matrix_batch of a square tensor ([..., n, n]): also throws when the last two dimensions differ
/// ("cholesky: expected a square matrix or a batch of them, got shape [2, 3]").
MatrixBatch square_batch(const char* op, const char* what, const Tensor& t);

/// a and b over the broadcast of their batch shapes (torch.matmul's rule: aligned on the right, a 1
/// or a missing dimension stretches), each with stride 0 along the dimensions it is broadcast; throws
/// naming `op` and both shapes where they do not broadcast.
void broadcast_batches(const char* op, MatrixBatch& a, MatrixBatch& b);

/// Throws naming `op` unless `view` is a single matrix: for the ops whose kernels take one matrix at a
/// time ("matmul: batches of matrices are not supported yet, got a batch of shape [4] of 2 × 2 matrices").
void require_single_matrix(const char* op, const MatrixBatch& view);

/// matrix_batch and require_single_matrix: the view of an operand of an op that takes one matrix.
MatrixBatch one_matrix(const char* op, const char* what, const Tensor& t);

/// The view of an op's one floating-point square operand, for an op that takes one matrix at a time:
/// check_floating, square_batch and require_single_matrix.
MatrixBatch one_square_matrix(const char* op, const Tensor& t);

}  // namespace sg::detail
