// Where one Upper·Upper TF32 call's time goes outside its kernel (twenty-fourth session, 2026-11-26; not built by
// CMake; docs/structured_gemm.md, "A call's time outside the kernel"). Link against libstructgrad.a (with -lcuda).
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>
#include <structgrad/structgrad.h>
#include "cuda/check.h"
#include "cuda/runtime.h"
#include "cuda/structured_gemm.h"

struct Big { unsigned char b[1024]; };
__global__ void empty_kernel(const __grid_constant__ Big big) { if (big.b[threadIdx.x] == 7 && blockIdx.x == 9999) printf("x"); }
__global__ void tiny_kernel(int x) { if (x == 7 && blockIdx.x == 9999) printf("x"); }

using Clock = std::chrono::steady_clock;
double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
double lo(std::vector<double> v) { return *std::min_element(v.begin(), v.end()); }

void measure(const char* name, cudaStream_t s, const std::function<void()>& body) {
  cudaEvent_t e0, e1;
  SG_CUDA_CHECK(cudaEventCreate(&e0)); SG_CUDA_CHECK(cudaEventCreate(&e1));
  for (int w = 0; w < 5; ++w) body();
  SG_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> host, ev;
  for (int r = 0; r < 41; ++r) {
    SG_CUDA_CHECK(cudaEventRecord(e0, s));
    auto t0 = Clock::now();
    body();
    auto t1 = Clock::now();
    SG_CUDA_CHECK(cudaEventRecord(e1, s));
    SG_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms; SG_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    ev.push_back(ms * 1e3);
  }
  // back to back: 20 calls between two events (the host runs ahead: the GPU's rate)
  std::vector<double> b2b;
  for (int r = 0; r < 5; ++r) {
    SG_CUDA_CHECK(cudaEventRecord(e0, s));
    for (int i = 0; i < 20; ++i) body();
    SG_CUDA_CHECK(cudaEventRecord(e1, s));
    SG_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms; SG_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    b2b.push_back(ms * 1e3 / 20);
  }
  std::printf("%-44s host %7.2f us (min %6.2f)  event %8.2f us (min %8.2f)  back-to-back %8.2f us\n", name, med(host),
              lo(host), med(ev), lo(ev), med(b2b));
  cudaEventDestroy(e0); cudaEventDestroy(e1);
}

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 4096;
  cudaStream_t s = sg::detail::cuda::stream(0);
  sg::set_matmul_precision(sg::Precision::TF32);
  const auto f32 = sg::TensorOptions().device(sg::kCUDA);
  sg::Tensor a = sg::UpperTriangular::randn(n, f32), b = sg::UpperTriangular::randn(n, f32), g = sg::randn({n, n}, f32);
  sg::Tensor out = sg::randn({n, n}, f32);
  if (argc > 2) {  // only a few fwd+bwd iterations (for ncu)
    sg::Tensor al = a.detach().requires_grad_(), bl = b.detach().requires_grad_();
    for (int i = 0; i < 3; ++i) { sg::matmul(al, bl).backward(g); al.zero_grad(); bl.zero_grad(); }
    SG_CUDA_CHECK(cudaStreamSynchronize(s));
    return 0;
  }
  Big big{};
  measure("empty kernel, 4-byte param", s, [&] { tiny_kernel<<<132, 256, 0, s>>>(1); });
  measure("empty kernel, 1 KB grid_constant param", s, [&] { empty_kernel<<<132, 256, 0, s>>>(big); });
  {
    sg::NoGradGuard ng;
    measure("sg::matmul(Upper, Upper) TF32", s, [&] { sg::matmul(sg::UpperTriangular(a), sg::UpperTriangular(b)); });
    sg::detail::GemmProblem p;
    p.m = p.n = p.k = n;
    p.a = {sg::detail::OperandKind::Upper, false, true};
    p.b = {sg::detail::OperandKind::Upper, false, true};
    p.mask = sg::detail::OutputMask::Upper;
    p.lda = p.ldb = p.ldc = n;
    p.tf32 = true;
    p.a_data = a.data_ptr(); p.b_data = b.data_ptr(); p.c_data = out.data_ptr();
    measure("launch_structured_gemm(Upper, Upper) TF32", s, [&] { sg::detail::cuda::launch_structured_gemm(p, sg::kFloat32, 0); });
    for (bool grad_b : {false, true}) {
      sg::detail::GemmProblem q = p;
      q.a = {grad_b ? sg::detail::OperandKind::Lower : sg::detail::OperandKind::Upper, grad_b, grad_b};
      q.b = {grad_b ? sg::detail::OperandKind::Upper : sg::detail::OperandKind::Lower, !grad_b, !grad_b};
      q.a_data = grad_b ? a.data_ptr() : g.data_ptr();
      q.b_data = grad_b ? g.data_ptr() : b.data_ptr();
      measure(grad_b ? "launch dB = triu(At G)" : "launch dA = triu(G Bt)", s,
              [&] { sg::detail::cuda::launch_structured_gemm(q, sg::kFloat32, 0); });
    }
  }
  sg::Tensor al = a.detach().requires_grad_(), bl = b.detach().requires_grad_();
  measure("fwd+bwd (autograd)", s, [&] {
    sg::matmul(al, bl).backward(g);
    al.zero_grad(); bl.zero_grad();
  });
  {
    sg::NoGradGuard ng;
    sg::Tensor c = sg::matmul(sg::UpperTriangular(a), sg::UpperTriangular(b));
    measure("forward result .to(Upper) nothing: triu copy?", s, [&] { (void)sg::UpperTriangular(c); });
  }
  // cuTensorMapEncodeTiled alone
  void* fn = nullptr; cudaDriverEntryPointQueryResult q{};
  SG_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  auto enc = reinterpret_cast<decltype(&cuTensorMapEncodeTiled)>(fn);
  CUtensorMap map;
  const cuuint64_t dims[2] = {(cuuint64_t)n, (cuuint64_t)n};
  const cuuint64_t strides[1] = {(cuuint64_t)n * 4};
  const cuuint32_t box[2] = {32, 256}, es[2] = {1, 1};
  auto t0 = Clock::now();
  for (int i = 0; i < 10000; ++i)
    enc(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, a.data_ptr(), dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  auto t1 = Clock::now();
  std::printf("cuTensorMapEncodeTiled: %.3f us each\n", std::chrono::duration<double, std::micro>(t1 - t0).count() / 10000);
}
