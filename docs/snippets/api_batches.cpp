// docs/api.md, "Batches of matrices": a batch of LowerTriangular factors as one parameter, through
// the batched solve (broadcast against a batch of vectors) and log-determinant, then Cholesky, a
// shared operand and cholesky_ex's info code per matrix.
// Built and run by CTest; the guide shows the body of main() before its checks.
#include <structgrad/structgrad.h>

#include <cmath>
#include <vector>

int main() {
  const auto f64 = sg::TensorOptions().dtype(sg::kFloat64);
  const int64_t k = 4, d = 3;                                 // a batch of 4 matrices, 3 × 3
  auto raw = sg::randn({k, d, d}, f64).requires_grad_();
  // One parameter holds every matrix's factor: tril with a positive (softplus) diagonal.
  sg::LowerTriangular L(sg::with_diagonal(sg::tril(raw), sg::softplus(sg::diagonal(raw)) + 1e-3));
  auto x = sg::randn({10, 1, d, 1}, f64);                     // 10 vectors, broadcast against the 4 matrices
  auto z = sg::solve_triangular(L, x);                        // L_c·z = x for every pair: [10, 4, 3, 1]
  auto loss = sg::mean(sg::square(z)) + sg::sum(sg::logdet(L));  // logdet(L): [4]
  loss.backward();                                            // raw.grad() [4, 3, 3], lower triangular per matrix

  sg::NoGradGuard no_grad;
  sg::Symmetric S = sg::gram(L);                              // L_c·L_cᵀ per matrix: Symmetric [4, 3, 3]
  auto shared = sg::matmul(L, sg::randn({d, 2}, f64));        // one matrix shared by the batch: [4, 3, 2]
  auto info = sg::cholesky_ex(S - 100.0 * sg::Symmetric::eye(d, f64)).info;  // int64 [4], one code per matrix
  auto first = sg::index_select(L, 0, sg::from_vector(std::vector<int64_t>{0}));  // keeps LowerTriangular: [1, 3, 3]

  SG_CHECK(z.shape() == sg::Shape({10, k, d, 1}), "z has shape ", z.shape());
  SG_CHECK(raw.grad().shape() == sg::Shape({k, d, d}), "the gradient has shape ", raw.grad().shape());
  const auto g = raw.grad().to_vector();
  for (int64_t c = 0; c < k; ++c)
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = i + 1; j < d; ++j) SG_CHECK(g[(c * d + i) * d + j] == 0.0, "a gradient above the diagonal");
  SG_CHECK(sg::sum(sg::abs(sg::cholesky(S) - L)).item() < 1e-10, "cholesky(gram(L)) differs from L");
  SG_CHECK(shared.shape() == sg::Shape({k, d, 2}), "shared has shape ", shared.shape());
  SG_CHECK(info.shape() == sg::Shape({k}) && info.to_vector()[0] == 1.0, "info ", info);
  SG_CHECK(first.structure() == sg::Structure::LowerTriangular, "index_select dropped the tag");
  return 0;
}
