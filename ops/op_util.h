// Helpers shared by the op files: allocating outputs on an input's device and reaching
// that device's backend. Internal.
#pragma once

#include "core/capture.h"
#include <structgrad/core/tensor.h>
#include "core/structures.h"
#include "ops/backend.h"
#include "ops/matrix_batch.h"

namespace sg::detail {

inline Backend& backend_of(const Tensor& t) { return backend_for(t.device()); }

inline Tensor empty_like(const Tensor& t, Structure s = Structure::Dense) {
  return make_tensor(t.shape(), t.dtype(), t.device(), s);
}

inline Tensor empty_on(const Tensor& like, const Shape& shape, Structure s = Structure::Dense) {
  return make_tensor(shape, like.dtype(), like.device(), s);
}

inline void check_defined(const char* op, const Tensor& t) {
  SG_CHECK(t.defined(), op, ": got an undefined tensor");
}

/// Runs `check` (an op's check that reads its results back) now, or, while a CUDA graph captures work
/// on `device`, after the graph's replays, when its user calls sg::cuda::Graph::check_errors.
template <class Check>
void check_now_or_after_replay(Device device, Check check) {
  if (capturing(device)) {
    defer_check(device, std::move(check));
  } else {
    check();
  }
}

}  // namespace sg::detail

namespace sg::detail {
/// Elementwise kernels without autograd (used by backward closures and other ops).
Tensor unary_raw(UnaryOp op, const Tensor& x, double alpha);
Tensor binary_raw(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, double alpha,
                  Structure structure);
/// The NumPy broadcast of shapes a and b at any rank: the output's shape and the index map;
/// throws naming `op` when they do not broadcast.
Broadcast make_broadcast(const char* op, const Shape& a, const Shape& b, Shape& out_shape);
/// The structure of a broadcast binary op's output (docs/semantics.md; the same in either order).
Structure binary_structure(BinaryOp op, const Tensor& a, const Tensor& b, const Shape& out_shape);
/// `dim` as an index into `shape` (negative counts from the end); throws naming `op`.
int64_t wrap_dim(const char* op, int64_t dim, const Shape& shape);
/// zeros(shape) with src scattered along `m` (added where positions repeat, with `accumulate`).
Tensor scatter_into_zeros(const Tensor& src, const Shape& shape, const IndexMap& m, bool accumulate);
/// alpha·op(a)·op(b) in exact arithmetic (never TF32) without autograd, op(x) = xᵀ where asked,
/// each operand read through its own structure tag. `out` says which part is computed and how the result is tagged: Dense (every
/// entry), Upper or Lower (that triangle, exact zeros in the other), Symmetric (the upper triangle
/// mirrored: only for a product known to be symmetric).
Tensor product_raw(const Tensor& a, bool ta, const Tensor& b, bool tb, Structure out, double alpha = 1.0);
/// out = x projected onto structure s `how` (the table's projection or gradient projection): a copy,
/// the entries outside s's stored part zeroed, or (x + xᵀ)/2. x and out of one shape; no autograd.
void project_into(Projection how, Structure s, const Tensor& x, Tensor& out);
/// x projected onto s as the backward engine projects a gradient (the table's gradient projection),
/// tagged s; differentiable (sg::triu, sg::tril, sg::sym).
Tensor project(const Tensor& x, Structure s);
/// g broadcast to `shape` (g's shape must broadcast to it), a new Dense tensor.
Tensor expand_raw(const Tensor& g, const Shape& shape);
}  // namespace sg::detail
