// Entering and leaving structures (triu, sym, as_upper, as_symmetric), the typed handles'
// factories, and the statically typed elementwise operators of DESIGN §1.
#include <structgrad/ops/structure.h>

#include <cstring>

#include <structgrad/autograd/grad_mode.h>
#include <structgrad/autograd/node.h>
#include <structgrad/ops/elementwise.h>
#include <structgrad/ops/factories.h>
#include "ops/op_util.h"

namespace sg {

namespace {
/// triu (Upper: entries with j − i >= diagonal, diagonal >= 0) or tril (Lower: j − i <= diagonal,
/// diagonal <= 0), tagged; the gradient is the same projection of G.
Tensor triangle(const char* op, const Tensor& x, int64_t diagonal, Structure s) {
  detail::check_square(op, x);
  const bool lower = s == Structure::LowerTriangular;
  SG_CHECK(lower ? diagonal <= 0 : diagonal >= 0, op, ": diagonal must be ", lower ? "<= 0" : ">= 0", " for an ",
           structure_name(s), " result, got ", diagonal);
  auto project = [lower](const Tensor& from, Tensor& to, int64_t d) {
    if (lower) detail::backend_of(from).tril(from, to, d);
    else detail::backend_of(from).triu(from, to, d);
  };
  Tensor out = detail::empty_like(x, s);
  if (x.numel() > 0) project(x, out, diagonal);
  if (autograd::needs_record({x})) {
    autograd::record(op, {x}, {out}, {}, [diagonal, s, project](autograd::BackwardContext& ctx) {
      const Tensor& g = ctx.grad_outputs[0];  // already projected onto s (the engine projects)
      if (diagonal == 0) return std::vector<Tensor>{g};
      Tensor dx = detail::empty_like(g, s);
      project(g, dx, diagonal);
      return std::vector<Tensor>{dx};
    });
  }
  return out;
}
}  // namespace

UpperTriangular triu(const Tensor& x, int64_t diagonal) {
  return UpperTriangular(triangle("triu", x, diagonal, Structure::UpperTriangular));
}

LowerTriangular tril(const Tensor& x, int64_t diagonal) {
  return LowerTriangular(triangle("tril", x, diagonal, Structure::LowerTriangular));
}

Symmetric sym(const Tensor& x) {
  detail::check_square("sym", x);
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
  detail::check_square(op, x);
  if (x.structure() == s) return x;
  const int64_t bad = x.numel() ? detail::backend_of(x).find_structure_violation(x, s) : -1;
  if (bad >= 0) {
    const int64_t n = x.size(0), i = bad / n, j = bad % n;
    const bool lower = s == Structure::LowerTriangular;
    SG_FAIL(op, ": entry (", i, ", ", j, ") = ", element_at(x, bad), " is ", lower ? "above" : "below",
            " the diagonal and not zero; use sg::", lower ? "tril" : "triu", " to project");
  }
  return tagged_identity(op, x, s);
}
}  // namespace

UpperTriangular as_upper(const Tensor& x) { return UpperTriangular(as_triangular("as_upper", x, Structure::UpperTriangular)); }

LowerTriangular as_lower(const Tensor& x) { return LowerTriangular(as_triangular("as_lower", x, Structure::LowerTriangular)); }

Symmetric as_symmetric(const Tensor& x) {
  detail::check_square("as_symmetric", x);
  if (x.structure() == Structure::Symmetric) return Symmetric(x);
  const int64_t bad = x.numel() ? detail::backend_of(x).find_structure_violation(x, Structure::Symmetric) : -1;
  if (bad >= 0) {
    const int64_t n = x.size(0), i = bad / n, j = bad % n;
    SG_FAIL("as_symmetric: entry (", i, ", ", j, ") = ", element_at(x, bad), " differs from entry (", j, ", ", i,
            ") = ", element_at(x, j * n + i), "; use sg::sym to project");
  }
  return Symmetric(tagged_identity("as_symmetric", x, Structure::Symmetric));
}

// ---- typed handles ---------------------------------------------------------------------

UpperTriangular::UpperTriangular(const Tensor& t) : Tensor(t) {
  SG_CHECK(t.defined() && t.structure() == Structure::UpperTriangular,
           "UpperTriangular: the tensor is not tagged UpperTriangular (got ",
           t.defined() ? structure_name(t.structure()) : "undefined", "); use sg::triu or sg::as_upper");
}

LowerTriangular::LowerTriangular(const Tensor& t) : Tensor(t) {
  SG_CHECK(t.defined() && t.structure() == Structure::LowerTriangular,
           "LowerTriangular: the tensor is not tagged LowerTriangular (got ",
           t.defined() ? structure_name(t.structure()) : "undefined", "); use sg::tril or sg::as_lower");
}

Symmetric::Symmetric(const Tensor& t) : Tensor(t) {
  SG_CHECK(t.defined() && t.structure() == Structure::Symmetric, "Symmetric: the tensor is not tagged Symmetric (got ",
           t.defined() ? structure_name(t.structure()) : "undefined", "); use sg::sym or sg::as_symmetric");
}

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
/// T ⊙ t typed, T triangular: triangular whenever t broadcasts to T's shape (any rank ≤ 2); a t of
/// higher rank broadcasts T itself, and the result is no matrix of T's structure.
template <typename Typed>
Typed triangular_product(const Tensor& a, const Tensor& b, const Tensor& other, const Tensor& triangular) {
  detail::check_defined("mul", other);
  const char* name = structure_name(triangular.structure());
  SG_CHECK(other.dim() <= 2, "mul: ", name, " ", triangular.shape(), " ⊙ a tensor of shape ", other.shape(),
           " broadcasts beyond the matrix and is not ", name, "; multiply its .dense() for a Dense result");
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
