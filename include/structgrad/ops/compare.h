// Comparisons and selection: masks, where, clamp, elementwise maximum and minimum, and the
// reductions that pick an element (max, min, amax, amin, argmax, argmin, logsumexp), allclose and
// equal. All broadcast NumPy-style at any rank, like the elementwise ops.
#pragma once

#include <tuple>

#include <structgrad/core/tensor.h>

namespace sg {

/// @{
/// a == b, a != b, a < b, a <= b, a > b, a >= b elementwise, as a mask: 1 where true, 0 where false,
/// in the inputs' dtype (float32 for int64 inputs), so `mask * x` selects and `sg::mean(mask)` is a
/// rate. Masks are not differentiable. Example: `auto hits = sg::eq(sg::argmax(logits, 1), labels);`
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
/// @}
/// @{
/// The same against a scalar. Example: `auto positive = sg::gt(x, 0.0);`
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
/// @}

/// a where `condition` is non-zero, b elsewhere, broadcast over all three. The gradient reaches
/// a and b only where they are chosen, and a NaN or inf in the branch not taken never leaks into
/// the result. Example: `auto y = sg::where(sg::gt(x, 0.0), x, 0.1 * x);`
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);

/// x limited to [min, max]; the gradient passes where min ≤ x ≤ max. NaN stays NaN.
/// Example: `auto p = sg::clamp(prob, 1e-6, 1.0 - 1e-6);`
Tensor clamp(const Tensor& x, double min, double max);
/// max(x, min). Example: `sg::clamp_min(var, 1e-8)`.
Tensor clamp_min(const Tensor& x, double min);
/// min(x, max). Example: `sg::clamp_max(logits, 30.0)`.
Tensor clamp_max(const Tensor& x, double max);

/// @{
/// The elementwise larger (smaller) of a and b, broadcasting; a NaN in either gives NaN. The
/// gradient goes to the chosen operand, half to each on a tie. Example: `sg::maximum(x, sg::zeros_like(x))`.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
/// @}

/// @{
/// The largest (smallest) values along `dim` and their positions (int64), the first on a tie; a
/// NaN counts as the largest and the smallest. The gradient goes to the chosen element.
/// Example: `auto [best, where] = sg::max(scores, 1);`
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
/// @}
/// @{
/// The largest (smallest) element of x, a 0-d tensor; a NaN counts as the largest and the smallest.
/// The gradient goes to the first such element. Example: `double top = sg::max(scores).item();`
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
/// @}
/// @{
/// Only the values of max / min along `dim`, like torch.amax / amin, except that the gradient goes
/// to the first of tied elements (torch splits it among them). Example: `auto peak = sg::amax(x, -1);`
Tensor amax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amin(const Tensor& x, int64_t dim, bool keepdim = false);
/// @}
/// |a − b| ≤ atol + rtol·|b| everywhere (or a == b, for infinities), a and b broadcasting; a NaN is
/// never close. Reads one value back. Example: `SG_CHECK(sg::allclose(got, want), "mismatch");`
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
/// Whether a and b have one shape and dtype and equal elements (a NaN equals nothing), as torch.equal.
/// Example: `sg::equal(sg::argmax(p, 1), labels)`
bool equal(const Tensor& a, const Tensor& b);
/// @{
/// Only the positions (int64) of max / min along `dim`. Example: `auto predicted = sg::argmax(logits, 1);`
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
/// @}

/// log Σ exp(x) along `dim`, computed stably (shifted by the largest element). Its gradient is
/// the softmax. Example: `auto log_softmax = logits - sg::logsumexp(logits, 1, true);`
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace sg
