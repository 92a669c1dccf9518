// docs/api.md, "Linear algebra": triangular solves, Cholesky, log-determinants with their
// gradients, triangular inverses, and a cholesky_ex loop that adds jitter until a factor exists.
// Built and run by CTest; the guide shows the body of main() before its checks.
#include <structgrad/structgrad.h>

#include <cmath>

int main() {
  const auto f64 = sg::TensorOptions().dtype(sg::kFloat64);
  sg::Symmetric K = sg::gram(sg::randn({8, 8}, f64)) + 8.0 * sg::Symmetric::eye(8, f64);  // positive definite
  K.requires_grad_();
  auto y = sg::randn({8, 2}, f64);

  sg::LowerTriangular L = sg::cholesky(K);                    // L·Lᵀ = K, exact zeros above the diagonal
  auto z = sg::solve_triangular(L, y);                        // L·z = y: Dense [8, 2]
  auto nll = 0.5 * sg::sum(sg::square(z)) + sg::logdet(K);    // −log N(y | 0, K) + const, both columns
  nll.backward();                                             // K.grad() is Symmetric: K⁻¹ − ½·α·αᵀ, α = K⁻¹y

  sg::NoGradGuard no_grad;
  auto alpha = sg::cholesky_solve(L, y);                      // K⁻¹·y from the factor: Dense [8, 2]
  sg::UpperTriangular U(sg::transpose(L));                    // Lᵀ
  sg::UpperTriangular U_inv = sg::inverse(U);                 // keeps Upper
  auto log_det_L = sg::logdet(L);                             // Σ log|lᵢᵢ| = ½·log det K, a 0-d tensor

  // Not positive definite after rounding: cholesky(C) would throw; cholesky_ex reports, jitter fixes.
  sg::Symmetric C = sg::as_symmetric(sg::ones({4, 4}, f64)) - 5e-3 * sg::Symmetric::eye(4, f64);
  sg::CholeskyResult factor = sg::cholesky_ex(C);             // never throws, never synchronises
  double jitter = 0.0;
  while (factor.info.item() != 0) {                           // 2 at first; item() waits for a GPU
    jitter = jitter == 0.0 ? 1e-4 : 10.0 * jitter;
    factor = sg::cholesky_ex(C + jitter * sg::Symmetric::eye(4, f64));
  }

  SG_CHECK(sg::sum(sg::square(K.grad() - sg::cholesky_solve(L, sg::eye(8, f64)) +
                             0.5 * sg::matmul(alpha, sg::transpose(alpha)))).item() < 1e-20, "dK = K⁻¹ − ½·α·αᵀ");
  SG_CHECK(sg::sum(sg::square(sg::matmul(K, alpha) - y)).item() < 1e-20, "cholesky_solve");
  SG_CHECK(sg::sum(sg::square(sg::matmul(U, U_inv) - sg::eye(8, f64))).item() < 1e-20, "inverse");
  SG_CHECK(std::abs(2.0 * log_det_L.item() - sg::logdet(K).item()) < 1e-10, "logdet");
  SG_CHECK(std::abs(jitter - 1e-2) < 1e-12 && factor.L.n() == 4, "jitter");
}
