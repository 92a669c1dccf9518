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
// in exact arithmetic.
#include <structgrad/ops/linalg.h>

#include <vector>

#include <structgrad/autograd/grad_mode.h>
#include <structgrad/autograd/node.h>
#include <structgrad/ops/elementwise.h>
#include <structgrad/ops/factories.h>
#include <structgrad/ops/reduce.h>
#include <structgrad/ops/shape.h>
#include "ops/op_util.h"

namespace sg {
namespace {

using detail::is_triangular;
using detail::op_structure;

/// The view of a floating-point square matrix `t` (what: its name in messages); one matrix.
detail::MatrixBatch square_matrix(const char* op, const char* what, const Tensor& t) {
  SG_CHECK(t.defined(), op, ": ", what, " is undefined");
  detail::check_floating(op, t);
  const detail::MatrixBatch view = detail::square_batch(op, what, t);
  detail::require_single_matrix(op, view);
  return view;
}

/// Checks that `t` is a square triangular matrix; `what` names it in the message.
void check_triangular(const char* op, const char* what, const Tensor& t) {
  square_matrix(op, what, t);
  SG_CHECK(is_triangular(t.structure()), op, ": expected ", what,
           " to be UpperTriangular or LowerTriangular (tag it with sg::triu, sg::tril, sg::as_upper or "
           "sg::as_lower), got ",
           detail::with_article(structure_name(t.structure())), " tensor");
}

/// A copy of the triangular t's diagonal for check_nonzero_diagonal. Taken before a solve and checked
/// after it is queued, a device's check waits on the solve rather than stalling the queue before it.
Tensor diagonal_copy(const Tensor& t) {
  Tensor d = detail::empty_on(t, {t.size(0)});
  if (d.numel() > 0) detail::backend_of(t).diagonal(t, d);
  return d;
}

/// Checks that the diagonal d (diagonal_copy) of the triangular `what` holds no exact zero (reads it back).
void check_nonzero_diagonal(const char* op, const char* what, const Tensor& d) {
  const std::vector<double> values = d.to_vector_as<double>();
  for (size_t i = 0; i < values.size(); ++i)
    SG_CHECK(values[i] != 0.0, op, ": ", what, " has an exact zero on its diagonal at (", i, ", ", i,
             "); a triangular matrix with a zero pivot is singular");
}

/// Checks the right-hand side of a solve against op(T) [n, n]: a matrix of T's dtype and device
/// with n rows (left) or n columns (right).
void check_rhs(const char* op, const Tensor& t, const Tensor& b, bool left) {
  SG_CHECK(b.defined(), op, ": B is undefined");
  detail::check_floating(op, b);
  SG_CHECK(b.device() == t.device(), op, ": expected T and B on one device, got ", t.device(), " and ", b.device());
  SG_CHECK(b.dtype() == t.dtype(), op, ": expected T and B of one dtype, got ", t.dtype(), " and ", b.dtype());
  const detail::MatrixBatch view = detail::matrix_batch(op, "B", b);
  const int64_t n = t.size(-1);
  SG_CHECK(left ? view.rows == n : view.cols == n, op, ": T of shape ", t.shape(), " does not fit B of shape ",
           b.shape(), left ? " (a left solve needs B with " : " (a right solve needs B with ", n,
           left ? " rows)" : " columns)");
  detail::require_single_matrix(op, view);
}

/// X with op(T)·X = B or X·op(T) = B, no autograd.
Tensor solve_raw(const Tensor& t, bool trans, const Tensor& b, bool left, bool unit_diagonal) {
  Tensor x = detail::empty_like(b);
  if (x.numel() == 0) return x;
  detail::Backend& backend = detail::backend_of(t);
  backend.copy(b, x);
  backend.solve_triangular(t, op_structure(t.structure(), trans), trans, unit_diagonal, left, x);
  return x;
}

/// d with its diagonal set to zero (the unit-diagonal solve's T gets no gradient there).
Tensor without_diagonal(const Tensor& d) {
  Tensor out = detail::empty_like(d, d.structure());
  if (d.numel() == 0) return out;
  detail::backend_of(d).set_diagonal(d, zeros({d.size(0)}, TensorOptions().dtype(d.dtype()).device(d.device())), out);
  return out;
}

/// The differentiable solve with op(T) = Tᵀ when `trans` (cholesky_solve's second solve). With
/// `checked_as`, T's diagonal is checked for zeros (an error calls T so) before anything is recorded.
Tensor solve(const char* op, const Tensor& t, bool trans, const Tensor& b, bool left, bool unit_diagonal,
             const char* checked_as = nullptr) {
  const Tensor diagonal = checked_as ? diagonal_copy(t) : Tensor();
  Tensor x = solve_raw(t, trans, b, left, unit_diagonal);
  if (checked_as) check_nonzero_diagonal(op, checked_as, diagonal);
  if (!autograd::needs_record({t, b})) return x;
  const Structure st = t.structure();
  autograd::record(op, {t, b}, {x}, {t, x}, [trans, left, unit_diagonal, st](autograd::BackwardContext& ctx) {
    const Tensor& g = ctx.grad_outputs[0];
    const Tensor &t_saved = ctx.saved[0], &x_saved = ctx.saved[1];
    // dB = op(T)⁻ᵀ·G (left) or G·op(T)⁻ᵀ (right): the solve with T read the other way.
    Tensor db = solve_raw(t_saved, !trans, g, left, unit_diagonal);
    Tensor dt;
    if (ctx.needs(0)) {
      // d op(T) = −dB·Xᵀ (left) or −Xᵀ·dB (right); dT is its transpose when op(T) = Tᵀ. Only T's
      // triangle is computed.
      if (left) dt = trans ? detail::product_raw(x_saved, false, db, true, st, -1.0)
                           : detail::product_raw(db, false, x_saved, true, st, -1.0);
      else dt = trans ? detail::product_raw(db, true, x_saved, false, st, -1.0)
                      : detail::product_raw(x_saved, true, db, false, st, -1.0);
      if (unit_diagonal) dt = without_diagonal(dt);
    }
    return std::vector<Tensor>{dt, ctx.needs(1) ? db : Tensor()};
  });
  return x;
}

/// Checks that s is a square Symmetric matrix; `op` names the caller.
void check_symmetric(const char* op, const Tensor& s) {
  detail::one_square_matrix(op, s);
  SG_CHECK(s.structure() == Structure::Symmetric, op,
           ": expected a Symmetric positive definite matrix (tag it with sg::sym or sg::as_symmetric), got ",
           detail::with_article(structure_name(s.structure())), " tensor");
}

/// The Cholesky factor and its info code, no autograd and no check of the code.
CholeskyResult cholesky_raw(const Tensor& s) {
  const int64_t n = s.size(0);
  Tensor l = detail::make_tensor({n, n}, s.dtype(), s.device(), Structure::LowerTriangular);
  Tensor info = detail::make_tensor({}, DType::Int64, s.device());
  detail::backend_of(s).cholesky(s, l, info);
  return {LowerTriangular(l), info};
}

/// Throws naming `op` unless the info code of a factorization is 0 (reads it back).
void check_positive_definite(const char* op, const Tensor& info, int64_t n) {
  const int64_t pivot = static_cast<int64_t>(info.item());
  SG_CHECK(pivot == 0, op, ": the matrix is not positive definite: pivot ", pivot, " of ", n, " is not positive");
}

/// Records the Cholesky backward for l = cholesky(s).
void record_cholesky(const Tensor& s, const Tensor& l) {
  autograd::record("cholesky", {s}, {l}, {l}, [](autograd::BackwardContext& ctx) {
    const Tensor& dl = ctx.grad_outputs[0];  // projected onto Lower by the engine
    const Tensor& l_saved = ctx.saved[0];
    const int64_t n = l_saved.size(0);
    if (n == 0) return std::vector<Tensor>{detail::make_tensor({0, 0}, dl.dtype(), dl.device(), Structure::Symmetric)};
    detail::Backend& backend = detail::backend_of(l_saved);
    Tensor m = detail::make_tensor({n, n}, l_saved.dtype(), l_saved.device(), Structure::LowerTriangular);
    backend.triangular_inverse(l_saved, Structure::LowerTriangular, false, m);  // M = L⁻¹
    // Φ(Lᵀ·dL)ᵀ = triu(dLᵀ·L) with its diagonal halved, an Upper matrix.
    Tensor q = detail::product_raw(dl, true, l_saved, false, Structure::UpperTriangular);
    Tensor half_diagonal = detail::empty_on(q, {n});
    backend.diagonal(q, half_diagonal);
    half_diagonal = detail::unary_raw(detail::UnaryOp::MulScalar, half_diagonal, 0.5);
    Tensor phi_t = detail::empty_like(q, Structure::UpperTriangular);
    backend.set_diagonal(q, half_diagonal, phi_t);
    // dS = sym(Mᵀ·Φᵀ·M): Mᵀ·Φᵀ is Upper·Upper, then Upper·Lower, then (X + Xᵀ)/2.
    Tensor v = detail::product_raw(m, true, phi_t, false, Structure::UpperTriangular);
    Tensor y = detail::product_raw(v, false, m, false, Structure::Dense);
    Tensor ds = detail::make_tensor({n, n}, y.dtype(), y.device(), Structure::Symmetric);
    backend.symmetrize(y, ds);
    return std::vector<Tensor>{ds};
  });
}

}  // namespace

Tensor solve_triangular(const Tensor& t, const Tensor& b, bool left, bool unit_diagonal) {
  constexpr const char* op = "solve_triangular";
  check_triangular(op, "T", t);
  check_rhs(op, t, b, left);
  return solve(op, t, false, b, left, unit_diagonal, unit_diagonal ? nullptr : "T");
}

LowerTriangular cholesky(const Tensor& s) {
  check_symmetric("cholesky", s);
  CholeskyResult r = cholesky_raw(s);
  check_positive_definite("cholesky", r.info, s.size(0));
  if (autograd::needs_record({s})) record_cholesky(s, r.L);
  return r.L;
}

CholeskyResult cholesky_ex(const Tensor& s) {
  check_symmetric("cholesky_ex", s);
  CholeskyResult r = cholesky_raw(s);
  if (autograd::needs_record({s})) record_cholesky(s, r.L);
  return r;
}

Tensor logdet(const Tensor& x) {
  constexpr const char* op = "logdet";
  detail::one_square_matrix(op, x);
  if (is_triangular(x.structure())) return sum(log(abs(diagonal(x))));  // diagonal's gradient keeps x's tag
  SG_CHECK(x.structure() == Structure::Symmetric, op,
           ": expected a Symmetric positive definite or a triangular matrix, got a Dense tensor (tag it with "
           "sg::sym, sg::as_symmetric, sg::triu or sg::tril)");
  CholeskyResult r = cholesky_raw(x);
  check_positive_definite(op, r.info, x.size(0));
  Tensor value;
  {
    autograd::NoGradGuard no_grad;
    value = sum(log(diagonal(r.L))) * 2.0;
  }
  if (autograd::needs_record({x})) {
    autograd::record(op, {x}, {value}, {r.L}, [](autograd::BackwardContext& ctx) {
      const Tensor& g = ctx.grad_outputs[0];
      const Tensor& l_saved = ctx.saved[0];
      const int64_t n = l_saved.size(0);
      Tensor m = detail::make_tensor({n, n}, l_saved.dtype(), l_saved.device(), Structure::LowerTriangular);
      if (n > 0) detail::backend_of(l_saved).triangular_inverse(l_saved, Structure::LowerTriangular, false, m);
      // X⁻¹ = L⁻ᵀ·L⁻¹ = Mᵀ·M, symmetric: the upper triangle computed and mirrored.
      Tensor inv = detail::product_raw(m, true, m, false, Structure::Symmetric);
      return std::vector<Tensor>{detail::binary_raw("logdet", detail::BinaryOp::Mul, inv, g, 0.0,
                                                    Structure::Symmetric)};
    });
  }
  return value;
}

Tensor cholesky_solve(const Tensor& l, const Tensor& b) {
  constexpr const char* op = "cholesky_solve";
  square_matrix(op, "L", l);
  SG_CHECK(l.structure() == Structure::LowerTriangular, op,
           ": expected L to be the LowerTriangular Cholesky factor (sg::cholesky), got ",
           detail::with_article(structure_name(l.structure())), " tensor");
  check_rhs(op, l, b, true);
  // S⁻¹·B = L⁻ᵀ·(L⁻¹·B): two solves, the second reading L transposed.
  return solve(op, l, true, solve(op, l, false, b, true, false, "L"), true, false);
}

Tensor inverse(const Tensor& t) {
  constexpr const char* op = "inverse";
  check_triangular(op, "T", t);
  const Tensor diagonal = diagonal_copy(t);
  const Structure st = t.structure();
  Tensor m = detail::empty_like(t, st);
  if (m.numel() > 0) detail::backend_of(t).triangular_inverse(t, st, false, m);
  check_nonzero_diagonal(op, "T", diagonal);
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

}  // namespace sg
