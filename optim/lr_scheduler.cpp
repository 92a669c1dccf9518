// The learning-rate schedules (sg::optim::lr_scheduler): each rate a closed form of the epoch and
// of the optimizer's initial rate, written into the optimizer through Optimizer::set_lr.
#include <algorithm>
#include <cmath>

#include <structgrad/core/error.h>
#include <structgrad/ops/factories.h>
#include <structgrad/optim/optim.h>

namespace sg::optim::lr_scheduler {

namespace {
constexpr double kPi = 3.14159265358979323846;
}  // namespace

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer), base_lr_(optimizer.lr()) {}

void LRScheduler::start() {
  last_lr_ = rate(0);
  optimizer_.set_lr(last_lr_);
}

std::vector<std::pair<std::string, Tensor>> LRScheduler::state_dict() const {
  const TensorOptions f64 = TensorOptions().dtype(DType::Float64);
  return {{"lr_scheduler.epoch", full({}, static_cast<double>(epoch_), f64)},
          {"lr_scheduler.base_lr", full({}, base_lr_, f64)}};
}

void LRScheduler::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  const Tensor* epoch = nullptr;
  const Tensor* base = nullptr;
  for (const auto& [name, t] : state) {
    if (name == "lr_scheduler.epoch") epoch = &t;
    else if (name == "lr_scheduler.base_lr") base = &t;
    else SG_FAIL("LRScheduler.load_state_dict: unexpected entry '", name, "'");
  }
  SG_CHECK(epoch != nullptr && base != nullptr && epoch->numel() == 1 && base->numel() == 1,
           "LRScheduler.load_state_dict: expected one value each for lr_scheduler.epoch and lr_scheduler.base_lr");
  const double e = epoch->item();
  SG_CHECK(e >= 0 && e == std::floor(e), "LRScheduler.load_state_dict: the epoch must be a whole number ≥ 0, got ", e);
  epoch_ = static_cast<int64_t>(e);
  base_lr_ = base->item();
  last_lr_ = rate(epoch_);
  optimizer_.set_lr(last_lr_);
}

void LRScheduler::step() {
  ++epoch_;
  last_lr_ = rate(epoch_);
  optimizer_.set_lr(last_lr_);
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  SG_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  start();
}

double StepLR::rate(int64_t epoch) const {
  return base_lr() * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  SG_CHECK(t_max > 0, "CosineAnnealingLR: t_max must be positive, got ", t_max);
  start();
}

double CosineAnnealingLR::rate(int64_t epoch) const {
  const double phase = kPi * static_cast<double>(epoch) / static_cast<double>(t_max_);
  return eta_min_ + (base_lr() - eta_min_) * (1.0 + std::cos(phase)) / 2.0;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  SG_CHECK(start_factor > 0.0 && start_factor <= 1.0 && end_factor >= 0.0 && end_factor <= 1.0,
           "LinearLR: expected 0 < start_factor ≤ 1 and 0 ≤ end_factor ≤ 1, got ", start_factor, " and ", end_factor);
  SG_CHECK(total_iters >= 0, "LinearLR: total_iters must not be negative, got ", total_iters);
  start();
}

double LinearLR::rate(int64_t epoch) const {
  const double progress = total_iters_ == 0 ? 1.0
                                            : static_cast<double>(std::min(epoch, total_iters_)) /
                                                  static_cast<double>(total_iters_);
  return base_lr() * (start_factor_ + (end_factor_ - start_factor_) * progress);
}

}  // namespace sg::optim::lr_scheduler
