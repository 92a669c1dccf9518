// TF32 accuracy of the structured GEMM beside cuBLAS on the same inputs: Upper·Upper's product and
// both gradients, each on every TF32 mainloop (the default wgmma kernels, every tile staged through
// registers, mma.sync), against float64 on the same values; and cuBLAS SGEMM in its TF32 mode on the
// same operands (dense storage, zeros included), for C = A·B and for dA's G·Bᵀ. Prints the relative
// Frobenius errors ‖x − ref‖ / ‖ref‖ and their ratio to cuBLAS's.
// Usage: bench_tf32_error_cuda [--n 1024,4096]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <structgrad/structgrad.h>

#include "bench/bench_util.h"
#include "cuda/check.h"
#include "cuda/runtime.h"
#include "cuda/gemm/plan_cache.h"
#include "cuda/gemm/tuning.h"
#include "cuda/structured_gemm.h"

namespace {

namespace cu = sg::detail::cuda;

double rel_error(const sg::Tensor& x, const sg::Tensor& ref) {
  const std::vector<double> a = x.to(sg::kCPU).to(sg::kFloat64).to_vector(), b = ref.to(sg::kCPU).to_vector();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

/// C = op(A)·op(B) by cuBLAS SGEMM in TF32 mode, row-major n × n (b_transposed: op(B) = Bᵀ).
sg::Tensor cublas_tf32(const sg::Tensor& a, const sg::Tensor& b, bool b_transposed) {
  const int n = static_cast<int>(a.size(0));
  sg::Tensor c = sg::zeros({n, n}, sg::TensorOptions().device(sg::kCUDA));
  cublasHandle_t handle = cu::cublas_handle(0);
  SG_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH));
  const float one = 1, zero = 0;
  // Row-major C = A·op(B) is column-major Cᵀ = op(B)ᵀ·Aᵀ.
  SG_CUBLAS_CHECK(cublasSgemm(handle, b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one,
                              b.data<float>(), n, a.data<float>(), n, &zero, c.data<float>(), n));
  SG_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes = {1024, 4096};
  if (argc == 3 && std::string(argv[1]) == "--n") sizes = bench::split_sizes(argv[2]);
  if (!sg::cuda::is_available()) {
    std::fprintf(stderr, "bench_tf32_error_cuda: no CUDA device\n");
    return 1;
  }
  std::printf("TF32 relative errors against float64, Upper·Upper, on %s\n", sg::cuda::device_name().c_str());
  std::printf("%5s %-22s %10s %10s %10s\n", "n", "path", "C", "dA", "dB");
  const auto f32 = sg::TensorOptions().device(sg::kCUDA);
  for (const int64_t n : sizes) {
    sg::manual_seed(1234 + n);
    const sg::Tensor a = sg::UpperTriangular::randn(n, f32), b = sg::UpperTriangular::randn(n, f32);
    const sg::Tensor g = sg::randn({n, n}, f32);
    // The float64 reference on the same values.
    sg::set_matmul_precision(sg::Precision::Float32);
    sg::Tensor a64 = a.to(sg::kFloat64).detach().requires_grad_(), b64 = b.to(sg::kFloat64).detach().requires_grad_();
    const sg::Tensor c64 = sg::matmul(a64, b64);
    c64.backward(g.to(sg::kFloat64));
    const sg::Tensor gbt64 = sg::matmul(g.to(sg::kFloat64), sg::transpose(b.to(sg::kFloat64)));
    // Ours, on each loop.
    sg::set_matmul_precision(sg::Precision::TF32);
    double ours_c = 0;
    for (const auto& [loop, name] : {std::pair{cu::Tf32Loop::Auto, "structgrad (default)"},
                                     std::pair{cu::Tf32Loop::WgmmaStaged, "structgrad, staged"},
                                     std::pair{cu::Tf32Loop::MmaSync, "structgrad, mma.sync"}}) {
      const cu::Tf32Loop chosen = loop;
      cu::GemmTuningGuard guard([chosen](cu::GemmTuning& o) { o.tf32_loop = chosen; });
      sg::Tensor x = a.detach().requires_grad_(), y = b.detach().requires_grad_();
      const sg::Tensor c = sg::matmul(x, y);
      c.backward(g);
      const double ec = rel_error(c, c64);
      if (chosen == cu::Tf32Loop::Auto) ours_c = ec;
      std::printf("%5lld %-22s %10.3g %10.3g %10.3g\n", static_cast<long long>(n), name, ec,
                  rel_error(x.grad(), a64.grad()), rel_error(y.grad(), b64.grad()));
    }
    sg::set_matmul_precision(sg::Precision::Float32);
    const double cublas_c = rel_error(cublas_tf32(a, b, false), c64);
    const double cublas_gbt = rel_error(cublas_tf32(g, b, true), gbt64);
    std::printf("%5lld %-22s %10.3g %10.3g %10s   (dA column: G·Bᵀ, unprojected)\n", static_cast<long long>(n),
                "cuBLAS SGEMM TF32", cublas_c, cublas_gbt, "");
    std::printf("%5lld %-22s %10.2f\n", static_cast<long long>(n), "ours C / cuBLAS C", ours_c / cublas_c);
  }
  return 0;
}
