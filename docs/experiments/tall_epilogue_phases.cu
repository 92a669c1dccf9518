// The tall kernel's epilogue phases (twenty-fourth session, 2026-11-26; not built by CMake): needs the library
// built with docs/experiments/tall_epilogue_phases.patch, which defines sg_epi_reset and sg_epi_dump.
#include <cuda_runtime.h>
#include <cstdio>
#include <structgrad/structgrad.h>
#include "cuda/check.h"
#include "cuda/runtime.h"
void sg_epi_reset();
void sg_epi_dump(unsigned long long* out);
int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 4096;
  sg::set_matmul_precision(sg::Precision::TF32);
  const auto f32 = sg::TensorOptions().device(sg::kCUDA);
  sg::Tensor a = sg::UpperTriangular::randn(n, f32), b = sg::UpperTriangular::randn(n, f32), d = sg::randn({n, n}, f32);
  sg::NoGradGuard ng;
  const char* names[14] = {"k-loop issue", "drain", "split arrive", "wait read r0", "wait read r1-3", "barrier 1",
                           "STS", "fence+barrier 2", "TMA issue", "split stored", "whole items", "split items", "k-steps", "epilogue total"};
  for (int which = 0; which < 2; ++which) {
    auto run = [&] { return which == 0 ? sg::matmul(sg::UpperTriangular(a), sg::UpperTriangular(b)) : sg::matmul(d, sg::UpperTriangular(b)); };
    for (int w = 0; w < 5; ++w) run();
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    sg_epi_reset();
    const int reps = 10;
    for (int r = 0; r < reps; ++r) run();
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    unsigned long long v[16];
    sg_epi_dump(v);
    const double items = double(v[10] + v[11]);
    std::printf("== %s n=%lld: items per launch %.0f (whole %.0f, split %.0f), k-steps per launch %.0f\n",
                which == 0 ? "upper·upper" : "dense·upper", (long long)n, items / reps, v[10] / double(reps), v[11] / double(reps), v[12] / double(reps));
    for (int k = 0; k < 14; ++k) {
      if (k == 10 || k == 11 || k == 12) continue;
      std::printf("  %-18s %10.0f cycles per item  (%.2f us at 1.755 GHz)\n", names[k], v[k] / items, v[k] / items / 1755.0);
    }
    std::printf("  per k-step (issue): %.0f cycles\n", v[0] / double(v[12]));
  }
}
