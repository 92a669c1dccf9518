// Twenty-fifth session (docs/structured_gemm.md, "A's transpose written by the forward"): Upper·Upper TF32
// at n: the forward alone (no grad), the forward that writes op(A)ᵀ (B requires grad; the graph dropped),
// forward + backward, with the transposed output on and off (twenty-fifth session, 2026-11-26; not built by
// CMake). Link against libstructgrad.a (with -lcuda -lcublas); run: transposed_a_forward N REPS.
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>
#include <cuda_runtime.h>
#include "structgrad.h"
#include "cuda/structured_gemm.h"
#include "cuda/runtime.h"
namespace cu = sg::detail::cuda;
int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 4096;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 21;
  sg::set_matmul_precision(sg::Precision::TF32);
  const sg::Device dev("cuda");
  auto f32 = sg::TensorOptions().dtype(sg::kFloat32).device(dev);
  sg::Tensor a = sg::UpperTriangular::randn(n, f32), b = sg::UpperTriangular::randn(n, f32);
  sg::Tensor g = sg::randn({n, n}, f32);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto time = [&](auto&& f) {
    std::vector<float> t;
    for (int r = 0; r < reps; ++r) {
      cudaDeviceSynchronize();
      cudaEventRecord(e0, cu::stream(0));
      f();
      cudaEventRecord(e1, cu::stream(0));
      cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1); t.push_back(ms);
    }
    std::sort(t.begin(), t.end()); return t[t.size() / 2];
  };
  for (bool on : {true, false, true, false}) {
    cu::set_transposed_a_output(on);
    const float fwd = time([&] { sg::NoGradGuard ng; sg::matmul(a, b); });
    sg::Tensor x = a.detach().requires_grad_(), y = b.detach().requires_grad_();
    const float fwd_grad = time([&] { sg::matmul(x, y); });
    const float fb = time([&] { sg::matmul(x, y).backward(g); });
    std::printf("n %lld output %-3s  fwd %.4f  fwd(grad, writes=%d) %.4f  fwd+bwd %.4f ms\n", (long long)n, on ? "on" : "off",
                fwd, on ? 1 : 0, fwd_grad, fb);
  }
  return 0;
}
