// Twenty-sixth session (docs/structured_gemm.md, "Where a forward + backward's time goes"): Upper·Upper
// TF32 forward + backward at N, its three kernels' blocks timed. Link against a libstructgrad.a whose
// structured_gemm.cu has docs/experiments/fwd_bwd_block_times.patch applied and was built with
// -DSG_BLOCK_TIMES (with -lcuda -lcublas; not built by CMake). Every block of the tall (the writing
// instance: slot 0, the other: 2) and wide (1) kernels stamps %globaltimer at its start, its end and
// after its wait for the grid before it (go). Two input sets in turn, as bench_gemm_cuda. Prints per
// kernel the mean over REPS of its effective time (its last end minus the last end before it), a
// block's busy time (end minus go) and the first go after the kernel before ended; appends every
// block's stamps to CSV (costs,launch,n,kernel,rep,block,start,end,go: the costs column is the
// SG_TALL_COSTS value, which only the sweep build of the session read, else the shipped costs).
// usage: fwd_bwd_timeline N REPS CSV [nopdl]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <vector>
#include <cuda_runtime.h>
#include "structgrad.h"
#include "cuda/structured_gemm.h"
#include "cuda/runtime.h"
namespace sg::detail::cuda {
void sg_read_block_times(unsigned long long* host);
void sg_clear_block_times();
}
namespace cu = sg::detail::cuda;
static unsigned long long bt[3][3][1024];
int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 4096;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 7;
  const bool pdl = !(argc > 4 && std::strcmp(argv[4], "nopdl") == 0);
  cu::set_dependent_launch(pdl);
  const char* costs = std::getenv("SG_TALL_COSTS");
  sg::set_matmul_precision(sg::Precision::TF32);
  const sg::Device dev("cuda");
  auto f32 = sg::TensorOptions().dtype(sg::kFloat32).device(dev);
  std::vector<sg::Tensor> xs, ys;
  for (int s = 0; s < 2; ++s) {
    xs.push_back(sg::Tensor(sg::UpperTriangular::randn(n, f32)).detach().requires_grad_());
    ys.push_back(sg::Tensor(sg::UpperTriangular::randn(n, f32)).detach().requires_grad_());
  }
  sg::Tensor g = sg::randn({n, n}, f32);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  FILE* csv = std::fopen(argc > 3 ? argv[3] : "/dev/null", "a");
  for (int w = 0; w < 3; ++w) { sg::matmul(xs[w % 2], ys[w % 2]).backward(g); xs[w % 2].zero_grad(); ys[w % 2].zero_grad(); }
  cudaDeviceSynchronize();
  double sum_eff[3] = {0, 0, 0}, sum_event = 0, sum_busy[3] = {0, 0, 0}, sum_gap[3] = {0, 0, 0};
  std::vector<float> events;
  for (int r = 0; r < reps; ++r) {
    sg::Tensor& x = xs[r % 2]; sg::Tensor& y = ys[r % 2];
    cu::sg_clear_block_times();
    cudaDeviceSynchronize();
    cudaEventRecord(e0, cu::stream(0));
    sg::matmul(x, y).backward(g);
    cudaEventRecord(e1, cu::stream(0));
    cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1);
    events.push_back(ms * 1e3f);
    x.zero_grad(); y.zero_grad();
    cu::sg_read_block_times(&bt[0][0][0]);
    unsigned long long t0 = ~0ull;
    for (int k = 0; k < 3; ++k) for (int b = 0; b < 1024; ++b) if (bt[k][0][b]) t0 = std::min(t0, bt[k][0][b]);
    double prev_end = 0;
    for (int k = 0; k < 3; ++k) {
      double go_min = 1e30, end_max = 0, busy = 0; int blocks = 0;
      for (int b = 0; b < 1024; ++b) {
        if (!bt[k][0][b]) continue;
        const double s = (bt[k][0][b] - t0) * 1e-3, e = (bt[k][1][b] - t0) * 1e-3, go = (bt[k][2][b] - t0) * 1e-3;
        std::fprintf(csv, "%s,%s,%lld,%d,%d,%d,%.3f,%.3f,%.3f\n", costs ? costs : "8,4,5,1.5", pdl ? "pdl" : "nopdl",
                     (long long)n, k, r, b, s, e, go);
        go_min = std::min(go_min, go); end_max = std::max(end_max, e); busy += e - go; ++blocks;
      }
      sum_eff[k] += end_max - prev_end; sum_busy[k] += busy / blocks; sum_gap[k] += go_min - prev_end;
      prev_end = end_max;
    }
    sum_event += ms * 1e3;
  }
  std::sort(events.begin(), events.end());
  std::printf("n %lld costs %s %s: event median %.1f mean %.1f us; per kernel (mean over reps) eff / busy-per-block / first go after the previous end:",
              (long long)n, costs ? costs : "8,4,5,1.5", pdl ? "pdl  " : "nopdl", events[events.size() / 2], sum_event / reps);
  for (int k = 0; k < 3; ++k) std::printf("  k%d %.1f / %.1f / %+.1f", k, sum_eff[k] / reps, sum_busy[k] / reps, sum_gap[k] / reps);
  std::printf("\n");
  std::fclose(csv);
  return 0;
}
