// The softmax family and the losses: values against float64 loops on the host (with extreme
// logits: ±1e4 and −inf), gradients by gradcheck in float64, label smoothing, and the errors.
#include "test_util.h"

#include <cmath>
#include <vector>

namespace {

using sg::Tensor;
using sgtest::message_of;

class Loss : public ::testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override {
    SG_SKIP_IF_UNAVAILABLE(GetParam());
    sg::manual_seed(3);
  }
  sg::TensorOptions f64() const { return sg::TensorOptions().dtype(sg::kFloat64).device(GetParam()); }
  sg::TensorOptions f32() const { return sg::TensorOptions().dtype(sg::kFloat32).device(GetParam()); }
  Tensor classes(const std::vector<int64_t>& v) const {
    return sg::from_vector(v, {static_cast<int64_t>(v.size())}, sg::TensorOptions().device(GetParam()));
  }
};

/// log Σ_c exp(row[c]) on the host, shifted by the row's finite maximum.
double host_logsumexp(const std::vector<double>& x, int64_t row, int64_t c) {
  double top = -INFINITY;
  for (int64_t j = 0; j < c; ++j) top = std::max(top, x[static_cast<size_t>(row * c + j)]);
  double s = 0;
  for (int64_t j = 0; j < c; ++j) s += std::exp(x[static_cast<size_t>(row * c + j)] - top);
  return top + std::log(s);
}

const std::vector<double> kExtreme = {1e4, -1e4, 0.5, -INFINITY, 3.0, 2.0, -1.0, 1e4, 0.0, -2.5, 7.0, -INFINITY};

TEST_P(Loss, LogSoftmaxAndSoftmaxAreStableForExtremeLogits) {
  for (const sg::TensorOptions o : {f64(), f32()}) {
    const Tensor x = sg::from_vector(kExtreme, {3, 4}, o);
    const std::vector<double> logp = sg::log_softmax(x, 1).to_vector(), p = sg::softmax(x, -1).to_vector();
    for (int64_t i = 0; i < 3; ++i) {
      const double lse = host_logsumexp(kExtreme, i, 4);
      double total = 0;
      for (int64_t j = 0; j < 4; ++j) {
        const size_t e = static_cast<size_t>(i * 4 + j);
        const double want = kExtreme[e] - lse;
        if (std::isinf(want)) {
          EXPECT_EQ(logp[e], -INFINITY) << e;
        } else {
          EXPECT_NEAR(logp[e], want, 1e-5 * (1 + std::abs(want))) << e;
        }
        EXPECT_NEAR(p[e], std::exp(want), 1e-6) << e;
        total += p[e];
      }
      EXPECT_NEAR(total, 1.0, 1e-6);
    }
  }
}

TEST_P(Loss, CrossEntropyAndNllLossMatchTheHostLoop) {
  const std::vector<int64_t> target = {0, 2, 1};  // the first row's class holds 1e4, the third's −inf's neighbour
  for (double smoothing : {0.0, 0.1}) {
    double want = 0;
    for (int64_t i = 0; i < 3; ++i) {
      const double lse = host_logsumexp(kExtreme, i, 4);
      const double nll = lse - kExtreme[static_cast<size_t>(i * 4 + target[static_cast<size_t>(i)])];
      double uniform = 0;
      for (int64_t j = 0; j < 4; ++j) uniform += lse - kExtreme[static_cast<size_t>(i * 4 + j)];
      want += (1 - smoothing) * nll + (smoothing > 0 ? smoothing * uniform / 4 : 0.0);
    }
    want /= 3;
    const Tensor x = sg::from_vector(kExtreme, {3, 4}, f64());
    const double got = sg::cross_entropy(x, classes(target), smoothing).item();
    if (smoothing == 0.0) {
      EXPECT_NEAR(got, want, 1e-9 * std::abs(want));
      EXPECT_NEAR(sg::nll_loss(sg::log_softmax(x, 1), classes(target)).item(), want, 1e-9 * std::abs(want));
    } else {
      EXPECT_EQ(got, INFINITY);  // the smoothed target puts mass on the −inf logits, as in PyTorch
    }
  }
  // Finite logits, with label smoothing.
  const std::vector<double> v = {0.3, -1.2, 2.0, 0.7, 1e4, -3.0, 0.0, 0.1, -1e4};
  const std::vector<int64_t> t = {2, 0, 1};
  double want = 0;
  for (int64_t i = 0; i < 3; ++i) {
    const double lse = host_logsumexp(v, i, 3);
    double uniform = 0;
    for (int64_t j = 0; j < 3; ++j) uniform += lse - v[static_cast<size_t>(i * 3 + j)];
    want += 0.8 * (lse - v[static_cast<size_t>(i * 3 + t[static_cast<size_t>(i)])]) + 0.2 * uniform / 3;
  }
  want /= 3;
  EXPECT_NEAR(sg::cross_entropy(sg::from_vector(v, {3, 3}, f64()), classes(t), 0.2).item(), want, 1e-9 * want);
  EXPECT_NEAR(sg::cross_entropy(sg::from_vector(v, {3, 3}, f32()), classes(t), 0.2).item(), want, 1e-4 * want);
}

TEST_P(Loss, CrossEntropyGradientIsSoftmaxMinusTarget) {
  // d/dx of the mean cross-entropy: (softmax(x) − one-hot) / N, finite at ±1e4 and −inf.
  const Tensor x = sg::from_vector(kExtreme, {3, 4}, f64()).requires_grad_();
  const std::vector<int64_t> target = {0, 2, 1};
  sg::cross_entropy(x, classes(target)).backward();
  const std::vector<double> g = x.grad().to_vector();
  for (int64_t i = 0; i < 3; ++i) {
    const double lse = host_logsumexp(kExtreme, i, 4);
    for (int64_t j = 0; j < 4; ++j) {
      const size_t e = static_cast<size_t>(i * 4 + j);
      const double want = (std::exp(kExtreme[e] - lse) - (j == target[static_cast<size_t>(i)] ? 1.0 : 0.0)) / 3;
      EXPECT_NEAR(g[e], want, 1e-12) << e;
    }
  }
}

TEST_P(Loss, BinaryAndGaussianLossesMatchTheHostLoop) {
  const std::vector<double> x = {1e4, -1e4, 0.3, -2.0, 5.0, 0.0}, y = {1.0, 0.0, 0.25, 1.0, 0.0, 0.5};
  double want = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    // softplus(x) − x·y, with softplus computed without overflow.
    const double softplus = std::max(x[i], 0.0) + std::log1p(std::exp(-std::abs(x[i])));
    want += softplus - x[i] * y[i];
  }
  want /= static_cast<double>(x.size());
  for (const sg::TensorOptions o : {f64(), f32()}) {
    const double got = sg::binary_cross_entropy_with_logits(sg::from_vector(x, {2, 3}, o), sg::from_vector(y, {2, 3}, o)).item();
    EXPECT_NEAR(got, want, 1e-5 * want);
  }
  const std::vector<double> mu = {0.5, -1.0, 2.0, 0.0}, t = {0.0, -1.5, 2.5, 3.0}, var = {0.5, 2.0, 1e-9, 1.0};
  double nll = 0;
  for (size_t i = 0; i < mu.size(); ++i) {
    const double v = std::max(var[i], 1e-6);
    nll += 0.5 * (std::log(v) + (mu[i] - t[i]) * (mu[i] - t[i]) / v);
  }
  nll /= 4;
  const Tensor m = sg::from_vector(mu, {4}, f64()), target = sg::from_vector(t, {4}, f64());
  const Tensor v = sg::from_vector(var, {4}, f64());
  EXPECT_NEAR(sg::gaussian_nll_loss(m, target, v).item(), nll, 1e-9 * std::abs(nll));
  EXPECT_NEAR(sg::gaussian_nll_loss(m, target, v, true).item(), nll + 0.5 * std::log(2 * M_PI), 1e-9 * std::abs(nll));
  // One variance for every entry broadcasts.
  const double shared = sg::gaussian_nll_loss(m, target, sg::full({1}, 2.0, f64())).item();
  double want_shared = 0;
  for (size_t i = 0; i < mu.size(); ++i) want_shared += 0.5 * (std::log(2.0) + (mu[i] - t[i]) * (mu[i] - t[i]) / 2.0);
  EXPECT_NEAR(shared, want_shared / 4, 1e-12);
}

TEST_P(Loss, GradientsPassGradcheckInFloat64) {
  const Tensor logits = sg::randn({4, 5}, f64()).requires_grad_();
  const Tensor labels = classes({4, 0, 2, 2});
  const Tensor y = sg::rand({4, 5}, f64());
  const Tensor mean = sg::randn({6}, f64()).requires_grad_(), target = sg::randn({6}, f64());
  const Tensor var = (sg::rand({6}, f64()) + 0.5).requires_grad_();
  struct Case {
    const char* name;
    std::vector<Tensor> inputs;
    std::function<Tensor(const std::vector<Tensor>&)> f;
  };
  const std::vector<Case> cases = {
      {"log_softmax", {logits}, [](const auto& in) { return sg::log_softmax(in[0], 1); }},
      {"softmax", {logits}, [](const auto& in) { return sg::softmax(in[0], 0); }},
      {"cross_entropy", {logits}, [&](const auto& in) { return sg::cross_entropy(in[0], labels); }},
      {"cross_entropy smoothed", {logits}, [&](const auto& in) { return sg::cross_entropy(in[0], labels, 0.3); }},
      {"nll_loss", {logits}, [&](const auto& in) { return sg::nll_loss(in[0], labels); }},
      {"binary_cross_entropy_with_logits", {logits},
       [&](const auto& in) { return sg::binary_cross_entropy_with_logits(in[0], y); }},
      {"gaussian_nll_loss", {mean, var}, [&](const auto& in) { return sg::gaussian_nll_loss(in[0], target, in[1]); }},
  };
  for (const Case& c : cases) {
    const sg::GradcheckResult r = sg::gradcheck(c.f, c.inputs);
    EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
  }
}

TEST_P(Loss, BadInputNamesTheOp) {
  const Tensor logits = sg::zeros({3, 4}, f64());
  EXPECT_EQ(message_of([&] { sg::cross_entropy(logits, classes({0, 4, 1})); }),
            "cross_entropy: class index 4 of sample 1 is out of range for 4 classes");
  EXPECT_EQ(message_of([&] { sg::nll_loss(logits, classes({-1, 0, 1})); }),
            "nll_loss: class index -1 of sample 0 is out of range for 4 classes");
  EXPECT_EQ(message_of([&] { sg::cross_entropy(logits, classes({0, 1})); }),
            "cross_entropy: logits of shape [3, 4] needs a target of shape [3], got [2]");
  EXPECT_EQ(message_of([&] { sg::cross_entropy(logits, sg::zeros({3}, f64())); }),
            "cross_entropy: expected int64 class indices, got a float64 target");
  EXPECT_EQ(message_of([&] { sg::cross_entropy(sg::zeros({4}, f64()), classes({0})); }),
            "cross_entropy: expected logits of shape [N, C], got [4]");
  EXPECT_EQ(message_of([&] { sg::cross_entropy(logits, classes({0, 1, 2}), 1.5); }),
            "cross_entropy: label_smoothing must lie in [0, 1], got 1.5");
  EXPECT_EQ(message_of([&] { sg::binary_cross_entropy_with_logits(logits, sg::zeros({4, 3}, f64())); }),
            "binary_cross_entropy_with_logits: logits of shape [3, 4] and target of shape [4, 3] differ");
  EXPECT_EQ(message_of([&] { sg::gaussian_nll_loss(logits, logits, sg::ones({2}, f64())); }),
            "gaussian_nll_loss: shapes [3, 4] and [2] cannot be broadcast");
  EXPECT_EQ(message_of([&] { sg::gaussian_nll_loss(logits, logits, sg::ones({2, 3, 4}, f64())); }),
            "gaussian_nll_loss: var of shape [2, 3, 4] does not broadcast to the input's shape [3, 4]");
  EXPECT_EQ(message_of([&] { sg::log_softmax(logits, 2); }), "log_softmax: dimension 2 out of range for shape [3, 4]");
  EXPECT_EQ(message_of([&] { sg::gaussian_nll_loss(logits, logits, sg::full({4}, -0.5, f64())); }),
            "gaussian_nll_loss: var has a negative entry");
}

INSTANTIATE_TEST_SUITE_P(Devices, Loss, ::testing::ValuesIn(sgtest::test_devices()), sgtest::device_test_name);

}  // namespace
