// A Gaussian mixture fitted by maximum likelihood through sg::distributions::MixtureSameFamily:
// K components in d dimensions, their scale_tril factors one batched LowerTriangular parameter
// [K, d, d] (tril with a softplus diagonal), the weights a Categorical over K logits. The data come
// from a known mixture; the held-out NLL of the fit must come within --max-gap nats of the true
// mixture's. Runs on the CPU by default, --device cuda on a GPU; exits 77 when asked for CUDA
// where there is none.
#include <cmath>
#include <cstdio>
#include <vector>

#include "common.h"

namespace {

namespace dist = sg::distributions;

constexpr int64_t kComponents = 3, kDim = 2;

/// The true mixture: three well-separated, correlated clusters with unequal weights.
dist::MixtureSameFamily truth(sg::TensorOptions opts) {
  const sg::Tensor logits = sg::log(sg::tensor({0.5, 0.3, 0.2}, opts));
  const sg::Tensor mu = sg::from_vector(std::vector<double>{-2.0, 0.0, 2.0, 1.5, 1.0, -2.0}, {kComponents, kDim}, opts);
  const sg::Tensor l = sg::from_vector(std::vector<double>{0.6, 0, 0.3, 0.4, 0.3, 0, -0.2, 0.5, 0.5, 0, 0.4, 0.2},
                                       {kComponents, kDim, kDim}, opts);
  return dist::MixtureSameFamily(dist::Categorical(logits), dist::MultivariateNormal(mu, sg::as_lower(l)));
}

/// The fitted mixture's parameters.
struct Model {
  sg::Tensor logits, mu, raw;

  explicit Model(sg::TensorOptions opts)
      : logits(sg::zeros({kComponents}, opts).requires_grad_()),
        mu(sg::randn({kComponents, kDim}, opts).requires_grad_()),
        raw((0.1 * sg::randn({kComponents, kDim, kDim}, opts)).requires_grad_()) {}

  dist::MixtureSameFamily mixture() const {
    // One parameter for every factor: tril with a positive diagonal.
    const sg::LowerTriangular l = sg::with_diagonal(sg::tril(raw), sg::softplus(sg::diagonal(raw)) + 1e-3);
    return dist::MixtureSameFamily(dist::Categorical(logits), dist::MultivariateNormal(mu, l));
  }
};

}  // namespace

int main(int argc, char** argv) {
  examples::Args args(argc, argv);
  const sg::Device device = args.device();
  if (args.cuda_missing("gaussian_mixture")) return examples::kSkipped;
  sg::manual_seed(static_cast<uint64_t>(args.get_int("seed", 0)));
  const auto opts = sg::TensorOptions().dtype(args.dtype()).device(device);
  const int64_t samples = args.get_int("samples", 4096), steps = args.get_int("steps", 600);
  const double max_gap = args.get_double("max-gap", 0.05);
  const dist::MixtureSameFamily true_mixture = truth(opts);
  const sg::Tensor train_x = true_mixture.sample({samples}), test_x = true_mixture.sample({samples});
  std::printf("gaussian_mixture: %lld components in %lld dimensions, %lld samples, device=%s\n",
              (long long)kComponents, (long long)kDim, (long long)samples, device.str().c_str());

  Model model(opts);
  sg::optim::Adam opt({model.logits, model.mu, model.raw}, {.lr = args.get_double("lr", 0.05)});
  for (int64_t step = 1; step <= steps; ++step) {
    opt.zero_grad();
    const sg::Tensor loss = -model.mixture().log_prob(train_x).mean();
    loss.backward();
    opt.step();
    if (!args.quiet && (step == 1 || step % 100 == 0)) std::printf("step %4lld  NLL %.4f\n", (long long)step, loss.item());
  }
  sg::NoGradGuard no_grad;
  const double fitted = -model.mixture().log_prob(test_x).mean().item();
  const double best = -true_mixture.log_prob(test_x).mean().item();
  std::printf("held-out NLL: fitted %.4f, true mixture %.4f (gap %.4f, threshold %.2f)\n", fitted, best, fitted - best,
              max_gap);
  const std::vector<double> weights = sg::softmax(model.logits, 0).to_vector();
  std::printf("fitted weights %.3f %.3f %.3f (true 0.5, 0.3, 0.2, in some order)\n", weights[0], weights[1], weights[2]);
  return fitted - best <= max_gap ? 0 : 1;
}
