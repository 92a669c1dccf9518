// Probability distributions shaped like torch.distributions: batched by broadcasting their
// parameters, differentiable in them (rsample by reparameterisation), with structure where it
// belongs (a MultivariateNormal holds a LowerTriangular scale_tril). Every log_prob, entropy and
// KL divergence is built from the library's differentiable ops, so their gradients follow.
#pragma once

#include <structgrad/core/tensor.h>
#include <structgrad/ops/structure.h>

namespace sg::distributions {

/// N(loc, scale²) elementwise; loc and scale broadcast to the batch shape.
/// Example: `sg::distributions::Normal d(mu, sigma);  auto lp = d.log_prob(x);`
class Normal {
 public:
  Normal(Tensor loc, Tensor scale);
  const Tensor& loc() const { return loc_; }
  const Tensor& scale() const { return scale_; }
  /// The shape loc and scale broadcast to.
  const Shape& batch_shape() const { return batch_shape_; }
  /// @{
  /// loc, scale and scale². Example: `auto v = d.variance();`
  Tensor mean() const { return loc_; }
  Tensor stddev() const { return scale_; }
  Tensor variance() const;
  /// @}
  /// log N(value; loc, scale²) elementwise, value broadcasting against the batch.
  Tensor log_prob(const Tensor& value) const;
  /// ½ + ½·log 2π + log scale, of the batch shape. Example: `auto h = d.entropy();`
  Tensor entropy() const;
  /// loc + scale·ε with ε ~ N(0, 1) of shape sample_shape + batch_shape: differentiable in loc and scale.
  Tensor rsample(const Shape& sample_shape = {}) const;
  /// rsample without a gradient. Example: `auto draws = d.sample({1000});`
  Tensor sample(const Shape& sample_shape = {}) const;

 private:
  Tensor loc_, scale_;
  Shape batch_shape_;
};

/// N(loc, L·Lᵀ) over the last dimension (the event, of size d), batched over the others:
/// loc [..., d], scale_tril [..., d, d]. log_prob runs on the batched triangular solve.
/// Example: `auto mvn = sg::distributions::MultivariateNormal(mu, L);  auto lp = mvn.log_prob(x);`
class MultivariateNormal {
 public:
  /// scale_tril must be tagged LowerTriangular (sg::tril, sg::as_lower, or a LowerTriangular).
  MultivariateNormal(Tensor loc, const Tensor& scale_tril);
  /// From a Symmetric positive definite covariance Σ = L·Lᵀ (L by Cholesky).
  static MultivariateNormal from_covariance(Tensor loc, const Tensor& covariance);
  /// From a Symmetric positive definite precision P = Σ⁻¹.
  static MultivariateNormal from_precision(Tensor loc, const Tensor& precision);
  const Tensor& loc() const { return loc_; }
  const LowerTriangular& scale_tril() const { return scale_tril_; }
  /// The batch shape, loc's and scale_tril's broadcast without the event.
  const Shape& batch_shape() const { return batch_shape_; }
  /// The event size d.
  int64_t event_size() const { return scale_tril_.size(-1); }
  /// loc. Example: `auto mu = mvn.mean();`
  Tensor mean() const { return loc_; }
  /// L·Lᵀ, Symmetric. Example: `auto sigma = mvn.covariance();`
  Tensor covariance() const;
  /// log density at value [..., d], value's batch broadcasting against the distribution's: [...].
  Tensor log_prob(const Tensor& value) const;
  /// ½·d·(1 + log 2π) + Σ log L(i, i), of the batch shape. Example: `auto h = mvn.entropy();`
  Tensor entropy() const;
  /// loc + L·ε with ε ~ N(0, I): shape sample_shape + batch_shape + [d].
  Tensor rsample(const Shape& sample_shape = {}) const;
  /// rsample without a gradient. Example: `auto draws = mvn.sample({100});`
  Tensor sample(const Shape& sample_shape = {}) const;
  /// Σ log L(i, i) per matrix, half the log-determinant of the covariance: batch_shape.
  Tensor half_log_det() const;

 private:
  Tensor loc_;
  LowerTriangular scale_tril_;
  Shape batch_shape_;
};

/// N(loc, W·Wᵀ + diag(D)) with a low-rank factor W [..., d, r] and a positive diagonal D [..., d];
/// log_prob and entropy use the r × r capacitance I + Wᵀ·D⁻¹·W (Woodbury), never a d × d matrix.
/// Example: `sg::distributions::LowRankMultivariateNormal d(mu, W, D);`
class LowRankMultivariateNormal {
 public:
  LowRankMultivariateNormal(Tensor loc, Tensor cov_factor, Tensor cov_diag);
  const Tensor& loc() const { return loc_; }
  const Tensor& cov_factor() const { return cov_factor_; }
  const Tensor& cov_diag() const { return cov_diag_; }
  const Shape& batch_shape() const { return batch_shape_; }
  int64_t event_size() const { return loc_.size(-1); }
  /// loc. Example: `auto mu = d.mean();`
  Tensor mean() const { return loc_; }
  /// W·Wᵀ + diag(D), Symmetric (d × d: for inspection, not used by log_prob).
  Tensor covariance() const;
  /// log density at value [..., d]: [...]. Example: `auto lp = d.log_prob(x);`
  Tensor log_prob(const Tensor& value) const;
  /// ½·(d·(1 + log 2π) + log det Σ), of the batch shape. Example: `auto h = d.entropy();`
  Tensor entropy() const;
  /// loc + W·ε_r + √D ⊙ ε_d: shape sample_shape + batch_shape + [d]. Example: `auto x = d.rsample({8});`
  Tensor rsample(const Shape& sample_shape = {}) const;
  /// rsample without a gradient. Example: `auto draws = d.sample({100});`
  Tensor sample(const Shape& sample_shape = {}) const;

 private:
  /// log det(W·Wᵀ + D) per batch entry, and the Cholesky factor of the capacitance.
  Tensor log_det(LowerTriangular* capacitance_factor) const;
  Tensor loc_, cov_factor_, cov_diag_;
  Shape batch_shape_;
};

/// A categorical distribution over the last dimension of logits [..., K] (unnormalised log
/// probabilities). Example: `sg::distributions::Categorical c(logits);  auto k = c.sample();`
class Categorical {
 public:
  explicit Categorical(Tensor logits);
  /// logits − logsumexp(logits): normalised log probabilities [..., K].
  const Tensor& logits() const { return logits_; }
  /// exp(logits()), [..., K]. Example: `auto p = c.probs();`
  Tensor probs() const;
  const Shape& batch_shape() const { return batch_shape_; }
  int64_t num_classes() const { return logits_.size(-1); }
  /// log p(value) for int64 classes of the batch shape: [...].
  Tensor log_prob(const Tensor& value) const;
  /// −Σ p log p over the classes (0 for a class of probability 0). Example: `auto h = c.entropy();`
  Tensor entropy() const;
  /// int64 classes of shape sample_shape + batch_shape (Gumbel-max).
  Tensor sample(const Shape& sample_shape = {}) const;

 private:
  Tensor logits_;
  Shape batch_shape_;
};

/// A mixture of K MultivariateNormal components sharing a family: the mixture's Categorical over
/// [..., K] and components of batch shape [..., K]; log_prob is logsumexp over the components.
/// Example: `sg::distributions::MixtureSameFamily gmm(Categorical(w), MultivariateNormal(mu, L));`
class MixtureSameFamily {
 public:
  MixtureSameFamily(Categorical mixture, MultivariateNormal components);
  const Categorical& mixture() const { return mixture_; }
  const MultivariateNormal& components() const { return components_; }
  /// The components' batch shape without its last dimension (K).
  const Shape& batch_shape() const { return batch_shape_; }
  /// log Σ_k π_k N(value; μ_k, Σ_k) for value [..., d]: [...].
  Tensor log_prob(const Tensor& value) const;
  /// Σ_k π_k μ_k, [..., d]. Example: `auto m = gmm.mean();`
  Tensor mean() const;
  /// Samples of shape sample_shape + batch_shape + [d]: a component drawn per sample, then its sample.
  Tensor sample(const Shape& sample_shape = {}) const;

 private:
  Categorical mixture_;
  MultivariateNormal components_;
  Shape batch_shape_;
};

/// KL(p ‖ q) between two multivariate normals of one event size, batch shapes broadcasting.
/// Example: `auto kl = sg::distributions::kl_divergence(q, prior);`
Tensor kl_divergence(const MultivariateNormal& p, const MultivariateNormal& q);
/// KL(p ‖ q) between two Normals, elementwise. Example: `auto kl = sg::distributions::kl_divergence(q, prior);`
Tensor kl_divergence(const Normal& p, const Normal& q);

}  // namespace sg::distributions
