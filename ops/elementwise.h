// Elementwise ops with their structure rules (DESIGN §1): ops that map 0 to 0 keep
// UpperTriangular, every unary op keeps Symmetric; +, − keep a shared structure; Upper ⊙
// anything is Upper; mixed structures and broadcasts give Dense. Binary ops broadcast
// NumPy-style over rank ≤ 2 (a [m, n] with a row [n], a column [m, 1] or a scalar).
#pragma once

#include "../core/tensor.h"

namespace sg {

/// Example: `auto c = sg::add(a, b);` or `a + b`.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
/// x > 0 ? x : slope·x. Example: `sg::leaky_relu(x, 0.2)`.
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
/// ln(1 + eˣ), stable. Example: `sg::softplus(d)`.
Tensor softplus(const Tensor& x);
/// x > 0 ? 1 : 0 (zero gradient).
Tensor step(const Tensor& x);
/// xᵖ for a scalar exponent. Example: `sg::pow(x, 3.0)`.
Tensor pow(const Tensor& x, double exponent);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(const Tensor& a, double s);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(const Tensor& a, double s);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(const Tensor& a, double s);
Tensor operator/(double s, const Tensor& a);

namespace detail {
/// The output structure of a unary op on `in` (DESIGN §1).
Structure unary_structure(int op, double alpha, Structure in);
}  // namespace detail

}  // namespace sg
