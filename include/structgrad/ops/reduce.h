// Reductions: sum, mean and the 2-norm over all elements or along one dimension.
#pragma once

#include <structgrad/core/tensor.h>

namespace sg {

/// Sum of all elements, a 0-d tensor. Example: `auto loss = sg::sum(x * x);`
Tensor sum(const Tensor& x);
/// Sum along `dim` (negative counts from the end). Example: `sg::sum(z, 1)` → [batch].
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
/// Mean of all elements, a 0-d tensor. Example: `auto l = sg::mean(sg::square(y - t));`
Tensor mean(const Tensor& x);
/// Mean along `dim`. Example: `sg::mean(x, 0)` → column means [n].
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);

/// The 2-norm of all elements, √Σ x², a 0-d tensor; its gradient x/‖x‖ is 0 at x = 0.
/// Example: `auto n = sg::norm(w);`
Tensor norm(const Tensor& x);
/// The 2-norm along `dim`. Example: `sg::norm(rows, 1)` → [n].
Tensor norm(const Tensor& x, int64_t dim, bool keepdim = false);

namespace detail {
/// Sums `g` down to `shape` (undoing a broadcast); returns g when shapes already match.
Tensor sum_to(const Tensor& g, const Shape& shape);
}  // namespace detail

}  // namespace sg
