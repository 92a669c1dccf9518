// Fits the mean μ and the covariance Σ = L·Lᵀ of a d-dimensional Gaussian by maximum likelihood,
// with L a LowerTriangular `scale_tril` whose diagonal is kept positive through softplus (the
// parameterisation of PyTorch's and Pyro's MultivariateNormal):
//   L = tril(W, −1) + diag(softplus(v)),   z = L⁻¹(x − μ),
//   NLL(x) = ½‖z‖² + Σ log Lᵢᵢ + (d/2)·log 2π.
// All samples form one batch: Z = L⁻¹·(X − μ)ᵀ is one triangular solve of a [d, N] right-hand side,
// and Σ log Lᵢᵢ is sg::logdet of the LowerTriangular L. The data are samples from a known Σ* and μ*;
// the program prints the relative error ‖L·Lᵀ − Σ*‖_F/‖Σ*‖_F next to that of the sample covariance
// (the maximum-likelihood estimate, the best any fit can do with these samples), the mean error, and
// the NLL against that of the true parameters. It exits non-zero unless the covariance error is
// below --max-error and the fit's NLL is below the true parameters'. Everything stays on the
// device; on CUDA it prints the copies between host and device while training. Exits 77 when asked
// for CUDA where there is none.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common.h"

namespace {

/// The mean NLL of the columns of xt [d, N] under N(μ, L·Lᵀ), for μ [d] and a LowerTriangular L.
sg::Tensor nll(const sg::Tensor& xt, const sg::Tensor& mu, const sg::Tensor& l) {
  const int64_t d = xt.size(0);
  const sg::Tensor z = sg::solve_triangular(l, xt - sg::reshape(mu, {d, 1}));  // L⁻¹(x − μ), column by column
  return 0.5 * sg::sum(sg::square(z)) / static_cast<double>(xt.size(1)) + sg::logdet(l) +
         0.5 * static_cast<double>(d) * std::log(2.0 * M_PI);
}

}  // namespace

int main(int argc, char** argv) {
  examples::Args args(argc, argv);
  const sg::Device device = args.device();
  if (args.cuda_missing("gaussian_scale_tril")) return examples::kSkipped;
  const int64_t d = args.get_int("n", 12), samples = args.get_int("samples", 4000);
  const int64_t steps = args.get_int("steps", 400);
  const double lr = args.get_double("lr", 0.05), max_error = args.get_double("max-error", 0.1);
  const sg::DType dtype = args.dtype();
  sg::manual_seed(static_cast<uint64_t>(args.get_int("seed", 0)));
  const auto opts = sg::TensorOptions().dtype(dtype).device(device);

  // A known Σ* = A·Aᵀ/d + ½I and μ*; samples x = μ* + L*·ε with L* = cholesky(Σ*), made on the
  // device. Xᵀ [d, N] holds one sample per column, as the solve wants them.
  const sg::Symmetric sigma_true = sg::gram(sg::randn({d, d}, opts)) * (1.0 / static_cast<double>(d)) +
                                   sg::Symmetric::eye(d, opts) * 0.5;
  const sg::LowerTriangular l_true = sg::cholesky(sigma_true);
  const sg::Tensor mu_true = sg::randn({d}, opts);
  const sg::Tensor x = sg::linear(sg::randn({samples, d}, opts), l_true) + mu_true;  // rows L*·ε + μ*
  const sg::Tensor xt = sg::transpose(x);

  // Parameters: μ, W (only its strict lower triangle is used) and v, starting at μ = 0, L = I.
  const sg::Tensor mu = sg::zeros({d}, opts.requires_grad());
  const sg::Tensor w = sg::zeros({d, d}, opts.requires_grad());
  const sg::Tensor v = sg::full({d}, std::log(std::expm1(1.0)), opts.requires_grad());  // softplus(v) = 1
  auto scale_tril = [&] { return sg::LowerTriangular(sg::with_diagonal(sg::tril(w, -1), sg::softplus(v))); };
  sg::optim::Adam opt({mu, w, v}, {.lr = lr});

  const double sigma_norm = sg::norm(sigma_true).item();  // ‖Σ*‖_F
  auto covariance_error = [&](const sg::Tensor& l) { return sg::norm(sg::gram(l) - sigma_true).item() / sigma_norm; };
  std::printf("gaussian_scale_tril: d=%lld samples=%lld steps=%lld device=%s dtype=%s\n", (long long)d,
              (long long)samples, (long long)steps, device.str().c_str(), sg::dtype_name(dtype));
  std::printf("covariance relative error at the start (L = I): %.4f\n", covariance_error(scale_tril().detach()));

  sg::nn::Progress progress(steps, std::max<int64_t>(steps / 8, 1), args.quiet);
  const bool on_cuda = device.is_cuda();
  const sg::cuda::TransferStats before = on_cuda ? sg::cuda::transfer_stats(device.index) : sg::cuda::TransferStats{};
  for (int64_t step = 1; step <= steps; ++step) {
    opt.zero_grad();
    const sg::Tensor loss = nll(xt, mu, scale_tril());
    loss.backward();
    opt.step();
    progress.update_lazy(step, [&] { return loss.item(); });
  }
  if (on_cuda) {
    // Informational: the printed losses, and whatever the library's own checks read.
    const sg::cuda::TransferStats after = sg::cuda::transfer_stats(device.index);
    std::printf("host transfers while training: %llu uploads, %llu downloads in %lld steps\n",
                (unsigned long long)(after.host_to_device - before.host_to_device),
                (unsigned long long)(after.device_to_host - before.device_to_host), (long long)steps);
  }

  // The maximum-likelihood estimate in closed form (sample mean, sample covariance with 1/N) for
  // reference, and the errors of the fit.
  sg::NoGradGuard no_grad;
  const sg::LowerTriangular l_fit = scale_tril();
  const sg::Tensor sample_mean = sg::mean(x, 0);
  const sg::Symmetric sample_cov = sg::gram(sg::transpose(x - sample_mean)) * (1.0 / static_cast<double>(samples));
  const double err = covariance_error(l_fit), sample_err = sg::norm(sample_cov - sigma_true).item() / sigma_norm;
  const double nll_fit = nll(xt, mu, l_fit).item(), nll_true = nll(xt, mu_true, l_true).item();
  const double nll_mle = nll(xt, sample_mean, sg::cholesky(sample_cov)).item();
  std::printf("mean error |mu - mu*|: %.4f (sample mean %.4f)\n", sg::norm(mu - mu_true).item(),
              sg::norm(sample_mean - mu_true).item());
  std::printf("NLL per sample: fit %.5f, true parameters %.5f, maximum-likelihood estimate %.5f\n", nll_fit, nll_true,
              nll_mle);
  std::printf("sample covariance relative error: %.4f (the best a fit can do with these samples)\n", sample_err);
  // The maximum-likelihood estimate fits these samples better than the true parameters do (by about
  // (d + d(d+1)/2)/(2N) nats), so a converged fit must too.
  const bool beats_truth = nll_fit < nll_true;
  std::printf("fit NLL below the true parameters' NLL: %s\n", beats_truth ? "yes" : "no");
  std::printf("covariance relative error: %.4f (threshold %.3f)\n", err, max_error);
  return err < max_error && beats_truth ? 0 : 1;
}
