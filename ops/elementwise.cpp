// Elementwise ops: structure rule, forward through the backend, and the backward beside it.
// Unary backwards use the fused *Grad binary kernels (one pass each); broadcast binary
// backwards sum the gradient back down to each input's shape.
#include <structgrad/ops/elementwise.h>

#include <structgrad/ops/compare.h>

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
    case UnaryOp::ClampMin: return alpha <= 0;
    case UnaryOp::ClampMax: return alpha >= 0;
    case UnaryOp::FiniteOrZero: return true;
    default: return false;
  }
}

/// Upper or Lower: a structure whose other triangle is exact zeros.
static bool triangular(Structure s) { return s == Structure::UpperTriangular || s == Structure::LowerTriangular; }

Structure unary_structure(int op, double alpha, Structure in) {
  if (in == Structure::Symmetric) return Structure::Symmetric;
  if (triangular(in) && maps_zero_to_zero(static_cast<UnaryOp>(op), alpha)) return in;
  return Structure::Dense;
}

Broadcast make_broadcast(const char* op, const Shape& a, const Shape& b, Shape& out_shape) {
  Broadcast bc;
  if (a == b) {  // the common case: one flat pass
    out_shape = a;
    bc.same = true;
    bc.dims = 1;
    bc.size[0] = shape_numel(a);
    bc.a_stride[0] = bc.b_stride[0] = 1;
    return bc;
  }
  const size_t rank = std::max(a.size(), b.size());
  // Align the shapes on their last dimension; a missing leading dimension is a 1.
  auto aligned = [rank](const Shape& s, size_t d) { return d < rank - s.size() ? int64_t{1} : s[d - (rank - s.size())]; };
  out_shape.assign(rank, 1);
  std::vector<int64_t> a_stride(rank), b_stride(rank);
  int64_t a_next = 1, b_next = 1;
  for (size_t k = rank; k-- > 0;) {
    const int64_t as = aligned(a, k), bs = aligned(b, k);
    SG_CHECK(as == bs || as == 1 || bs == 1, op, ": shapes ", a, " and ", b, " cannot be broadcast");
    out_shape[k] = as == 1 ? bs : as;  // a 1 stretches to the other size, 0 included
    a_stride[k] = as == 1 ? 0 : a_next;
    b_stride[k] = bs == 1 ? 0 : b_next;
    a_next *= as;
    b_next *= bs;
  }
  // Merge neighbours that both operands step through alike; drop dimensions of size 1.
  for (size_t k = 0; k < rank; ++k) {
    if (out_shape[k] == 1) continue;
    if (bc.dims > 0) {
      const int d = bc.dims - 1;
      if (bc.a_stride[d] == a_stride[k] * out_shape[k] && bc.b_stride[d] == b_stride[k] * out_shape[k]) {
        bc.size[d] *= out_shape[k];
        bc.a_stride[d] = a_stride[k];
        bc.b_stride[d] = b_stride[k];
        continue;
      }
    }
    SG_CHECK(bc.dims < kMaxBroadcastDims, op, ": broadcasting shapes ", a, " and ", b, " needs more than ",
             kMaxBroadcastDims, " dimensions");
    bc.size[bc.dims] = out_shape[k];
    bc.a_stride[bc.dims] = a_stride[k];
    bc.b_stride[bc.dims] = b_stride[k];
    ++bc.dims;
  }
  if (bc.dims == 0) {  // one element
    bc.dims = 1;
    bc.size[0] = 1;
  }
  return bc;
}

/// True for a one-element operand of rank ≤ 2: 0-d, [1] or [1, 1].
static bool is_scalar_like(const Tensor& t) { return t.numel() == 1 && t.dim() <= 2; }
/// True for a row [n] or [1, n], or a column [n, 1], that scales an n×n matrix along one side.
static bool is_vector_like(const Tensor& t, int64_t n) {
  if (t.dim() == 1) return t.size(0) == n || t.size(0) == 1;
  return t.dim() == 2 && ((t.size(0) == 1 && (t.size(1) == n || t.size(1) == 1)) || (t.size(1) == 1 && t.size(0) == n));
}

/// The output structure of a broadcast binary op (docs/semantics.md), the same in either order. A
/// structured operand passes its structure on only when the output's matrices have its matrices'
/// shape (it may be broadcast over batch dimensions).
///  * mul: Upper ⊙ anything is Upper (zeros stay zero); Sym ⊙ Sym and Sym ⊙ scalar are Symmetric.
///  * div: Upper / (a scalar, row or column) is Upper; Sym / Sym, Sym / scalar and scalar / Sym
///    are Symmetric.
///  * add, sub: a shared structure is kept; Sym ± scalar is Symmetric.
/// Everything else, a row or column against a Symmetric matrix included, is Dense.
Structure binary_structure(BinaryOp op, const Tensor& a, const Tensor& b, const Shape& out_shape) {
  auto passed_on = [&out_shape](const Tensor& t) {
    const size_t rank = out_shape.size();
    const bool same_matrices = t.dim() >= 2 && t.size(-2) == out_shape[rank - 2] && t.size(-1) == out_shape[rank - 1];
    return same_matrices ? t.structure() : Structure::Dense;
  };
  const Structure sa = passed_on(a), sb = passed_on(b);
  const int64_t n = out_shape.size() == 2 ? out_shape[0] : -1;
  auto symmetric = [](Structure s) { return s == Structure::Symmetric; };
  switch (op) {
    case BinaryOp::Mul:
      // Upper ⊙ Lower is diagonal, both at once: it is tagged Upper.
      if (sa == Structure::UpperTriangular || sb == Structure::UpperTriangular) return Structure::UpperTriangular;
      if (sa == Structure::LowerTriangular || sb == Structure::LowerTriangular) return Structure::LowerTriangular;
      if ((symmetric(sa) && (symmetric(sb) || is_scalar_like(b))) || (symmetric(sb) && is_scalar_like(a)))
        return Structure::Symmetric;
      return Structure::Dense;
    case BinaryOp::Div:
      if (triangular(sa) && (is_scalar_like(b) || is_vector_like(b, n))) return sa;
      if ((symmetric(sa) && (symmetric(sb) || is_scalar_like(b))) || (symmetric(sb) && is_scalar_like(a)))
        return Structure::Symmetric;
      return Structure::Dense;
    case BinaryOp::Add:
    case BinaryOp::Sub:
      if (sa == sb && sa != Structure::Dense) return sa;
      if ((symmetric(sa) && is_scalar_like(b)) || (symmetric(sb) && is_scalar_like(a))) return Structure::Symmetric;
      return Structure::Dense;
    default: return Structure::Dense;
  }
}

/// A triangular result whose kernel may have written non-zeros in its zero triangle (0·inf = NaN
/// from an operand that is not triangular alike, or a non-finite scalar) gets them zeroed:
/// entries a structure ignores stay exact zeros, whatever non-finite values meet them.
static Tensor keep_triangle_zeros(const Tensor& out) {
  if (out.numel() == 0) return out;
  Tensor fixed = empty_like(out, out.structure());
  if (out.structure() == Structure::LowerTriangular) backend_of(out).tril(out, fixed, 0);
  else backend_of(out).triu(out, fixed, 0);
  return fixed;
}

/// Not recorded: the kernels backward closures and other ops are built from.
Tensor unary_raw(UnaryOp op, const Tensor& x, double alpha) {
  Tensor out = empty_like(x, unary_structure(static_cast<int>(op), alpha, x.structure()));
  if (x.numel() > 0) backend_of(x).unary(op, x, out, alpha);
  if (triangular(out.structure()) && !std::isfinite(alpha)) return keep_triangle_zeros(out);
  return out;
}

Tensor binary_raw(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, double alpha,
                  Structure structure) {
  check_same_device_dtype(name, a, b);
  Shape out_shape;
  const Broadcast bc = make_broadcast(name, a.shape(), b.shape(), out_shape);
  Tensor out = make_tensor(out_shape, a.dtype(), a.device(), structure);
  if (out.numel() > 0) backend_of(a).binary(op, a, b, out, bc, alpha);
  // Every binary op maps (0, 0) to 0 for finite alpha, so two operands triangular alike give a
  // result triangular alike.
  const bool both_alike = a.structure() == structure && b.structure() == structure && bc.same && std::isfinite(alpha);
  if (triangular(structure) && !both_alike) return keep_triangle_zeros(out);
  return out;
}

/// Structure of a fused gradient g ⊙ f'(x): upper when g is upper and f' is finite at 0,
/// symmetric when both are symmetric; otherwise Dense (the engine projects anyway).
static Structure grad_structure(BinaryOp op, const Tensor& g, const Tensor& x) {
  if (g.structure() == Structure::Symmetric && x.structure() == Structure::Symmetric) return Structure::Symmetric;
  const bool finite_at_zero = op != BinaryOp::SqrtGrad && op != BinaryOp::PowGrad && op != BinaryOp::Div;
  if (triangular(g.structure()) && finite_at_zero && g.shape() == x.shape()) return g.structure();
  return Structure::Dense;
}

static Tensor fused_grad(BinaryOp op, const Tensor& g, const Tensor& x, double alpha = 0) {
  return binary_raw("backward", op, g, x, alpha, grad_structure(op, g, x));
}

}  // namespace detail

namespace {

Tensor unary_op(const char* name, UnaryOp op, const Tensor& x, double alpha = 0) {
  detail::check_floating(name, x);
  Tensor out = detail::unary_raw(op, x, alpha);
  if (!autograd::needs_record({x})) return out;

  // What the backward needs: the input x, or the output y.
  bool save_output = op == UnaryOp::Exp || op == UnaryOp::RPowScalar || op == UnaryOp::Sqrt || op == UnaryOp::Tanh || op == UnaryOp::Sigmoid;
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
      case UnaryOp::Square: dx = fused_grad(BinaryOp::SquareGrad, g, s); break;
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
      case UnaryOp::RPowScalar:  // d(aˣ) = aˣ·ln a · g
        dx = detail::unary_raw(UnaryOp::MulScalar, fused_grad(BinaryOp::Mul, g, s), std::log(alpha));
        break;
      case UnaryOp::ClampMin: dx = fused_grad(BinaryOp::ClampMinGrad, g, s, alpha); break;
      case UnaryOp::ClampMax: dx = fused_grad(BinaryOp::ClampMaxGrad, g, s, alpha); break;
      case UnaryOp::FiniteOrZero: SG_FAIL("backward: FiniteOrZero is not recorded");
    }
    return std::vector<Tensor>{dx};
  });
  return out;
}

Tensor binary_op(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  detail::check_same_device_dtype(name, a, b);
  detail::check_floating(name, a);
  Shape out_shape;
  detail::make_broadcast(name, a.shape(), b.shape(), out_shape);
  Tensor out = detail::binary_raw(name, op, a, b, 0, detail::binary_structure(op, a, b, out_shape));
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
Tensor sign(const Tensor& x) { return unary_op("sign", UnaryOp::Sign, x); }
Tensor pow(const Tensor& x, double exponent) { return unary_op("pow", UnaryOp::PowScalar, x, exponent); }
Tensor pow(double base, const Tensor& exponent) { return unary_op("pow", UnaryOp::RPowScalar, exponent, base); }

Tensor clamp_min(const Tensor& x, double min) { return unary_op("clamp_min", UnaryOp::ClampMin, x, min); }
Tensor clamp_max(const Tensor& x, double max) { return unary_op("clamp_max", UnaryOp::ClampMax, x, max); }
Tensor clamp(const Tensor& x, double min, double max) {
  SG_CHECK(!(min > max), "clamp: min ", min, " is larger than max ", max);
  return clamp_max(clamp_min(x, min), max);
}

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
