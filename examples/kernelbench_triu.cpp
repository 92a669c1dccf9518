// C = triu(A·B) with A, B UpperTriangular: the structured product against the dense path
// (the same product on .dense() copies, what PyTorch's triu(A @ B) does). Checks the result
// and times forward and forward+backward of both. N = 4096 on CUDA, 512 on CPU by default.
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
  auto a = sg::UpperTriangular::randn(n, opts).requires_grad_();
  auto b = sg::UpperTriangular::randn(n, opts).requires_grad_();
  auto g = sg::randn({n, n}, opts);

  sg::UpperTriangular c = sg::matmul(a, b);
  sg::Tensor c_dense = sg::triu(sg::matmul(a.dense(), b.dense()));
  const double err = std::sqrt(sg::sum(sg::square(c - c_dense)).item() / sg::sum(sg::square(c_dense)).item());

  auto structured_fwd = [&] { sg::NoGradGuard guard; (void)sg::matmul(a, b); };
  auto dense_fwd = [&] { sg::NoGradGuard guard; (void)sg::triu(sg::matmul(a.dense(), b.dense())); };
  auto structured_fb = [&] { sg::matmul(a, b).backward(g); a.zero_grad(); b.zero_grad(); };
  auto dense_fb = [&] { sg::triu(sg::matmul(a.dense(), b.dense())).backward(g); a.zero_grad(); b.zero_grad(); };
  using examples::median_ms;
  const double sf = median_ms(structured_fwd, device, reps), df = median_ms(dense_fwd, device, reps);
  const double sfb = median_ms(structured_fb, device, reps), dfb = median_ms(dense_fb, device, reps);
  const double useful = static_cast<double>(n) * n * n / 3.0;
  std::printf("kernelbench_triu: N=%lld device=%s float32, relative error vs dense path %.2e\n", (long long)n,
              device.str().c_str(), err);
  std::printf("| path | forward ms | forward+backward ms | useful GFLOP/s (fwd) |\n|---|---|---|---|\n");
  std::printf("| structured | %.3f | %.3f | %.1f |\n", sf, sfb, useful / sf / 1e6);
  std::printf("| dense      | %.3f | %.3f | %.1f |\n", df, dfb, useful / df / 1e6);
  std::printf("speed-up: forward %.2fx, forward+backward %.2fx\n", df / sf, dfb / sfb);
  return err < 1e-5 ? 0 : 1;
}
