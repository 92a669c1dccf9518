// Heteroscedastic regression with a full covariance per input: a small MLP maps x [2] to the mean
// μ(x) [3] and the Cholesky factor L(x) of the noise covariance, a batch of LowerTriangular
// matrices with a softplus diagonal, trained by the Gaussian negative log-likelihood
//   NLL = ½‖L(x)⁻¹(y − μ(x))‖² + Σ log L(x)ᵢᵢ + (d/2)·log 2π
// on synthetic data whose noise is correlated and depends on x. The same network with a diagonal
// covariance is the baseline; the held-out NLL of the full model must beat it by --min-gain nats.
// Runs on the CPU by default, --device cuda on a GPU; exits 77 when asked for CUDA where there is none.
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "common.h"

namespace {

constexpr int64_t kDim = 3;  // of y

/// Synthetic data: x uniform in [−1, 1]², y = f(x) + L(x)·ε with a correlated, x-dependent L.
struct Data {
  sg::Tensor x, y;
};

Data make_data(int64_t count, sg::TensorOptions opts) {
  const std::vector<double> x = (2.0 * sg::rand({count, 2}, sg::kFloat64) - 1.0).to_vector();
  const std::vector<double> eps = sg::randn({count, kDim}, sg::kFloat64).to_vector();
  std::vector<double> y(static_cast<size_t>(count * kDim));
  for (int64_t i = 0; i < count; ++i) {
    const double a = x[2 * i], b = x[2 * i + 1];
    const double mean[kDim] = {std::sin(2 * a), std::cos(1.5 * b), a * b};
    // L(x): the scales grow with a, and the correlations turn with a and b.
    const double l[kDim][kDim] = {{0.1 + 0.15 * (1 + a), 0, 0},
                                  {0.3 * a, 0.08 + 0.05 * (1 + b), 0},
                                  {0.25 * b, -0.2 * a * b, 0.1}};
    for (int64_t r = 0; r < kDim; ++r) {
      double v = mean[r];
      for (int64_t c = 0; c <= r; ++c) v += l[r][c] * eps[static_cast<size_t>(i * kDim + c)];
      y[static_cast<size_t>(i * kDim + r)] = v;
    }
  }
  return {sg::from_vector(x, {count, 2}, opts), sg::from_vector(y, {count, kDim}, opts)};
}

/// The network: x [N, 2] → μ [N, d] and the raw entries of L, d·d (full) or d (diagonal) per input.
struct Model {
  bool full;
  std::shared_ptr<sg::nn::Sequential> net;

  Model(bool full_covariance, int64_t hidden, sg::TensorOptions opts) : full(full_covariance) {
    const int64_t outputs = kDim + (full ? kDim * kDim : kDim);
    net = std::make_shared<sg::nn::Sequential>(std::vector<std::shared_ptr<sg::nn::Layer>>{
        std::make_shared<sg::nn::Linear>(2, hidden, true, opts), std::make_shared<sg::nn::Tanh>(),
        std::make_shared<sg::nn::Linear>(hidden, hidden, true, opts), std::make_shared<sg::nn::Tanh>(),
        std::make_shared<sg::nn::Linear>(hidden, outputs, true, opts)});
  }

  /// The mean NLL of the rows of y [N, d] given x [N, 2].
  sg::Tensor nll(const sg::Tensor& x, const sg::Tensor& y) const {
    const sg::Tensor out = net->forward(x);
    const int64_t n = x.size(0);
    const sg::Tensor mu = sg::narrow(out, 1, 0, kDim);
    // A batch of N LowerTriangular factors with a positive diagonal.
    sg::LowerTriangular l;
    if (full) {
      const sg::Tensor raw = sg::reshape(sg::narrow(out, 1, kDim, kDim * kDim), {n, kDim, kDim});
      l = sg::LowerTriangular(sg::with_diagonal(sg::tril(raw), sg::softplus(sg::diagonal(raw)) + 1e-4));
    } else {
      l = sg::tril(sg::diag_embed(sg::softplus(sg::narrow(out, 1, kDim, kDim)) + 1e-4));
    }
    const sg::Tensor z = sg::solve_triangular(l, sg::reshape(y - mu, {n, kDim, 1}));  // [N, d, 1]
    const sg::Tensor per_point = 0.5 * sg::sum(sg::reshape(sg::square(z), {n, kDim}), 1) +
                                 sg::logdet(l) + 0.5 * kDim * std::log(2 * M_PI);
    return sg::mean(per_point);
  }
};

}  // namespace

int main(int argc, char** argv) {
  examples::Args args(argc, argv);
  const sg::Device device = args.device();
  if (args.cuda_missing("heteroscedastic_regression")) return examples::kSkipped;
  sg::manual_seed(static_cast<uint64_t>(args.get_int("seed", 0)));
  const auto opts = sg::TensorOptions().dtype(args.dtype()).device(device);
  const int64_t samples = args.get_int("samples", 4096), hidden = args.get_int("hidden", 32);
  const double min_gain = args.get_double("min-gain", 0.1);
  const Data train_set = make_data(samples, opts), test_set = make_data(samples / 4, opts);
  std::printf("heteroscedastic_regression: %lld samples, d = %lld, device=%s\n", (long long)samples,
              (long long)kDim, device.str().c_str());

  const double full = examples::train_model_nll(Model(true, hidden, opts), train_set, test_set, args, "full");
  const double diagonal = examples::train_model_nll(Model(false, hidden, opts), train_set, test_set, args, "diagonal");
  std::printf("held-out NLL: full covariance %.4f, diagonal covariance %.4f (gain %.4f nats, threshold %.2f)\n",
              full, diagonal, diagonal - full, min_gain);
  return diagonal - full >= min_gain ? 0 : 1;
}
