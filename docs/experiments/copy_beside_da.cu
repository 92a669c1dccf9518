// Can dB's relayout copy of A run beside dA = triu(G·Bᵀ) on a second stream? (twenty-fourth session, 2026-11-26;
// not built by CMake; docs/structured_gemm.md, "Tried, not kept: the copy beside dA"). Link against libstructgrad.a.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>
#include <structgrad/structgrad.h>
#include "cuda/check.h"
#include "cuda/runtime.h"
#include "cuda/structured_gemm.h"

// The relayout kernel's shape (one 32 × 32 tile per block, 32 × 8 threads): out[o·ld + k] = A[k][o]
// for k <= o, zeros for o < k < o + 256 (dB's A operand, Aᵀ outer-major).
__global__ void __launch_bounds__(256) copy_kernel(const float* a, int n, float* out) {
  __shared__ float tile[32][33];
  const int o0 = blockIdx.y * 32, k0 = blockIdx.x * 32, tx = threadIdx.x, ty = threadIdx.y;
  const int zero_distance = k0 - (o0 + 31);
  if (zero_distance >= 256) return;
  for (int r = ty; r < 32; r += 8) {
    const int o = o0 + tx, k = k0 + r;
    tile[r][tx] = zero_distance <= 0 && k <= o ? a[(long)k * n + o] : 0.0f;
  }
  __syncthreads();
  for (int r = ty; r < 32; r += 8) out[(long)(o0 + r) * n + k0 + tx] = tile[tx][r];
}

double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main() {
  const int64_t n = 4096;
  cudaStream_t main_s = sg::detail::cuda::stream(0);
  int lo, hi;
  SG_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  cudaStream_t side_lo, side_hi;
  SG_CUDA_CHECK(cudaStreamCreateWithPriority(&side_lo, cudaStreamNonBlocking, lo));
  SG_CUDA_CHECK(cudaStreamCreateWithPriority(&side_hi, cudaStreamNonBlocking, hi));
  sg::set_matmul_precision(sg::Precision::TF32);
  const auto f32 = sg::TensorOptions().device(sg::kCUDA);
  sg::Tensor a = sg::UpperTriangular::randn(n, f32), b = sg::UpperTriangular::randn(n, f32), g = sg::randn({n, n}, f32);
  sg::Tensor out = sg::randn({n, n}, f32), copy = sg::randn({n, n}, f32);
  sg::detail::GemmProblem p;
  p.m = p.n = p.k = n;
  p.a = {sg::detail::OperandKind::Upper, false, false};
  p.b = {sg::detail::OperandKind::Lower, true, true};
  p.mask = sg::detail::OutputMask::Upper;
  p.lda = p.ldb = p.ldc = n;
  p.tf32 = true;
  p.a_data = g.data_ptr(); p.b_data = b.data_ptr(); p.c_data = out.data_ptr();
  cudaEvent_t e0, e1, fork, join;
  SG_CUDA_CHECK(cudaEventCreate(&e0)); SG_CUDA_CHECK(cudaEventCreate(&e1));
  SG_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  SG_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  const dim3 grid(n / 32, n / 32), block(32, 8);
  auto dA = [&] { sg::detail::cuda::launch_structured_gemm(p, sg::kFloat32, 0); };
  auto cp = [&](cudaStream_t s) { copy_kernel<<<grid, block, 0, s>>>(static_cast<float*>(a.data_ptr()), n, static_cast<float*>(copy.data_ptr())); SG_CUDA_CHECK(cudaGetLastError()); };
  auto timed = [&](const char* name, const std::function<void()>& body) {
    std::vector<double> t;
    for (int r = 0; r < 25; ++r) {
      SG_CUDA_CHECK(cudaEventRecord(e0, main_s));
      body();
      SG_CUDA_CHECK(cudaEventRecord(e1, main_s));
      SG_CUDA_CHECK(cudaEventSynchronize(e1));
      float ms; SG_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (r >= 3) t.push_back(ms * 1e3);
    }
    std::printf("%-52s %8.1f us (min %.1f)\n", name, med(t), *std::min_element(t.begin(), t.end()));
  };
  auto with_side = [&](cudaStream_t side, bool copy_first) {
    SG_CUDA_CHECK(cudaEventRecord(fork, main_s));
    SG_CUDA_CHECK(cudaStreamWaitEvent(side, fork));
    if (copy_first) cp(side);
    dA();
    if (!copy_first) cp(side);
    SG_CUDA_CHECK(cudaEventRecord(join, side));
    SG_CUDA_CHECK(cudaStreamWaitEvent(main_s, join));
  };
  for (int round = 0; round < 2; ++round) {
    timed("dA alone", dA);
    timed("copy alone (main stream)", [&] { cp(main_s); });
    timed("dA then copy, serial (main stream)", [&] { dA(); cp(main_s); });
    timed("dA, copy on a low-priority side stream after it", [&] { with_side(side_lo, false); });
    timed("dA, copy on a high-priority side stream after it", [&] { with_side(side_hi, false); });
    timed("copy on a low-priority side stream, then dA", [&] { with_side(side_lo, true); });
    timed("copy on a high-priority side stream, then dA", [&] { with_side(side_hi, true); });
  }
}
