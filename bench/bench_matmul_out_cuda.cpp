// The cost of one out-style product call (sg::matmul_out, what the PyTorch ops run) on CUDA:
// host time to issue a call, and the time of one call from issue to completion. The PyTorch binding's own numbers
// (examples/pytorch/bench_torch_ops.py) are compared with these to get its overhead per call.
//   usage: bench_matmul_out_cuda [--n 1024,4096] [--reps 200]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <structgrad/structgrad.h>

namespace {

void check(cudaError_t e) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Result {
  double host_us;    // wall time per call while issuing `reps` calls back to back, before any wait
  double matmul_ms;  // call_ms of sg::matmul on tagged tensors (its pooled Upper output), for reference
  double call_ms;    // median time of one call from issue to completion (events around call and wait)
};

Result measure(int64_t n, sg::Structure s, int reps) {
  const sg::TensorOptions o = sg::TensorOptions().device(sg::kCUDA);
  sg::Tensor a = sg::randn({n, n}, o), b = sg::randn({n, n}, o), c = sg::Tensor::empty({n, n}, o);
  for (int i = 0; i < 5; ++i) sg::matmul_out(c, a, s, b, s, sg::Precision::Float32);  // plans, caches
  sg::cuda::synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) sg::matmul_out(c, a, s, b, s, sg::Precision::Float32);
  const auto t1 = std::chrono::steady_clock::now();
  sg::cuda::synchronize();
  Result r;
  r.host_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / reps;
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0));
  check(cudaEventCreate(&e1));
  std::vector<float> times;
  for (int i = 0; i < 30; ++i) {
    // The library stream does not synchronise with the legacy one: e1 is recorded after the wait.
    check(cudaEventRecord(e0, nullptr));
    sg::matmul_out(c, a, s, b, s, sg::Precision::Float32);
    sg::cuda::synchronize();
    check(cudaEventRecord(e1, nullptr));
    check(cudaEventSynchronize(e1));
    float ms = 0;
    check(cudaEventElapsedTime(&ms, e0, e1));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  r.call_ms = times[times.size() / 2];
  const sg::Tensor ta = s == sg::Structure::Symmetric ? sg::Tensor(sg::sym(a)) : sg::Tensor(sg::triu(a));
  const sg::Tensor tb = s == sg::Structure::Symmetric ? sg::Tensor(sg::sym(b)) : sg::Tensor(sg::triu(b));
  times.clear();
  for (int i = 0; i < 35; ++i) {
    check(cudaEventRecord(e0, nullptr));
    { sg::Tensor product = sg::matmul(ta, tb); }
    sg::cuda::synchronize();
    check(cudaEventRecord(e1, nullptr));
    check(cudaEventSynchronize(e1));
    float ms = 0;
    check(cudaEventElapsedTime(&ms, e0, e1));
    if (i >= 5) times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  r.matmul_ms = times[times.size() / 2];
  check(cudaEventDestroy(e0));
  check(cudaEventDestroy(e1));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes = {1024, 4096};
  int reps = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--n")) {
      sizes.clear();
      for (char* t = std::strtok(argv[i + 1], ","); t; t = std::strtok(nullptr, ",")) sizes.push_back(std::atoll(t));
    } else if (!std::strcmp(argv[i], "--reps")) {
      reps = std::atoi(argv[i + 1]);
    }
  }
  if (!sg::cuda::is_available()) {
    std::printf("bench_matmul_out_cuda: no CUDA device\n");
    return 0;
  }
  std::printf("%s, float32, sg::matmul_out\n", sg::cuda::device_name().c_str());
  std::printf("%-22s %6s %14s %17s %18s\n", "product", "n", "host us/call", "ms/call (synced)", "sg::matmul (synced)");
  for (int64_t n : sizes)
    for (sg::Structure s : {sg::Structure::UpperTriangular, sg::Structure::Symmetric}) {
      const Result r = measure(n, s, reps);
      std::printf("%-22s %6lld %14.2f %17.4f %18.4f\n", s == sg::Structure::Symmetric ? "symmetric·symmetric" : "upper·upper",
                  static_cast<long long>(n), r.host_us, r.call_ms, r.matmul_ms);
    }
  return 0;
}
