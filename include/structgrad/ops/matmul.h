// Structured matrix products. Every product dispatches on both operands' structures
// through one table (ops/matmul.cpp): Upper·Upper → Upper, every other pair → Dense
// (Symmetric·Symmetric too: S·T is symmetric only when S and T commute). Backward runs
// the same structured GEMM, computing only what each input's structure needs.
#pragma once

#include <cstdint>

#include <structgrad/core/tensor.h>
#include <structgrad/ops/structure.h>

namespace sg {

/// How float32 matrix products are computed (like torch.backends.cuda.matmul.allow_tf32).
/// Float32 (the default): exact float32 multiply-adds. TF32: on CUDA devices of compute
/// capability 8.0 and newer, float32 products (structured and Dense·Dense) run on tensor cores
/// with inputs rounded to TF32 (10-bit mantissa) and float32 accumulation; relative error
/// about 1e-3 instead of 1e-6. float64 products and the CPU backend are never affected.
enum class Precision : uint8_t { Float32, TF32 };
/// Sets the precision of every later float32 product, process-wide and thread-safe.
/// Example: `sg::set_matmul_precision(sg::Precision::TF32);`
void set_matmul_precision(Precision precision);
/// The current setting. Example: `if (sg::matmul_precision() == sg::Precision::TF32) { ... }`
Precision matmul_precision();

/// a·b for matrices (a [m, k], b [k, n]) of any structures. Example: `auto c = sg::matmul(a, b);`
Tensor matmul(const Tensor& a, const Tensor& b);
/// Upper·Upper stays upper, statically. Example: `sg::UpperTriangular c = sg::matmul(u, v);`
UpperTriangular matmul(const UpperTriangular& a, const UpperTriangular& b);
/// x·wᵀ (+ bias) like torch::nn::functional::linear, with w of any structure: an
/// UpperTriangular w runs the structured kernel on wᵀ without copying it.
/// Example: `auto y = sg::linear(x, U, b);`  (x [batch, in], w [out, in], bias [out])
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor());
/// a·aᵀ, Symmetric; computes one triangle and mirrors it. Example: `auto g = sg::gram(a);`
Symmetric gram(const Tensor& a);

}  // namespace sg
