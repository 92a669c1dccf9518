// Optimizers (like torch::optim): SGD with momentum / Nesterov / weight decay and Adam
// (bias-corrected; AdamW with decoupled weight decay), and learning-rate schedules. step()
// updates the parameters in place outside the tape: on CUDA every parameter of a dtype in one
// multi-tensor launch (capturable in a sg::cuda::Graph), on the CPU one fused loop each. A structured
// parameter stays structured: its gradient is a projection onto the structure and every update
// is elementwise.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <structgrad/core/tensor.h>

namespace sg::optim {

/// The base of the optimizers: holds the parameters (shared handles, updated in place).
/// Example: `sg::optim::Optimizer& opt = adam; opt.zero_grad();`
class Optimizer {
 public:
  /// Takes the parameters to update (leaves requiring grad).
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer();
  /// Neither copyable nor movable: a captured step's replay checks refer to this object.
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  /// Drops every parameter's gradient. Example: `opt.zero_grad(); loss.backward(); opt.step();`
  void zero_grad();
  /// Applies one update to every parameter that has a gradient.
  virtual void step() = 0;
  /// The parameters this optimizer updates. Example: `for (auto& p : opt.params()) ...`
  const std::vector<Tensor>& params() const { return params_; }
  /// Hyper-parameters, step count and buffers as named tensors (buffers shared, not copied), for
  /// checkpoints that resume bit-identically. Example: `sg::save_npz("opt.npz", opt.state_dict());`
  virtual std::vector<std::pair<std::string, Tensor>> state_dict() const;
  /// Restores a state_dict() of the same optimizer type over the same parameter shapes and dtypes
  /// (hyper-parameters included, like libtorch); all is checked before anything changes.
  /// Example: `opt.load_state_dict(sg::load_npz("opt.npz"));`
  virtual void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);
  /// The learning rate the next step() uses. Example: `double lr = opt.lr();`
  virtual double lr() const = 0;
  /// Sets the learning rate (what a learning-rate schedule does). Example: `opt.set_lr(1e-4);`
  virtual void set_lr(double lr) = 0;

 protected:
  /// The hyper-parameters by name, as a captured step was recorded with them.
  virtual std::vector<std::pair<const char*, double>> hyper_parameters() const = 0;
  /// The optimizer's name in messages ("Adam").
  virtual const char* name() const = 0;
  /// While a CUDA graph captures work on `device`: has each replay refused once hyper_parameters()
  /// differ from their values now (a captured launch holds them as they are).
  void check_hyper_parameters_on_replay(Device device) const;

  std::vector<Tensor> params_;  ///< the parameters, in the order given

 private:
  std::shared_ptr<const Optimizer*> self_;  // null once destroyed; read by the replay checks
};

/// SGD hyper-parameters (PyTorch's meaning). Example: `{.lr = 0.1, .momentum = 0.9}`.
struct SGDOptions {
  double lr = 0.01;            ///< learning rate
  double momentum = 0.0;       ///< momentum factor (0: plain SGD)
  double dampening = 0.0;      ///< dampening of the momentum
  double weight_decay = 0.0;   ///< L2 penalty added to the gradient
  bool nesterov = false;       ///< Nesterov momentum
  /// CUDA parameters: all of one dtype in one multi-tensor launch (needed to capture the step in a
  /// sg::cuda::Graph); false: a launch per parameter. CPU parameters run a loop each either way.
  bool fused = true;
};

/// Example: `sg::optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});`
class SGD : public Optimizer {
 public:
  /// Example: `sg::optim::SGD opt({w}, {.lr = 0.1});`
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step() override;
  double lr() const override { return options.lr; }
  void set_lr(double lr) override { options.lr = lr; }
  /// Options and momentum buffers ("sgd.lr", "sgd.momentum_buffer.0", ...). Example: `auto s = opt.state_dict();`
  std::vector<std::pair<std::string, Tensor>> state_dict() const override;
  /// Restores SGD::state_dict(). Example: `opt.load_state_dict(s);`
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) override;
  SGDOptions options;  ///< may be changed between steps (e.g. a learning-rate schedule)

 protected:
  std::vector<std::pair<const char*, double>> hyper_parameters() const override;
  const char* name() const override { return "SGD"; }

 private:
  std::vector<Tensor> momentum_;
  std::vector<bool> started_;
};

/// Adam hyper-parameters (PyTorch's defaults). Example: `{.lr = 0.05, .weight_decay = 1e-4}`.
struct AdamOptions {
  double lr = 1e-3;            ///< learning rate
  double beta1 = 0.9;          ///< decay of the first moment
  double beta2 = 0.999;        ///< decay of the second moment
  double eps = 1e-8;           ///< added to the denominator
  double weight_decay = 0.0;   ///< L2 penalty (or decoupled decay for AdamW)
  bool decoupled_weight_decay = false;  ///< AdamW
  /// CUDA parameters: all of one dtype in one multi-tensor launch, with the step count kept on the
  /// device (needed to capture the step in a sg::cuda::Graph); false: a launch per parameter with the
  /// step count passed from the host. CPU parameters run a loop each either way.
  bool fused = true;
};

/// Example: `sg::optim::Adam opt({U, mu}, {.lr = 0.05});`
class Adam : public Optimizer {
 public:
  /// Example: `sg::optim::Adam opt(model.parameters(), {.lr = 1e-3});`
  Adam(std::vector<Tensor> params, AdamOptions options);
  void step() override;
  double lr() const override { return options.lr; }
  void set_lr(double lr) override { options.lr = lr; }
  /// Options, step count and moments ("adam.step", "adam.exp_avg.0", ...). Example: `auto s = opt.state_dict();`
  std::vector<std::pair<std::string, Tensor>> state_dict() const override;
  /// Restores Adam::state_dict(). Example: `opt.load_state_dict(s);`
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) override;
  AdamOptions options;  ///< may be changed between steps (e.g. a learning-rate schedule)
  /// Number of steps taken so far, replays of a captured step included (the t of the bias
  /// correction; the fused CUDA step keeps it on the device, so this waits for it). Example: `opt.steps_taken()`.
  int64_t steps_taken() const;
  /// @{
  /// The first and second moment buffers of parameter i (for checkpoints).
  /// Example: `auto m = opt.exp_avg(0);`
  Tensor& exp_avg(size_t i) { return exp_avg_.at(i); }
  Tensor& exp_avg_sq(size_t i) { return exp_avg_sq_.at(i); }
  /// @}
  /// Sets the step count (restoring a checkpoint). Example: `opt.set_steps_taken(100);`
  void set_steps_taken(int64_t s);

 protected:
  std::vector<std::pair<const char*, double>> hyper_parameters() const override;
  const char* name() const override { return "Adam"; }

 private:
  /// True when step() runs the multi-tensor CUDA update (options.fused, every parameter on one GPU).
  bool runs_fused() const;

  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  int64_t step_ = 0;  // the host's count; the fused CUDA step keeps its own in counter_
  Tensor counter_;    // fused CUDA step: float64 [t, 1 − beta1^t, 1 − beta2^t] on the parameters' device
};

/// Learning-rate schedules, like torch.optim.lr_scheduler: each sets the optimizer's rate from its
/// initial one when built (epoch 0), and step() moves to the next epoch (or iteration) and sets it.
namespace lr_scheduler {

/// The base of the schedules. Example: `sched.step();  double now = sched.last_lr();`
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  /// Advances one epoch and sets the optimizer's rate. Example: `opt.step(); sched.step();`
  void step();
  /// The epochs stepped so far. Example: `sched.last_epoch()`
  int64_t last_epoch() const { return epoch_; }
  /// The rate the schedule last set. Example: `sched.last_lr()`
  double last_lr() const { return last_lr_; }
  /// The optimizer's rate when the schedule was built. Example: `sched.base_lr()`
  double base_lr() const { return base_lr_; }
  /// The epoch and the base rate as 0-d float64 tensors ("lr_scheduler.epoch", "lr_scheduler.base_lr"),
  /// for checkpoints. Example: `sg::save_npz("sched.npz", sched.state_dict());`
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  /// Restores state_dict() (both entries, checked first) and sets the optimizer's rate of that
  /// epoch, so that training resumes on the schedule. Example: `sched.load_state_dict(sg::load_npz("sched.npz"));`
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  /// Sets the rate of epoch 0; each schedule's constructor calls it once its fields are set.
  void start();
  /// The rate at `epoch`.
  virtual double rate(int64_t epoch) const = 0;

 private:
  Optimizer& optimizer_;
  double base_lr_;
  double last_lr_;
  int64_t epoch_ = 0;
};

/// base·gamma^⌊epoch / step_size⌋. Example: `sg::optim::lr_scheduler::StepLR sched(opt, 30, 0.1);`
class StepLR : public LRScheduler {
 public:
  /// Sets the rate of epoch 0. Example: `sg::optim::lr_scheduler::StepLR sched(opt, 30);`
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double rate(int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// eta_min + (base − eta_min)·(1 + cos(π·epoch / t_max))/2, the closed form of PyTorch's
/// CosineAnnealingLR (periodic past t_max). Example: `CosineAnnealingLR sched(opt, 100);`
class CosineAnnealingLR : public LRScheduler {
 public:
  /// Sets the rate of epoch 0. Example: `sg::optim::lr_scheduler::CosineAnnealingLR sched(opt, epochs, 1e-5);`
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0.0);

 protected:
  double rate(int64_t epoch) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

/// A linear warm-up (PyTorch's LinearLR): base·factor, the factor going linearly from
/// start_factor to end_factor over total_iters epochs, then staying there.
/// Example: `LinearLR warmup(opt, 0.1, 1.0, 500);`
class LinearLR : public LRScheduler {
 public:
  /// Sets the rate of epoch 0 (base·start_factor). Example: `sg::optim::lr_scheduler::LinearLR warmup(opt, 0.1, 1.0, 100);`
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);

 protected:
  double rate(int64_t epoch) const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

}  // namespace lr_scheduler

}  // namespace sg::optim
