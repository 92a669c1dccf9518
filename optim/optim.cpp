// SGD and Adam: bookkeeping here, the per-element update in one fused backend kernel.
#include <structgrad/optim/optim.h>

#include <structgrad/autograd/grad_mode.h>
#include "ops/backend.h"
#include <structgrad/ops/factories.h>

namespace sg::optim {

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (size_t i = 0; i < params_.size(); ++i) {
    SG_CHECK(params_[i].defined(), "optimizer: parameter ", i, " is undefined");
    SG_CHECK(params_[i].is_leaf() && params_[i].requires_grad(), "optimizer: parameter ", i,
             " must be a leaf that requires grad");
  }
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.zero_grad();
}

namespace {
void check_grad(size_t i, const Tensor& p, const Tensor& g) {
  SG_CHECK(g.shape() == p.shape() && g.dtype() == p.dtype() && g.device() == p.device(), "optimizer: gradient of parameter ",
           i, " (", g.shape(), " ", g.dtype(), " on ", g.device(), ") does not match the parameter (", p.shape(), " ",
           p.dtype(), " on ", p.device(), ")");
}
/// Optimizer state must still match its parameter (a module moved to another dtype or device
/// after the optimizer was made would otherwise have its buffers read as the wrong type).
void check_state(const char* opt, size_t i, const Tensor& p, const Tensor& s) {
  SG_CHECK(s.shape() == p.shape() && s.dtype() == p.dtype() && s.device() == p.device(), opt,
           ": state of parameter ", i, " (", s.shape(), " ", s.dtype(), " on ", s.device(),
           ") does not match the parameter (", p.shape(), " ", p.dtype(), " on ", p.device(),
           "); make the optimizer after moving the parameters");
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : Optimizer(std::move(params)), options(o) {
  SG_CHECK(o.lr >= 0 && o.momentum >= 0 && o.weight_decay >= 0, "SGD: negative hyper-parameter");
  SG_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), "SGD: nesterov needs momentum > 0 and no dampening");
  momentum_.resize(params_.size());
  started_.assign(params_.size(), false);
}

void SGD::step() {
  NoGradGuard guard;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    check_grad(i, p, g);
    if (options.momentum > 0 && !momentum_[i].defined()) momentum_[i] = zeros_like(p);
    if (momentum_[i].defined()) check_state("SGD", i, p, momentum_[i]);
    if (p.numel() == 0) continue;
    detail::SgdParams h;
    h.lr = options.lr;
    h.momentum = options.momentum;
    h.dampening = options.dampening;
    h.weight_decay = options.weight_decay;
    h.nesterov = options.nesterov;
    h.first_step = !started_[i];
    detail::backend_for(p.device()).sgd_step(p, g, momentum_[i], h);
    p.impl().storage->version++;
    started_[i] = true;
  }
}

Adam::Adam(std::vector<Tensor> params, AdamOptions o) : Optimizer(std::move(params)), options(o) {
  SG_CHECK(o.lr >= 0 && o.eps >= 0 && o.weight_decay >= 0, "Adam: negative hyper-parameter");
  SG_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "Adam: betas must be in [0, 1)");
  for (const Tensor& p : params_) {
    exp_avg_.push_back(zeros_like(p));
    exp_avg_sq_.push_back(zeros_like(p));
  }
}

void Adam::step() {
  NoGradGuard guard;
  ++step_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    check_grad(i, p, g);
    check_state("Adam", i, p, exp_avg_[i]);
    check_state("Adam", i, p, exp_avg_sq_[i]);
    if (p.numel() == 0) continue;
    detail::AdamParams h;
    h.lr = options.lr;
    h.beta1 = options.beta1;
    h.beta2 = options.beta2;
    h.eps = options.eps;
    h.weight_decay = options.weight_decay;
    h.decoupled_weight_decay = options.decoupled_weight_decay;
    h.step = step_;
    detail::backend_for(p.device()).adam_step(p, g, exp_avg_[i], exp_avg_sq_[i], h);
    p.impl().storage->version++;
  }
}

}  // namespace sg::optim
