// Structured matrix products. Every product dispatches on both operands' structures
// through one table (ops/matmul.cpp): Upper·Upper → Upper, Lower·Lower → Lower, every other of
// the 16 pairs of {Dense, Upper, Lower, Symmetric} → Dense (Symmetric·Symmetric too: S·T is
// symmetric only when S and T commute). Backward runs the same structured GEMM, computing only
// what each input's structure needs.
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

/// a·b for matrices (a [m, k], b [k, n]) of any structures, or batches of them ([..., m, k] and
/// [..., k, n], batch dimensions broadcast as torch.matmul's; a 1-D operand is a vector), matrix by
/// matrix. Example: `auto c = sg::matmul(a, b);`
Tensor matmul(const Tensor& a, const Tensor& b);
/// Upper·Upper stays upper, statically. Example: `sg::UpperTriangular c = sg::matmul(u, v);`
UpperTriangular matmul(const UpperTriangular& a, const UpperTriangular& b);
/// Lower·Lower stays lower, statically. Example: `sg::LowerTriangular c = sg::matmul(l, m);`
LowerTriangular matmul(const LowerTriangular& a, const LowerTriangular& b);
/// x·wᵀ (+ bias) like torch::nn::functional::linear, with w of any structure: an
/// UpperTriangular w runs the structured kernel on wᵀ without copying it.
/// Example: `auto y = sg::linear(x, U, b);`  (x [..., batch, in], w [out, in], bias [out])
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor());
/// a·aᵀ per matrix of a [..., m, k], Symmetric; computes one triangle and mirrors it.
/// Example: `auto g = sg::gram(a);`
Symmetric gram(const Tensor& a);

// ---- products into memory the caller owns ---------------------------------------------------
// For bindings (the PyTorch ops) and preallocated buffers; not recorded, like at::mm_out. Each
// operand is read through the structure named, whatever its tag: UpperTriangular reads only the
// entries i <= j, Symmetric only the upper triangle, mirrored. All tensors share one dtype, device
// and batch shape (matrices [m, k] or batches [..., m, k]; no broadcasting), and an output must
// not overlap an input.

/// out [m, n] = a·b: both UpperTriangular gives the upper triangle and exact zeros below it, any
/// other pair every entry. Example: `sg::matmul_out(c, a, sg::Structure::UpperTriangular, b, sg::Structure::UpperTriangular);`
void matmul_out(Tensor& out, const Tensor& a, Structure a_as, const Tensor& b, Structure b_as,
                Precision precision = matmul_precision());
/// matmul_out's gradients for the upstream gradient `grad` [m, n] (read through the product's
/// structure: its upper triangle when both are UpperTriangular), each projected onto its operand's
/// structure: a_grad = proj(grad·bᵀ), b_grad = proj(aᵀ·grad); the projection onto Symmetric is
/// (X + Xᵀ)/2. An undefined a_grad or b_grad is skipped.
/// Example: `sg::matmul_backward_out(g, a, sg::Structure::Dense, b, sg::Structure::Dense, da, db);`
void matmul_backward_out(const Tensor& grad, const Tensor& a, Structure a_as, const Tensor& b, Structure b_as,
                         Tensor& a_grad, Tensor& b_grad, Precision precision = matmul_precision());
/// out [m, m] = a·aᵀ, every entry. Example: `sg::gram_out(c, a, sg::Structure::Dense);`
void gram_out(Tensor& out, const Tensor& a, Structure a_as, Precision precision = matmul_precision());
/// gram_out's gradient for any upstream gradient `grad` [m, m]: a_grad = proj((grad + gradᵀ)·a).
/// Example: `sg::gram_backward_out(g, a, sg::Structure::Dense, da);`
void gram_backward_out(const Tensor& grad, const Tensor& a, Structure a_as, Tensor& a_grad,
                       Precision precision = matmul_precision());

}  // namespace sg
