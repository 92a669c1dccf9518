// Structured matrix products. Every product dispatches on both operands' structures
// through one table (ops/matmul.cpp): Upper·Upper → Upper, every other pair → Dense
// (Symmetric·Symmetric too: S·T is symmetric only when S and T commute). Backward runs
// the same structured GEMM, computing only what each input's structure needs.
#pragma once

#include "../core/tensor.h"
#include "structure.h"

namespace sg {

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
