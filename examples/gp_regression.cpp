// Gaussian-process regression on 1-D data: learns the lengthscale ℓ, signal scale σ and noise
// scale σₙ of an RBF kernel by minimizing the negative log marginal likelihood
//   NLL = ½·yᵀK⁻¹y + ½·log|K| + (n/2)·log 2π,   K = σ²·exp(−(xᵢ − xⱼ)²/(2ℓ²)) + σₙ²·I,
// with the hyperparameters as unconstrained logs. K is built from library ops and tagged
// Symmetric with sg::sym; L = cholesky(K), z = L⁻¹y gives yᵀK⁻¹y = ‖z‖², and ½·log|K| = log|L|.
// The data are noisy samples of a known function; the program prints the recovered noise scale
// against the true one and the RMSE of the posterior mean K*·K⁻¹y against the true function on a
// held-out grid, and exits non-zero unless the RMSE is below --max-rmse and σₙ is within
// --noise-factor of the truth. The data are uploaded once and training stays on the device; on
// CUDA it prints the copies between host and device while training; --graph trains by replaying one
// captured CUDA graph of the step. Exits 77 when asked for CUDA where there is none.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common.h"

namespace {

/// The function behind the data.
double true_function(double x) { return std::sin(3.0 * x) + 0.3 * std::cos(7.0 * x); }

/// The hyperparameters, each the log of a positive scale.
struct Hyper {
  sg::Tensor log_lengthscale, log_signal, log_noise;  // 0-d
};

/// σ²·exp(−(a − b)²/(2ℓ²)) for squared distances d2 = (a − b)², from the log-parameters.
sg::Tensor rbf(const sg::Tensor& d2, const Hyper& h) {
  return sg::exp(2.0 * h.log_signal) * sg::exp(d2 * (-0.5 * sg::exp(-2.0 * h.log_lengthscale)));
}

/// K = rbf + σₙ²·I, tagged Symmetric (the projection (K + Kᵀ)/2 is the identity here, and makes the
/// gradient for K symmetric).
sg::Symmetric training_covariance(const sg::Tensor& d2, const sg::Tensor& eye, const Hyper& h) {
  return sg::sym(rbf(d2, h) + sg::exp(2.0 * h.log_noise) * eye);
}

/// (a − b)² for every pair of a column a [m, 1] and a row b [1, n], [m, n].
sg::Tensor squared_distances(const sg::Tensor& a_column, const sg::Tensor& b_row) {
  return sg::square(a_column - b_row);
}

/// The posterior mean at the test inputs, K*·K⁻¹y, with K⁻¹y by sg::cholesky_solve.
sg::Tensor posterior_mean(const sg::Tensor& d2_train, const sg::Tensor& d2_test, const sg::Tensor& eye,
                          const sg::Tensor& y, const Hyper& h) {
  sg::NoGradGuard no_grad;
  const sg::LowerTriangular l = sg::cholesky(training_covariance(d2_train, eye, h));
  return sg::matmul(rbf(d2_test, h), sg::cholesky_solve(l, y));
}

double rmse(const sg::Tensor& prediction, const sg::Tensor& truth) {
  return std::sqrt(sg::mean(sg::square(prediction - truth)).item());
}

double value(const sg::Tensor& log_scale) { return std::exp(log_scale.item()); }

}  // namespace

int main(int argc, char** argv) {
  examples::Args args(argc, argv);
  const sg::Device device = args.device();
  if (args.cuda_missing("gp_regression")) return examples::kSkipped;
  const int64_t n = args.get_int("n", 300), test_points = args.get_int("test", 400);
  const int64_t steps = args.get_int("steps", 200);
  const double lr = args.get_double("lr", 0.05), noise = args.get_double("noise", 0.1);
  const double max_rmse = args.get_double("max-rmse", 0.05), noise_factor = args.get_double("noise-factor", 1.25);
  const sg::DType dtype = args.dtype();
  sg::manual_seed(static_cast<uint64_t>(args.get_int("seed", 0)));
  const auto opts = sg::TensorOptions().dtype(dtype).device(device);
  const double lo = -3.0, hi = 3.0;

  // Training inputs uniform on [lo, hi] with y = f(x) + noise·ε, and a grid of test inputs with
  // f there; drawn on the host once and uploaded.
  const std::vector<double> u = sg::rand({n}, sg::kFloat64).to_vector();
  const std::vector<double> e = sg::randn({n}, sg::kFloat64).to_vector();
  std::vector<double> xs(n), ys(n), grid(test_points), f_grid(test_points);
  for (int64_t i = 0; i < n; ++i) {
    xs[i] = lo + (hi - lo) * u[i];
    ys[i] = true_function(xs[i]) + noise * e[i];
  }
  for (int64_t i = 0; i < test_points; ++i) {
    grid[i] = lo + (hi - lo) * (static_cast<double>(i) + 0.5) / static_cast<double>(test_points);
    f_grid[i] = true_function(grid[i]);
  }
  const sg::Tensor x = sg::from_vector(xs, {n, 1}, opts), y = sg::from_vector(ys, {n, 1}, opts);
  const sg::Tensor x_test = sg::from_vector(grid, {test_points, 1}, opts);
  const sg::Tensor f_test = sg::from_vector(f_grid, {test_points, 1}, opts);

  // Pairwise squared distances, constant through training: a column minus a row.
  const sg::Tensor x_row = sg::transpose(x);
  const sg::Tensor d2_train = squared_distances(x, x_row), d2_test = squared_distances(x_test, x_row);
  const sg::Tensor eye = sg::eye(n, opts);

  // Start at ℓ = 1, σ = 1, σₙ = 0.5: too smooth for the data, and too noisy.
  Hyper h{sg::full({}, 0.0, opts.requires_grad()), sg::full({}, 0.0, opts.requires_grad()),
          sg::full({}, std::log(0.5), opts.requires_grad())};
  sg::optim::Adam opt({h.log_lengthscale, h.log_signal, h.log_noise}, {.lr = lr});

  const double baseline = rmse(sg::mean(y) + sg::zeros_like(f_test), f_test);
  const double initial = rmse(posterior_mean(d2_train, d2_test, eye, y, h), f_test);
  std::printf("gp_regression: n=%lld test=%lld steps=%lld device=%s dtype=%s\n", (long long)n,
              (long long)test_points, (long long)steps, device.str().c_str(), sg::dtype_name(dtype));
  std::printf("test RMSE of the training mean: %.4f; of the posterior mean at the initial hyperparameters: %.4f\n",
              baseline, initial);

  // Training: the loss is the NLL per training point. The example reads nothing back except on the
  // steps that print and the last one: the factorization's status (cholesky_ex) is checked there.
  const double log_2pi = std::log(2.0 * M_PI);
  sg::nn::Progress progress(steps, std::max<int64_t>(steps / 6, 1), args.quiet);
  const bool on_cuda = device.is_cuda();
  const sg::cuda::TransferStats before = on_cuda ? sg::cuda::transfer_stats(device.index) : sg::cuda::TransferStats{};
  sg::Tensor nll, info;
  auto step = [&] {
    opt.zero_grad();
    auto factorization = sg::cholesky_ex(training_covariance(d2_train, eye, h));
    info = factorization.info;
    const sg::Tensor z = sg::solve_triangular(factorization.L, y);  // L⁻¹y
    nll = (0.5 * sg::sum(sg::square(z)) + sg::logdet(factorization.L)) / static_cast<double>(n) + 0.5 * log_2pi;
    nll.backward();
    opt.step();
  };
  bool positive_definite = true;
  examples::run_steps(args, steps, step, [&](int64_t s) {
    if (!(progress.should_report(s) || s == steps)) return true;
    if (info.item() != 0) {
      std::printf("step %lld: K is not positive definite (pivot %lld)\n", (long long)s, (long long)info.item());
      positive_definite = false;
      return false;
    }
    progress.update_lazy(s, [&] { return nll.item(); });
    return true;
  });
  if (!positive_definite) return 1;
  if (on_cuda) {
    // Informational: the printed losses and status checks, and whatever the library's own checks read.
    const sg::cuda::TransferStats after = sg::cuda::transfer_stats(device.index);
    std::printf("host transfers while training: %llu uploads, %llu downloads in %lld steps\n",
                (unsigned long long)(after.host_to_device - before.host_to_device),
                (unsigned long long)(after.device_to_host - before.device_to_host), (long long)steps);
  }

  const double lengthscale = value(h.log_lengthscale), signal = value(h.log_signal), noise_fit = value(h.log_noise);
  std::printf("lengthscale %.4f  signal scale %.4f  (no true value: the data are not a GP sample)\n", lengthscale,
              signal);
  std::printf("noise scale %.4f  (true %.4f, ratio %.3f; must be within a factor %.2f)\n", noise_fit, noise,
              noise_fit / noise, noise_factor);
  const double test_rmse = rmse(posterior_mean(d2_train, d2_test, eye, y, h), f_test);
  const bool noise_ok = noise_fit < noise * noise_factor && noise_fit > noise / noise_factor;
  std::printf("test_rmse=%.4f (threshold %.4f, against the true function)\n", test_rmse, max_rmse);
  return test_rmse < max_rmse && noise_ok ? 0 : 1;
}
