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

/// The view of an op's floating-point square operand [..., n, n] (check_floating and square_batch).
MatrixBatch square_matrices(const char* op, const Tensor& t);

/// Matrix `index` (row-major over the batch) of `view` in messages: "the matrix" for one matrix,
/// "matrix 3 of the batch" for a batch of one dimension, "matrix [1, 2] of the batch" otherwise.
std::string matrix_name(const MatrixBatch& view, int64_t index);

/// Where matrix `index` (row-major over the batch) of `view` lies, for messages: "" for one matrix,
/// " of matrix 3 of the batch" for a batch of one dimension, " of matrix [1, 2] of the batch" otherwise.
std::string matrix_position(const MatrixBatch& view, int64_t index);

/// The broadcast of the batch shapes of a and b (matrices or batches of them; torch.matmul's rule);
/// throws naming `op` and both shapes where they do not broadcast.
Shape broadcast_batch_shape(const char* op, const Tensor& a, const Tensor& b);

/// t [..., r, c] broadcast over `batch_shape` (t's batch shape must broadcast to it), keeping its
/// structure tag: t itself where its batch shape is already `batch_shape` or where t holds one matrix
/// (the batch then shares it: batch stride 0); otherwise a differentiable copy.
Tensor batch_broadcast(const Tensor& t, const Shape& batch_shape);

/// Matrix i of t [..., r, c] as an [r, c] tensor over t's memory (no copy, no ownership: t must
/// outlive it and the work queued on it), for a backend that runs a batch one matrix at a time.
Tensor matrix_of(const Tensor& t, int64_t i);

/// The number of matrices of t [..., r, c].
inline int64_t matrix_count(const Tensor& t) { return shape_numel(Shape(t.shape().begin(), t.shape().end() - 2)); }

}  // namespace sg::detail
