// Shape ops: transpose, reshape (a view), diagonal and with_diagonal.
#pragma once

#include <structgrad/core/tensor.h>

namespace sg {

/// xᵀ for a matrix (a copy). transpose(Symmetric) is the same tensor; transpose(Upper) is
/// LowerTriangular and transpose(Lower) UpperTriangular. 1-D tensors are returned unchanged.
/// Example: `auto t = sg::transpose(m);`
Tensor transpose(const Tensor& x);
/// A view with another shape (one entry may be −1). The result is Dense.
/// Example: `sg::reshape(x, {-1})`.
Tensor reshape(const Tensor& x, const Shape& shape);
/// The main diagonal of a square matrix, [n]. Example: `auto d = sg::diagonal(u);`
Tensor diagonal(const Tensor& x);
/// x with its diagonal replaced by d, keeping x's structure (the diagonal does not touch
/// either invariant). Example: `auto U = sg::with_diagonal(W, sg::exp(sg::diagonal(W)));`
Tensor with_diagonal(const Tensor& x, const Tensor& d);

}  // namespace sg
