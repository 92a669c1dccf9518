// Optimizers (like torch::optim): SGD with momentum / Nesterov / weight decay and Adam
// (bias-corrected; AdamW with decoupled weight decay). step() updates each parameter in
// place with one fused kernel, outside the tape. A structured parameter stays structured:
// its gradient is a projection onto the structure and every update is elementwise.
#pragma once

#include <vector>

#include "../core/tensor.h"

namespace sg::optim {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer() = default;
  /// Drops every parameter's gradient. Example: `opt.zero_grad(); loss.backward(); opt.step();`
  void zero_grad();
  /// Applies one update to every parameter that has a gradient.
  virtual void step() = 0;
  const std::vector<Tensor>& params() const { return params_; }

 protected:
  std::vector<Tensor> params_;
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

/// Example: `sg::optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});`
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step() override;
  SGDOptions options;

 private:
  std::vector<Tensor> momentum_;
  std::vector<bool> started_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  ///< AdamW
};

/// Example: `sg::optim::Adam opt({U, mu}, {.lr = 0.05});`
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options);
  void step() override;
  AdamOptions options;
  int64_t steps_taken() const { return step_; }
  /// The first and second moment buffers of parameter i (for checkpoints).
  Tensor& exp_avg(size_t i) { return exp_avg_.at(i); }
  Tensor& exp_avg_sq(size_t i) { return exp_avg_sq_.at(i); }
  void set_steps_taken(int64_t s) { step_ = s; }

 private:
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  int64_t step_ = 0;
};

}  // namespace sg::optim
