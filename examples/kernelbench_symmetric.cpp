// C = A·B with A, B Symmetric: the result is Dense and NOT symmetric (S·T = (T·S)ᵀ ≠ T·S).
// Checks it against the dense product, shows how wrong the "mirror the upper triangle"
// shortcut is, and times the structured product against the dense one.
#include <cmath>
#include <cstdio>

#include "common.h"

int main(int argc, char** argv) {
  examples::Args args(argc, argv);
  const sg::Device device = args.device();
  const int64_t n = args.get_int("n", device.is_cuda() ? 4096 : 512);
  const int reps = static_cast<int>(args.get_int("steps", 5));
  sg::manual_seed(static_cast<uint64_t>(args.get_int("seed", 0)));
  auto opts = sg::TensorOptions().device(device);
  auto a = sg::Symmetric::randn(n, opts), b = sg::Symmetric::randn(n, opts);

  auto c = sg::matmul(a, b);
  auto c_dense = sg::matmul(a.dense(), b.dense());
  auto norm = [](const sg::Tensor& t) { return std::sqrt(sg::sum(sg::square(t)).item()); };
  const double err = norm(c - c_dense) / norm(c_dense);
  const double asym = norm(c - sg::transpose(c)) / norm(c);
  // The shortcut: keep the upper triangle of S·T and mirror it.
  auto mirrored = sg::sym(sg::triu(c) + sg::transpose(sg::triu(c)) - sg::with_diagonal(c * 0.0, sg::diagonal(c)));
  const double mirror_err = norm(mirrored - c_dense) / norm(c_dense);

  const double ts = examples::median_ms([&] { (void)sg::matmul(a, b); }, device, reps);
  const double td = examples::median_ms([&] { (void)sg::matmul(a.dense(), b.dense()); }, device, reps);
  std::printf("kernelbench_symmetric: N=%lld device=%s float32\n", (long long)n, device.str().c_str());
  std::printf("result structure: %s; relative error vs dense product: %.2e\n", sg::structure_name(c.structure()), err);
  std::printf("|C - C^T| / |C| = %.3f (the product of two symmetric matrices is not symmetric)\n", asym);
  std::printf("mirroring the upper triangle would give relative error %.3f\n", mirror_err);
  std::printf("structured %.3f ms, dense %.3f ms (%.2fx)\n", ts, td, td / ts);
  return err < 1e-5 && c.structure() == sg::Structure::Dense ? 0 : 1;
}
