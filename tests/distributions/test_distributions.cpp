// sg::distributions against closed forms in float64 (Eigen on the host for the multivariate ones),
// sample moments within statistical bounds with a fixed seed, gradients by structure-aware
// gradcheck (rsample re-seeded inside the checked function), and the errors.
#include "test_util.h"

#include <Eigen/Dense>
#include <cmath>
#include <vector>

namespace {

namespace dist = sg::distributions;
using sg::Tensor;
using sgtest::message_of;
using Matrix = Eigen::MatrixXd;
using Vector = Eigen::VectorXd;

constexpr double kLog2Pi = 1.8378770664093453;

class Distributions : public ::testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override {
    SG_SKIP_IF_UNAVAILABLE(GetParam());
    sg::manual_seed(11);
  }
  sg::TensorOptions f64() const { return sg::TensorOptions().dtype(sg::kFloat64).device(GetParam()); }
  /// A batch of well-conditioned lower-triangular factors with a positive diagonal.
  Tensor factors(const sg::Shape& batch, int64_t d) const {
    sg::Shape shape = batch;
    shape.push_back(d);
    shape.push_back(d);
    sg::Shape diagonal = batch;
    diagonal.push_back(d);
    return sg::with_diagonal(sg::tril(sg::randn(shape, f64()) * 0.4), sg::rand(diagonal, f64()) + 0.5);
  }
};

/// Matrix i of t [..., d, d] (or vector i of t [..., d]) on the host.
Matrix matrix(const Tensor& t, int64_t i) {
  const int64_t r = t.size(-2), c = t.size(-1);
  const std::vector<double> v = t.to_vector();
  Matrix m(r, c);
  for (int64_t a = 0; a < r; ++a)
    for (int64_t b = 0; b < c; ++b) m(a, b) = v[static_cast<size_t>(i * r * c + a * c + b)];
  return m;
}
Vector vec(const Tensor& t, int64_t i) {
  const int64_t d = t.size(-1);
  const std::vector<double> v = t.to_vector();
  Vector x(d);
  for (int64_t a = 0; a < d; ++a) x(a) = v[static_cast<size_t>(i * d + a)];
  return x;
}

double mvn_log_prob(const Vector& x, const Vector& mu, const Matrix& sigma) {
  const Eigen::LLT<Matrix> llt(sigma);
  const Vector diff = x - mu;
  const double maha = diff.dot(llt.solve(diff));
  const double log_det = 2 * Matrix(llt.matrixL()).diagonal().array().log().sum();
  return -0.5 * (static_cast<double>(x.size()) * kLog2Pi + maha + log_det);
}

TEST_P(Distributions, NormalMatchesItsClosedForms) {
  const Tensor loc = sg::from_vector(std::vector<double>{0.5, -1.0, 2.0}, {3}, f64());
  const Tensor scale = sg::from_vector(std::vector<double>{1.5, 0.2, 3.0}, {3}, f64());
  const dist::Normal n(loc, scale);
  const Tensor x = sg::from_vector(std::vector<double>{0.0, -1.1, 10.0}, {3}, f64());
  const std::vector<double> lp = n.log_prob(x).to_vector(), h = n.entropy().to_vector();
  const std::vector<double> m = loc.to_vector(), s = scale.to_vector(), xv = x.to_vector();
  for (size_t i = 0; i < 3; ++i) {
    const double z = (xv[i] - m[i]) / s[i];
    EXPECT_NEAR(lp[i], -0.5 * z * z - std::log(s[i]) - 0.5 * kLog2Pi, 1e-12);
    EXPECT_NEAR(h[i], 0.5 + 0.5 * kLog2Pi + std::log(s[i]), 1e-12);
  }
  const dist::Normal q(sg::full({3}, 0.3, f64()), sg::full({3}, 2.0, f64()));
  const std::vector<double> kl = dist::kl_divergence(n, q).to_vector();
  for (size_t i = 0; i < 3; ++i) {
    // log(σq/σp) + (σp² + (μp − μq)²)/(2σq²) − ½
    const double want = std::log(2.0 / s[i]) + (s[i] * s[i] + (m[i] - 0.3) * (m[i] - 0.3)) / 8.0 - 0.5;
    EXPECT_NEAR(kl[i], want, 1e-12);
  }
  // Moments of 20000 draws: the mean within 5 standard errors.
  const Tensor draws = n.sample({20000});
  EXPECT_EQ(draws.shape(), (sg::Shape{20000, 3}));
  EXPECT_FALSE(draws.requires_grad());
  const std::vector<double> mean = sg::mean(draws, 0).to_vector();
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(mean[i], m[i], 5 * s[i] / std::sqrt(20000.0));
}

TEST_P(Distributions, MultivariateNormalMatchesEigen) {
  const int64_t d = 4;
  const Tensor l = factors({3}, d), loc = sg::randn({3, d}, f64());
  const dist::MultivariateNormal mvn(loc, l);
  EXPECT_EQ(mvn.batch_shape(), (sg::Shape{3}));
  const Tensor x = sg::randn({2, 3, d}, f64());  // two samples per batch entry
  const std::vector<double> lp = mvn.log_prob(x).to_vector(), h = mvn.entropy().to_vector();
  ASSERT_EQ(lp.size(), 6u);
  for (int64_t b = 0; b < 3; ++b) {
    const Matrix lb = matrix(l, b), sigma = lb * lb.transpose();
    for (int64_t s = 0; s < 2; ++s)
      EXPECT_NEAR(lp[static_cast<size_t>(s * 3 + b)], mvn_log_prob(vec(x, s * 3 + b), vec(loc, b), sigma), 1e-10);
    const double log_det = std::log(sigma.determinant());
    EXPECT_NEAR(h[static_cast<size_t>(b)], 0.5 * (static_cast<double>(d) * (1 + kLog2Pi) + log_det), 1e-10);
    EXPECT_TRUE((matrix(mvn.covariance(), b) - sigma).cwiseAbs().maxCoeff() < 1e-12);
  }
  // The same distribution from its covariance and from its precision (Σ⁻¹ computed on the host).
  std::vector<double> p_values;
  for (int64_t b = 0; b < 3; ++b) {
    const Matrix lb = matrix(l, b), p = (lb * lb.transpose()).inverse();
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) p_values.push_back(p(i, j));
  }
  const Tensor precision = sg::sym(sg::from_vector(p_values, {3, d, d}, f64()));
  const std::vector<double> from_covariance =
      dist::MultivariateNormal::from_covariance(loc, mvn.covariance()).log_prob(x).to_vector();
  const std::vector<double> from_precision = dist::MultivariateNormal::from_precision(loc, precision).log_prob(x).to_vector();
  EXPECT_TRUE(sgtest::all_close(from_covariance, lp, 1e-10, 1e-10));
  EXPECT_TRUE(sgtest::all_close(from_precision, lp, 1e-9, 1e-9));
}

TEST_P(Distributions, MultivariateNormalKlAndMomentsMatch) {
  const int64_t d = 3;
  const Tensor lp = factors({2}, d), lq = factors({2}, d);
  const Tensor mp = sg::randn({2, d}, f64()), mq = sg::randn({2, d}, f64());
  const dist::MultivariateNormal p(mp, lp), q(mq, lq);
  const std::vector<double> kl = dist::kl_divergence(p, q).to_vector();
  for (int64_t b = 0; b < 2; ++b) {
    const Matrix sp = matrix(lp, b) * matrix(lp, b).transpose(), sq = matrix(lq, b) * matrix(lq, b).transpose();
    const Vector diff = vec(mq, b) - vec(mp, b);
    const double want = 0.5 * ((sq.inverse() * sp).trace() + diff.dot(sq.inverse() * diff) - static_cast<double>(d) +
                               std::log(sq.determinant() / sp.determinant()));
    EXPECT_NEAR(kl[static_cast<size_t>(b)], want, 1e-10);
  }
  EXPECT_TRUE(sgtest::all_close(dist::kl_divergence(p, p).to_vector(), {0.0, 0.0}, 1e-12, 1e-12));
  // 40000 draws of matrix 0: sample mean within 5 standard errors, sample covariance within 0.05.
  const dist::MultivariateNormal one(sg::index_select(mp, 0, sg::from_vector(std::vector<int64_t>{0}, {1},
                                                      sg::TensorOptions().device(GetParam()))),
                                     sg::as_lower(sg::index_select(lp, 0, sg::from_vector(std::vector<int64_t>{0}, {1},
                                                      sg::TensorOptions().device(GetParam())))));
  const int64_t n = 40000;
  const Tensor draws = sg::reshape(one.sample({n}), {n, d});
  const Matrix x = matrix(draws, 0), sigma = matrix(lp, 0) * matrix(lp, 0).transpose();
  const Vector mean = x.colwise().mean();
  for (int64_t i = 0; i < d; ++i) EXPECT_NEAR(mean(i), vec(mp, 0)(i), 5 * std::sqrt(sigma(i, i) / n));
  const Matrix centred = x.rowwise() - mean.transpose();
  const Matrix cov = centred.transpose() * centred / static_cast<double>(n - 1);
  EXPECT_LT((cov - sigma).cwiseAbs().maxCoeff(), 0.05 * sigma.cwiseAbs().maxCoeff());
}

TEST_P(Distributions, LowRankMatchesTheDenseNormal) {
  const int64_t d = 5, r = 2;
  const Tensor loc = sg::randn({3, d}, f64()), w = sg::randn({3, d, r}, f64()), diag = sg::rand({3, d}, f64()) + 0.3;
  const dist::LowRankMultivariateNormal low(loc, w, diag);
  const dist::MultivariateNormal dense = dist::MultivariateNormal::from_covariance(loc, low.covariance());
  const Tensor x = sg::randn({4, 3, d}, f64());
  EXPECT_TRUE(sgtest::all_close(low.log_prob(x).to_vector(), dense.log_prob(x).to_vector(), 1e-10, 1e-10));
  EXPECT_TRUE(sgtest::all_close(low.entropy().to_vector(), dense.entropy().to_vector(), 1e-10, 1e-10));
  EXPECT_EQ(low.rsample({7}).shape(), (sg::Shape{7, 3, d}));
}

TEST_P(Distributions, CategoricalLogProbEntropyAndFrequencies) {
  const std::vector<double> logits = {0.2, -1.0, 1.5, 0.0, 3.0, -INFINITY, 0.0, 1.0};
  const dist::Categorical c(sg::from_vector(logits, {2, 4}, f64()));
  const Tensor classes = sg::from_vector(std::vector<int64_t>{2, 0}, {2}, sg::TensorOptions().device(GetParam()));
  const std::vector<double> lp = c.log_prob(classes).to_vector(), h = c.entropy().to_vector();
  for (int64_t b = 0; b < 2; ++b) {
    double z = 0, ent = 0;
    for (int64_t k = 0; k < 4; ++k) z += std::exp(logits[static_cast<size_t>(b * 4 + k)]);
    for (int64_t k = 0; k < 4; ++k) {
      const double p = std::exp(logits[static_cast<size_t>(b * 4 + k)]) / z;
      if (p > 0) ent -= p * std::log(p);
    }
    const int64_t k = b == 0 ? 2 : 0;
    EXPECT_NEAR(lp[static_cast<size_t>(b)], logits[static_cast<size_t>(b * 4 + k)] - std::log(z), 1e-12);
    EXPECT_NEAR(h[static_cast<size_t>(b)], ent, 1e-12);
  }
  // 20000 draws: each class's frequency within 5 standard errors; the −inf class never drawn.
  const int64_t n = 20000;
  const Tensor draws = c.sample({n});
  ASSERT_EQ(draws.shape(), (sg::Shape{n, 2}));
  const std::vector<int64_t> v = draws.to_vector_as<int64_t>();
  const std::vector<double> probs = c.probs().to_vector();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t k = 0; k < 4; ++k) {
      int64_t hits = 0;
      for (int64_t i = 0; i < n; ++i) hits += v[static_cast<size_t>(i * 2 + b)] == k;
      const double p = probs[static_cast<size_t>(b * 4 + k)];
      EXPECT_NEAR(static_cast<double>(hits) / n, p, 5 * std::sqrt(p * (1 - p) / n) + 1e-12) << b << " " << k;
    }
}

TEST_P(Distributions, MixtureLogProbIsTheWeightedSum) {
  const int64_t k = 3, d = 2;
  const Tensor weights = sg::randn({k}, f64()), l = factors({k}, d), mu = sg::randn({k, d}, f64()) * 2.0;
  const dist::MixtureSameFamily gmm(dist::Categorical(weights), dist::MultivariateNormal(mu, l));
  EXPECT_EQ(gmm.batch_shape(), (sg::Shape{}));
  const Tensor x = sg::randn({5, d}, f64());
  const std::vector<double> lp = gmm.log_prob(x).to_vector(), w = weights.to_vector();
  double z = 0;
  for (double wi : w) z += std::exp(wi);
  for (int64_t s = 0; s < 5; ++s) {
    double total = 0;
    for (int64_t c = 0; c < k; ++c) {
      const Matrix lc = matrix(l, c);
      total += std::exp(w[static_cast<size_t>(c)]) / z * std::exp(mvn_log_prob(vec(x, s), vec(mu, c), lc * lc.transpose()));
    }
    EXPECT_NEAR(lp[static_cast<size_t>(s)], std::log(total), 1e-10);
  }
  // A batch of two mixtures draws one point per sample and mixture: [samples, 2, d].
  const dist::MixtureSameFamily batch(dist::Categorical(sg::randn({2, k}, f64())),
                                      dist::MultivariateNormal(sg::randn({2, k, d}, f64()), factors({2, k}, d)));
  EXPECT_EQ(batch.batch_shape(), (sg::Shape{2}));
  EXPECT_EQ(batch.sample({5}).shape(), (sg::Shape{5, 2, d}));
  EXPECT_EQ(batch.log_prob(sg::randn({5, 2, d}, f64())).shape(), (sg::Shape{5, 2}));
  // The sample mean of 40000 draws within 0.1 of the mixture's mean.
  const std::vector<double> mean = gmm.mean().to_vector();
  const std::vector<double> sample_mean = sg::mean(gmm.sample({40000}), 0).to_vector();
  for (int64_t i = 0; i < d; ++i) EXPECT_NEAR(sample_mean[static_cast<size_t>(i)], mean[static_cast<size_t>(i)], 0.1);
}

TEST_P(Distributions, GradientsPassGradcheck) {
  const int64_t d = 3;
  const Tensor loc = sg::randn({2, d}, f64()).requires_grad_(), l = factors({2}, d).detach().requires_grad_();
  const Tensor x = sg::randn({2, d}, f64());
  const Tensor w = sg::randn({2, d, 2}, f64()).requires_grad_(), diag = (sg::rand({2, d}, f64()) + 0.5).requires_grad_();
  const Tensor logits = sg::randn({2, 4}, f64()).requires_grad_();
  // Four distinct components per mixture, so that the weights and each component matter.
  const Tensor component_mu = sg::randn({2, 4, d}, f64()).requires_grad_();
  const Tensor component_l = factors({2, 4}, d).detach().requires_grad_();
  struct Case {
    const char* name;
    std::vector<Tensor> inputs;
    std::function<Tensor(const std::vector<Tensor>&)> f;
  };
  const std::vector<Case> cases = {
      {"MultivariateNormal.log_prob", {loc, l},
       [&](const auto& in) { return dist::MultivariateNormal(in[0], in[1]).log_prob(x); }},
      {"MultivariateNormal.entropy", {loc, l}, [](const auto& in) { return dist::MultivariateNormal(in[0], in[1]).entropy(); }},
      {"MultivariateNormal.rsample", {loc, l},
       [](const auto& in) {
         sg::manual_seed(5);  // the same noise at every evaluation
         return dist::MultivariateNormal(in[0], in[1]).rsample({3});
       }},
      {"kl_divergence", {loc, l},
       [&](const auto& in) {
         return dist::kl_divergence(dist::MultivariateNormal(in[0], in[1]),
                                    dist::MultivariateNormal(sg::zeros({d}, f64()), sg::LowerTriangular::eye(d, f64())));
       }},
      {"LowRankMultivariateNormal.log_prob", {loc, w, diag},
       [&](const auto& in) { return dist::LowRankMultivariateNormal(in[0], in[1], in[2]).log_prob(x); }},
      {"Normal.rsample", {loc, diag},
       [](const auto& in) {
         sg::manual_seed(6);
         return dist::Normal(in[0], in[1]).rsample({2});
       }},
      {"MixtureSameFamily.log_prob", {logits, component_mu, component_l},
       [&](const auto& in) {
         return dist::MixtureSameFamily(dist::Categorical(in[0]), dist::MultivariateNormal(in[1], in[2])).log_prob(x);
       }},
  };
  for (const Case& c : cases) {
    const sg::GradcheckResult r = sg::gradcheck(c.f, c.inputs);
    EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
  }
}

TEST_P(Distributions, BadInputNamesTheDistribution) {
  const Tensor l = factors({2}, 3), loc = sg::zeros({2, 3}, f64());
  const dist::MultivariateNormal mvn(loc, l);
  EXPECT_EQ(message_of([&] { mvn.log_prob(sg::zeros({2, 4}, f64())); }),
            "MultivariateNormal.log_prob: expected a value with event size 3 in its last dimension, got shape [2, 4]");
  EXPECT_EQ(message_of([&] { dist::MultivariateNormal(loc, sg::randn({2, 3, 3}, f64())); }),
            "MultivariateNormal: expected scale_tril to be LowerTriangular (tag it with sg::tril or sg::as_lower), got "
            "a Dense tensor");
  EXPECT_EQ(message_of([&] { dist::MultivariateNormal(sg::zeros({2, 4}, f64()), l); }),
            "MultivariateNormal: loc of shape [2, 4] does not fit scale_tril of shape [2, 3, 3] (event size 3)");
  const dist::Categorical c(sg::zeros({2, 4}, f64()));
  EXPECT_EQ(message_of([&] { c.log_prob(sg::from_vector(std::vector<int64_t>{1, 4}, {2},
                                                        sg::TensorOptions().device(GetParam()))); }),
            "Categorical.log_prob: class 4 is out of range for 4 classes");
  EXPECT_EQ(message_of([&] { dist::MixtureSameFamily(dist::Categorical(sg::zeros({3}, f64())), mvn); }),
            "MixtureSameFamily: components of batch shape [2] need 3 components in their last batch dimension (the "
            "mixture's classes)");
}

INSTANTIATE_TEST_SUITE_P(Devices, Distributions, ::testing::ValuesIn(sgtest::test_devices()), sgtest::device_test_name);

}  // namespace
