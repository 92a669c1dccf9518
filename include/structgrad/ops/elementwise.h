// Elementwise ops with their structure rules (docs/semantics.md), the same in either operand order:
// unary ops that map 0 to 0 keep UpperTriangular and LowerTriangular, every unary op keeps
// Symmetric; +, − keep a shared structure (and Symmetric ± a scalar); Upper ⊙ anything that
// broadcasts to its shape (a scalar, a row, a column, a matrix) is Upper, and Lower likewise; Symmetric ⊙ Symmetric or a scalar is Symmetric,
// while a row or column ⊙ Symmetric is Dense (it scales one side only). Binary ops broadcast
// NumPy-style at any rank; a structured operand that is itself broadcast gives Dense.
#pragma once

#include <structgrad/core/tensor.h>

namespace sg {

/// Example: `auto c = sg::add(a, b);` or `a + b`.
Tensor add(const Tensor& a, const Tensor& b);
/// a − b (broadcasting). Example: `auto d = sg::sub(x, mu);` or `x - mu`.
Tensor sub(const Tensor& a, const Tensor& b);
/// a ⊙ b, elementwise (Upper ⊙ anything of its shape or smaller is Upper). Example: `auto m = sg::mul(u, mask);` or `u * mask`.
Tensor mul(const Tensor& a, const Tensor& b);
/// a / b, elementwise. Example: `auto r = sg::div(a, b);` or `a / b`.
Tensor div(const Tensor& a, const Tensor& b);

/// −x (keeps Upper and Symmetric). Example: `auto y = sg::neg(x);` or `-x`.
Tensor neg(const Tensor& x);
/// eˣ (Upper becomes Dense: exp(0) = 1). Example: `auto y = sg::exp(d);`
Tensor exp(const Tensor& x);
/// Natural logarithm. Example: `auto l = sg::log(sg::abs(sg::diagonal(u)));`
Tensor log(const Tensor& x);
/// √x (keeps Upper). Example: `auto r = sg::sqrt(v);`
Tensor sqrt(const Tensor& x);
/// x² (keeps Upper). Example: `auto loss = sg::sum(sg::square(z));`
Tensor square(const Tensor& x);
/// |x| (keeps Upper). Example: `auto a = sg::abs(x);`
Tensor abs(const Tensor& x);
/// tanh x (keeps Upper). Example: `auto h = sg::tanh(x);`
Tensor tanh(const Tensor& x);
/// 1 / (1 + e⁻ˣ), stable. Example: `auto p = sg::sigmoid(logits);`
Tensor sigmoid(const Tensor& x);
/// max(x, 0) (keeps Upper). Example: `auto h = sg::relu(x);`
Tensor relu(const Tensor& x);
/// x > 0 ? x : slope·x. Example: `sg::leaky_relu(x, 0.2)`.
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
/// ln(1 + eˣ), stable. Example: `sg::softplus(d)`.
Tensor softplus(const Tensor& x);
/// x > 0 ? 1 : 0 (zero gradient).
Tensor step(const Tensor& x);
/// −1, 0 or 1 by the sign of x (keeps Upper; zero gradient). Example: `auto s = sg::sign(x);`
Tensor sign(const Tensor& x);
/// xᵖ for a scalar exponent. Example: `sg::pow(x, 3.0)`.
Tensor pow(const Tensor& x, double exponent);
/// bˣ for a scalar base, as torch.pow(b, x) (NaN for a negative b and a non-integer x).
/// Example: `auto parity = sg::pow(-1.0, count);`
Tensor pow(double base, const Tensor& exponent);

/// @{
/// add, sub, mul (elementwise ⊙, not matmul), div and neg as operators.
/// Example: `auto y = (x - mu) * w;`
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
/// @}
/// @{
/// With a scalar on either side: x·c, x/c keep Upper and Symmetric; x + c, c − x, c/x keep
/// Symmetric only. Example: `auto nll = 0.5 * sg::mean(z) - 1.0;`
Tensor operator+(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(const Tensor& a, double s);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(const Tensor& a, double s);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(const Tensor& a, double s);
Tensor operator/(double s, const Tensor& a);
/// @}

namespace detail {
/// The output structure of a unary op on `in` (docs/semantics.md).
Structure unary_structure(int op, double alpha, Structure in);
}  // namespace detail

}  // namespace sg
