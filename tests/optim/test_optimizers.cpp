// The CPU optimizer steps against their closed forms (PyTorch's semantics), and the threaded SIMD
// loop of a large parameter against the single-threaded loop of small ones.
#include "test_util.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace {

/// Gradients for step s: deterministic, of both signs and several magnitudes.
std::vector<double> gradient_values(int64_t n, int step) {
  std::vector<double> g(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    g[static_cast<size_t>(i)] = std::sin(0.37 * static_cast<double>(i) + 1.3 * step) * std::pow(10.0, static_cast<double>(i % 5) - 2.0);
  return g;
}

std::vector<double> start_values(int64_t n) {
  std::vector<double> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = std::cos(0.11 * static_cast<double>(i)) - 0.25;
  return p;
}

struct AdamCase {
  double weight_decay;
  bool decoupled;
};

/// Three Adam steps in double, written out from the update's definition.
std::vector<double> adam_reference(std::vector<double> p, double lr, const AdamCase& c, int steps) {
  const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::vector<double> m(p.size(), 0.0), v(p.size(), 0.0);
  for (int t = 1; t <= steps; ++t) {
    const std::vector<double> grad = gradient_values(static_cast<int64_t>(p.size()), t);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i];
      if (c.decoupled) p[i] *= 1.0 - lr * c.weight_decay;
      else g += c.weight_decay * p[i];
      m[i] = beta1 * m[i] + (1.0 - beta1) * g;
      v[i] = beta2 * v[i] + (1.0 - beta2) * g * g;
      const double m_hat = m[i] / (1.0 - std::pow(beta1, t)), v_hat = v[i] / (1.0 - std::pow(beta2, t));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
  return p;
}

struct SgdCase {
  double momentum, dampening, weight_decay;
  bool nesterov;
};

std::vector<double> sgd_reference(std::vector<double> p, double lr, const SgdCase& c, int steps) {
  std::vector<double> buf(p.size(), 0.0);
  for (int t = 1; t <= steps; ++t) {
    const std::vector<double> grad = gradient_values(static_cast<int64_t>(p.size()), t);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i] + c.weight_decay * p[i];
      if (c.momentum != 0.0) {
        buf[i] = t == 1 ? g : c.momentum * buf[i] + (1.0 - c.dampening) * g;
        g = c.nesterov ? g + c.momentum * buf[i] : buf[i];
      }
      p[i] -= lr * g;
    }
  }
  return p;
}

/// Runs `steps` steps of `opt` over `params`, each given gradient_values of its own length.
template <typename Opt>
void run_steps(Opt& opt, std::vector<sg::Tensor>& params, int steps) {
  for (int t = 1; t <= steps; ++t) {
    for (sg::Tensor& p : params)
      p.set_grad(sg::from_vector(gradient_values(p.numel(), t), p.shape(), sg::TensorOptions().dtype(p.dtype())));
    opt.step();
  }
}

/// |got − want| ≤ tol·(1 + |want|) everywhere.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::abs(got[i] - want[i]), tol * (1.0 + std::abs(want[i]))) << what << ", element " << i << ": " << got[i] << " vs " << want[i];
}

TEST(CpuOptimizers, AdamFollowsItsClosedForm) {
  const int64_t n = 257;
  for (sg::DType dtype : {sg::kFloat64, sg::kFloat32}) {
    // float64 differs from the reference only by rounding order; float32 rounds every operation.
    const double tol = dtype == sg::kFloat64 ? 1e-13 : 2e-6;
    for (const AdamCase& c : {AdamCase{0.0, false}, AdamCase{0.1, false}, AdamCase{0.1, true}}) {
      for (bool fused : {true, false}) {
        std::vector<sg::Tensor> params = {sg::from_vector(start_values(n), {n}, sg::TensorOptions().dtype(dtype).requires_grad())};
        sg::optim::Adam opt(params, {.lr = 0.05, .weight_decay = c.weight_decay, .decoupled_weight_decay = c.decoupled, .fused = fused});
        run_steps(opt, params, 3);
        expect_close(params[0].to_vector(), adam_reference(start_values(n), 0.05, c, 3), tol,
                     c.decoupled ? "AdamW" : c.weight_decay != 0 ? "Adam with L2" : "Adam");
      }
    }
  }
}

TEST(CpuOptimizers, SgdFollowsItsClosedForm) {
  const int64_t n = 257;
  for (sg::DType dtype : {sg::kFloat64, sg::kFloat32}) {
    const double tol = dtype == sg::kFloat64 ? 1e-14 : 1e-6;
    for (const SgdCase& c : {SgdCase{0.0, 0.0, 0.0, false}, SgdCase{0.9, 0.0, 0.01, false}, SgdCase{0.9, 0.25, 0.0, false},
                             SgdCase{0.9, 0.0, 0.01, true}}) {
      std::vector<sg::Tensor> params = {sg::from_vector(start_values(n), {n}, sg::TensorOptions().dtype(dtype).requires_grad())};
      sg::optim::SGD opt(params, {.lr = 0.1, .momentum = c.momentum, .dampening = c.dampening, .weight_decay = c.weight_decay,
                                  .nesterov = c.nesterov});
      run_steps(opt, params, 3);
      expect_close(params[0].to_vector(), sgd_reference(start_values(n), 0.1, c, 3), tol, c.nesterov ? "Nesterov" : "SGD");
    }
  }
}

// A parameter large enough for the loop to split over the OpenMP threads gives, element for
// element, what the same values give as small parameters updated on one thread.
TEST(CpuOptimizers, ALargeParameterUpdatesAsItsPiecesDo) {
  const int64_t piece = 1000, pieces = 140, n = piece * pieces;  // 140,000 > 2^17 elements
  for (sg::DType dtype : {sg::kFloat32, sg::kFloat64}) {
    const std::vector<double> start = start_values(n);
    const auto opts = sg::TensorOptions().dtype(dtype).requires_grad(), grad_opts = sg::TensorOptions().dtype(dtype);
    std::vector<sg::Tensor> whole = {sg::from_vector(start, {n}, opts)};
    std::vector<sg::Tensor> split;
    for (int64_t k = 0; k < pieces; ++k)
      split.push_back(sg::from_vector(std::vector<double>(start.begin() + k * piece, start.begin() + (k + 1) * piece), {piece}, opts));
    // Each piece's gradients are the whole's slice: feed the whole's gradients to the pieces by hand.
    sg::optim::Adam adam_whole(whole, {.lr = 0.01, .weight_decay = 0.1, .decoupled_weight_decay = true});
    sg::optim::Adam adam_split(split, {.lr = 0.01, .weight_decay = 0.1, .decoupled_weight_decay = true});
    sg::optim::SGD sgd_whole(whole, {.lr = 0.01, .momentum = 0.9, .nesterov = true});
    sg::optim::SGD sgd_split(split, {.lr = 0.01, .momentum = 0.9, .nesterov = true});
    for (int t = 1; t <= 3; ++t) {
      const std::vector<double> g = gradient_values(n, t);
      whole[0].set_grad(sg::from_vector(g, {n}, grad_opts));
      for (int64_t k = 0; k < pieces; ++k)
        split[static_cast<size_t>(k)].set_grad(
            sg::from_vector(std::vector<double>(g.begin() + k * piece, g.begin() + (k + 1) * piece), {piece}, grad_opts));
      adam_whole.step();
      adam_split.step();
      sgd_whole.step();
      sgd_split.step();
    }
    const std::vector<double> got = whole[0].to_vector();
    for (int64_t k = 0; k < pieces; ++k) {
      const std::vector<double> want = split[static_cast<size_t>(k)].to_vector();
      for (int64_t i = 0; i < piece; ++i)
        ASSERT_EQ(got[static_cast<size_t>(k * piece + i)], want[static_cast<size_t>(i)])
            << sg::dtype_name(dtype) << ", element " << k * piece + i;
    }
  }
}

}  // namespace
