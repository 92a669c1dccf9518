// transpose, reshape, broadcast_to, diagonal, with_diagonal and diag_embed, each with its backward.
#include <structgrad/ops/shape.h>

#include <structgrad/autograd/node.h>
#include <structgrad/ops/factories.h>
#include <structgrad/ops/reduce.h>
#include <structgrad/ops/structure.h>
#include "ops/op_util.h"

namespace sg {

Tensor transpose(const Tensor& x) {
  detail::check_floating("transpose", x);
  if (x.dim() < 2) return x;
  const detail::MatrixBatch view = detail::matrix_batch("transpose", nullptr, x);
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
  // Matrices that keep their place and shape keep their structure.
  const bool same_matrices = x.dim() >= 2 && target.size() >= 2 && target[target.size() - 2] == x.size(-2) &&
                             target.back() == x.size(-1);
  Tensor out = detail::alias_with(x, target, same_matrices ? x.structure() : Structure::Dense);
  if (autograd::needs_record({x})) {
    const Shape from = x.shape();
    autograd::record("reshape", {x}, {out}, {}, [from](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{reshape(ctx.grad_outputs[0], from)};
    });
  }
  return out;
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  detail::check_defined("broadcast_to", x);
  if (x.shape() == shape) return x;
  Tensor out = detail::expand_raw(x, shape);
  const bool same_matrices = x.dim() >= 2 && shape.size() >= 2 && shape[shape.size() - 2] == x.size(-2) &&
                             shape.back() == x.size(-1);
  if (same_matrices && x.structure() != Structure::Dense) out = detail::alias_with(out, shape, x.structure());
  if (autograd::needs_record({x})) {
    const Shape from = x.shape();
    autograd::record("broadcast_to", {x}, {out}, {}, [from](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{detail::sum_to(ctx.grad_outputs[0], from)};
    });
  }
  return out;
}

namespace {
/// The batch of matrices zeros [..., n, n] with diagonals d [..., n], tagged s (a diagonal matrix
/// holds every structure's invariant).
Tensor diagonal_matrices(const Tensor& d, Structure s) {
  Shape shape = d.shape();
  shape.push_back(d.size(-1));
  Tensor z = zeros(shape, TensorOptions().dtype(d.dtype()).device(d.device()));
  Tensor out = detail::make_tensor(shape, d.dtype(), d.device(), s);
  if (out.numel() > 0) detail::backend_of(d).set_diagonal(z, d, out);
  return out;
}

/// The shape of the diagonals of x [..., n, n]: [..., n].
Shape diagonal_shape(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 1); }
}  // namespace

Tensor diagonal(const Tensor& x) {
  detail::square_matrices("diagonal", x);
  Tensor out = detail::empty_on(x, diagonal_shape(x));
  if (out.numel() > 0) detail::backend_of(x).diagonal(x, out);
  if (autograd::needs_record({x})) {
    const Structure s = x.structure();
    autograd::record("diagonal", {x}, {out}, {}, [s](autograd::BackwardContext& ctx) {
      // A diagonal matrix satisfies every structure's invariant: tag it like x.
      return std::vector<Tensor>{diagonal_matrices(ctx.grad_outputs[0], s)};
    });
  }
  return out;
}

Tensor with_diagonal(const Tensor& x, const Tensor& d) {
  detail::square_matrices("with_diagonal", x);
  detail::check_same_device_dtype("with_diagonal", x, d);
  SG_CHECK(d.shape() == diagonal_shape(x), "with_diagonal: diagonal of shape ", d.shape(),
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
          detail::backend_of(g).set_diagonal(g, zeros(diagonal_shape(g), TensorOptions().dtype(g.dtype()).device(g.device())), dx);
      }
      if (ctx.needs(1)) {
        dd = detail::empty_on(g, diagonal_shape(g));
        if (!empty) detail::backend_of(g).diagonal(g, dd);
      }
      return std::vector<Tensor>{dx, dd};
    });
  }
  return out;
}

Tensor diag_embed(const Tensor& d) {
  detail::check_defined("diag_embed", d);
  detail::check_floating("diag_embed", d);
  SG_CHECK(d.dim() >= 1, "diag_embed: expected a vector or a batch of them, got shape ", d.shape());
  Tensor out = diagonal_matrices(d, Structure::Dense);
  if (autograd::needs_record({d})) {
    autograd::record("diag_embed", {d}, {out}, {}, [](autograd::BackwardContext& ctx) {
      const Tensor& g = ctx.grad_outputs[0];
      Tensor dd = detail::empty_on(g, diagonal_shape(g));
      if (dd.numel() > 0) detail::backend_of(g).diagonal(g, dd);
      return std::vector<Tensor>{dd};
    });
  }
  return out;
}

UpperTriangular with_diagonal(const UpperTriangular& x, const Tensor& d) {
  return UpperTriangular(with_diagonal(static_cast<const Tensor&>(x), d));
}
LowerTriangular with_diagonal(const LowerTriangular& x, const Tensor& d) {
  return LowerTriangular(with_diagonal(static_cast<const Tensor&>(x), d));
}
Symmetric with_diagonal(const Symmetric& x, const Tensor& d) {
  return Symmetric(with_diagonal(static_cast<const Tensor&>(x), d));
}
LowerTriangular transpose(const UpperTriangular& x) { return LowerTriangular(transpose(static_cast<const Tensor&>(x))); }
UpperTriangular transpose(const LowerTriangular& x) { return UpperTriangular(transpose(static_cast<const Tensor&>(x))); }
Symmetric transpose(const Symmetric& x) { return Symmetric(transpose(static_cast<const Tensor&>(x))); }

}  // namespace sg
