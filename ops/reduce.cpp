// Sum and mean, with their backward (broadcast the gradient back), and sum_to (the
// reduction that undoes a broadcast in binary backwards).
#include <structgrad/ops/reduce.h>

#include <structgrad/autograd/node.h>
#include <structgrad/ops/elementwise.h>
#include "ops/op_util.h"
#include <structgrad/ops/shape.h>

namespace sg {

namespace detail {

Tensor expand_raw(const Tensor& g, const Shape& shape, int64_t rows, int64_t cols, int64_t g_row_stride,
                  int64_t g_col_stride) {
  Tensor out = make_tensor(shape, g.dtype(), g.device());
  if (out.numel() == 0) return out;
  Broadcast2D bc;
  bc.rows = rows;
  bc.cols = cols;
  bc.a_rs = bc.b_rs = g_row_stride;
  bc.a_cs = bc.b_cs = g_col_stride;
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

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int64_t n = shape_numel(shape);
  if (n == 1) return alias_with(sum_raw(g, {}, 1, g.numel(), 1), shape, Structure::Dense);
  SG_CHECK(g.dim() == 2, "sum_to: cannot reduce ", g.shape(), " to ", shape);
  const int64_t rows = g.size(0), cols = g.size(1);
  if (n == cols && (shape.size() == 1 || shape[0] == 1))
    return alias_with(sum_raw(g, {cols}, 1, rows, cols), shape, Structure::Dense);
  if (shape.size() == 2 && shape[0] == rows && shape[1] == 1)
    return alias_with(sum_raw(g, {rows}, rows, cols, 1), shape, Structure::Dense);
  SG_FAIL("sum_to: cannot reduce ", g.shape(), " to ", shape);
}

}  // namespace detail

Tensor sum(const Tensor& x) {
  detail::check_defined("sum", x);
  Tensor out = detail::sum_raw(x, {}, 1, x.numel(), 1);
  if (autograd::needs_record({x})) {
    const Shape shape = x.shape();
    autograd::record("sum", {x}, {out}, {}, [shape](autograd::BackwardContext& ctx) {
      const int64_t n = shape_numel(shape);
      return std::vector<Tensor>{detail::expand_raw(ctx.grad_outputs[0], shape, n, 1, 0, 0)};
    });
  }
  return out;
}

Tensor sum(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined("sum", x);
  SG_CHECK(x.dim() >= 1 && x.dim() <= 2, "sum: reducing along a dimension needs a 1-D or 2-D tensor, got shape ",
           x.shape());
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  SG_CHECK(d >= 0 && d < x.dim(), "sum: dimension ", dim, " out of range for shape ", x.shape());
  if (x.dim() == 1) {
    Tensor s = sum(x);
    return keepdim ? reshape(s, {1}) : s;
  }
  const int64_t rows = x.size(0), cols = x.size(1);
  Shape out_shape = d == 0 ? Shape{cols} : Shape{rows};
  Tensor out = d == 0 ? detail::sum_raw(x, out_shape, 1, rows, cols) : detail::sum_raw(x, out_shape, rows, cols, 1);
  if (keepdim) out = detail::alias_with(out, d == 0 ? Shape{1, cols} : Shape{rows, 1}, Structure::Dense);
  if (autograd::needs_record({x})) {
    autograd::record("sum", {x}, {out}, {}, [rows, cols, d](autograd::BackwardContext& ctx) {
      const Tensor& g = ctx.grad_outputs[0];
      // d == 0: g [cols] repeats down the rows; d == 1: g [rows] repeats along each row.
      return std::vector<Tensor>{d == 0 ? detail::expand_raw(g, {rows, cols}, rows, cols, 0, 1)
                                        : detail::expand_raw(g, {rows, cols}, rows, cols, 1, 0)};
    });
  }
  return out;
}

Tensor mean(const Tensor& x) {
  detail::check_defined("mean", x);
  SG_CHECK(x.numel() > 0, "mean: got an empty tensor of shape ", x.shape());
  return sum(x) / static_cast<double>(x.numel());
}

Tensor mean(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined("mean", x);
  SG_CHECK(x.dim() >= 1 && x.dim() <= 2, "mean: reducing along a dimension needs a 1-D or 2-D tensor, got shape ",
           x.shape());
  SG_CHECK(dim >= -x.dim() && dim < x.dim(), "mean: dimension ", dim, " out of range for shape ", x.shape());
  const int64_t n = x.size(dim);
  SG_CHECK(n > 0, "mean: dimension ", dim, " of shape ", x.shape(), " is empty");
  return sum(x, dim, keepdim) / static_cast<double>(n);
}

}  // namespace sg
