// docs/from_pytorch.md: a Gaussian process with learned hyperparameters (lengthscale, variance and
// noise of an RBF kernel) by the marginal likelihood, beside the PyTorch program of the same steps.
// Built and run by CTest; the guide shows the body of main() before its checks.
#include <structgrad/structgrad.h>

int main() {
  sg::manual_seed(0);
  const auto f64 = sg::TensorOptions().dtype(sg::kFloat64);
  auto x = (sg::arange(200, f64) * (6.0 / 199) - 3.0).reshape({200, 1});
  auto y = sg::tanh(2.0 * x).reshape({200}) + 0.1 * sg::randn({200}, f64);
  auto log_params = sg::zeros({3}, f64).requires_grad_();  // lengthscale, variance, noise
  sg::optim::Adam opt({log_params}, {.lr = 0.05});
  sg::Tensor loss;
  for (int step = 0; step < 200; ++step) {
    auto p = log_params.exp();
    auto lengthscale = sg::narrow(p, 0, 0, 1), variance = sg::narrow(p, 0, 1, 1), noise = sg::narrow(p, 0, 2, 1);
    auto k = sg::sym(variance * sg::exp(-0.5 * (x - x.t()).square() / lengthscale.square()) + noise * sg::eye(200, f64));
    auto gp = sg::distributions::MultivariateNormal::from_covariance(sg::zeros({200}, f64), k);
    loss = -gp.log_prob(y);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }

  const double fitted_noise = sg::exp(log_params).to_vector()[2];
  SG_CHECK(fitted_noise > 0.007 && fitted_noise < 0.014, "the fit finds the noise variance 0.01: ", fitted_noise);
  return 0;
}
