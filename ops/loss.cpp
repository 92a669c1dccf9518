// mse_loss with a fused forward ((a − b)² in one pass) and backward.
#include <structgrad/ops/loss.h>

#include <structgrad/autograd/grad_mode.h>
#include <structgrad/autograd/node.h>
#include <structgrad/ops/elementwise.h>
#include "ops/op_util.h"
#include <structgrad/ops/reduce.h>

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

}  // namespace sg
