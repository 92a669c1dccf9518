// sg::distributions: each density, entropy and divergence composed from differentiable ops, the
// multivariate ones on the (batched) triangular solve and Cholesky factorization.
//   MultivariateNormal:  log p(x) = −½(d·log 2π + ‖L⁻¹(x − μ)‖²) − Σ log L(i, i)
//   LowRank (Σ = W·Wᵀ + D): with the capacitance C = I + Wᵀ·D⁻¹·W = Lc·Lcᵀ (Woodbury),
//     log det Σ = log det C + Σ log D,  (x − μ)ᵀΣ⁻¹(x − μ) = ‖x − μ‖²_{D⁻¹} − ‖Lc⁻¹·Wᵀ·D⁻¹(x − μ)‖²
//   KL(p ‖ q) for MVNs = log det Lq − log det Lp + ½(‖Lq⁻¹Lp‖²_F + ‖Lq⁻¹(μq − μp)‖² − d)
#include <structgrad/distributions/distributions.h>

#include <cmath>
#include <limits>

#include <structgrad/autograd/grad_mode.h>
#include <structgrad/ops/compare.h>
#include <structgrad/ops/elementwise.h>
#include <structgrad/ops/factories.h>
#include <structgrad/ops/index.h>
#include <structgrad/ops/linalg.h>
#include <structgrad/ops/matmul.h>
#include <structgrad/ops/reduce.h>
#include <structgrad/ops/shape.h>
#include "ops/op_util.h"

namespace sg::distributions {
namespace {

constexpr double kLog2Pi = 1.8378770664093453;  // log 2π

Shape broadcast(const char* op, const Shape& a, const Shape& b) {
  Shape out;
  detail::make_broadcast(op, a, b, out);
  return out;
}

Shape joined(const Shape& a, const Shape& b) {
  Shape out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

/// s without its last `k` dimensions.
Shape leading(const Shape& s, size_t k) { return Shape(s.begin(), s.end() - static_cast<std::ptrdiff_t>(k)); }

/// x [..., d] as a batch of columns [..., d, 1].
Tensor as_column(const Tensor& x) { return reshape(x, joined(x.shape(), {1})); }

/// x [..., d, 1] back to [..., d].
Tensor from_column(const Tensor& x) { return reshape(x, leading(x.shape(), 1)); }

/// Σ over the last two dimensions.
Tensor sum_matrices(const Tensor& x) { return sum(sum(x, -1), -1); }

TensorOptions options_of(const Tensor& t) { return TensorOptions().dtype(t.dtype()).device(t.device()); }

void check_parameter(const char* op, const char* name, const Tensor& t, int64_t min_dim) {
  SG_CHECK(t.defined(), op, ": ", name, " is undefined");
  detail::check_floating(op, t);
  SG_CHECK(t.dim() >= min_dim, op, ": expected ", name, " with at least ", min_dim, " dimension",
           min_dim == 1 ? "" : "s", ", got shape ", t.shape());
}

/// Checks that value [..., d] has the event size d (value's batch is checked by the ops it meets).
void check_event(const char* op, const Tensor& value, const Tensor& like, int64_t d) {
  SG_CHECK(value.defined(), op, ": the value is undefined");
  detail::check_same_device_dtype(op, value, like);
  SG_CHECK(value.dim() >= 1 && value.size(-1) == d, op, ": expected a value with event size ", d,
           " in its last dimension, got shape ", value.shape());
}

/// The gradient-free draw of `rsample`.
template <typename Draw>
Tensor without_grad(const Draw& draw) {
  NoGradGuard no_grad;
  return draw().detach();
}

}  // namespace

// ---- Normal ------------------------------------------------------------------------------------

Normal::Normal(Tensor loc, Tensor scale) : loc_(std::move(loc)), scale_(std::move(scale)) {
  check_parameter("Normal", "loc", loc_, 0);
  check_parameter("Normal", "scale", scale_, 0);
  detail::check_same_device_dtype("Normal", loc_, scale_);
  batch_shape_ = broadcast("Normal", loc_.shape(), scale_.shape());
}

Tensor Normal::variance() const { return square(scale_); }

Tensor Normal::log_prob(const Tensor& value) const {
  SG_CHECK(value.defined(), "Normal.log_prob: the value is undefined");
  detail::check_same_device_dtype("Normal.log_prob", value, loc_);
  return -square(value - loc_) / (2.0 * variance()) - log(scale_) - 0.5 * kLog2Pi;
}

Tensor Normal::entropy() const {
  return broadcast_to(log(scale_) + 0.5 * (1.0 + kLog2Pi), batch_shape_);
}

Tensor Normal::rsample(const Shape& sample_shape) const {
  return loc_ + scale_ * randn(joined(sample_shape, batch_shape_), options_of(loc_));
}

Tensor Normal::sample(const Shape& sample_shape) const {
  return without_grad([&] { return rsample(sample_shape); });
}

Tensor kl_divergence(const Normal& p, const Normal& q) {
  detail::check_same_device_dtype("kl_divergence", p.loc(), q.loc());
  const Tensor ratio = square(p.scale() / q.scale());
  return 0.5 * (ratio + square((p.loc() - q.loc()) / q.scale()) - 1.0) - 0.5 * log(ratio);
}

// ---- MultivariateNormal ------------------------------------------------------------------------

MultivariateNormal::MultivariateNormal(Tensor loc, const Tensor& scale_tril) : loc_(std::move(loc)) {
  constexpr const char* op = "MultivariateNormal";
  check_parameter(op, "loc", loc_, 1);
  check_parameter(op, "scale_tril", scale_tril, 2);
  detail::check_same_device_dtype(op, loc_, scale_tril);
  SG_CHECK(scale_tril.structure() == Structure::LowerTriangular, op,
           ": expected scale_tril to be LowerTriangular (tag it with sg::tril or sg::as_lower), got ",
           detail::with_article(structure_name(scale_tril.structure())), " tensor");
  const int64_t d = scale_tril.size(-1);
  SG_CHECK(scale_tril.size(-2) == d, op, ": expected square scale_tril matrices, got shape ", scale_tril.shape());
  SG_CHECK(loc_.size(-1) == d, op, ": loc of shape ", loc_.shape(), " does not fit scale_tril of shape ",
           scale_tril.shape(), " (event size ", d, ")");
  scale_tril_ = LowerTriangular(scale_tril);
  batch_shape_ = broadcast(op, leading(loc_.shape(), 1), leading(scale_tril.shape(), 2));
}

MultivariateNormal MultivariateNormal::from_covariance(Tensor loc, const Tensor& covariance) {
  SG_CHECK(covariance.defined(), "MultivariateNormal.from_covariance: the covariance is undefined");
  SG_CHECK(covariance.structure() == Structure::Symmetric,
           "MultivariateNormal.from_covariance: expected a Symmetric positive definite covariance (tag it with "
           "sg::sym or sg::as_symmetric), got ", detail::with_article(structure_name(covariance.structure())), " tensor");
  return MultivariateNormal(std::move(loc), cholesky(covariance));
}

MultivariateNormal MultivariateNormal::from_precision(Tensor loc, const Tensor& precision) {
  SG_CHECK(precision.defined(), "MultivariateNormal.from_precision: the precision is undefined");
  SG_CHECK(precision.structure() == Structure::Symmetric,
           "MultivariateNormal.from_precision: expected a Symmetric positive definite precision (tag it with "
           "sg::sym or sg::as_symmetric), got ", detail::with_article(structure_name(precision.structure())), " tensor");
  // Σ = P⁻¹ = Lp⁻ᵀ·Lp⁻¹ with P = Lp·Lpᵀ, then its factor.
  const LowerTriangular inv = inverse(cholesky(precision));
  return MultivariateNormal(std::move(loc), cholesky(gram(transpose(inv))));
}

Tensor MultivariateNormal::covariance() const { return gram(scale_tril_); }

Tensor MultivariateNormal::half_log_det() const { return sum(log(diagonal(scale_tril_)), -1); }

Tensor MultivariateNormal::log_prob(const Tensor& value) const {
  const int64_t d = event_size();
  check_event("MultivariateNormal.log_prob", value, loc_, d);
  const Tensor z = solve_triangular(scale_tril_, as_column(value - loc_));
  return -0.5 * (sum_matrices(square(z)) + static_cast<double>(d) * kLog2Pi) - half_log_det();
}

Tensor MultivariateNormal::entropy() const {
  const double d = static_cast<double>(event_size());
  return broadcast_to(half_log_det() + 0.5 * d * (1.0 + kLog2Pi), batch_shape_);
}

Tensor MultivariateNormal::rsample(const Shape& sample_shape) const {
  const Tensor eps = randn(joined(joined(sample_shape, batch_shape_), {event_size(), 1}), options_of(loc_));
  return loc_ + from_column(matmul(scale_tril_, eps));
}

Tensor MultivariateNormal::sample(const Shape& sample_shape) const {
  return without_grad([&] { return rsample(sample_shape); });
}

Tensor kl_divergence(const MultivariateNormal& p, const MultivariateNormal& q) {
  SG_CHECK(p.event_size() == q.event_size(), "kl_divergence: event sizes ", p.event_size(), " and ",
           q.event_size(), " differ");
  detail::check_same_device_dtype("kl_divergence", p.loc(), q.loc());
  const Tensor trace = sum_matrices(square(solve_triangular(q.scale_tril(), p.scale_tril())));
  const Tensor mahalanobis = sum_matrices(square(solve_triangular(q.scale_tril(), as_column(q.loc() - p.loc()))));
  return q.half_log_det() - p.half_log_det() +
         0.5 * (trace + mahalanobis - static_cast<double>(p.event_size()));
}

// ---- LowRankMultivariateNormal -----------------------------------------------------------------

LowRankMultivariateNormal::LowRankMultivariateNormal(Tensor loc, Tensor cov_factor, Tensor cov_diag)
    : loc_(std::move(loc)), cov_factor_(std::move(cov_factor)), cov_diag_(std::move(cov_diag)) {
  constexpr const char* op = "LowRankMultivariateNormal";
  check_parameter(op, "loc", loc_, 1);
  check_parameter(op, "cov_factor", cov_factor_, 2);
  check_parameter(op, "cov_diag", cov_diag_, 1);
  detail::check_same_device_dtype(op, loc_, cov_factor_);
  detail::check_same_device_dtype(op, loc_, cov_diag_);
  const int64_t d = loc_.size(-1);
  SG_CHECK(cov_factor_.size(-2) == d && cov_diag_.size(-1) == d, op, ": loc of shape ", loc_.shape(),
           ", cov_factor of shape ", cov_factor_.shape(), " and cov_diag of shape ", cov_diag_.shape(),
           " do not share the event size ", d);
  batch_shape_ = broadcast(op, broadcast(op, leading(loc_.shape(), 1), leading(cov_factor_.shape(), 2)),
                           leading(cov_diag_.shape(), 1));
}

Tensor LowRankMultivariateNormal::covariance() const {
  return sym(matmul(cov_factor_, transpose(cov_factor_)) + diag_embed(cov_diag_));
}

Tensor LowRankMultivariateNormal::log_det(LowerTriangular* capacitance_factor) const {
  const int64_t r = cov_factor_.size(-1);
  // C = I + Wᵀ·D⁻¹·W, r × r.
  const Tensor scaled = cov_factor_ / as_column(cov_diag_);
  const Tensor capacitance = sym(matmul(transpose(cov_factor_), scaled) + eye(r, options_of(loc_)));
  *capacitance_factor = cholesky(capacitance);
  return 2.0 * sum(log(diagonal(*capacitance_factor)), -1) + sum(log(cov_diag_), -1);
}

Tensor LowRankMultivariateNormal::log_prob(const Tensor& value) const {
  const int64_t d = event_size();
  check_event("LowRankMultivariateNormal.log_prob", value, loc_, d);
  LowerTriangular lc;
  const Tensor log_det_sigma = log_det(&lc);
  const Tensor diff = value - loc_;
  const Tensor weighted = diff / cov_diag_;  // D⁻¹(x − μ)
  const Tensor v = solve_triangular(lc, matmul(transpose(cov_factor_), as_column(weighted)));
  const Tensor mahalanobis = sum(diff * weighted, -1) - sum_matrices(square(v));
  return -0.5 * (static_cast<double>(d) * kLog2Pi + log_det_sigma + mahalanobis);
}

Tensor LowRankMultivariateNormal::entropy() const {
  LowerTriangular lc;
  const double d = static_cast<double>(event_size());
  return broadcast_to(0.5 * (d * (1.0 + kLog2Pi) + log_det(&lc)), batch_shape_);
}

Tensor LowRankMultivariateNormal::rsample(const Shape& sample_shape) const {
  const Shape shape = joined(sample_shape, batch_shape_);
  const TensorOptions o = options_of(loc_);
  const Tensor eps_r = randn(joined(shape, {cov_factor_.size(-1), 1}), o);
  const Tensor eps_d = randn(joined(shape, {event_size()}), o);
  return loc_ + from_column(matmul(cov_factor_, eps_r)) + sqrt(cov_diag_) * eps_d;
}

Tensor LowRankMultivariateNormal::sample(const Shape& sample_shape) const {
  return without_grad([&] { return rsample(sample_shape); });
}

// ---- Categorical -------------------------------------------------------------------------------

Categorical::Categorical(Tensor logits) {
  check_parameter("Categorical", "logits", logits, 1);
  SG_CHECK(logits.size(-1) > 0, "Categorical: expected at least one class, got logits of shape ", logits.shape());
  logits_ = logits - logsumexp(logits, -1, true);
  batch_shape_ = leading(logits_.shape(), 1);
}

Tensor Categorical::probs() const { return exp(logits_); }

Tensor Categorical::log_prob(const Tensor& value) const {
  constexpr const char* op = "Categorical.log_prob";
  SG_CHECK(value.defined(), op, ": the value is undefined");
  SG_CHECK(value.dtype() == DType::Int64, op, ": expected int64 classes, got a ", value.dtype(), " value");
  SG_CHECK(value.device() == logits_.device(), op, ": the classes are on ", value.device(), ", the logits on ",
           logits_.device());
  const Shape shape = broadcast(op, value.shape(), batch_shape_);
  SG_CHECK(shape == value.shape(), op, ": classes of shape ", value.shape(), " do not cover the batch shape ",
           batch_shape_);
  detail::refuse_under_capture(op, value.device(), "reads its check of the classes back to the host");
  const int64_t bad = detail::backend_of(value).find_bad_index(value, num_classes());
  if (bad >= 0)
    SG_FAIL(op, ": class ", value.to(kCPU).data<int64_t>()[bad], " is out of range for ", num_classes(), " classes");
  const Tensor logits = broadcast_to(logits_, joined(shape, {num_classes()}));
  return from_column(gather(logits, -1, as_column(value)));
}

Tensor Categorical::entropy() const {
  // A class of probability 0 adds 0 (not 0·(−inf)): its log-probability is clamped to the lowest finite value.
  const double lowest = logits_.dtype() == DType::Float32 ? std::numeric_limits<float>::lowest()
                                                          : std::numeric_limits<double>::lowest();
  return -sum(probs() * clamp_min(logits_, lowest), -1);
}

Tensor Categorical::sample(const Shape& sample_shape) const {
  NoGradGuard no_grad;
  // Gumbel-max: argmax(log p + G), G = −log(−log U) standard Gumbel.
  const Tensor u = rand(joined(joined(sample_shape, batch_shape_), {num_classes()}), options_of(logits_));
  return argmax(logits_.detach() - log(-log(u)), -1);
}

// ---- MixtureSameFamily -------------------------------------------------------------------------

MixtureSameFamily::MixtureSameFamily(Categorical mixture, MultivariateNormal components)
    : mixture_(std::move(mixture)), components_(std::move(components)) {
  constexpr const char* op = "MixtureSameFamily";
  const Shape& cb = components_.batch_shape();
  SG_CHECK(!cb.empty() && cb.back() == mixture_.num_classes(), op, ": components of batch shape ", cb,
           " need ", mixture_.num_classes(), " components in their last batch dimension (the mixture's classes)");
  batch_shape_ = leading(cb, 1);
  SG_CHECK(broadcast(op, mixture_.batch_shape(), batch_shape_) == batch_shape_, op, ": the mixture's batch shape ",
           mixture_.batch_shape(), " does not fit the components' ", batch_shape_);
  detail::check_same_device_dtype(op, mixture_.logits(), components_.loc());
}

Tensor MixtureSameFamily::log_prob(const Tensor& value) const {
  const int64_t d = components_.event_size();
  check_event("MixtureSameFamily.log_prob", value, components_.loc(), d);
  // value [..., d] against every component: [..., 1, d] → [..., K].
  Shape one_each = leading(value.shape(), 1);
  one_each.push_back(1);
  one_each.push_back(d);
  return logsumexp(components_.log_prob(reshape(value, one_each)) + mixture_.logits(), -1);
}

Tensor MixtureSameFamily::mean() const {
  const Shape shape = joined(components_.batch_shape(), {components_.event_size()});
  const Tensor weights = as_column(mixture_.probs());  // [..., K, 1]
  return sum(weights * broadcast_to(components_.mean(), shape), -2);
}

Tensor MixtureSameFamily::sample(const Shape& sample_shape) const {
  NoGradGuard no_grad;
  const int64_t k = mixture_.num_classes();
  // The mixture's logits over the whole batch (they may broadcast), one draw per sample: [S..., B...].
  const Tensor which = Categorical(broadcast_to(mixture_.logits(), joined(batch_shape_, {k}))).sample(sample_shape);
  const Tensor all = components_.sample(sample_shape);                                 // [S..., B..., K, d]
  const Tensor chosen = eq(as_column(which), arange(k, TensorOptions().dtype(DType::Int64).device(which.device())));
  return sum(as_column(chosen.to(all.dtype())) * all, -2);
}

}  // namespace sg::distributions
