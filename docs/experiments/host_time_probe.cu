// Where the host time of one structured product goes (eleventh session; not built by CMake).
// Host time per call with the GPU queue busy (40 calls back to back) and the event-pair time of
// single calls, for sg::matmul of two UpperTriangular tensors (TF32, 4096), the launcher alone,
// empty kernel launches and an allocation. Build on the GPU machine after the library, e.g.:
//   nvcc -std=c++17 -O2 -arch=sm_90a -DSG_WITH_CUDA=1 -DSG_CUDA_SM90A=1 -I. -I<build>/include \
//     -isystem /usr/include/eigen3 docs/experiments/host_time_probe.cu <build>/libstructgrad.a \
//     -lcublas -lcublasLt -lgomp -lnccl -o probe
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <structgrad/structgrad.h>
#include "cuda/runtime.h"
#include "cuda/structured_gemm.h"

struct Big { char bytes[1024]; };
__global__ void empty_big(const __grid_constant__ Big b) { if (b.bytes[threadIdx.x] == 42) printf("x"); }
__global__ void empty_small(int x) { if (x == 42) printf("x"); }

using Clock = std::chrono::steady_clock;
template <class F> double host_us(int reps, F f) {  // host wall per call, GPU queue not drained
  auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) f(i);
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / reps;
}
template <class F> double event_us(cudaStream_t s, int reps, F f) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(a, s); f(i); cudaEventRecord(b, s); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms * 1000);
  }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}

int main() {
  const int64_t n = 4096;
  sg::set_matmul_precision(sg::Precision::TF32);
  const auto f32 = sg::TensorOptions().device(sg::kCUDA);
  std::vector<sg::Tensor> a, b;
  for (int s = 0; s < 4; ++s) { a.push_back(sg::UpperTriangular::randn(n, f32)); b.push_back(sg::UpperTriangular::randn(n, f32)); }
  sg::Tensor c = sg::randn({n, n}, f32);
  cudaStream_t st = sg::detail::cuda::stream(0);
  sg::NoGradGuard no_grad;
  auto mm = [&](int i) { sg::matmul(sg::UpperTriangular(a[i % 4]), sg::UpperTriangular(b[i % 4])); };
  sg::detail::GemmProblem p;
  p.m = p.n = p.k = n; p.a = {sg::detail::OperandKind::Upper, false, true}; p.b = {sg::detail::OperandKind::Upper, false, true};
  p.mask = sg::detail::OutputMask::Upper; p.lda = p.ldb = p.ldc = n; p.tf32 = true; p.c_data = c.data_ptr();
  auto direct = [&](int i) { p.a_data = a[i % 4].data_ptr(); p.b_data = b[i % 4].data_ptr(); sg::detail::cuda::launch_structured_gemm(p, sg::kFloat32, 0); };
  Big big{};
  auto eb = [&](int) { empty_big<<<1, 32, 0, st>>>(big); };
  auto es = [&](int) { empty_small<<<1, 32, 0, st>>>(1); };
  auto alloc = [&](int) { sg::Tensor t = sg::zeros({n, n}, f32); };
  for (int i = 0; i < 5; ++i) { mm(i); direct(i); eb(i); es(i); }
  cudaStreamSynchronize(st);
  for (int round = 0; round < 2; ++round) {
    std::printf("round %d\n", round);
    for (auto [name, f] : std::vector<std::pair<const char*, std::function<void(int)>>>{
             {"sg::matmul (Upper·Upper TF32 4096)", mm}, {"launch_structured_gemm", direct},
             {"empty kernel, 1 KB param", eb}, {"empty kernel, int param", es}, {"sg::zeros 64 MB + free", alloc}}) {
      cudaStreamSynchronize(st);
      const double h = host_us(40, f);
      cudaStreamSynchronize(st);
      const double e = event_us(st, 25, f);
      std::printf("  %-40s host %7.2f us/call (queue busy)  event pair %8.2f us\n", name, h, e);
    }
  }
  cudaStreamSynchronize(st);
  return 0;
}
