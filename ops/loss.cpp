// mse_loss with a fused forward ((a − b)² in one pass) and backward; the softmax family and the
// classification and Gaussian losses, composed from differentiable ops (their gradients follow).
#include <structgrad/ops/loss.h>

#include <cmath>

#include <structgrad/autograd/grad_mode.h>
#include <structgrad/autograd/node.h>
#include <structgrad/ops/compare.h>
#include <structgrad/ops/elementwise.h>
#include <structgrad/ops/index.h>
#include <structgrad/ops/reduce.h>
#include <structgrad/ops/shape.h>
#include "ops/op_util.h"

namespace sg {

Tensor mse_loss(const Tensor& pred, const Tensor& target) {
  detail::check_same_device_dtype("mse_loss", pred, target);
  detail::check_floating("mse_loss", pred);
  SG_CHECK(pred.shape() == target.shape(), "mse_loss: prediction of shape ", pred.shape(),
           " and target of shape ", target.shape(), " differ");
  SG_CHECK(pred.numel() > 0, "mse_loss: got empty tensors");
  const double n = static_cast<double>(pred.numel());
  Tensor out;
  {
    NoGradGuard guard;
    Tensor sq = detail::binary_raw("mse_loss", detail::BinaryOp::SquaredDiff, pred, target, 0, Structure::Dense);
    out = sum(sq) / n;
  }
  if (autograd::needs_record({pred, target})) {
    autograd::record("mse_loss", {pred, target}, {out}, {pred, target}, [n](autograd::BackwardContext& ctx) {
      // d/dpred = 2 (pred − target) / n · g;  d/dtarget = −d/dpred.
      const Tensor diff = detail::binary_raw("mse_loss", detail::BinaryOp::Sub, ctx.saved[0], ctx.saved[1], 0,
                                             Structure::Dense);
      const Tensor dpred = mul(diff, ctx.grad_outputs[0]) * (2.0 / n);
      Tensor dtarget;
      if (ctx.needs(1)) dtarget = neg(dpred);
      return std::vector<Tensor>{dpred, dtarget};
    });
  }
  return out;
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  detail::check_defined("log_softmax", x);
  detail::check_floating("log_softmax", x);
  SG_CHECK(x.dim() >= 1, "log_softmax: expected at least one dimension, got a 0-d tensor");
  const int64_t d = detail::wrap_dim("log_softmax", dim, x.shape());
  return x - logsumexp(x, d, true);
}

Tensor softmax(const Tensor& x, int64_t dim) {
  detail::check_defined("softmax", x);
  detail::check_floating("softmax", x);
  SG_CHECK(x.dim() >= 1, "softmax: expected at least one dimension, got a 0-d tensor");
  return exp(log_softmax(x, dim));
}

namespace {

/// Checks scores [N, C] and int64 classes [N] in [0, C) for `op` (reads the classes' range back).
void check_classes(const char* op, const char* what, const Tensor& scores, const Tensor& target) {
  detail::check_defined(op, scores);
  detail::check_floating(op, scores);
  SG_CHECK(scores.dim() == 2, op, ": expected ", what, " of shape [N, C], got ", scores.shape());
  SG_CHECK(target.defined(), op, ": the target is undefined");
  SG_CHECK(target.dtype() == DType::Int64, op, ": expected int64 class indices, got a ", target.dtype(), " target");
  SG_CHECK(target.device() == scores.device(), op, ": ", what, " is on ", scores.device(), ", the target on ",
           target.device());
  SG_CHECK(target.dim() == 1 && target.size(0) == scores.size(0), op, ": ", what, " of shape ", scores.shape(),
           " needs a target of shape [", scores.size(0), "], got ", target.shape());
  SG_CHECK(scores.size(0) > 0, op, ": got an empty batch");
  const int64_t classes = scores.size(1);
  detail::refuse_under_capture(op, target.device(), "reads its check of the class indices back to the host");
  const int64_t bad = detail::backend_of(target).find_bad_index(target, classes);
  if (bad < 0) return;
  const int64_t value = target.to(kCPU).data<int64_t>()[bad];
  SG_FAIL(op, ": class index ", value, " of sample ", bad, " is out of range for ", classes, " classes");
}

/// −mean_i log_probs[i, target[i]], the target already checked.
Tensor picked_nll(const Tensor& log_probs, const Tensor& target) {
  const Tensor picked = gather(log_probs, 1, reshape(target, {target.size(0), 1}));
  return -mean(picked);
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& target) {
  check_classes("nll_loss", "log-probabilities", log_probs, target);
  return picked_nll(log_probs, target);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, double label_smoothing) {
  check_classes("cross_entropy", "logits", logits, target);
  SG_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, "cross_entropy: label_smoothing must lie in [0, 1], got ",
           label_smoothing);
  const Tensor log_probs = log_softmax(logits, 1);
  const Tensor nll = picked_nll(log_probs, target);
  if (label_smoothing == 0.0) return nll;
  // The uniform part: −(1/C)·Σ_c log p[i, c], averaged over i, is −mean over every entry.
  return (1.0 - label_smoothing) * nll - label_smoothing * mean(log_probs);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target) {
  constexpr const char* op = "binary_cross_entropy_with_logits";
  detail::check_defined(op, logits);
  detail::check_defined(op, target);
  detail::check_same_device_dtype(op, logits, target);
  detail::check_floating(op, logits);
  SG_CHECK(logits.shape() == target.shape(), op, ": logits of shape ", logits.shape(), " and target of shape ",
           target.shape(), " differ");
  SG_CHECK(logits.numel() > 0, op, ": got empty tensors");
  // −[y·log σ(x) + (1 − y)·log(1 − σ(x))] = softplus(x) − x·y; softplus is computed as
  // max(x, 0) + log1p(exp(−|x|)), which neither overflows nor cancels.
  return mean(softplus(logits) - logits * target);
}

Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var, bool full, double eps) {
  constexpr const char* op = "gaussian_nll_loss";
  detail::check_defined(op, input);
  detail::check_defined(op, target);
  detail::check_defined(op, var);
  detail::check_same_device_dtype(op, input, target);
  detail::check_same_device_dtype(op, input, var);
  detail::check_floating(op, input);
  SG_CHECK(input.shape() == target.shape(), op, ": input of shape ", input.shape(), " and target of shape ",
           target.shape(), " differ");
  SG_CHECK(input.numel() > 0, op, ": got empty tensors");
  SG_CHECK(eps > 0.0, op, ": eps must be positive, got ", eps);
  Shape shape;
  detail::make_broadcast(op, input.shape(), var.shape(), shape);
  SG_CHECK(shape == input.shape(), op, ": var of shape ", var.shape(), " does not broadcast to the input's shape ",
           input.shape());
  detail::check_now_or_after_replay(var.device(), [op, var = var.detach()] {
    NoGradGuard no_grad;
    SG_CHECK(!(min(var).item() < 0.0), op, ": var has a negative entry");  // as PyTorch (reads one value back)
  });
  // max(var, eps) in value; the gradient reaches var unchanged, as PyTorch's clamp under no_grad.
  const Tensor v = var + (clamp_min(var, eps) - var).detach();
  const Tensor loss = 0.5 * mean(log(v) + square(input - target) / v);
  return full ? loss + 0.5 * std::log(2.0 * M_PI) : loss;
}

}  // namespace sg
