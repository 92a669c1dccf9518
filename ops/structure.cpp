// Entering and leaving structures (triu, sym, as_upper, as_symmetric) and the projections behind
// them, read from the structure table (core/structures.h); the typed handles' factories, and the
// statically typed elementwise operators (docs/semantics.md).
#include <structgrad/ops/structure.h>

#include <cstring>

#include <structgrad/autograd/grad_mode.h>
#include <structgrad/autograd/node.h>
#include <structgrad/ops/elementwise.h>
#include <structgrad/ops/factories.h>
#include "ops/op_util.h"

namespace sg {

namespace {
/// Keeps the entries of x in `stored` (MatrixPart bits) within the band the offset `diagonal` moves:
/// triu's (the part on and above it, j − i >= diagonal) or tril's (j − i <= diagonal); `op` names the
/// caller.
void keep_stored(const char* op, const Tensor& x, Tensor& out, uint8_t stored, int64_t diagonal) {
  detail::Backend& backend = detail::backend_of(x);
  const bool below = stored & detail::kBelowDiagonal, above = stored & detail::kAboveDiagonal;
  SG_CHECK(below != above, op, ": no kernel keeps the parts ", int(stored), " of a matrix");
  if (above) backend.triu(x, out, diagonal);
  else backend.tril(x, out, diagonal);
}

/// triu (Upper: entries with j − i >= diagonal, diagonal >= 0) or tril (Lower: j − i <= diagonal,
/// diagonal <= 0), tagged; the gradient is the same projection of G.
Tensor triangle(const char* op, const Tensor& x, int64_t diagonal, Structure s) {
  detail::square_matrices(op, x);
  const uint8_t stored = detail::traits(s).stored;
  const bool lower = !(stored & detail::kAboveDiagonal);
  SG_CHECK(lower ? diagonal <= 0 : diagonal >= 0, op, ": diagonal must be ", lower ? "<= 0" : ">= 0", " for ",
           detail::with_article(structure_name(s)), " result, got ", diagonal);
  Tensor out = detail::empty_like(x, s);
  if (x.numel() > 0) keep_stored(op, x, out, stored, diagonal);
  if (autograd::needs_record({x})) {
    autograd::record(op, {x}, {out}, {}, [op, diagonal, s, stored](autograd::BackwardContext& ctx) {
      const Tensor& g = ctx.grad_outputs[0];  // already projected onto s (the engine projects)
      if (diagonal == 0) return std::vector<Tensor>{g};
      Tensor dx = detail::empty_like(g, s);
      keep_stored(op, g, dx, stored, diagonal);
      return std::vector<Tensor>{dx};
    });
  }
  return out;
}
}  // namespace

namespace detail {
void project_into(Projection how, Structure s, const Tensor& x, Tensor& out) {
  switch (how) {
    case Projection::Identity: backend_of(x).copy(x, out); return;
    case Projection::KeepStored: keep_stored(traits(s).projection_op, x, out, traits(s).stored, 0); return;
    case Projection::Symmetrize: backend_of(x).symmetrize(x, out); return;
  }
}

Tensor project(const Tensor& x, Structure s) {
  switch (traits(s).gradient_projection) {
    case Projection::Identity: return alias_with(x, x.shape(), s);
    case Projection::KeepStored: return triangle(traits(s).projection_op, x, 0, s);
    case Projection::Symmetrize: return sym(x);
  }
  return x;
}
}  // namespace detail

UpperTriangular triu(const Tensor& x, int64_t diagonal) {
  return UpperTriangular(triangle("triu", x, diagonal, Structure::UpperTriangular));
}

LowerTriangular tril(const Tensor& x, int64_t diagonal) {
  return LowerTriangular(triangle("tril", x, diagonal, Structure::LowerTriangular));
}

Symmetric sym(const Tensor& x) {
  detail::square_matrices("sym", x);
  Tensor out = detail::empty_like(x, Structure::Symmetric);
  if (x.numel() > 0) detail::backend_of(x).symmetrize(x, out);
  if (autograd::needs_record({x})) {
    autograd::record("sym", {x}, {out}, {}, [](autograd::BackwardContext& ctx) {
      // d/dx of (x + xᵀ)/2 applied to a symmetric G is (G + Gᵀ)/2 = G.
      return std::vector<Tensor>{ctx.grad_outputs[0]};
    });
  }
  return Symmetric(out);
}

namespace {

double element_at(const Tensor& x, int64_t index) {
  const size_t bytes = element_size(x.dtype());
  Tensor one = detail::make_tensor({1}, x.dtype(), kCPU);
  if (x.device().is_cpu()) {
    std::memcpy(one.data_ptr(), static_cast<const char*>(x.data_ptr()) + index * bytes, bytes);
  } else {
    Tensor host = x.to(kCPU);
    std::memcpy(one.data_ptr(), static_cast<const char*>(host.data_ptr()) + index * bytes, bytes);
  }
  return one.item();
}

Tensor tagged_identity(const char* name, const Tensor& x, Structure s) {
  Tensor out = detail::alias_with(x, x.shape(), s);
  if (autograd::needs_record({x})) {
    autograd::record(name, {x}, {out}, {}, [](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{ctx.grad_outputs[0]};
    });
  }
  return out;
}

}  // namespace

namespace {
/// x tagged Upper or Lower after checking its other triangle holds exact zeros.
Tensor as_triangular(const char* op, const Tensor& x, Structure s) {
  const detail::MatrixBatch view = detail::square_matrices(op, x);
  if (x.structure() == s) return x;
  detail::refuse_under_capture(op, x.device(), "reads its check of the structure back to the host");
  const int64_t bad = x.numel() ? detail::backend_of(x).find_structure_violation(x, s) : -1;
  if (bad >= 0) {
    const int64_t n = view.rows, i = bad / n % n, j = bad % n;
    const bool lower = !(detail::traits(s).stored & detail::kAboveDiagonal);
    SG_FAIL(op, ": entry (", i, ", ", j, ")", detail::matrix_position(view, bad / (n * n)), " = ", element_at(x, bad),
            " is ", lower ? "above" : "below", " the diagonal and not zero; use sg::", detail::traits(s).projection_op,
            " to project");
  }
  return tagged_identity(op, x, s);
}
}  // namespace

UpperTriangular as_upper(const Tensor& x) { return UpperTriangular(as_triangular("as_upper", x, Structure::UpperTriangular)); }

LowerTriangular as_lower(const Tensor& x) { return LowerTriangular(as_triangular("as_lower", x, Structure::LowerTriangular)); }

Symmetric as_symmetric(const Tensor& x) {
  const detail::MatrixBatch view = detail::square_matrices("as_symmetric", x);
  if (x.structure() == Structure::Symmetric) return Symmetric(x);
  detail::refuse_under_capture("as_symmetric", x.device(), "reads its check of the symmetry back to the host");
  const int64_t bad = x.numel() ? detail::backend_of(x).find_structure_violation(x, Structure::Symmetric) : -1;
  if (bad >= 0) {
    const int64_t n = view.rows, i = bad / n % n, j = bad % n, first = bad - bad % (n * n);
    SG_FAIL("as_symmetric: entry (", i, ", ", j, ")", detail::matrix_position(view, bad / (n * n)), " = ",
            element_at(x, bad), " differs from entry (", j, ", ", i, ") = ", element_at(x, first + j * n + i),
            "; use sg::sym to project");
  }
  return Symmetric(tagged_identity("as_symmetric", x, Structure::Symmetric));
}

// ---- typed handles ---------------------------------------------------------------------

namespace {
/// Checks that `t` is tagged `s` before a typed handle of `s` wraps it; `checked_op` (as_upper, ...)
/// is the other way in besides the structure's projection.
void check_tag(const Tensor& t, Structure s, const char* checked_op) {
  const char* name = structure_name(s);
  SG_CHECK(t.defined() && t.structure() == s, name, ": the tensor is not tagged ", name, " (got ",
           t.defined() ? structure_name(t.structure()) : "undefined", "); use sg::", detail::traits(s).projection_op,
           " or sg::", checked_op);
}
}  // namespace

UpperTriangular::UpperTriangular(const Tensor& t) : Tensor(t) { check_tag(t, Structure::UpperTriangular, "as_upper"); }

LowerTriangular::LowerTriangular(const Tensor& t) : Tensor(t) { check_tag(t, Structure::LowerTriangular, "as_lower"); }

Symmetric::Symmetric(const Tensor& t) : Tensor(t) { check_tag(t, Structure::Symmetric, "as_symmetric"); }

namespace {
TensorOptions plain(TensorOptions o) { return o.requires_grad(false); }
int64_t checked_size(const char* op, int64_t n, const TensorOptions& o) {
  SG_CHECK(n >= 0, op, ": negative size ", n);
  detail::check_shape(op, {n, n}, o.dtype_);
  return n;
}
template <typename Typed>
Typed finish(Typed t, const TensorOptions& o) {
  if (o.requires_grad_) t.requires_grad_(true);
  return t;
}

/// zeros or the identity, n×n, tagged s.
Tensor constant_matrix(const char* op, int64_t n, const TensorOptions& o, Structure s, bool identity) {
  checked_size(op, n, o);
  return finish(detail::alias_with(identity ? sg::eye(n, plain(o)) : sg::zeros({n, n}, plain(o)), {n, n}, s), o);
}
}  // namespace

UpperTriangular UpperTriangular::randn(int64_t n, TensorOptions o) {
  checked_size("UpperTriangular::randn", n, o);
  return finish(UpperTriangular(triu(sg::randn({n, n}, plain(o))).detach()), o);
}
UpperTriangular UpperTriangular::zeros(int64_t n, TensorOptions o) {
  return UpperTriangular(constant_matrix("UpperTriangular::zeros", n, o, Structure::UpperTriangular, false));
}
UpperTriangular UpperTriangular::eye(int64_t n, TensorOptions o) {
  return UpperTriangular(constant_matrix("UpperTriangular::eye", n, o, Structure::UpperTriangular, true));
}
LowerTriangular LowerTriangular::randn(int64_t n, TensorOptions o) {
  checked_size("LowerTriangular::randn", n, o);
  return finish(LowerTriangular(tril(sg::randn({n, n}, plain(o))).detach()), o);
}
LowerTriangular LowerTriangular::zeros(int64_t n, TensorOptions o) {
  return LowerTriangular(constant_matrix("LowerTriangular::zeros", n, o, Structure::LowerTriangular, false));
}
LowerTriangular LowerTriangular::eye(int64_t n, TensorOptions o) {
  return LowerTriangular(constant_matrix("LowerTriangular::eye", n, o, Structure::LowerTriangular, true));
}
Symmetric Symmetric::randn(int64_t n, TensorOptions o) {
  checked_size("Symmetric::randn", n, o);
  NoGradGuard guard;
  Tensor s = sym(sg::randn({n, n}, plain(o)));
  return finish(Symmetric(detail::alias_with(s * 1.4142135623730951, {n, n}, Structure::Symmetric)), o);
}
Symmetric Symmetric::zeros(int64_t n, TensorOptions o) {
  return Symmetric(constant_matrix("Symmetric::zeros", n, o, Structure::Symmetric, false));
}
Symmetric Symmetric::eye(int64_t n, TensorOptions o) {
  return Symmetric(constant_matrix("Symmetric::eye", n, o, Structure::Symmetric, true));
}

// ---- statically typed operators (the dynamic rules already give these tags) -------------

UpperTriangular operator+(const UpperTriangular& a, const UpperTriangular& b) { return UpperTriangular(add(a, b)); }
UpperTriangular operator-(const UpperTriangular& a, const UpperTriangular& b) { return UpperTriangular(sub(a, b)); }
UpperTriangular operator-(const UpperTriangular& a) { return UpperTriangular(neg(a)); }
UpperTriangular operator*(const UpperTriangular& a, const UpperTriangular& b) { return UpperTriangular(mul(a, b)); }
namespace {
/// T ⊙ t typed, T triangular: triangular whenever t broadcasts to T's shape; a t that broadcasts T
/// itself to new matrices gives no matrix of T's structure.
template <typename Typed>
Typed triangular_product(const Tensor& a, const Tensor& b, const Tensor& other, const Tensor& triangular) {
  detail::check_defined("mul", other);
  const char* name = structure_name(triangular.structure());
  Shape out_shape;
  detail::make_broadcast("mul", a.shape(), b.shape(), out_shape);
  SG_CHECK(out_shape == triangular.shape(), "mul: ", name, " ", triangular.shape(), " ⊙ a tensor of shape ",
           other.shape(), " broadcasts beyond the matrix and is not ", name,
           "; multiply its .dense() for a Dense result");
  return Typed(mul(a, b));
}
}  // namespace

UpperTriangular operator*(const UpperTriangular& a, const Tensor& b) { return triangular_product<UpperTriangular>(a, b, b, a); }
UpperTriangular operator*(const Tensor& a, const UpperTriangular& b) { return triangular_product<UpperTriangular>(a, b, a, b); }
UpperTriangular operator*(const UpperTriangular& a, double s) { return UpperTriangular(static_cast<const Tensor&>(a) * s); }
UpperTriangular operator*(double s, const UpperTriangular& a) { return UpperTriangular(static_cast<const Tensor&>(a) * s); }
LowerTriangular operator+(const LowerTriangular& a, const LowerTriangular& b) { return LowerTriangular(add(a, b)); }
LowerTriangular operator-(const LowerTriangular& a, const LowerTriangular& b) { return LowerTriangular(sub(a, b)); }
LowerTriangular operator-(const LowerTriangular& a) { return LowerTriangular(neg(a)); }
LowerTriangular operator*(const LowerTriangular& a, const LowerTriangular& b) { return LowerTriangular(mul(a, b)); }
LowerTriangular operator*(const LowerTriangular& a, const Tensor& b) { return triangular_product<LowerTriangular>(a, b, b, a); }
LowerTriangular operator*(const Tensor& a, const LowerTriangular& b) { return triangular_product<LowerTriangular>(a, b, a, b); }
UpperTriangular operator*(const LowerTriangular& a, const UpperTriangular& b) { return UpperTriangular(mul(a, b)); }
UpperTriangular operator*(const UpperTriangular& a, const LowerTriangular& b) { return UpperTriangular(mul(a, b)); }
LowerTriangular operator*(const LowerTriangular& a, double s) { return LowerTriangular(static_cast<const Tensor&>(a) * s); }
LowerTriangular operator*(double s, const LowerTriangular& a) { return LowerTriangular(static_cast<const Tensor&>(a) * s); }
Symmetric operator+(const Symmetric& a, const Symmetric& b) { return Symmetric(add(a, b)); }
Symmetric operator-(const Symmetric& a, const Symmetric& b) { return Symmetric(sub(a, b)); }
Symmetric operator-(const Symmetric& a) { return Symmetric(neg(a)); }
Symmetric operator*(const Symmetric& a, const Symmetric& b) { return Symmetric(mul(a, b)); }
Symmetric operator*(const Symmetric& a, double s) { return Symmetric(static_cast<const Tensor&>(a) * s); }
Symmetric operator*(double s, const Symmetric& a) { return Symmetric(static_cast<const Tensor&>(a) * s); }

}  // namespace sg
