// docs/from_pytorch.md: a 4-component Gaussian mixture through MixtureSameFamily, the scale_tril
// factors one batched parameter, beside the PyTorch program of the same steps.
// Built and run by CTest; the guide shows the body of main() before its checks.
#include <structgrad/structgrad.h>

#include <vector>

int main() {
  namespace D = sg::distributions;
  sg::manual_seed(0);
  const auto f64 = sg::TensorOptions().dtype(sg::kFloat64);
  const int64_t k = 4, d = 2;
  std::vector<sg::Tensor> clusters;
  for (int64_t c = 0; c < k; ++c) clusters.push_back(sg::randn({512, d}, f64) * 0.5 + 3.0 * sg::randn({1, d}, f64));
  auto x = sg::cat(clusters);
  auto logits = sg::zeros({k}, f64).requires_grad_();
  auto mu = sg::randn({k, d}, f64).requires_grad_();
  auto raw = sg::zeros({k, d, d}, f64).requires_grad_();
  sg::optim::Adam opt({logits, mu, raw}, {.lr = 0.05});
  sg::Tensor loss;
  for (int step = 0; step < 300; ++step) {
    auto l = sg::with_diagonal(sg::tril(raw), sg::softplus(sg::diagonal(raw)) + 1e-3);
    D::MixtureSameFamily gmm(D::Categorical(logits), D::MultivariateNormal(mu, l));
    loss = -gmm.log_prob(x).mean();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }

  SG_CHECK(loss.item() < 3.6, "the mixture fits the clusters: ", loss.item());
  return 0;
}
