// Batches of small structured matrices through the public API on CUDA: Cholesky, triangular solves,
// the Upper·Upper product and an MVN log-density with a batch of scale_tril factors (composed by hand
// and through sg::distributions::MultivariateNormal), forward and forward + backward, each the median
// of CUDA-event timings after warm-ups (bench/bench_cuda.h).
// bench/torch_batched.py times PyTorch on the same workloads; run both in one command.
//   usage: bench_batched_cuda [--batch 4096] [--n 16,32,64] [--dtype float32,float64] [--reps 31]
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <structgrad/structgrad.h>

#include "bench/bench_cuda.h"

namespace {

/// X·Xᵀ/n + I per matrix: well-conditioned symmetric positive definite.
sg::Tensor spd(int64_t batch, int64_t n, sg::TensorOptions o) {
  const sg::Tensor x = sg::randn({batch, n, n}, o);
  return sg::sym(sg::matmul(x, sg::transpose(x)) / static_cast<double>(n) + sg::eye(n, o));
}

/// A well-conditioned batch of lower-triangular factors: off-diagonal entries of size 1/n, 1 to 2 on
/// the diagonal.
sg::Tensor lower(int64_t batch, int64_t n, sg::TensorOptions o) {
  const sg::Tensor w = sg::tril(sg::randn({batch, n, n}, o) / static_cast<double>(n));
  return sg::with_diagonal(w, sg::rand({batch, n}, o) + 1.0);
}

void row(const char* workload, int64_t batch, int64_t n, sg::DType dtype, double fwd, double fwd_bwd) {
  std::printf("| %s | %lld × %lld² | %s | %.4f | %.4f |\n", workload, static_cast<long long>(batch),
              static_cast<long long>(n), sg::dtype_name(dtype), fwd, fwd_bwd);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bench::program = "bench_batched_cuda";
  int64_t batch = 4096;
  std::vector<int64_t> sizes{16, 32, 64};
  std::vector<std::string> dtypes{"float32", "float64"};
  int reps = 31;
  bench::for_each_flag(argc, argv, "bench_batched_cuda [--batch B] [--n 16,32] [--dtype float32,float64] [--reps R]",
                       [&](const std::string& flag, const std::string& value) {
                         if (flag == "--batch") batch = std::stoll(value);
                         else if (flag == "--n") sizes = bench::split_sizes(value);
                         else if (flag == "--dtype") dtypes = bench::split(value);
                         else if (flag == "--reps") reps = std::stoi(value);
                         else return false;
                         return true;
                       });
  std::printf("| workload | batch | dtype | structgrad fwd ms | structgrad fwd+bwd ms |\n|---|---|---|---|---|\n");
  for (const std::string& dtype_name : dtypes) {
    const sg::DType dtype = dtype_name == "float64" ? sg::kFloat64 : sg::kFloat32;
    const sg::TensorOptions o = sg::TensorOptions().dtype(dtype).device(sg::kCUDA);
    for (const int64_t n : sizes) {
      sg::manual_seed(0);
      // Cholesky: cholesky_ex (no host round trip) and cholesky (reads the info codes back).
      const sg::Tensor s = spd(batch, n, o).detach().requires_grad_();
      const sg::Tensor dl = sg::randn({batch, n, n}, o);
      const double chol_ex = bench::median_ms(reps, [&](int) {
        sg::NoGradGuard no_grad;
        sg::cholesky_ex(s);
      });
      const double chol_ex_fb = bench::median_ms(reps, [&](int) { sg::cholesky_ex(s).L.backward(dl); });
      row("cholesky_ex", batch, n, dtype, chol_ex, chol_ex_fb);
      const double chol = bench::median_ms(reps, [&](int) {
        sg::NoGradGuard no_grad;
        sg::cholesky(s);
      });
      const double chol_fb = bench::median_ms(reps, [&](int) { sg::cholesky(s).backward(dl); });
      row("cholesky", batch, n, dtype, chol, chol_fb);
      // Triangular solve with 64 right-hand sides.
      const sg::Tensor l = lower(batch, n, o).detach().requires_grad_();
      const sg::Tensor b = sg::randn({batch, n, 64}, o).requires_grad_();
      const sg::Tensor gx = sg::randn({batch, n, 64}, o);
      const double solve = bench::median_ms(reps, [&](int) {
        sg::NoGradGuard no_grad;
        sg::solve_triangular(l, b);
      });
      const double solve_fb = bench::median_ms(reps, [&](int) { sg::solve_triangular(l, b).backward(gx); });
      row("solve_triangular, 64 rhs", batch, n, dtype, solve, solve_fb);
      // triu(A·B) for Upper A, B.
      const sg::Tensor u = sg::triu(sg::randn({batch, n, n}, o)).detach().requires_grad_();
      const sg::Tensor v = sg::triu(sg::randn({batch, n, n}, o)).detach().requires_grad_();
      const sg::Tensor gc = sg::randn({batch, n, n}, o);
      const double product = bench::median_ms(reps, [&](int) {
        sg::NoGradGuard no_grad;
        sg::matmul(u, v);
      });
      const double product_fb = bench::median_ms(reps, [&](int) { sg::matmul(u, v).backward(gc); });
      row("triu(A·B), Upper·Upper", batch, n, dtype, product, product_fb);
      // The MVN log-density of x [batch, n] under N(μ, L·Lᵀ), one scale_tril per input, summed.
      const sg::Tensor x = sg::randn({batch, n, 1}, o);
      const sg::Tensor mu = sg::randn({n, 1}, o).requires_grad_();
      const double log_2pi = std::log(2 * M_PI);
      auto log_prob = [&] {
        const sg::Tensor z = sg::solve_triangular(l, x - mu);
        const sg::Tensor half_mahalanobis = sg::sum(sg::sum(sg::square(z), -1), -1) * 0.5;  // [batch]
        const sg::Tensor log_det = sg::sum(sg::log(sg::diagonal(l)), -1);
        return sg::sum(-half_mahalanobis - log_det - 0.5 * static_cast<double>(n) * log_2pi);
      };
      const double mvn = bench::median_ms(reps, [&](int) {
        sg::NoGradGuard no_grad;
        log_prob();
      });
      const double mvn_fb = bench::median_ms(reps, [&](int) { log_prob().backward(); });
      row("MVN log-density, scale_tril", batch, n, dtype, mvn, mvn_fb);
      // The same density through sg::distributions::MultivariateNormal, built each step as a model would.
      const sg::Tensor x_rows = sg::reshape(x, {batch, n});
      const sg::Tensor loc = sg::randn({n}, o).requires_grad_();
      auto distribution_log_prob = [&] { return sg::sum(sg::distributions::MultivariateNormal(loc, l).log_prob(x_rows)); };
      const double dist = bench::median_ms(reps, [&](int) {
        sg::NoGradGuard no_grad;
        distribution_log_prob();
      });
      const double dist_fb = bench::median_ms(reps, [&](int) { distribution_log_prob().backward(); });
      row("MVN log-density, MultivariateNormal", batch, n, dtype, dist, dist_fb);
    }
  }
  return 0;
}
