// docs/from_pytorch.md: an 8-D Gaussian with a full covariance fitted through its scale_tril, beside
// the PyTorch program of the same steps.
// Built and run by CTest; the guide shows the body of main() before its checks.
#include <structgrad/structgrad.h>

#include <cmath>

int main() {
  sg::manual_seed(0);
  const auto f64 = sg::TensorOptions().dtype(sg::kFloat64);
  const int64_t d = 8;
  auto l_true = sg::tril(sg::randn({d, d}, f64)) * 0.3 + sg::eye(d, f64);
  auto x = sg::matmul(sg::randn({4096, d}, f64), l_true.t()) + 1.0;
  auto mu = sg::zeros({d}, f64).requires_grad_();
  auto raw = sg::zeros({d, d}, f64).requires_grad_();
  sg::optim::Adam opt({mu, raw}, {.lr = 0.05});
  sg::Tensor loss;
  for (int step = 0; step < 300; ++step) {
    auto l = sg::with_diagonal(sg::tril(raw), sg::softplus(sg::diagonal(raw)) + 1e-3);
    loss = -sg::distributions::MultivariateNormal(mu, l).log_prob(x).mean();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }

  // The maximum-likelihood NLL in closed form: ½·d·(1 + log 2π) + ½·log det S of the sample covariance.
  auto centred = x - sg::mean(x, 0);
  const double best = 0.5 * d * (1 + std::log(2 * M_PI)) +
                      0.5 * sg::logdet(sg::sym(sg::matmul(centred.t(), centred) / 4096.0)).item();
  SG_CHECK(std::abs(loss.item() - best) < 1e-3, "the fit reaches the maximum likelihood ", best, ": ", loss.item());
  return 0;
}
