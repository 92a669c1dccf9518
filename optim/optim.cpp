// SGD and Adam: bookkeeping here, the per-element update in fused backend kernels (one multi-tensor
// launch per dtype on CUDA, one per parameter otherwise).
#include <structgrad/optim/optim.h>

#include <algorithm>
#include <cmath>

#include <structgrad/autograd/grad_mode.h>
#include <structgrad/ops/factories.h>
#include "core/capture.h"
#include "ops/backend.h"

namespace sg::optim {

Optimizer::Optimizer(std::vector<Tensor> params)
    : params_(std::move(params)), self_(std::make_shared<const Optimizer*>(this)) {
  for (size_t i = 0; i < params_.size(); ++i) {
    SG_CHECK(params_[i].defined(), "optimizer: parameter ", i, " is undefined");
    SG_CHECK(params_[i].is_leaf() && params_[i].requires_grad(), "optimizer: parameter ", i,
             " must be a leaf that requires grad");
  }
}

Optimizer::~Optimizer() { *self_ = nullptr; }

void Optimizer::check_hyper_parameters_on_replay(Device device) const {
  if (!detail::capturing(device)) return;
  detail::check_before_replay(device, [self = self_, captured = hyper_parameters(), name = name()] {
    SG_CHECK(*self != nullptr, "Graph::replay: the ", name, " optimizer of the captured step has been destroyed");
    const auto now = (*self)->hyper_parameters();
    for (size_t i = 0; i < captured.size(); ++i)
      SG_CHECK(now[i].second == captured[i].second, "Graph::replay: ", name, "'s ", captured[i].first, " is ",
               now[i].second, " but the step was captured with ", captured[i].second,
               "; the captured launches hold the old value, so capture the step again after changing it");
  });
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

std::vector<std::pair<const char*, double>> SGD::hyper_parameters() const {
  return {{"lr", options.lr},
          {"momentum", options.momentum},
          {"dampening", options.dampening},
          {"weight_decay", options.weight_decay},
          {"nesterov", options.nesterov ? 1.0 : 0.0}};
}

void SGD::step() {
  NoGradGuard guard;
  detail::SgdParams h;
  h.lr = options.lr;
  h.momentum = options.momentum;
  h.dampening = options.dampening;
  h.weight_decay = options.weight_decay;
  h.nesterov = options.nesterov;
  std::vector<Tensor> grads(params_.size());
  std::vector<detail::SgdSlot> slots;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    grads[i] = p.grad();
    if (!grads[i].defined()) continue;
    check_grad(i, p, grads[i]);
    const bool use_momentum = options.momentum != 0.0;
    if (use_momentum && !momentum_[i].defined()) {
      detail::refuse_under_capture("SGD::step", p.device(), "would start a momentum buffer, which every replay "
                                   "would start again; take one step before capturing");
      momentum_[i] = zeros_like(p);
    }
    if (momentum_[i].defined()) check_state("SGD", i, p, momentum_[i]);
    if (p.numel() == 0) continue;
    slots.push_back({&p, &grads[i], use_momentum ? &momentum_[i] : nullptr, !started_[i]});
  }
  if (slots.empty()) return;
  const Device device = slots[0].param->device();
  check_hyper_parameters_on_replay(device);
  const bool one_gpu = device.is_cuda() && std::all_of(slots.begin(), slots.end(), [&](const detail::SgdSlot& s) {
                         return s.param->device() == device;
                       });
  if (options.fused && one_gpu) {
    detail::backend_for(device).sgd_step_many(slots, h);
  } else {
    for (const detail::SgdSlot& s : slots) {
      h.first_step = s.first_step;
      Tensor unused;
      detail::backend_for(s.param->device()).sgd_step(*s.param, *s.grad, s.momentum ? *s.momentum : unused, h);
    }
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grads[i].defined() || params_[i].numel() == 0) continue;
    params_[i].impl().storage->version++;
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
  if (runs_fused()) set_steps_taken(0);
}

std::vector<std::pair<const char*, double>> Adam::hyper_parameters() const {
  return {{"lr", options.lr},
          {"beta1", options.beta1},
          {"beta2", options.beta2},
          {"eps", options.eps},
          {"weight_decay", options.weight_decay},
          {"decoupled_weight_decay", options.decoupled_weight_decay ? 1.0 : 0.0}};
}

bool Adam::runs_fused() const {
  if (!options.fused || params_.empty() || !params_[0].device().is_cuda()) return false;
  const Device device = params_[0].device();
  return std::all_of(params_.begin(), params_.end(), [&](const Tensor& p) { return p.device() == device; });
}

int64_t Adam::steps_taken() const {
  if (!counter_.defined()) return step_;
  return static_cast<int64_t>(counter_.to_vector()[0]);  // replays of a captured step counted too
}

void Adam::set_steps_taken(int64_t s) {
  SG_CHECK(s >= 0, "Adam::set_steps_taken: expected a count >= 0, got ", s);
  step_ = s;
  if (!runs_fused()) {
    counter_ = Tensor();
    return;
  }
  const double t = static_cast<double>(s);
  const std::vector<double> values = {t, 1.0 - std::pow(options.beta1, t), 1.0 - std::pow(options.beta2, t)};
  const Tensor counter = from_vector(values, {3}, TensorOptions().dtype(kFloat64).device(params_[0].device()));
  // In place where it exists: a captured step holds its address.
  if (counter_.defined() && counter_.device() == counter.device()) counter_.copy_(counter);
  else counter_ = counter;
}

void Adam::step() {
  NoGradGuard guard;
  const bool fused = runs_fused();
  if (fused != counter_.defined()) set_steps_taken(steps_taken());  // options.fused changed: carry the count over
  std::vector<Tensor> grads(params_.size());
  std::vector<detail::AdamSlot> slots;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    grads[i] = p.grad();
    if (!grads[i].defined()) continue;
    check_grad(i, p, grads[i]);
    check_state("Adam", i, p, exp_avg_[i]);
    check_state("Adam", i, p, exp_avg_sq_[i]);
    if (p.numel() > 0) slots.push_back({&p, &grads[i], &exp_avg_[i], &exp_avg_sq_[i]});
  }
  detail::AdamParams h;
  h.lr = options.lr;
  h.beta1 = options.beta1;
  h.beta2 = options.beta2;
  h.eps = options.eps;
  h.weight_decay = options.weight_decay;
  h.decoupled_weight_decay = options.decoupled_weight_decay;
  ++step_;
  if (fused) {
    const Device device = params_[0].device();
    check_hyper_parameters_on_replay(device);
    detail::backend_for(device).adam_step_many(slots, h, counter_);  // advances the count even without slots
  } else {
    for (const detail::AdamSlot& s : slots) {
      detail::refuse_under_capture("Adam::step", s.param->device(),
                                   "passes the step count from the host with fused = false; use the fused step");
      h.step = step_;
      detail::backend_for(s.param->device()).adam_step(*s.param, *s.grad, *s.exp_avg, *s.exp_avg_sq, h);
    }
  }
  for (const detail::AdamSlot& s : slots) s.param->impl().storage->version++;
}

}  // namespace sg::optim
