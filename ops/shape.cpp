// transpose, reshape, diagonal, with_diagonal, each with its backward.
#include <structgrad/ops/shape.h>

#include <structgrad/autograd/node.h>
#include <structgrad/ops/factories.h>
#include "ops/op_util.h"

namespace sg {

Tensor transpose(const Tensor& x) {
  detail::check_floating("transpose", x);
  if (x.dim() < 2) return x;
  const detail::MatrixBatch view = detail::matrix_batch("transpose", nullptr, x);
  detail::require_single_matrix("transpose", view);
  if (detail::traits(x.structure()).symmetric) return x;  // Sᵀ = S
  // Uᵀ is lower and Lᵀ upper: the tag follows the zeros (the structure table's transpose).
  const Structure s = detail::traits(x.structure()).transpose;
  Tensor out = detail::empty_on(x, view.shape_with(view.cols, view.rows), s);
  if (out.numel() > 0) detail::backend_of(x).transpose(x, out);
  if (autograd::needs_record({x})) {
    autograd::record("transpose", {x}, {out}, {}, [](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{transpose(ctx.grad_outputs[0])};
    });
  }
  return out;
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  detail::check_defined("reshape", x);
  Shape target = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      SG_CHECK(infer < 0, "reshape: only one dimension can be -1 in ", shape);
      infer = static_cast<int64_t>(i);
    } else {
      SG_CHECK(target[i] >= 0, "reshape: bad shape ", shape);
      SG_CHECK(!__builtin_mul_overflow(known, target[i], &known), "reshape: shape ", shape, " has too many elements");
    }
  }
  if (infer >= 0) {
    SG_CHECK(known > 0 && x.numel() % known == 0, "reshape: shape ", shape, " is invalid for ", x.numel(),
             " elements");
    target[static_cast<size_t>(infer)] = x.numel() / known;
  }
  SG_CHECK(shape_numel(target) == x.numel(), "reshape: shape ", shape, " is invalid for input of shape ", x.shape());
  Tensor out = detail::alias_with(x, target, Structure::Dense);
  if (autograd::needs_record({x})) {
    const Shape from = x.shape();
    autograd::record("reshape", {x}, {out}, {}, [from](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{reshape(ctx.grad_outputs[0], from)};
    });
  }
  return out;
}

Tensor diagonal(const Tensor& x) {
  const int64_t n = detail::one_square_matrix("diagonal", x).rows;
  Tensor out = detail::empty_on(x, {n});
  if (n > 0) detail::backend_of(x).diagonal(x, out);
  if (autograd::needs_record({x})) {
    const Structure s = x.structure();
    autograd::record("diagonal", {x}, {out}, {}, [n, s](autograd::BackwardContext& ctx) {
      // A diagonal matrix satisfies every structure's invariant: tag it like x.
      const Tensor& g = ctx.grad_outputs[0];
      Tensor z = zeros({n, n}, TensorOptions().dtype(g.dtype()).device(g.device()));
      Tensor dx = detail::make_tensor({n, n}, g.dtype(), g.device(), s);
      if (n > 0) detail::backend_of(g).set_diagonal(z, g, dx);
      return std::vector<Tensor>{dx};
    });
  }
  return out;
}

Tensor with_diagonal(const Tensor& x, const Tensor& d) {
  detail::one_square_matrix("with_diagonal", x);
  detail::check_same_device_dtype("with_diagonal", x, d);
  SG_CHECK(d.dim() == 1 && d.size(0) == x.size(0), "with_diagonal: diagonal of shape ", d.shape(),
           " does not fit a matrix of shape ", x.shape());
  Tensor out = detail::empty_like(x, x.structure());
  if (x.numel() > 0) detail::backend_of(x).set_diagonal(x, d, out);
  if (autograd::needs_record({x, d})) {
    autograd::record("with_diagonal", {x, d}, {out}, {}, [](autograd::BackwardContext& ctx) {
      const Tensor& g = ctx.grad_outputs[0];
      Tensor dx, dd;
      const bool empty = g.numel() == 0;
      if (ctx.needs(0)) {
        dx = detail::empty_like(g, g.structure());
        if (!empty)
          detail::backend_of(g).set_diagonal(g, zeros({g.size(0)}, TensorOptions().dtype(g.dtype()).device(g.device())), dx);
      }
      if (ctx.needs(1)) {
        dd = detail::empty_on(g, {g.size(0)});
        if (!empty) detail::backend_of(g).diagonal(g, dd);
      }
      return std::vector<Tensor>{dx, dd};
    });
  }
  return out;
}

}  // namespace sg
