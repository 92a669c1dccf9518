// gradcheck: perturbations stay inside each input's structure, so the check measures the
// gradient the structure defines (the Frobenius projection), not a dense one.
#include <structgrad/autograd/gradcheck.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include <structgrad/autograd/grad_mode.h>
#include "core/structures.h"

namespace sg::autograd {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

/// A float64 tensor of `shape` on `device` holding `values` (filled on the host, then copied).
Tensor float64_tensor(const std::vector<double>& values, const Shape& shape, Device device) {
  Tensor host = Tensor::empty(shape, DType::Float64);
  std::copy(values.begin(), values.end(), host.data<double>());
  return host.to(device);
}

Tensor like_input(const std::vector<double>& values, const Tensor& input) {
  return detail::alias_with(float64_tensor(values, input.shape(), input.device()), input.shape(), input.structure());
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// L(x) = ⟨W, f(x)⟩ without recording.
double objective(const Fn& f, const std::vector<Tensor>& xs, const std::vector<double>& w) {
  NoGradGuard guard;
  return dot(f(xs).to_vector(), w);
}

// A fresh leaf per input (same values and structure), requiring grad where the input does.
std::vector<Tensor> fresh_leaves(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> xs;
  for (const Tensor& in : inputs) {
    Tensor x = in.detach().clone();
    if (in.requires_grad()) x.requires_grad_(true);
    xs.push_back(x);
  }
  return xs;
}

// Gradients of L = ⟨W, f(x)⟩ for every input (empty vectors where no grad).
std::vector<std::vector<double>> analytical(const Fn& f, const std::vector<Tensor>& inputs,
                                            const std::vector<double>& w) {
  std::vector<Tensor> xs = fresh_leaves(inputs);
  Tensor y = f(xs);
  SG_CHECK(y.requires_grad(), "gradcheck: the function's output does not require grad");
  Tensor upstream = float64_tensor(w, y.shape(), y.device());
  y.backward(upstream);
  std::vector<std::vector<double>> grads;
  for (const Tensor& x : xs) {
    if (!x.requires_grad()) {
      grads.emplace_back();
      continue;
    }
    Tensor g = x.grad();
    grads.push_back(g.defined() ? g.to_vector() : std::vector<double>(static_cast<size_t>(x.numel()), 0.0));
  }
  return grads;
}

std::string describe(size_t index, const Tensor& t) {
  std::ostringstream s;
  s << "input " << index << " (" << structure_name(t.structure()) << " " << shape_str(t.shape()) << ")";
  return s.str();
}

/// The part of a matrix entry (i, j) lies in (detail::MatrixPart).
uint8_t part_of(int64_t i, int64_t j) {
  return i > j ? detail::kBelowDiagonal : i == j ? detail::kOnDiagonal : detail::kAboveDiagonal;
}

/// A structured tensor seen as a batch of n × n matrices (its trailing two dimensions), or, for a
/// Dense one, as plain entries (count 0).
struct Matrices {
  int64_t count = 0, n = 0;
  explicit Matrices(const Tensor& t) {
    if (t.structure() == Structure::Dense || t.dim() < 2) return;
    n = t.size(-1);
    count = n == 0 ? 0 : t.numel() / (n * n);
  }
};

/// "(i)", "(i, j)", "(b, i, j)": the index of flat element q of a tensor of `shape`.
std::string index_str(const Shape& shape, int64_t q) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] > 0 ? q % shape[d] : 0;
    q = shape[d] > 0 ? q / shape[d] : 0;
  }
  std::ostringstream s;
  s << "(";
  for (size_t d = 0; d < index.size(); ++d) s << (d ? ", " : "") << index[d];
  s << ")";
  return s.str();
}

// The basis of a structure's subspace, as lists of (flat index) that get +1: each entry of the stored
// part, and for a symmetric structure each pair {e_ij, e_ji}, i < j, as one direction.
std::vector<std::vector<int64_t>> basis(const Tensor& t) {
  std::vector<std::vector<int64_t>> out;
  const Matrices m(t);
  if (m.n == 0) {
    for (int64_t i = 0; i < t.numel(); ++i) out.push_back({i});
    return out;
  }
  const detail::StructureTraits& s = detail::traits(t.structure());
  const int64_t n = m.n;
  for (int64_t b = 0; b < m.count; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t at = (b * n + i) * n + j;
        if (!(s.stored & part_of(i, j))) continue;
        if (!s.symmetric || i == j) out.push_back({at});
        else if (i < j) out.push_back({at, (b * n + j) * n + i});
      }
  return out;
}

// A random direction inside the structure.
std::vector<double> random_direction(const Tensor& t, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  std::vector<double> e(static_cast<size_t>(t.numel()));
  for (double& v : e) v = normal(rng);
  const Matrices m(t);
  const detail::StructureTraits& s = detail::traits(t.structure());
  const int64_t n = m.n;
  for (int64_t b = 0; b < m.count; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const size_t at = static_cast<size_t>((b * n + i) * n + j);
        if (!(s.stored & part_of(i, j))) e[at] = 0.0;
        else if (s.symmetric && i > j) e[at] = e[static_cast<size_t>((b * n + j) * n + i)];
      }
  return e;
}

}  // namespace

GradcheckResult gradcheck(const Fn& f, const std::vector<Tensor>& inputs, const GradcheckOptions& o) {
  GradcheckResult result;
  for (size_t i = 0; i < inputs.size(); ++i) {
    SG_CHECK(inputs[i].defined(), "gradcheck: input ", i, " is undefined");
    SG_CHECK(inputs[i].dtype() == DType::Float64, "gradcheck: ", describe(i, inputs[i]), " must be float64, got ",
             inputs[i].dtype());
  }

  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> normal;
  Tensor y0;
  {
    NoGradGuard guard;
    y0 = f(inputs);
  }
  std::vector<double> w(static_cast<size_t>(y0.numel()));
  for (double& v : w) v = normal(rng);

  const std::vector<std::vector<double>> grads = analytical(f, inputs, w);
  auto fail = [&](const std::string& msg) {
    result.ok = false;
    result.message = "gradcheck: " + msg;
    return result;
  };

  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    const Tensor& x = inputs[i];
    const std::vector<double> base = x.to_vector();
    auto check_direction = [&](const std::vector<double>& e, const std::string& where) -> bool {
      std::vector<double> plus = base, minus = base;
      for (size_t q = 0; q < e.size(); ++q) {
        plus[q] += o.eps * e[q];
        minus[q] -= o.eps * e[q];
      }
      std::vector<Tensor> xp = inputs, xm = inputs;
      xp[i] = like_input(plus, x);
      xm[i] = like_input(minus, x);
      const double numerical = (objective(f, xp, w) - objective(f, xm, w)) / (2 * o.eps);
      const double analytic = dot(grads[i], e);
      result.directions_checked++;
      if (!(std::abs(numerical - analytic) <= o.atol + o.rtol * std::abs(numerical))) {
        std::ostringstream s;
        s << describe(i, x) << " " << where << ": numerical " << numerical << ", analytical " << analytic;
        fail(s.str());
        return false;
      }
      return true;
    };
    if (o.per_entry) {
      for (const auto& entries : basis(x)) {
        std::vector<double> e(base.size(), 0.0);
        for (int64_t q : entries) e[static_cast<size_t>(q)] = 1.0;
        if (!check_direction(e, "entry " + index_str(x.shape(), entries[0]))) return result;
      }
    }
    for (int r = 0; r < o.random_directions; ++r)
      if (!check_direction(random_direction(x, rng), "random direction " + std::to_string(r))) return result;
    // Entries a structure ignores get exactly zero gradient.
    const Matrices m(x);
    const uint8_t stored = detail::traits(x.structure()).stored;
    for (int64_t b = 0; b < m.count; ++b)
      for (int64_t r = 0; r < m.n; ++r)
        for (int64_t c = 0; c < m.n; ++c) {
          const int64_t at = (b * m.n + r) * m.n + c;
          if ((stored & part_of(r, c)) || grads[i][static_cast<size_t>(at)] == 0.0) continue;
          std::ostringstream s;
          s << describe(i, x) << " entry " << index_str(x.shape(), at) << ": gradient " << (r > c ? "below" : "above")
            << " the diagonal is " << grads[i][static_cast<size_t>(at)] << ", expected exactly 0";
          return fail(s.str());
        }
  }

  if (o.check_linearity) {
    std::vector<double> w2(w.size()), mix(w.size());
    for (double& v : w2) v = normal(rng);
    const double a = 0.7, b = -1.3;
    for (size_t q = 0; q < w.size(); ++q) mix[q] = a * w[q] + b * w2[q];
    const auto g2 = analytical(f, inputs, w2);
    const auto gm = analytical(f, inputs, mix);
    for (size_t i = 0; i < inputs.size(); ++i)
      for (size_t q = 0; q < gm[i].size(); ++q) {
        const double expect = a * grads[i][q] + b * g2[i][q];
        if (!(std::abs(gm[i][q] - expect) <= 1e-9 * (1 + std::abs(expect)))) {
          std::ostringstream s;
          s << describe(i, inputs[i]) << " element " << q << ": backward is not linear in the upstream gradient ("
            << gm[i][q] << " vs " << expect << ")";
          return fail(s.str());
        }
      }
  }
  if (o.check_repeatability) {
    const auto again = analytical(f, inputs, w);
    for (size_t i = 0; i < inputs.size(); ++i)
      for (size_t q = 0; q < again[i].size(); ++q)
        if (again[i][q] != grads[i][q]) {
          std::ostringstream s;
          s << describe(i, inputs[i]) << " element " << q << ": backward is not repeatable (" << grads[i][q]
            << " then " << again[i][q] << ")";
          return fail(s.str());
        }
  }
  return result;
}

}  // namespace sg::autograd
