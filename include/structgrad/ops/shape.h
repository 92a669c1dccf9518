// Shape ops: transpose, reshape (a view), broadcast_to, diagonal, with_diagonal and diag_embed.
// The matrix ops take a matrix [n, n] or a batch of them [..., n, n] and work matrix by matrix.
#pragma once

#include <structgrad/core/tensor.h>

namespace sg {

/// xᵀ of each matrix of x [..., r, c] (a copy), [..., c, r]. transpose(Symmetric) is the same
/// tensor; transpose(Upper) is LowerTriangular and transpose(Lower) UpperTriangular. 1-D tensors are
/// returned unchanged. Example: `auto t = sg::transpose(m);`
Tensor transpose(const Tensor& x);
/// A view with another shape (one entry may be −1). A reshape of the batch dimensions alone keeps
/// the structure tag; any other is Dense. Example: `sg::reshape(x, {-1})`.
Tensor reshape(const Tensor& x, const Shape& shape);
/// x broadcast to `shape` (NumPy's rule; a copy), like torch.broadcast_to. The gradient sums over
/// the broadcast dimensions. A structured x [..., n, n] broadcast over batch dimensions keeps its
/// tag. Example: `auto batch = sg::broadcast_to(L, {8, 3, 3});`
Tensor broadcast_to(const Tensor& x, const Shape& shape);
/// The main diagonal of each square matrix of x [..., n, n], [..., n]. Example: `auto d = sg::diagonal(u);`
Tensor diagonal(const Tensor& x);
/// x [..., n, n] with each matrix's diagonal replaced by d [..., n], keeping x's structure (the
/// diagonal does not touch either invariant). Example: `auto U = sg::with_diagonal(W, sg::exp(sg::diagonal(W)));`
Tensor with_diagonal(const Tensor& x, const Tensor& d);
/// The diagonal matrices of d [..., n], [..., n, n] (Dense), like torch.diag_embed. Example:
/// `auto D = sg::diag_embed(sg::exp(log_scale));`
Tensor diag_embed(const Tensor& d);

}  // namespace sg
