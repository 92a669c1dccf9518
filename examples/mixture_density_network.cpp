// A mixture density network: an MLP maps x ∈ [−1, 1] to the weights, means and scale_tril factors
// of a K-component Gaussian mixture over y ∈ R² per input, a MixtureSameFamily of batch shape [N]
// whose components (batch [N, K]) hold one LowerTriangular factor each, all from the network's
// outputs. The data are bimodal in y for most x (the two branches of a noisy circle), which a single
// Gaussian per input cannot express; the held-out NLL must beat a one-component network by
// --min-gain nats. Runs on the CPU by default, --device cuda on a GPU; exits 77 when asked for CUDA
// where there is none.
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "common.h"

namespace {

namespace dist = sg::distributions;

constexpr int64_t kDim = 2;  // of y

/// x uniform in [−1, 1]; y on the circle's upper or lower branch at x (equally likely), with
/// correlated noise: y = (x + 0.3·sin(3x), ±√(1 − x²)) + L·ε.
struct Data {
  sg::Tensor x, y;
};

Data make_data(int64_t count, sg::TensorOptions opts) {
  const std::vector<double> x = (2.0 * sg::rand({count, 1}, sg::kFloat64) - 1.0).to_vector();
  const std::vector<double> branch = sg::rand({count}, sg::kFloat64).to_vector();
  const std::vector<double> eps = sg::randn({count, kDim}, sg::kFloat64).to_vector();
  std::vector<double> y(static_cast<size_t>(count * kDim));
  for (int64_t i = 0; i < count; ++i) {
    const double a = x[static_cast<size_t>(i)], sign = branch[static_cast<size_t>(i)] < 0.5 ? 1.0 : -1.0;
    const double e0 = eps[static_cast<size_t>(2 * i)], e1 = eps[static_cast<size_t>(2 * i + 1)];
    y[static_cast<size_t>(2 * i)] = a + 0.3 * std::sin(3 * a) + 0.05 * e0;
    y[static_cast<size_t>(2 * i + 1)] = sign * std::sqrt(1 - a * a) + 0.04 * e0 + 0.05 * e1;
  }
  return {sg::from_vector(x, {count, 1}, opts), sg::from_vector(y, {count, kDim}, opts)};
}

/// The network: x [N, 1] → K logits, K means [d] and K raw d × d factors per input.
struct Model {
  int64_t k;
  std::shared_ptr<sg::nn::Sequential> net;

  Model(int64_t components, int64_t hidden, sg::TensorOptions opts) : k(components) {
    net = std::make_shared<sg::nn::Sequential>(
        std::make_shared<sg::nn::Linear>(1, hidden, true, opts), std::make_shared<sg::nn::Tanh>(),
        std::make_shared<sg::nn::Linear>(hidden, hidden, true, opts), std::make_shared<sg::nn::Tanh>(),
        std::make_shared<sg::nn::Linear>(hidden, k * (1 + kDim + kDim * kDim), true, opts));
  }

  /// The mixture over y for each row of x: batch shape [N].
  dist::MixtureSameFamily mixture(const sg::Tensor& x) const {
    const sg::Tensor out = net->forward(x);
    const int64_t n = x.size(0);
    const sg::Tensor logits = sg::narrow(out, 1, 0, k);
    const sg::Tensor mu = sg::narrow(out, 1, k, k * kDim).reshape({n, k, kDim});
    const sg::Tensor raw = sg::narrow(out, 1, k * (1 + kDim), k * kDim * kDim).reshape({n, k, kDim, kDim});
    // N·K LowerTriangular factors with a positive diagonal, one batch.
    const sg::LowerTriangular l = sg::with_diagonal(sg::tril(raw), sg::softplus(sg::diagonal(raw)) + 1e-3);
    return dist::MixtureSameFamily(dist::Categorical(logits), dist::MultivariateNormal(mu, l));
  }

  sg::Tensor nll(const sg::Tensor& x, const sg::Tensor& y) const { return -mixture(x).log_prob(y).mean(); }
};

}  // namespace

int main(int argc, char** argv) {
  examples::Args args(argc, argv);
  const sg::Device device = args.device();
  if (args.cuda_missing("mixture_density_network")) return examples::kSkipped;
  sg::manual_seed(static_cast<uint64_t>(args.get_int("seed", 0)));
  const auto opts = sg::TensorOptions().dtype(args.dtype()).device(device);
  const int64_t samples = args.get_int("samples", 4096), hidden = args.get_int("hidden", 32);
  const int64_t k = args.get_int("components", 4);
  const double min_gain = args.get_double("min-gain", 0.5);
  const Data train_set = make_data(samples, opts), test_set = make_data(samples / 4, opts);
  std::printf("mixture_density_network: %lld samples, %lld components, device=%s\n", (long long)samples,
              (long long)k, device.str().c_str());
  const double mixture = examples::train_model_nll(Model(k, hidden, opts), train_set, test_set, args, "mdn");
  const double single = examples::train_model_nll(Model(1, hidden, opts), train_set, test_set, args, "single");
  std::printf("held-out NLL: %lld components %.4f, one component %.4f (gain %.4f nats, threshold %.2f)\n",
              (long long)k, mixture, single, single - mixture, min_gain);
  return single - mixture >= min_gain ? 0 : 1;
}
