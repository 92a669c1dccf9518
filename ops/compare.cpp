// Comparisons and selection: masks through the backend's compare kernel, where / maximum /
// minimum as broadcast binary kernels with their masked backward, max / min (along a dimension or
// over the whole tensor) / amax / amin / argmax / argmin / logsumexp through arg_reduce, whose
// indices route the gradient back, and allclose / equal as a mask's minimum read back.
#include <structgrad/ops/compare.h>

#include <cmath>

#include <structgrad/autograd/grad_mode.h>
#include <structgrad/autograd/node.h>
#include <structgrad/ops/elementwise.h>
#include <structgrad/ops/factories.h>
#include <structgrad/ops/reduce.h>
#include <structgrad/ops/shape.h>
#include "ops/op_util.h"

namespace sg {

using autograd::BackwardContext;
using detail::BinaryOp;
using detail::CompareOp;

namespace {

/// The dtype of a mask over operands of `dtype`: itself when floating, float32 for int64.
DType mask_dtype(DType dtype) { return is_floating_point(dtype) ? dtype : DType::Float32; }

Tensor compare_raw(const char* op, CompareOp kind, const Tensor& a, const Tensor& b, DType out_dtype) {
  detail::check_same_device_dtype(op, a, b);
  Shape out_shape;
  const detail::Broadcast bc = detail::make_broadcast(op, a.shape(), b.shape(), out_shape);
  Tensor out = detail::make_tensor(out_shape, out_dtype, a.device());
  if (out.numel() > 0) detail::backend_of(a).compare(kind, a, b, out, bc);
  return out;
}

Tensor compare_op(const char* op, CompareOp kind, const Tensor& a, const Tensor& b) {
  return compare_raw(op, kind, a, b, mask_dtype(a.dtype()));
}

Tensor scalar_like(const char* op, const Tensor& a, double value) {
  detail::check_defined(op, a);
  return full({}, value, TensorOptions().dtype(a.dtype()).device(a.device()));
}

/// The same structure when both operands share it and the shape (max(0, 0) = 0 keeps Upper).
Structure shared_structure(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.structure() == b.structure() ? a.structure() : Structure::Dense;
}

Tensor extremum(const char* op, BinaryOp kind, const Tensor& a, const Tensor& b) {
  detail::check_same_device_dtype(op, a, b);
  detail::check_floating(op, a);
  Tensor out = detail::binary_raw(op, kind, a, b, 0, shared_structure(a, b));
  if (!autograd::needs_record({a, b})) return out;
  const Shape a_shape = a.shape(), b_shape = b.shape();
  const CompareOp wins = kind == BinaryOp::Maximum ? CompareOp::Gt : CompareOp::Lt;
  autograd::record(op, {a, b}, {out}, {a, b}, [op, wins, a_shape, b_shape](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_outputs[0];
    const Tensor &x = ctx.saved[0], &y = ctx.saved[1];
    // a's share: 1 where it wins, 1/2 on a tie; b gets the rest.
    const Tensor a_wins = compare_raw(op, wins, x, y, x.dtype());
    const Tensor tie = compare_raw(op, CompareOp::Eq, x, y, x.dtype());
    const Tensor share = detail::binary_raw(op, BinaryOp::AddScaled, a_wins, tie, 0.5, Structure::Dense);
    const Tensor ga = detail::binary_raw(op, BinaryOp::Mul, g, share, 0, Structure::Dense);
    Tensor da, db;
    if (ctx.needs(0)) da = detail::sum_to(ga, a_shape);
    if (ctx.needs(1)) db = detail::sum_to(detail::binary_raw(op, BinaryOp::Sub, g, ga, 0, Structure::Dense), b_shape);
    return std::vector<Tensor>{da, db};
  });
  return out;
}

/// The [outer, reduce, inner] view of x around dimension d.
struct Around {
  int64_t outer, reduce, inner, d;
  Shape kept, dropped;  // the result's shape with and without the reduced dimension
};

Around around(const char* op, const Tensor& x, int64_t dim) {
  SG_CHECK(x.dim() >= 1, op, ": reducing along a dimension needs a tensor of rank 1 or more, got shape ", x.shape());
  Around a;
  a.d = detail::wrap_dim(op, dim, x.shape());
  const Shape& s = x.shape();
  a.outer = shape_numel(Shape(s.begin(), s.begin() + a.d));
  a.reduce = s[static_cast<size_t>(a.d)];
  a.inner = shape_numel(Shape(s.begin() + a.d + 1, s.end()));
  SG_CHECK(a.reduce > 0, op, ": dimension ", dim, " of shape ", s, " is empty");
  a.kept = s;
  a.kept[static_cast<size_t>(a.d)] = 1;
  a.dropped = s;
  a.dropped.erase(a.dropped.begin() + a.d);
  return a;
}

std::tuple<Tensor, Tensor> arg_reduce_op(const char* op, detail::ArgReduce kind, const Tensor& x, int64_t dim,
                                         bool keepdim, bool want_values) {
  detail::check_defined(op, x);
  const Around a = around(op, x, dim);
  const Shape& shape = keepdim ? a.kept : a.dropped;
  Tensor indices = detail::make_tensor(shape, DType::Int64, x.device());
  Tensor values = want_values ? detail::empty_on(x, shape) : Tensor();
  if (indices.numel() > 0) detail::backend_of(x).arg_reduce(kind, x, values, indices, a.outer, a.reduce, a.inner);
  if (want_values && autograd::needs_record({x})) {
    detail::IndexMap m;
    m.outer = a.outer;
    m.extent = a.reduce;
    m.count = 1;
    m.inner = a.inner;
    m.per_element = true;
    const Shape x_shape = x.shape();
    autograd::record(op, {x}, {values}, {indices}, [m, x_shape](BackwardContext& ctx) {
      detail::IndexMap with_index = m;
      with_index.index = &ctx.saved[0];
      return std::vector<Tensor>{detail::scatter_into_zeros(ctx.grad_outputs[0], x_shape, with_index, false)};
    });
  }
  return {values, indices};
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare_op("eq", CompareOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare_op("ne", CompareOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare_op("lt", CompareOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare_op("le", CompareOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare_op("gt", CompareOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare_op("ge", CompareOp::Ge, a, b); }
Tensor eq(const Tensor& a, double b) { return eq(a, scalar_like("eq", a, b)); }
Tensor ne(const Tensor& a, double b) { return ne(a, scalar_like("ne", a, b)); }
Tensor lt(const Tensor& a, double b) { return lt(a, scalar_like("lt", a, b)); }
Tensor le(const Tensor& a, double b) { return le(a, scalar_like("le", a, b)); }
Tensor gt(const Tensor& a, double b) { return gt(a, scalar_like("gt", a, b)); }
Tensor ge(const Tensor& a, double b) { return ge(a, scalar_like("ge", a, b)); }

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  detail::check_defined("where", condition);
  detail::check_same_device_dtype("where", a, b);
  detail::check_floating("where", a);
  SG_CHECK(condition.device() == a.device(), "where: the condition is on ", condition.device(), ", the operands on ",
           a.device());
  const Tensor c = condition.dtype() == a.dtype() ? condition.detach() : condition.detach().to(a.dtype());
  // Each branch keeps exact zeros where it is not chosen; their sum is the chosen value alone.
  const Tensor from_a = detail::binary_raw("where", BinaryOp::KeepWhere, a, c, 0, Structure::Dense);
  const Tensor from_b = detail::binary_raw("where", BinaryOp::KeepWhereNot, b, c, 0, Structure::Dense);
  Tensor out = detail::binary_raw("where", BinaryOp::Add, from_a, from_b, 0, Structure::Dense);
  if (autograd::needs_record({a, b})) {
    const Shape a_shape = a.shape(), b_shape = b.shape();
    autograd::record("where", {a, b}, {out}, {c}, [a_shape, b_shape](BackwardContext& ctx) {
      const Tensor& g = ctx.grad_outputs[0];
      const Tensor& mask = ctx.saved[0];
      Tensor da, db;
      if (ctx.needs(0))
        da = detail::sum_to(detail::binary_raw("where", BinaryOp::KeepWhere, g, mask, 0, Structure::Dense), a_shape);
      if (ctx.needs(1))
        db = detail::sum_to(detail::binary_raw("where", BinaryOp::KeepWhereNot, g, mask, 0, Structure::Dense), b_shape);
      return std::vector<Tensor>{da, db};
    });
  }
  return out;
}

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum("maximum", BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum("minimum", BinaryOp::Minimum, a, b); }

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_reduce_op("max", detail::ArgReduce::Max, x, dim, keepdim, true);
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_reduce_op("min", detail::ArgReduce::Min, x, dim, keepdim, true);
}
namespace {
/// The extreme element of all of x, 0-d: the reduction along the one dimension of x flattened.
Tensor extreme_of_all(const char* op, detail::ArgReduce kind, const Tensor& x) {
  detail::check_defined(op, x);
  SG_CHECK(x.numel() > 0, op, ": got an empty tensor of shape ", x.shape());
  return std::get<0>(arg_reduce_op(op, kind, reshape(x, {x.numel()}), 0, false, true));
}
}  // namespace

Tensor max(const Tensor& x) { return extreme_of_all("max", detail::ArgReduce::Max, x); }
Tensor min(const Tensor& x) { return extreme_of_all("min", detail::ArgReduce::Min, x); }
Tensor amax(const Tensor& x, int64_t dim, bool keepdim) {
  return std::get<0>(arg_reduce_op("amax", detail::ArgReduce::Max, x, dim, keepdim, true));
}
Tensor amin(const Tensor& x, int64_t dim, bool keepdim) {
  return std::get<0>(arg_reduce_op("amin", detail::ArgReduce::Min, x, dim, keepdim, true));
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  detail::check_defined("allclose", a);
  detail::check_defined("allclose", b);
  detail::check_same_device_dtype("allclose", a, b);
  detail::check_floating("allclose", a);
  SG_CHECK(rtol >= 0 && atol >= 0, "allclose: tolerances must not be negative, got rtol = ", rtol, ", atol = ", atol);
  Shape shape;
  detail::make_broadcast("allclose", a.shape(), b.shape(), shape);
  if (shape_numel(shape) == 0) return true;
  NoGradGuard no_grad;
  // Equal, or both finite and within the tolerance (an infinity is close only to itself).
  const Tensor finite = lt(abs(a), INFINITY) * lt(abs(b), INFINITY);
  const Tensor close = maximum(eq(a, b), finite * le(abs(a - b), atol + rtol * abs(b)));
  return min(close).item() == 1.0;  // every entry close (a sum could round above 2²⁴ entries)
}

bool equal(const Tensor& a, const Tensor& b) {
  detail::check_defined("equal", a);
  detail::check_defined("equal", b);
  SG_CHECK(a.device() == b.device(), "equal: expected both tensors on one device, got ", a.device(), " and ",
           b.device());
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  if (a.numel() == 0) return true;
  NoGradGuard no_grad;
  return min(eq(a, b)).item() == 1.0;
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return std::get<1>(arg_reduce_op("argmax", detail::ArgReduce::Max, x, dim, keepdim, false));
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  return std::get<1>(arg_reduce_op("argmin", detail::ArgReduce::Min, x, dim, keepdim, false));
}

Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_floating("logsumexp", x);
  const Around a = around("logsumexp", x, dim);
  Tensor kept;
  {
    NoGradGuard no_grad;
    // Shifted by the largest element (0 where it is ±inf, so that inf − inf never appears).
    const Tensor largest = std::get<0>(max(x.detach(), a.d, true));
    const Tensor shift = detail::unary_raw(detail::UnaryOp::FiniteOrZero, largest, 0);
    kept = log(sum(exp(x.detach() - shift), a.d, true)) + shift;
  }
  Tensor out = keepdim ? kept : detail::alias_with(kept, a.dropped, Structure::Dense);
  if (autograd::needs_record({x})) {
    const Shape kept_shape = a.kept;
    autograd::record("logsumexp", {x}, {out}, {x, kept}, [kept_shape](BackwardContext& ctx) {
      // d/dx log Σ exp(x) = exp(x − logsumexp(x)), the softmax.
      const Tensor g = detail::alias_with(ctx.grad_outputs[0], kept_shape, Structure::Dense);
      const Tensor softmax =
          detail::unary_raw(detail::UnaryOp::Exp,
                            detail::binary_raw("logsumexp", BinaryOp::Sub, ctx.saved[0], ctx.saved[1], 0, Structure::Dense), 0);
      return std::vector<Tensor>{detail::binary_raw("logsumexp", BinaryOp::Mul, softmax, g, 0, Structure::Dense)};
    });
  }
  return out;
}

}  // namespace sg
