// docs/api.md, "Losses and distributions": a classifier's cross-entropy, and a Gaussian mixture
// (MixtureSameFamily) with one batched scale_tril parameter, its gradient, samples and KL.
// Built and run by CTest; the guide shows the body of main() before its checks.
#include <structgrad/structgrad.h>

#include <cmath>
#include <vector>

int main() {
  const auto f64 = sg::TensorOptions().dtype(sg::kFloat64);
  namespace dist = sg::distributions;
  auto logits = sg::randn({8, 3}, f64).requires_grad_();     // 8 samples, 3 classes
  auto labels = sg::randint(0, 3, {8});                        // int64 classes
  auto ce = sg::cross_entropy(logits, labels, 0.1);            // mean, label smoothing 0.1

  const int64_t k = 4, d = 2;                                  // 4 components in 2 dimensions
  auto raw = (0.1 * sg::randn({k, d, d}, f64)).requires_grad_();
  auto mu = sg::randn({k, d}, f64).requires_grad_();
  auto weights = sg::zeros({k}, f64).requires_grad_();
  // One parameter holds every factor: tril with a positive (softplus) diagonal.
  auto L = sg::with_diagonal(sg::tril(raw), sg::softplus(sg::diagonal(raw)) + 1e-3);
  dist::MultivariateNormal components(mu, L);
  dist::MixtureSameFamily gmm(dist::Categorical(weights), components);
  auto nll = -sg::mean(gmm.log_prob(sg::randn({256, d}, f64)));  // log_prob: [256]
  nll.backward();                                              // reaches raw, mu and weights
  auto draws = components.rsample({10});                       // [10, 4, 2], differentiable in mu and raw
  auto kl = dist::kl_divergence(components, dist::MultivariateNormal(sg::zeros({d}, f64),
                                                                   sg::LowerTriangular::eye(d, f64)));  // [4]

  SG_CHECK(ce.dim() == 0 && std::isfinite(ce.item()), "cross_entropy is a finite scalar");
  SG_CHECK(std::abs(sg::sum(sg::softmax(logits, 1)).item() - 8.0) < 1e-12, "softmax rows sum to 1");
  SG_CHECK(draws.shape() == sg::Shape({10, k, d}) && kl.shape() == sg::Shape({k}), "shapes");
  SG_CHECK(std::isfinite(nll.item()) && raw.grad().shape() == sg::Shape({k, d, d}) && mu.grad().defined() &&
               weights.grad().defined(),
           "the mixture's gradient reaches every parameter");
  return 0;
}
