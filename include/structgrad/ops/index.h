// Indexing, slicing and joining, each differentiable. Every result is a new contiguous tensor
// (storage in structgrad is always contiguous, so a slice is a copy). Indices are int64 tensors
// (sg::kInt64) on the data's device; an index out of range is an sg::Error naming the op, checked
// before anything runs (on CUDA the check reads one value back, a synchronisation).
#pragma once

#include <vector>

#include <structgrad/core/tensor.h>

namespace sg {

/// The slices of x at positions `index` (1-D int64) along `dim`; positions may repeat. Its
/// gradient adds each slice back where it came from. Example: `auto batch = sg::index_select(X, 0, idx);`
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// Positions start, start + step, … before end along `dim` (step ≥ 1). Negative start or end
/// count from the end, and both are clamped to the dimension, as in Python.
/// Example: `sg::slice(x, 0, 2, 10, 2)` → rows 2, 4, 6, 8.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
/// `length` positions from `start` along `dim` (both must lie inside). Example: `sg::narrow(x, 1, 0, 3)`.
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
/// The rows × cols block of a matrix at (row, col). A diagonal block (row == col, rows == cols)
/// of an UpperTriangular, LowerTriangular or Symmetric matrix keeps the structure; every other block is Dense.
/// Example: `sg::UpperTriangular u11(sg::block(U, 0, 0, k, k));`
Tensor block(const Tensor& x, int64_t row, int64_t col, int64_t rows, int64_t cols);
/// out[…][j][…] = x[…][index[…][j][…]][…] along `dim`: index (int64) has x's rank and x's sizes
/// except along `dim`; out has index's shape. Example: `sg::gather(logits, 1, labels_column)`.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// x with src added at the positions `index` gives along `dim` (gather's adjoint): index and src
/// have one shape, x's sizes except along `dim`; repeated positions add up.
/// Example: `auto counts = sg::scatter_add(sg::zeros({1, k}), 1, ids, sg::ones({1, n}));`
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// x with slice j of src added at position index[j] along `dim` (index_select's adjoint): index
/// is 1-D, src has x's shape with index.numel() along `dim`. Example: `sg::index_add(acc, 0, idx, rows)`.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// The tensors joined along `dim`; they agree in rank, dtype, device and every other size.
/// Example: `auto xy = sg::cat({x, y}, 1);`
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// The tensors (one shape) joined along a new dimension `dim`. Example: `sg::stack({a, b})` → [2, …].
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

namespace detail {
/// index_select without the range check, for indices known to be in range (a permutation).
Tensor index_select_trusted(const Tensor& x, int64_t dim, const Tensor& index);
}  // namespace detail

}  // namespace sg
