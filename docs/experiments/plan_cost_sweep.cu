// Twenty-sixth session (docs/structured_gemm.md, "The plans' costs fitted to the blocks' times"): the
// TF32 products whose plans the tall and wide costs deal (Upper·Upper, Dense·Upper, Upper·Dense, forward
// with no gradient and forward + backward), timed as bench_gemm_cuda times them: an event pair around
// one call, median of 15 after 3 warm-ups, two input sets in turn. The session's sweeps ran it under
// temporary environment overrides of the costs (not kept); its first form (ab26) used one input set.
// Not built by CMake: link against libstructgrad.a with -lcuda -lcublas.
// usage: plan_cost_sweep SIZES [TAG]   (SIZES: 3072,4096,8192)
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <functional>
#include <string>
#include <vector>
#include <cuda_runtime.h>
#include "structgrad.h"
#include "cuda/runtime.h"
namespace cu = sg::detail::cuda;
int main(int argc, char** argv) {
  const char* tag = argc > 2 ? argv[2] : "";
  sg::set_matmul_precision(sg::Precision::TF32);
  const sg::Device dev("cuda");
  auto f32 = sg::TensorOptions().dtype(sg::kFloat32).device(dev);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto time = [&](const std::function<void()>& f) {
    std::vector<float> t;
    for (int r = 0; r < 18; ++r) {
      cudaEventRecord(e0, cu::stream(0));
      f();
      cudaEventRecord(e1, cu::stream(0));
      cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1);
      if (r >= 3) t.push_back(ms);
    }
    std::sort(t.begin(), t.end()); return t[t.size() / 2] * 1e3;
  };
  std::string sizes = argc > 1 ? argv[1] : "4096";
  for (size_t pos = 0; pos < sizes.size();) {
    size_t end = sizes.find(',', pos); if (end == std::string::npos) end = sizes.size();
    const int64_t n = std::atoll(sizes.substr(pos, end - pos).c_str()); pos = end + 1;
    // Two input sets in turn (as bench_gemm_cuda: one pass reads more than the L2).
    std::vector<sg::Tensor> ua, ub, da, db;
    for (int s = 0; s < 2; ++s) {
      ua.push_back(sg::UpperTriangular::randn(n, f32)); ub.push_back(sg::UpperTriangular::randn(n, f32));
      da.push_back(sg::randn({n, n}, f32)); db.push_back(sg::randn({n, n}, f32));
    }
    sg::Tensor g = sg::randn({n, n}, f32);
    int turn = 0;
    auto fb = [&](std::vector<sg::Tensor>& as, std::vector<sg::Tensor>& bs) {
      std::vector<sg::Tensor> xs, ys;
      for (int s = 0; s < 2; ++s) { xs.push_back(as[s].detach().requires_grad_()); ys.push_back(bs[s].detach().requires_grad_()); }
      return time([&] { const int s = turn++ % 2; sg::matmul(xs[s], ys[s]).backward(g); xs[s].zero_grad(); ys[s].zero_grad(); });
    };
    auto fw = [&](std::vector<sg::Tensor>& as, std::vector<sg::Tensor>& bs) {
      return time([&] { const int s = turn++ % 2; sg::NoGradGuard ng; sg::matmul(as[s], bs[s]); });
    };
    const double uu = fw(ua, ub), uufb = fb(ua, ub), du = fw(da, ub), dufb = fb(da, ub), ud = fw(ua, db), udfb = fb(ua, db);
    std::printf("%s n %5lld | UU fwd %7.1f fb %7.1f | DU fwd %7.1f fb %7.1f | UD fwd %7.1f fb %7.1f us\n", tag, (long long)n, uu, uufb, du, dufb, ud, udfb);
  }
  return 0;
}
