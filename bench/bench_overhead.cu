// Host cost of one structured product call: back-to-back calls on small sizes, where the
// kernels are shorter than the host's work, so the calls' rate is the host's. Beside it,
// cuBLAS STRMM and SGEMM calls of the same shapes, and one call timed by CUDA events from an
// idle stream as bench_gemm_cuda times it (launch latency and host work included).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <functional>

#include <structgrad/structgrad.h>

#include "cuda/check.h"
#include "cuda/runtime.h"

namespace {

double host_us_per_call(int calls, const std::function<void()>& body, cudaStream_t stream) {
  for (int i = 0; i < 50; ++i) body();
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) body();
  const auto t1 = std::chrono::steady_clock::now();
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / calls;
}

double event_us(const std::function<void()>& body, cudaStream_t stream) {
  cudaEvent_t a, b;
  SG_CUDA_CHECK(cudaEventCreate(&a));
  SG_CUDA_CHECK(cudaEventCreate(&b));
  float best = 1e30f;
  for (int r = 0; r < 200; ++r) {
    SG_CUDA_CHECK(cudaEventRecord(a, stream));
    body();
    SG_CUDA_CHECK(cudaEventRecord(b, stream));
    SG_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    SG_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    best = std::min(best, ms);
  }
  SG_CUDA_CHECK(cudaEventDestroy(a));
  SG_CUDA_CHECK(cudaEventDestroy(b));
  return best * 1e3;
}

}  // namespace

int main() {
  cudaStream_t stream = sg::detail::cuda::stream(0);
  cublasHandle_t cublas;
  SG_CUBLAS_CHECK(cublasCreate(&cublas));
  SG_CUBLAS_CHECK(cublasSetStream(cublas, stream));
  const auto f32 = sg::TensorOptions().device(sg::kCUDA);
  std::printf("%6s %-34s %12s %12s\n", "n", "call", "host us/call", "event us");
  for (int64_t n : {64, 256, 1024}) {
    sg::Tensor a = sg::UpperTriangular::randn(n, f32), b = sg::UpperTriangular::randn(n, f32);
    sg::Tensor s = sg::Symmetric::randn(n, f32), d = sg::randn({n, n}, f32), out = sg::randn({n, n}, f32);
    const float one = 1, zero = 0;
    const int ni = static_cast<int>(n);
    auto pa = static_cast<float*>(a.data_ptr()), pb = static_cast<float*>(b.data_ptr());
    auto pd = static_cast<float*>(d.data_ptr()), po = static_cast<float*>(out.data_ptr());
    sg::NoGradGuard no_grad;
    const std::pair<const char*, std::function<void()>> calls[] = {
        {"sg::matmul(Upper, Upper)", [&] { sg::matmul(sg::UpperTriangular(a), sg::UpperTriangular(b)); }},
        {"sg::matmul(Symmetric, Dense)", [&] { sg::matmul(sg::Symmetric(s), d); }},
        {"sg::matmul(Dense, Dense)", [&] { sg::matmul(d, d); }},
        {"cublasStrmm", [&] {
           SG_CUBLAS_CHECK(cublasStrmm(cublas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                                       CUBLAS_DIAG_NON_UNIT, ni, ni, &one, pa, ni, pb, ni, po, ni));
         }},
        {"cublasSgemm", [&] {
           SG_CUBLAS_CHECK(cublasSgemm(cublas, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, pd, ni, pd, ni, &zero, po, ni));
         }},
    };
    for (const auto& [name, body] : calls)
      std::printf("%6lld %-34s %12.2f %12.2f\n", static_cast<long long>(n), name, host_us_per_call(2000, body, stream),
                  event_us(body, stream));
  }
  cublasDestroy(cublas);
}
