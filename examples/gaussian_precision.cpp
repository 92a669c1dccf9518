// Fits the mean μ and the precision Λ = UᵀU (U upper triangular, positive diagonal through
// exp) of a d-dimensional Gaussian by maximum likelihood:
//   NLL(x) = ½‖U(x − μ)‖² − Σ log Uᵢᵢ  (+ const),  batch form Z = (X − μ)·Uᵀ = linear(X − μ, U).
// Data come from a known covariance Σ*; the program prints the relative error of the
// recovered covariance (UᵀU)⁻¹ against Σ*, and that of the sample covariance for reference.
// --graph (with --device cuda) trains by replaying one captured CUDA graph of the step.
#include <Eigen/Dense>
#include <cmath>
#include <cstdio>

#include "common.h"

int main(int argc, char** argv) {
  examples::Args args(argc, argv);
  const sg::Device device = args.device();
  if (args.cuda_missing("gaussian_precision")) return examples::kSkipped;
  const int64_t d = args.get_int("n", 16);
  const int64_t samples = args.get_int("samples", 20000);
  const int64_t steps = args.get_int("steps", 200);
  const double lr = args.get_double("lr", 0.05);
  const sg::DType dtype = args.dtype();
  sg::manual_seed(static_cast<uint64_t>(args.get_int("seed", 0)));
  auto opts = sg::TensorOptions().dtype(dtype).device(device);

  // A known covariance Σ* = A·Aᵀ/d + ½I and mean μ*; samples x = μ* + L z with L = chol(Σ*).
  Eigen::MatrixXd a = sg::to_eigen<double>(sg::randn({d, d}, sg::kFloat64));
  Eigen::MatrixXd sigma_true = a * a.transpose() / static_cast<double>(d) + 0.5 * Eigen::MatrixXd::Identity(d, d);
  Eigen::MatrixXd chol = sigma_true.llt().matrixL();
  auto mu_true = sg::randn({d}, opts);
  auto z = sg::randn({samples, d}, opts);
  auto x = sg::linear(z, sg::from_eigen(chol, device).to(dtype)) + mu_true;

  // Parameters: μ and W (upper); U = W with its diagonal replaced by exp(diag W).
  auto mu = sg::zeros({d}, opts.requires_grad());
  auto w = sg::UpperTriangular::zeros(d, opts).requires_grad_();
  sg::optim::Adam opt({mu, w}, {.lr = lr});
  auto factor = [&] { return sg::with_diagonal(w, sg::exp(sg::diagonal(w))); };

  std::printf("gaussian_precision: d=%lld samples=%lld steps=%lld device=%s dtype=%s\n", static_cast<long long>(d),
              static_cast<long long>(samples), static_cast<long long>(steps), device.str().c_str(),
              sg::dtype_name(dtype));
  sg::nn::Progress progress(steps, std::max<int64_t>(steps / 8, 1), args.quiet);
  sg::Tensor nll;
  auto step = [&] {
    opt.zero_grad();
    auto u = factor();
    auto zz = sg::linear(x - mu, u);                                      // rows U(x − μ)
    nll = 0.5 * sg::mean(sg::sum(sg::square(zz), 1)) - sg::sum(sg::diagonal(w));  // log Uᵢᵢ = Wᵢᵢ
    nll.backward();
    opt.step();
  };
  examples::run_steps(args, steps, step, [&](int64_t s) {
    progress.update_lazy(s, [&] { return nll.item(); });
    return true;
  });

  // Recovered covariance (UᵀU)⁻¹ vs Σ*, and the sample covariance's error for reference.
  Eigen::MatrixXd u = sg::to_eigen<double>(factor().detach());
  Eigen::MatrixXd sigma_fit = (u.transpose() * u).inverse();
  Eigen::MatrixXd xs = sg::to_eigen<double>(x);
  Eigen::RowVectorXd mean = xs.colwise().mean();
  Eigen::MatrixXd centered = xs.rowwise() - mean;
  Eigen::MatrixXd sigma_sample = centered.transpose() * centered / static_cast<double>(samples);
  const double err = (sigma_fit - sigma_true).norm() / sigma_true.norm();
  const double sample_err = (sigma_sample - sigma_true).norm() / sigma_true.norm();
  std::printf("sample covariance relative error: %.4f (the best a fit can do with these samples)\n", sample_err);
  std::printf("covariance relative error: %.4f\n", err);
  const double max_error = args.get_double("max-error", 0.05);
  return err < max_error ? 0 : 1;
}
