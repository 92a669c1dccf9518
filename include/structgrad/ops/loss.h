// Losses and the softmax family. Each loss returns the mean over its elements (or samples) as a
// 0-d tensor, as PyTorch's default reduction does, and is computed stably for any finite input.
#pragma once

#include <structgrad/core/tensor.h>

namespace sg {

/// mean((pred − target)²), a 0-d tensor. Example: `auto l = sg::mse_loss(y, t);`
Tensor mse_loss(const Tensor& pred, const Tensor& target);

/// log(softmax(x)) along `dim`, as x − logsumexp(x): finite for finite logits of any size, −inf
/// where a logit is −inf. Example: `auto logp = sg::log_softmax(logits, 1);`
Tensor log_softmax(const Tensor& x, int64_t dim);
/// exp(x) / Σ exp(x) along `dim`, computed as exp(log_softmax(x, dim)). Example: `sg::softmax(logits, -1)`
Tensor softmax(const Tensor& x, int64_t dim);

/// −mean_i log_probs[i, target[i]] for log-probabilities [N, C] and int64 class indices [N] in
/// [0, C). Example: `auto l = sg::nll_loss(sg::log_softmax(logits, 1), labels);`
Tensor nll_loss(const Tensor& log_probs, const Tensor& target);
/// nll_loss(log_softmax(logits, 1), target) for logits [N, C] and int64 classes [N]; with
/// label_smoothing ε in [0, 1], the target is (1 − ε)·one-hot + ε/C, as in PyTorch.
/// Example: `auto l = sg::cross_entropy(net.forward(x), labels, 0.1);`
Tensor cross_entropy(const Tensor& logits, const Tensor& target, double label_smoothing = 0.0);
/// mean(softplus(x) − x·y), the binary cross-entropy of probabilities sigmoid(x) against targets y
/// in [0, 1], stable for logits of any size. Example: `sg::binary_cross_entropy_with_logits(x, y)`
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target);
/// mean(½·(log v + (input − target)²/v)) with v = max(var, eps), plus ½·log 2π with `full`: the
/// negative log-likelihood of target under N(input, var), var broadcasting against input (the
/// clamp passes var's gradient unchanged, as PyTorch's does; a negative var is an error).
/// Example: `auto l = sg::gaussian_nll_loss(mean, y, var);`
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var, bool full = false,
                         double eps = 1e-6);

}  // namespace sg
