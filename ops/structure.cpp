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

UpperTriangular triu(const Tensor& x, int64_t diagonal) {
  detail::check_square("triu", x);
  SG_CHECK(diagonal >= 0, "triu: diagonal must be >= 0 for an UpperTriangular result, got ", diagonal);
  Tensor out = detail::empty_like(x, Structure::UpperTriangular);
  if (x.numel() > 0) detail::backend_of(x).triu(x, out, diagonal);
  if (autograd::needs_record({x})) {
    autograd::record("triu", {x}, {out}, {}, [diagonal](autograd::BackwardContext& ctx) {
      const Tensor& g = ctx.grad_outputs[0];  // already upper (the engine projects)
      if (diagonal == 0) return std::vector<Tensor>{g};
      Tensor dx = detail::empty_like(g, Structure::UpperTriangular);
      detail::backend_of(g).triu(g, dx, diagonal);
      return std::vector<Tensor>{dx};
    });
  }
  return UpperTriangular(out);
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

UpperTriangular as_upper(const Tensor& x) {
  detail::check_square("as_upper", x);
  if (x.structure() == Structure::UpperTriangular) return UpperTriangular(x);
  const int64_t bad = x.numel() ? detail::backend_of(x).find_structure_violation(x, Structure::UpperTriangular) : -1;
  if (bad >= 0) {
    const int64_t n = x.size(0), i = bad / n, j = bad % n;
    SG_FAIL("as_upper: entry (", i, ", ", j, ") = ", element_at(x, bad),
            " is below the diagonal and not zero; use sg::triu to project");
  }
  return UpperTriangular(tagged_identity("as_upper", x, Structure::UpperTriangular));
}

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
}  // namespace

UpperTriangular UpperTriangular::randn(int64_t n, TensorOptions o) {
  checked_size("UpperTriangular::randn", n, o);
  return finish(UpperTriangular(triu(sg::randn({n, n}, plain(o))).detach()), o);
}
UpperTriangular UpperTriangular::zeros(int64_t n, TensorOptions o) {
  checked_size("UpperTriangular::zeros", n, o);
  return finish(UpperTriangular(detail::alias_with(sg::zeros({n, n}, plain(o)), {n, n}, Structure::UpperTriangular)), o);
}
UpperTriangular UpperTriangular::eye(int64_t n, TensorOptions o) {
  checked_size("UpperTriangular::eye", n, o);
  return finish(UpperTriangular(detail::alias_with(sg::eye(n, plain(o)), {n, n}, Structure::UpperTriangular)), o);
}
Symmetric Symmetric::randn(int64_t n, TensorOptions o) {
  checked_size("Symmetric::randn", n, o);
  NoGradGuard guard;
  Tensor s = sym(sg::randn({n, n}, plain(o)));
  return finish(Symmetric(detail::alias_with(s * 1.4142135623730951, {n, n}, Structure::Symmetric)), o);
}
Symmetric Symmetric::zeros(int64_t n, TensorOptions o) {
  checked_size("Symmetric::zeros", n, o);
  return finish(Symmetric(detail::alias_with(sg::zeros({n, n}, plain(o)), {n, n}, Structure::Symmetric)), o);
}
Symmetric Symmetric::eye(int64_t n, TensorOptions o) {
  checked_size("Symmetric::eye", n, o);
  return finish(Symmetric(detail::alias_with(sg::eye(n, plain(o)), {n, n}, Structure::Symmetric)), o);
}

// ---- statically typed operators (the dynamic rules already give these tags) -------------

UpperTriangular operator+(const UpperTriangular& a, const UpperTriangular& b) { return UpperTriangular(add(a, b)); }
UpperTriangular operator-(const UpperTriangular& a, const UpperTriangular& b) { return UpperTriangular(sub(a, b)); }
UpperTriangular operator-(const UpperTriangular& a) { return UpperTriangular(neg(a)); }
UpperTriangular operator*(const UpperTriangular& a, const UpperTriangular& b) { return UpperTriangular(mul(a, b)); }
namespace {
/// U ⊙ t typed: Upper whenever t broadcasts to U's shape (any rank ≤ 2); a t of higher rank
/// broadcasts U itself, and the result is no matrix of U's structure.
UpperTriangular upper_product(const Tensor& a, const Tensor& b, const Tensor& other, const Tensor& upper) {
  detail::check_defined("mul", other);
  SG_CHECK(other.dim() <= 2, "mul: UpperTriangular ", upper.shape(), " ⊙ a tensor of shape ", other.shape(),
           " broadcasts beyond the matrix and is not UpperTriangular; multiply upper.dense() for a Dense result");
  return UpperTriangular(mul(a, b));
}
}  // namespace

UpperTriangular operator*(const UpperTriangular& a, const Tensor& b) { return upper_product(a, b, b, a); }
UpperTriangular operator*(const Tensor& a, const UpperTriangular& b) { return upper_product(a, b, a, b); }
UpperTriangular operator*(const UpperTriangular& a, double s) { return UpperTriangular(static_cast<const Tensor&>(a) * s); }
UpperTriangular operator*(double s, const UpperTriangular& a) { return UpperTriangular(static_cast<const Tensor&>(a) * s); }
Symmetric operator+(const Symmetric& a, const Symmetric& b) { return Symmetric(add(a, b)); }
Symmetric operator-(const Symmetric& a, const Symmetric& b) { return Symmetric(sub(a, b)); }
Symmetric operator-(const Symmetric& a) { return Symmetric(neg(a)); }
Symmetric operator*(const Symmetric& a, const Symmetric& b) { return Symmetric(mul(a, b)); }
Symmetric operator*(const Symmetric& a, double s) { return Symmetric(static_cast<const Tensor&>(a) * s); }
Symmetric operator*(double s, const Symmetric& a) { return Symmetric(static_cast<const Tensor&>(a) * s); }

}  // namespace sg
