// Sum and mean, with their backward (broadcast the gradient back), and sum_to (the
// reduction that undoes a broadcast in binary backwards).
#include <structgrad/ops/reduce.h>

#include <structgrad/autograd/grad_mode.h>
#include <structgrad/autograd/node.h>
#include <structgrad/ops/compare.h>
#include <structgrad/ops/factories.h>
#include <structgrad/ops/elementwise.h>
#include "ops/op_util.h"
#include <structgrad/ops/shape.h>

namespace sg {

namespace detail {

Tensor expand_raw(const Tensor& g, const Shape& shape) {
  Shape out_shape;
  Broadcast bc = make_broadcast("expand", g.shape(), shape, out_shape);
  SG_CHECK(out_shape == shape, "expand: shape ", g.shape(), " does not broadcast to ", shape);
  Tensor out = make_tensor(shape, g.dtype(), g.device());
  if (out.numel() == 0) return out;
  bc.same = g.shape() == shape;
  for (int d = 0; d < bc.dims; ++d) bc.b_stride[d] = bc.a_stride[d];  // First reads a; b is g again
  backend_of(g).binary(BinaryOp::First, g, g, out, bc, 0);
  return out;
}

// x viewed as [outer, reduce, inner] summed over the middle.
static Tensor sum_raw(const Tensor& x, const Shape& out_shape, int64_t outer, int64_t reduce, int64_t inner) {
  Tensor out = make_tensor(out_shape, x.dtype(), x.device());
  if (out.numel() == 0) return out;
  if (reduce == 0) {
    backend_of(x).fill(out, 0.0);
    return out;
  }
  backend_of(x).sum(x, out, outer, reduce, inner);
  return out;
}

/// x summed along dimension d, kept as a dimension of size 1.
static Tensor sum_dim_raw(const Tensor& x, int64_t d) {
  const Shape& s = x.shape();
  const int64_t outer = shape_numel(Shape(s.begin(), s.begin() + d));
  const int64_t inner = shape_numel(Shape(s.begin() + d + 1, s.end()));
  Shape kept = s;
  kept[static_cast<size_t>(d)] = 1;
  return sum_raw(x, kept, outer, s[static_cast<size_t>(d)], inner);
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int64_t n = shape_numel(shape);
  if (n == 1) return alias_with(sum_raw(g, {}, 1, g.numel(), 1), shape, Structure::Dense);
  SG_CHECK(g.dim() >= static_cast<int64_t>(shape.size()), "sum_to: cannot reduce ", g.shape(), " to ", shape);
  // The leading dimensions shape lacks collapse into one, summed first; then each dimension where
  // shape has a 1 and g does not.
  const size_t lead = g.shape().size() - shape.size();
  Tensor cur = g;
  if (lead > 0) {
    const int64_t outer = shape_numel(Shape(g.shape().begin(), g.shape().begin() + static_cast<int64_t>(lead)));
    const Shape rest(g.shape().begin() + static_cast<int64_t>(lead), g.shape().end());
    cur = sum_raw(g, rest, 1, outer, shape_numel(rest));
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == cur.shape()[d]) continue;
    SG_CHECK(shape[d] == 1, "sum_to: cannot reduce ", g.shape(), " to ", shape);
    cur = sum_dim_raw(cur, static_cast<int64_t>(d));
  }
  return alias_with(cur, shape, Structure::Dense);
}

/// The dimension `dim` of x, negative counting from the end; throws naming `op` when out of range.
int64_t wrap_dim(const char* op, int64_t dim, const Shape& shape) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t d = dim < 0 ? dim + rank : dim;
  SG_CHECK(d >= 0 && d < rank, op, ": dimension ", dim, " out of range for shape ", shape);
  return d;
}

}  // namespace detail

Tensor sum(const Tensor& x) {
  detail::check_floating("sum", x);
  Tensor out = detail::sum_raw(x, {}, 1, x.numel(), 1);
  if (autograd::needs_record({x})) {
    const Shape shape = x.shape();
    autograd::record("sum", {x}, {out}, {}, [shape](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{detail::expand_raw(ctx.grad_outputs[0], shape)};
    });
  }
  return out;
}

Tensor sum(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_floating("sum", x);
  SG_CHECK(x.dim() >= 1, "sum: reducing along a dimension needs a tensor of rank 1 or more, got shape ", x.shape());
  const int64_t d = detail::wrap_dim("sum", dim, x.shape());
  Tensor kept = detail::sum_dim_raw(x, d);
  Shape out_shape = x.shape();
  out_shape.erase(out_shape.begin() + d);
  // A sum over a batch dimension adds matrices of one structure: the structure stays.
  const Structure s = d < x.dim() - 2 ? x.structure() : Structure::Dense;
  Tensor out = detail::alias_with(kept, keepdim ? kept.shape() : out_shape, s);
  if (autograd::needs_record({x})) {
    const Shape x_shape = x.shape(), kept_shape = kept.shape();
    autograd::record("sum", {x}, {out}, {}, [x_shape, kept_shape](autograd::BackwardContext& ctx) {
      const Tensor g = detail::alias_with(ctx.grad_outputs[0], kept_shape, Structure::Dense);
      return std::vector<Tensor>{detail::expand_raw(g, x_shape)};
    });
  }
  return out;
}

Tensor mean(const Tensor& x) {
  detail::check_floating("mean", x);
  SG_CHECK(x.numel() > 0, "mean: got an empty tensor of shape ", x.shape());
  return sum(x) / static_cast<double>(x.numel());
}

Tensor mean(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_floating("mean", x);
  SG_CHECK(x.dim() >= 1, "mean: reducing along a dimension needs a tensor of rank 1 or more, got shape ", x.shape());
  const int64_t n = x.size(detail::wrap_dim("mean", dim, x.shape()));
  SG_CHECK(n > 0, "mean: dimension ", dim, " of shape ", x.shape(), " is empty");
  return sum(x, dim, keepdim) / static_cast<double>(n);
}

namespace {
/// √Σ x² of x reduced by `reduce` (a sum over everything or along a dimension, with keepdim), and
/// its backward g·x/‖x‖, 0 where ‖x‖ = 0 (the subgradient PyTorch takes).
template <typename Reduce>
Tensor norm_of(const char* op, const Tensor& x, const Reduce& reduce, const Shape& kept_shape) {
  detail::check_floating(op, x);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = sqrt(reduce(square(x.detach())));
  }
  if (autograd::needs_record({x})) {
    autograd::record(op, {x}, {out}, {x, out}, [kept_shape](autograd::BackwardContext& ctx) {
      const Tensor n = detail::alias_with(ctx.saved[1], kept_shape, Structure::Dense);
      const Tensor g = detail::alias_with(ctx.grad_outputs[0], kept_shape, Structure::Dense);
      const Tensor scale = where(eq(n, 0.0), zeros_like(n), g / n);
      return std::vector<Tensor>{ctx.saved[0] * scale};
    });
  }
  return out;
}
}  // namespace

Tensor norm(const Tensor& x) {
  detail::check_defined("norm", x);
  const Shape ones(static_cast<size_t>(x.dim()), 1);
  return norm_of("norm", x, [](const Tensor& t) { return sum(t); }, ones);
}

Tensor norm(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined("norm", x);
  SG_CHECK(x.dim() >= 1, "norm: reducing along a dimension needs a tensor of rank 1 or more, got shape ", x.shape());
  const int64_t d = detail::wrap_dim("norm", dim, x.shape());
  Shape kept = x.shape();
  kept[static_cast<size_t>(d)] = 1;
  return norm_of("norm", x, [d, keepdim](const Tensor& t) { return sum(t, d, keepdim); }, kept);
}

}  // namespace sg
