// Elementwise ops: structure rule, forward through the backend, and the backward beside it.
// Unary backwards use the fused *Grad binary kernels (one pass each); broadcast binary
// backwards sum the gradient back down to each input's shape.
#include <structgrad/ops/elementwise.h>

#include <cmath>

#include <structgrad/autograd/node.h>
#include <structgrad/ops/factories.h>
#include "ops/op_util.h"
#include <structgrad/ops/reduce.h>

namespace sg {

using autograd::BackwardContext;
using detail::BinaryOp;
using detail::UnaryOp;

namespace detail {

static bool maps_zero_to_zero(UnaryOp op, double alpha) {
  switch (op) {
    case UnaryOp::Neg: case UnaryOp::Sqrt: case UnaryOp::Square: case UnaryOp::Abs:
    case UnaryOp::Tanh: case UnaryOp::Relu: case UnaryOp::LeakyRelu: case UnaryOp::Sign:
    case UnaryOp::MulScalar: return true;
    case UnaryOp::DivScalar: return alpha != 0;
    case UnaryOp::PowScalar: return alpha > 0;
    default: return false;
  }
}

Structure unary_structure(int op, double alpha, Structure in) {
  if (in == Structure::Symmetric) return Structure::Symmetric;
  if (in == Structure::UpperTriangular && maps_zero_to_zero(static_cast<UnaryOp>(op), alpha))
    return Structure::UpperTriangular;
  return Structure::Dense;
}

/// Shape and index map of a broadcast binary op; throws naming `op` when incompatible.
static Broadcast2D broadcast(const char* op, const Tensor& a, const Tensor& b, Shape& out_shape) {
  Broadcast2D bc;
  if (a.shape() == b.shape()) {
    out_shape = a.shape();
    bc.rows = 1;
    bc.cols = a.numel();
    bc.a_cs = bc.b_cs = 1;
    bc.same = true;
    return bc;
  }
  if (b.numel() == 1 && b.dim() <= a.dim()) {
    out_shape = a.shape();
    bc.rows = a.numel();
    bc.cols = 1;
    bc.a_rs = 1;
    return bc;
  }
  if (a.numel() == 1 && a.dim() <= b.dim()) {
    out_shape = b.shape();
    bc.rows = b.numel();
    bc.cols = 1;
    bc.b_rs = 1;
    return bc;
  }
  SG_CHECK(a.dim() <= 2 && b.dim() <= 2, op, ": shapes ", a.shape(), " and ", b.shape(), " cannot be broadcast");
  auto as2 = [](const Tensor& t) -> std::pair<int64_t, int64_t> {
    if (t.dim() == 2) return {t.size(0), t.size(1)};
    if (t.dim() == 1) return {1, t.size(0)};
    return {1, 1};
  };
  const auto [ar, ac] = as2(a);
  const auto [br, bcols] = as2(b);
  SG_CHECK((ar == br || ar == 1 || br == 1) && (ac == bcols || ac == 1 || bcols == 1), op, ": shapes ",
           a.shape(), " and ", b.shape(), " cannot be broadcast");
  // A dimension of 1 stretches to the other (also to 0: [0, 3] + [1, 3] is [0, 3]).
  bc.rows = ar == 1 ? br : ar;
  bc.cols = ac == 1 ? bcols : ac;
  bc.a_rs = ar == 1 ? 0 : ac;
  bc.a_cs = ac == 1 ? 0 : 1;
  bc.b_rs = br == 1 ? 0 : bcols;
  bc.b_cs = bcols == 1 ? 0 : 1;
  if (std::max(a.dim(), b.dim()) == 2) out_shape = {bc.rows, bc.cols};
  else out_shape = {bc.cols};
  return bc;
}

static Structure binary_structure(BinaryOp op, const Tensor& a, const Tensor& b, bool same_shape) {
  const Structure sa = a.structure(), sb = b.structure();
  const bool b_scalar = b.numel() == 1 && !same_shape;
  if (op == BinaryOp::Mul) {
    if (same_shape && (sa == Structure::UpperTriangular || sb == Structure::UpperTriangular))
      return Structure::UpperTriangular;
    if (b_scalar) return sa;  // a scalar keeps Upper (0·c = 0) and Symmetric
  }
  if (op == BinaryOp::Div && b_scalar && sa == Structure::Symmetric) return sa;
  if (same_shape && sa == sb && sa != Structure::Dense) {
    if (op == BinaryOp::Add || op == BinaryOp::Sub || op == BinaryOp::Mul) return sa;
    if (op == BinaryOp::Div && sa == Structure::Symmetric) return sa;
  }
  return Structure::Dense;
}

/// An UpperTriangular result whose kernel may have written non-zeros below the diagonal
/// (0·inf = NaN from an operand that is not upper, or a non-finite scalar) gets them zeroed:
/// entries a structure ignores stay exact zeros, whatever non-finite values meet them.
static Tensor keep_upper_zeros(const Tensor& out) {
  if (out.numel() == 0) return out;
  Tensor fixed = empty_like(out, Structure::UpperTriangular);
  backend_of(out).triu(out, fixed, 0);
  return fixed;
}

/// Not recorded: the kernels backward closures and other ops are built from.
Tensor unary_raw(UnaryOp op, const Tensor& x, double alpha) {
  Tensor out = empty_like(x, unary_structure(static_cast<int>(op), alpha, x.structure()));
  if (x.numel() > 0) backend_of(x).unary(op, x, out, alpha);
  if (out.structure() == Structure::UpperTriangular && !std::isfinite(alpha)) return keep_upper_zeros(out);
  return out;
}

Tensor binary_raw(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, double alpha,
                  Structure structure) {
  check_same_device_dtype(name, a, b);
  Shape out_shape;
  const Broadcast2D bc = broadcast(name, a, b, out_shape);
  Tensor out = make_tensor(out_shape, a.dtype(), a.device(), structure);
  if (out.numel() > 0) backend_of(a).binary(op, a, b, out, bc, alpha);
  // Every binary op maps (0, 0) to 0 for finite alpha, so two upper operands give an upper result.
  const bool both_upper = a.structure() == Structure::UpperTriangular && b.structure() == Structure::UpperTriangular &&
                          bc.same && std::isfinite(alpha);
  if (structure == Structure::UpperTriangular && !both_upper) return keep_upper_zeros(out);
  return out;
}

/// Structure of a fused gradient g ⊙ f'(x): upper when g is upper and f' is finite at 0,
/// symmetric when both are symmetric; otherwise Dense (the engine projects anyway).
static Structure grad_structure(BinaryOp op, const Tensor& g, const Tensor& x) {
  if (g.structure() == Structure::Symmetric && x.structure() == Structure::Symmetric) return Structure::Symmetric;
  const bool finite_at_zero = op != BinaryOp::SqrtGrad && op != BinaryOp::PowGrad && op != BinaryOp::Div;
  if (g.structure() == Structure::UpperTriangular && finite_at_zero && g.shape() == x.shape())
    return Structure::UpperTriangular;
  return Structure::Dense;
}

static Tensor fused_grad(BinaryOp op, const Tensor& g, const Tensor& x, double alpha = 0) {
  return binary_raw("backward", op, g, x, alpha, grad_structure(op, g, x));
}

}  // namespace detail

namespace {

Tensor unary_op(const char* name, UnaryOp op, const Tensor& x, double alpha = 0) {
  detail::check_defined(name, x);
  Tensor out = detail::unary_raw(op, x, alpha);
  if (!autograd::needs_record({x})) return out;

  // What the backward needs: the input x, or the output y.
  bool save_output = op == UnaryOp::Exp || op == UnaryOp::Sqrt || op == UnaryOp::Tanh || op == UnaryOp::Sigmoid;
  autograd::record(name, {x}, {out}, {save_output ? out : x}, [op, alpha](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_outputs[0];
    const Tensor& s = ctx.saved[0];  // x, or y where save_output
    using detail::fused_grad;
    Tensor dx;
    switch (op) {
      case UnaryOp::Neg: dx = detail::unary_raw(UnaryOp::Neg, g, 0); break;
      case UnaryOp::Exp: dx = fused_grad(BinaryOp::Mul, g, s); break;
      case UnaryOp::Log: dx = fused_grad(BinaryOp::Div, g, s); break;
      case UnaryOp::Sqrt: dx = fused_grad(BinaryOp::SqrtGrad, g, s); break;
      case UnaryOp::Square: dx = fused_grad(BinaryOp::PowGrad, g, s, 2.0); break;
      case UnaryOp::Abs: dx = fused_grad(BinaryOp::AbsGrad, g, s); break;
      case UnaryOp::Tanh: dx = fused_grad(BinaryOp::TanhGrad, g, s); break;
      case UnaryOp::Sigmoid: dx = fused_grad(BinaryOp::SigmoidGrad, g, s); break;
      case UnaryOp::Relu: dx = fused_grad(BinaryOp::ReluGrad, g, s); break;
      case UnaryOp::LeakyRelu: dx = fused_grad(BinaryOp::LeakyReluGrad, g, s, alpha); break;
      case UnaryOp::Softplus: dx = fused_grad(BinaryOp::SoftplusGrad, g, s); break;
      case UnaryOp::Step: case UnaryOp::Sign: dx = zeros_like(s); break;
      case UnaryOp::AddScalar: dx = g; break;
      case UnaryOp::MulScalar: dx = detail::unary_raw(UnaryOp::MulScalar, g, alpha); break;
      case UnaryOp::DivScalar: dx = detail::unary_raw(UnaryOp::DivScalar, g, alpha); break;
      case UnaryOp::RSubScalar: dx = detail::unary_raw(UnaryOp::Neg, g, 0); break;
      case UnaryOp::RDivScalar: {
        // d(a/x) = −a/x² · g
        Tensor x2 = detail::unary_raw(UnaryOp::Square, s, 0);
        dx = detail::unary_raw(UnaryOp::MulScalar, fused_grad(BinaryOp::Div, g, x2), -alpha);
        break;
      }
      case UnaryOp::PowScalar: dx = fused_grad(BinaryOp::PowGrad, g, s, alpha); break;
    }
    return std::vector<Tensor>{dx};
  });
  return out;
}

Tensor binary_op(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  detail::check_same_device_dtype(name, a, b);
  Shape out_shape;
  const bool same = a.shape() == b.shape();
  Tensor out = detail::binary_raw(name, op, a, b, 0, detail::binary_structure(op, a, b, same));
  if (!autograd::needs_record({a, b})) return out;

  const bool need_values = op == BinaryOp::Mul || op == BinaryOp::Div;
  std::vector<Tensor> saved;
  if (need_values) saved = {a, b};
  const Shape a_shape = a.shape(), b_shape = b.shape();
  autograd::record(name, {a, b}, {out}, saved, [op, a_shape, b_shape](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_outputs[0];
    Tensor da, db;
    using detail::binary_raw;
    using detail::sum_to;
    switch (op) {
      case BinaryOp::Add:
        if (ctx.needs(0)) da = sum_to(g, a_shape);
        if (ctx.needs(1)) db = sum_to(g, b_shape);
        break;
      case BinaryOp::Sub:
        if (ctx.needs(0)) da = sum_to(g, a_shape);
        if (ctx.needs(1)) db = detail::unary_raw(UnaryOp::Neg, sum_to(g, b_shape), 0);
        break;
      case BinaryOp::Mul: {
        const Tensor &x = ctx.saved[0], &y = ctx.saved[1];
        if (ctx.needs(0)) da = sum_to(mul(g, y), a_shape);
        if (ctx.needs(1)) db = sum_to(mul(g, x), b_shape);
        break;
      }
      case BinaryOp::Div: {
        const Tensor &x = ctx.saved[0], &y = ctx.saved[1];
        if (ctx.needs(0)) da = sum_to(div(g, y), a_shape);
        if (ctx.needs(1)) db = sum_to(neg(div(mul(g, x), mul(y, y))), b_shape);
        break;
      }
      default: SG_FAIL("backward: unexpected binary op");
    }
    return std::vector<Tensor>{da, db};
  });
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary_op("add", BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary_op("sub", BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_op("mul", BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_op("div", BinaryOp::Div, a, b); }

Tensor neg(const Tensor& x) { return unary_op("neg", UnaryOp::Neg, x); }
Tensor exp(const Tensor& x) { return unary_op("exp", UnaryOp::Exp, x); }
Tensor log(const Tensor& x) { return unary_op("log", UnaryOp::Log, x); }
Tensor sqrt(const Tensor& x) { return unary_op("sqrt", UnaryOp::Sqrt, x); }
Tensor square(const Tensor& x) { return unary_op("square", UnaryOp::Square, x); }
Tensor abs(const Tensor& x) { return unary_op("abs", UnaryOp::Abs, x); }
Tensor tanh(const Tensor& x) { return unary_op("tanh", UnaryOp::Tanh, x); }
Tensor sigmoid(const Tensor& x) { return unary_op("sigmoid", UnaryOp::Sigmoid, x); }
Tensor relu(const Tensor& x) { return unary_op("relu", UnaryOp::Relu, x); }
Tensor leaky_relu(const Tensor& x, double slope) { return unary_op("leaky_relu", UnaryOp::LeakyRelu, x, slope); }
Tensor softplus(const Tensor& x) { return unary_op("softplus", UnaryOp::Softplus, x); }
Tensor step(const Tensor& x) { return unary_op("step", UnaryOp::Step, x); }
Tensor pow(const Tensor& x, double exponent) { return unary_op("pow", UnaryOp::PowScalar, x, exponent); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, double s) { return unary_op("add", UnaryOp::AddScalar, a, s); }
Tensor operator+(double s, const Tensor& a) { return unary_op("add", UnaryOp::AddScalar, a, s); }
Tensor operator-(const Tensor& a, double s) { return unary_op("sub", UnaryOp::AddScalar, a, -s); }
Tensor operator-(double s, const Tensor& a) { return unary_op("sub", UnaryOp::RSubScalar, a, s); }
Tensor operator*(const Tensor& a, double s) { return unary_op("mul", UnaryOp::MulScalar, a, s); }
Tensor operator*(double s, const Tensor& a) { return unary_op("mul", UnaryOp::MulScalar, a, s); }
Tensor operator/(const Tensor& a, double s) { return unary_op("div", UnaryOp::DivScalar, a, s); }
Tensor operator/(double s, const Tensor& a) { return unary_op("div", UnaryOp::RDivScalar, a, s); }

}  // namespace sg
