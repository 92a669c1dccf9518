// Structured linear algebra: triangular solves, Cholesky, log-determinants and triangular
// inverses. The device's backend runs the factorizations and solves (CPU: Eigen; CUDA: blocked
// over the structured GEMM); every backward here is built from those solves and structured
// products, each gradient projected onto its input's structure:
//   solve, left  (op(T)·X = B):  dB = op(T)⁻ᵀ·G,  d op(T) = −dB·Xᵀ
//   solve, right (X·op(T) = B):  dB = G·op(T)⁻ᵀ,  d op(T) = −Xᵀ·dB
//   cholesky (L·Lᵀ = S):         dS = sym(L⁻ᵀ·Φ(Lᵀ·dL)·L⁻¹), Φ = the lower triangle, diagonal halved
//   logdet of S = L·Lᵀ:           dS = S⁻¹ = L⁻ᵀ·L⁻¹
//   inverse (M = T⁻¹):            dT = −proj_T(Mᵀ·G·Mᵀ)
// No backward runs in TF32: the backend's solves are exact, and the products here are asked for
// in exact arithmetic. Every op takes a matrix or a batch [..., n, n] and works matrix by matrix;
// the batch dimensions of a solve's T and B broadcast as in torch.linalg.
#include <structgrad/ops/linalg.h>

#include <cmath>
#include <utility>
#include <vector>

#include <structgrad/autograd/grad_mode.h>
#include <structgrad/autograd/node.h>
#include <structgrad/ops/compare.h>
#include <structgrad/ops/elementwise.h>
#include <structgrad/ops/factories.h>
#include <structgrad/ops/reduce.h>
#include <structgrad/ops/shape.h>
#include "ops/op_util.h"

namespace sg {
namespace {

using detail::is_triangular;
using detail::op_structure;

/// The view of a floating-point square matrix or batch of them `t` (what: its name in messages).
detail::MatrixBatch square_matrix(const char* op, const char* what, const Tensor& t) {
  SG_CHECK(t.defined(), op, ": ", what, " is undefined");
  detail::check_floating(op, t);
  return detail::square_batch(op, what, t);
}

/// Checks that `t` is a square triangular matrix or batch of them; `what` names it in the message.
detail::MatrixBatch check_triangular(const char* op, const char* what, const Tensor& t) {
  const detail::MatrixBatch view = square_matrix(op, what, t);
  SG_CHECK(is_triangular(t.structure()), op, ": expected ", what,
           " to be UpperTriangular or LowerTriangular (tag it with sg::triu, sg::tril, sg::as_upper or "
           "sg::as_lower), got ",
           detail::with_article(structure_name(t.structure())), " tensor");
  return view;
}

/// The diagonals of x [..., n, n], [..., n], no autograd.
Tensor diagonals(const Tensor& x) {
  Tensor d = detail::empty_on(x, Shape(x.shape().begin(), x.shape().end() - 1));
  if (d.numel() > 0) detail::backend_of(x).diagonal(x, d);
  return d;
}

/// Checks that the diagonals d (diagonals(T), taken before a solve and checked after it is queued, so
/// that a device's check waits on the solve rather than stalling the queue before it) of the
/// triangular `what` hold no exact zero (reads back their count of zeros, and on an error all of them).
void check_nonzero_diagonal(const char* op, const char* what, const Tensor& d, const detail::MatrixBatch& view) {
  if (d.numel() == 0) return;
  {
    autograd::NoGradGuard no_grad;
    if (sum(eq(d, 0.0)).item() == 0.0) return;  // the count of zeros, counted where d lives
  }
  const std::vector<double> values = d.to_vector_as<double>();  // an error's path: every diagonal
  const int64_t n = view.rows;
  for (size_t e = 0; e < values.size(); ++e) {
    if (values[e] != 0.0) continue;
    const int64_t i = static_cast<int64_t>(e) % n;
    SG_FAIL(op, ": ", what, " has an exact zero on its diagonal at (", i, ", ", i, ")",
            detail::matrix_position(view, static_cast<int64_t>(e) / n),
            "; a triangular matrix with a zero pivot is singular");
  }
}

/// Checks the right-hand side of a solve against op(T) [..., n, n]: a matrix or batch of T's dtype and
/// device with n rows (left) or n columns (right), batch dimensions broadcasting with T's; returns the
/// broadcast batch shape.
Shape check_rhs(const char* op, const char* t_name, const Tensor& t, const Tensor& b, bool left) {
  SG_CHECK(b.defined(), op, ": B is undefined");
  detail::check_floating(op, b);
  SG_CHECK(b.device() == t.device(), op, ": expected ", t_name, " and B on one device, got ", t.device(), " and ",
           b.device());
  SG_CHECK(b.dtype() == t.dtype(), op, ": expected ", t_name, " and B of one dtype, got ", t.dtype(), " and ",
           b.dtype());
  const detail::MatrixBatch view = detail::matrix_batch(op, "B", b);
  const int64_t n = t.size(-1);
  SG_CHECK(left ? view.rows == n : view.cols == n, op, ": ", t_name, " of shape ", t.shape(),
           " does not fit B of shape ", b.shape(), left ? " (a left solve needs B with " : " (a right solve needs B with ",
           n, left ? " rows)" : " columns)");
  return detail::broadcast_batch_shape(op, t, b);
}

/// x broadcast to the batch shape `batch` as a full batch (a copy where it is not one already).
Tensor full_batch(const Tensor& x, const Shape& batch) {
  if (Shape(x.shape().begin(), x.shape().end() - 2) == batch) return x;
  Shape shape = batch;
  shape.push_back(x.size(-2));
  shape.push_back(x.size(-1));
  return broadcast_to(x, shape);
}

/// X with op(T)·X = B or X·op(T) = B, no autograd: B a full batch, T of its batch shape or one
/// matrix the batch shares.
Tensor solve_raw(const Tensor& t, bool trans, const Tensor& b, bool left, bool unit_diagonal) {
  Tensor x = detail::empty_like(b);
  if (x.numel() == 0) return x;
  detail::backend_of(t).solve_triangular(t, op_structure(t.structure(), trans), trans, unit_diagonal, left, b, x);
  return x;
}

/// d with the diagonal of each matrix set to zero (the unit-diagonal solve's T gets no gradient there).
Tensor without_diagonal(const Tensor& d) {
  Tensor out = detail::empty_like(d, d.structure());
  if (d.numel() == 0) return out;
  const Shape diagonal_shape(d.shape().begin(), d.shape().end() - 1);
  detail::backend_of(d).set_diagonal(d, zeros(diagonal_shape, TensorOptions().dtype(d.dtype()).device(d.device())), out);
  return out;
}

/// (dT, dB) of X = solve(op(T), B) for G = dX (see the file's comment), no autograd. dT is computed
/// only with `needs_t`, in T's triangle, summed over the batch where the batch shared T.
std::pair<Tensor, Tensor> solve_backward(const Tensor& t, bool trans, const Tensor& x, const Tensor& g, bool left,
                                         bool unit_diagonal, bool needs_t) {
  const Structure st = t.structure();
  // dB = op(T)⁻ᵀ·G (left) or G·op(T)⁻ᵀ (right): the solve with T read the other way.
  Tensor db = solve_raw(t, !trans, g, left, unit_diagonal);
  Tensor dt;
  if (needs_t) {
    // d op(T) = −dB·Xᵀ (left) or −Xᵀ·dB (right); dT is its transpose when op(T) = Tᵀ. Only T's
    // triangle is computed.
    if (left) dt = trans ? detail::product_raw(x, false, db, true, st, -1.0) : detail::product_raw(db, false, x, true, st, -1.0);
    else dt = trans ? detail::product_raw(db, true, x, false, st, -1.0) : detail::product_raw(x, true, db, false, st, -1.0);
    if (dt.shape() != t.shape()) dt = detail::alias_with(detail::sum_to(dt, t.shape()), t.shape(), st);
    if (unit_diagonal) dt = without_diagonal(dt);
  }
  return {dt, db};
}

/// The differentiable solve with op(T) = Tᵀ when `trans` (cholesky_solve's second solve); `t_name`
/// names T in messages. With `check_diagonal`, T's diagonal is checked for zeros before anything is
/// recorded.
Tensor solve(const char* op, const char* t_name, const Tensor& t, bool trans, const Tensor& b, bool left,
             bool unit_diagonal, bool check_diagonal) {
  const detail::MatrixBatch view = detail::square_batch(op, t_name, t);
  const Shape batch = check_rhs(op, t_name, t, b, left);
  const Tensor tb = detail::batch_broadcast(t, batch), bb = full_batch(b, batch);
  const Tensor diagonal = check_diagonal ? diagonals(t) : Tensor();
  Tensor x = solve_raw(tb, trans, bb, left, unit_diagonal);
  if (check_diagonal)
    detail::check_now_or_after_replay(t.device(), [=] { check_nonzero_diagonal(op, t_name, diagonal, view); });
  if (!autograd::needs_record({tb, bb})) return x;
  autograd::record(op, {tb, bb}, {x}, {tb, x}, [trans, left, unit_diagonal](autograd::BackwardContext& ctx) {
    auto [dt, db] = solve_backward(ctx.saved[0], trans, ctx.saved[1], ctx.grad_outputs[0], left, unit_diagonal,
                                   ctx.needs(0));
    return std::vector<Tensor>{dt, ctx.needs(1) ? db : Tensor()};
  });
  return x;
}

/// Checks that s is a square Symmetric matrix or batch of them; `op` names the caller.
detail::MatrixBatch check_symmetric(const char* op, const Tensor& s) {
  const detail::MatrixBatch view = detail::square_matrices(op, s);
  SG_CHECK(s.structure() == Structure::Symmetric, op,
           ": expected a Symmetric positive definite matrix (tag it with sg::sym or sg::as_symmetric), got ",
           detail::with_article(structure_name(s.structure())), " tensor");
  return view;
}

/// The Cholesky factors and their info codes, no autograd and no check of the codes.
CholeskyResult cholesky_raw(const Tensor& s) {
  Tensor l = detail::make_tensor(s.shape(), s.dtype(), s.device(), Structure::LowerTriangular);
  Tensor info = detail::make_tensor(Shape(s.shape().begin(), s.shape().end() - 2), DType::Int64, s.device());
  if (info.numel() > 0) detail::backend_of(s).cholesky(s, l, info);
  return {LowerTriangular(l), info};
}

/// Throws naming `op` unless every info code of the factorization of s is 0 (reads them back): names
/// the first NaN of the failing matrix's lower triangle (what the factorization reads), or its pivot.
void check_positive_definite(const char* op, const Tensor& s, const Tensor& info, const detail::MatrixBatch& view) {
  const std::vector<int64_t> codes = info.to_vector_as<int64_t>();
  for (size_t m = 0; m < codes.size(); ++m) {
    if (codes[m] == 0) continue;
    const int64_t n = view.rows, index = static_cast<int64_t>(m);
    const std::string name = detail::matrix_name(view, index);
    const std::vector<double> values = s.to_vector_as<double>();  // an error's path: the whole batch
    const size_t first = static_cast<size_t>(index * n * n);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j)
        SG_CHECK(!std::isnan(values[first + static_cast<size_t>(i * n + j)]), op, ": ", name, " holds a NaN at (", i,
                 ", ", j, ")");
    SG_FAIL(op, ": ", name, " is not positive definite: pivot ", codes[m], " of ", n, " is not positive");
  }
}

/// dS of L = cholesky(S), composed from a triangular inverse and structured products (see the file's
/// comment); dL is read through its lower triangle.
Tensor cholesky_backward_composed(const Tensor& l, const Tensor& dl) {
  detail::Backend& backend = detail::backend_of(l);
  const Shape diagonal_shape(l.shape().begin(), l.shape().end() - 1);
  Tensor m = detail::make_tensor(l.shape(), l.dtype(), l.device(), Structure::LowerTriangular);
  backend.triangular_inverse(l, Structure::LowerTriangular, false, m);  // M = L⁻¹
  // Φ(Lᵀ·dL)ᵀ = triu(dLᵀ·L) with its diagonal halved, an Upper matrix.
  Tensor dl_lower = dl;
  if (dl.structure() != Structure::LowerTriangular) {  // a binding's unprojected gradient
    dl_lower = detail::empty_like(dl, Structure::LowerTriangular);
    backend.tril(dl, dl_lower, 0);
  }
  Tensor q = detail::product_raw(dl_lower, true, l, false, Structure::UpperTriangular);
  Tensor half_diagonal = detail::empty_on(q, diagonal_shape);
  backend.diagonal(q, half_diagonal);
  half_diagonal = detail::unary_raw(detail::UnaryOp::MulScalar, half_diagonal, 0.5);
  Tensor phi_t = detail::empty_like(q, Structure::UpperTriangular);
  backend.set_diagonal(q, half_diagonal, phi_t);
  // dS = sym(Mᵀ·Φᵀ·M): Mᵀ·Φᵀ is Upper·Upper, then Upper·Lower, then (X + Xᵀ)/2.
  Tensor v = detail::product_raw(m, true, phi_t, false, Structure::UpperTriangular);
  Tensor y = detail::product_raw(v, false, m, false, Structure::Dense);
  Tensor ds = detail::make_tensor(l.shape(), y.dtype(), y.device(), Structure::Symmetric);
  backend.symmetrize(y, ds);
  return ds;
}

/// Records the Cholesky backward for l = cholesky(s).
void record_cholesky(const Tensor& s, const Tensor& l) {
  autograd::record("cholesky", {s}, {l}, {l}, [](autograd::BackwardContext& ctx) {
    return std::vector<Tensor>{linalg_backward::cholesky(ctx.saved[0], ctx.grad_outputs[0])};
  });
}

}  // namespace

Tensor solve_triangular(const Tensor& t, const Tensor& b, bool left, bool unit_diagonal) {
  constexpr const char* op = "solve_triangular";
  check_triangular(op, "T", t);
  return solve(op, "T", t, false, b, left, unit_diagonal, !unit_diagonal);
}

LowerTriangular cholesky(const Tensor& s) {
  const detail::MatrixBatch view = check_symmetric("cholesky", s);
  CholeskyResult r = cholesky_raw(s);
  detail::check_now_or_after_replay(s.device(), [view, info = r.info, s = s.detach()] {
    check_positive_definite("cholesky", s, info, view);
  });
  if (autograd::needs_record({s})) record_cholesky(s, r.L);
  return r.L;
}

CholeskyResult cholesky_ex(const Tensor& s) {
  check_symmetric("cholesky_ex", s);
  CholeskyResult r = cholesky_raw(s);
  if (autograd::needs_record({s})) record_cholesky(s, r.L);
  return r;
}

/// sign(det T) = Π sign(tᵢᵢ) of a triangular T per matrix: 0 with a zero on the diagonal, else
/// (−1)^(the number of negative entries). Not differentiable.
static Tensor triangular_det_sign(const Tensor& t) {
  autograd::NoGradGuard no_grad;
  const Tensor d = diagonal(t);
  const Tensor negatives = sum(lt(d, 0.0), -1);
  const Tensor no_zero = eq(sum(eq(d, 0.0), -1), 0.0);
  return pow(-1.0, negatives) * no_zero;
}

/// 2·Σ log lᵢᵢ of the Cholesky factor of a Symmetric positive definite X, recorded with gradient X⁻¹.
static Tensor spd_logdet(const char* op, const Tensor& x, const detail::MatrixBatch& view) {
  CholeskyResult r = cholesky_raw(x);
  detail::check_now_or_after_replay(x.device(), [op, view, info = r.info, x = x.detach()] {
    check_positive_definite(op, x, info, view);
  });
  Tensor value;
  {
    autograd::NoGradGuard no_grad;
    value = sum(log(diagonal(r.L)), -1) * 2.0;
  }
  if (autograd::needs_record({x})) {
    autograd::record(op, {x}, {value}, {r.L}, [](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{linalg_backward::logdet(ctx.saved[0], ctx.grad_outputs[0])};
    });
  }
  return value;
}

static detail::MatrixBatch check_logdet_operand(const char* op, const Tensor& x) {
  const detail::MatrixBatch view = detail::square_matrices(op, x);
  SG_CHECK(is_triangular(x.structure()) || x.structure() == Structure::Symmetric, op,
           ": expected a Symmetric positive definite or a triangular matrix, got a Dense tensor (tag it with "
           "sg::sym, sg::as_symmetric, sg::triu or sg::tril)");
  return view;
}

Tensor logdet(const Tensor& x) {
  constexpr const char* op = "logdet";
  const detail::MatrixBatch view = check_logdet_operand(op, x);
  if (!is_triangular(x.structure())) return spd_logdet(op, x, view);
  // log Π xᵢᵢ = Σ log|xᵢᵢ| + log sign: + 0, NaN where the determinant is negative, −inf where it is 0.
  return sum(log(abs(diagonal(x))), -1) + log(triangular_det_sign(x));  // diagonal's gradient keeps x's tag
}

SignLogAbsDet slogdet(const Tensor& x) {
  constexpr const char* op = "slogdet";
  const detail::MatrixBatch view = check_logdet_operand(op, x);
  if (is_triangular(x.structure())) return {triangular_det_sign(x), sum(log(abs(diagonal(x))), -1)};
  Tensor value = spd_logdet(op, x, view);
  return {ones_like(value), value};
}

Tensor cholesky_solve(const Tensor& l, const Tensor& b) {
  constexpr const char* op = "cholesky_solve";
  square_matrix(op, "L", l);
  SG_CHECK(l.structure() == Structure::LowerTriangular, op,
           ": expected L to be the LowerTriangular Cholesky factor (sg::cholesky), got ",
           detail::with_article(structure_name(l.structure())), " tensor");
  // S⁻¹·B = L⁻ᵀ·(L⁻¹·B): two solves, the second reading L transposed.
  return solve(op, "L", l, true, solve(op, "L", l, false, b, true, false, true), true, false, false);
}

Tensor inverse(const Tensor& t) {
  constexpr const char* op = "inverse";
  const detail::MatrixBatch view = check_triangular(op, "T", t);
  const Tensor diagonal = diagonals(t);
  const Structure st = t.structure();
  Tensor m = detail::empty_like(t, st);
  if (m.numel() > 0) detail::backend_of(t).triangular_inverse(t, st, false, m);
  check_nonzero_diagonal(op, "T", diagonal, view);
  if (autograd::needs_record({t})) {
    autograd::record(op, {t}, {m}, {m}, [st](autograd::BackwardContext& ctx) {
      const Tensor& g = ctx.grad_outputs[0];
      const Tensor& m_saved = ctx.saved[0];
      // dT = −proj_T(Mᵀ·G·Mᵀ): Mᵀ·G (the other triangle times T's), then T's triangle of ·Mᵀ.
      Tensor mg = detail::product_raw(m_saved, true, g, false, Structure::Dense);
      return std::vector<Tensor>{detail::product_raw(mg, false, m_saved, true, st, -1.0)};
    });
  }
  return m;
}

UpperTriangular inverse(const UpperTriangular& t) { return UpperTriangular(inverse(static_cast<const Tensor&>(t))); }
LowerTriangular inverse(const LowerTriangular& t) { return LowerTriangular(inverse(static_cast<const Tensor&>(t))); }

namespace linalg_backward {

Tensor cholesky(const Tensor& l, const Tensor& dl) {
  SG_CHECK(l.defined() && dl.defined() && l.shape() == dl.shape(), "cholesky backward: expected L and dL of one shape");
  if (l.numel() == 0) return detail::make_tensor(l.shape(), dl.dtype(), dl.device(), Structure::Symmetric);
  Tensor ds = detail::make_tensor(l.shape(), l.dtype(), l.device(), Structure::Symmetric);
  if (detail::backend_of(l).cholesky_backward(l, dl, ds)) return ds;
  return cholesky_backward_composed(l, dl);
}

std::pair<Tensor, Tensor> solve_triangular(const Tensor& t, const Tensor& x, const Tensor& g, bool left,
                                           bool unit_diagonal, bool needs_t, bool needs_b) {
  const Shape batch = check_rhs("solve_triangular backward", "T", t, x, left);
  auto [dt, db] = solve_backward(detail::batch_broadcast(t, batch), false, x, g, left, unit_diagonal, needs_t);
  if (dt.defined() && dt.shape() != t.shape()) dt = detail::alias_with(detail::sum_to(dt, t.shape()), t.shape(), t.structure());
  return {dt, needs_b ? db : Tensor()};
}

Tensor logdet(const Tensor& l, const Tensor& g) {
  Tensor m = detail::make_tensor(l.shape(), l.dtype(), l.device(), Structure::LowerTriangular);
  if (l.numel() > 0) detail::backend_of(l).triangular_inverse(l, Structure::LowerTriangular, false, m);
  // X⁻¹ = L⁻ᵀ·L⁻¹ = Mᵀ·M, symmetric: the upper triangle computed and mirrored; times g per matrix.
  Tensor inv = detail::product_raw(m, true, m, false, Structure::Symmetric);
  Shape g_shape = g.shape();
  g_shape.push_back(1);
  g_shape.push_back(1);
  return detail::binary_raw("logdet", detail::BinaryOp::Mul, inv, detail::alias_with(g, g_shape, Structure::Dense), 0.0,
                            Structure::Symmetric);
}

}  // namespace linalg_backward

}  // namespace sg
