// Optimizer state dicts: hyper-parameters, step counts and per-parameter buffers as named
// tensors (scalars as float64 rank-0 tensors), so a checkpoint resumes training bit-identically.
// Loading checks every key, shape and dtype before it changes anything.
#include <cmath>
#include <map>
#include <set>

#include <structgrad/autograd/grad_mode.h>
#include <structgrad/optim/optim.h>
#include <structgrad/ops/factories.h>

namespace sg::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

std::vector<std::pair<std::string, Tensor>> Optimizer::state_dict() const {
  SG_FAIL("state_dict: this optimizer does not implement state_dict()");
}

void Optimizer::load_state_dict(const std::vector<std::pair<std::string, Tensor>>&) {
  SG_FAIL("load_state_dict: this optimizer does not implement load_state_dict()");
}

namespace {

Tensor scalar(double value) { return full({}, value, kFloat64); }

/// Looks keys up in a state dict, remembering which were used so that leftovers are reported.
class StateReader {
 public:
  StateReader(const NamedTensors& state, const char* op) : op_(op) {
    for (const auto& [name, t] : state) {
      SG_CHECK(t.defined(), op, ": tensor '", name, "' is undefined");
      SG_CHECK(tensors_.emplace(name, t).second, op, ": the name '", name, "' appears twice");
    }
  }
  const Tensor* find(const std::string& key) {
    auto it = tensors_.find(key);
    if (it == tensors_.end()) return nullptr;
    used_.insert(key);
    return &it->second;
  }
  const Tensor& require(const std::string& key) {
    const Tensor* t = find(key);
    SG_CHECK(t != nullptr, op_, ": the state dict has no '", key, "'", hint());
    return *t;
  }
  double scalar(const std::string& key) {
    const Tensor& t = require(key);
    SG_CHECK(t.numel() == 1, op_, ": '", key, "' should hold one value, got shape ", t.shape());
    return t.item();
  }
  int64_t count(const std::string& key) {
    const double v = scalar(key);
    SG_CHECK(v >= 0 && v <= 9007199254740992.0 && std::floor(v) == v, op_, ": '", key,
             "' should be a non-negative integer, got ", v);
    return static_cast<int64_t>(v);
  }
  /// A buffer of parameter `i`: same shape and dtype as the parameter.
  void check_buffer(const std::string& key, const Tensor& t, size_t i, const Tensor& param) const {
    SG_CHECK(t.shape() == param.shape() && t.dtype() == param.dtype(), op_, ": '", key, "' is ", t.shape(), " ",
             t.dtype(), " but parameter ", i, " is ", param.shape(), " ", param.dtype());
  }
  void check_all_used() const {
    std::string unexpected;
    for (const auto& [name, t] : tensors_)
      if (!used_.count(name)) unexpected += (unexpected.empty() ? "'" : ", '") + name + "'";
    SG_CHECK(unexpected.empty(), op_, ": unexpected entries in the state dict: ", unexpected);
  }

 private:
  std::string hint() const {
    std::string keys;
    int shown = 0;
    for (const auto& [name, t] : tensors_) {
      if (shown++ == 3) {
        keys += ", ...";
        break;
      }
      keys += (keys.empty() ? "" : ", ") + name;
    }
    return keys.empty() ? " (it is empty)" : " (it holds " + keys + "; is it from another optimizer?)";
  }

  const char* op_;
  std::map<std::string, Tensor> tensors_;
  std::set<std::string> used_;
};

/// `buffer` (made like `param` where undefined or unlike it) set to `value`, in place where it exists: a
/// captured step holds its address.
void load_buffer(Tensor& buffer, const Tensor& value, const Tensor& param) {
  if (!buffer.defined() || buffer.shape() != param.shape() || buffer.dtype() != param.dtype() ||
      buffer.device() != param.device())
    buffer = zeros_like(param);
  buffer.copy_(value.detach().to(param.device()));
}

}  // namespace

// ---- SGD ---------------------------------------------------------------------------------

std::vector<std::pair<std::string, Tensor>> SGD::state_dict() const {
  NamedTensors out = {{"sgd.lr", scalar(options.lr)},
                      {"sgd.momentum", scalar(options.momentum)},
                      {"sgd.dampening", scalar(options.dampening)},
                      {"sgd.weight_decay", scalar(options.weight_decay)},
                      {"sgd.nesterov", scalar(options.nesterov ? 1 : 0)},
                      {"sgd.num_params", scalar(static_cast<double>(params_.size()))}};
  for (size_t i = 0; i < params_.size(); ++i)
    if (momentum_[i].defined()) out.emplace_back("sgd.momentum_buffer." + std::to_string(i), momentum_[i].detach());
  return out;
}

void SGD::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  const char* op = "SGD::load_state_dict";
  StateReader in(state, op);
  SGDOptions o;
  o.lr = in.scalar("sgd.lr");
  o.momentum = in.scalar("sgd.momentum");
  o.dampening = in.scalar("sgd.dampening");
  o.weight_decay = in.scalar("sgd.weight_decay");
  o.nesterov = in.scalar("sgd.nesterov") != 0;
  SG_CHECK(o.lr >= 0 && o.momentum >= 0 && o.weight_decay >= 0, op, ": negative hyper-parameter in the state dict");
  SG_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), op,
           ": the state dict sets nesterov without momentum > 0 and no dampening");
  const int64_t n = in.count("sgd.num_params");
  SG_CHECK(n == static_cast<int64_t>(params_.size()), op, ": the state dict is for ", n,
           " parameters, this optimizer has ", params_.size());
  std::vector<const Tensor*> buffers(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string key = "sgd.momentum_buffer." + std::to_string(i);
    buffers[i] = in.find(key);
    if (buffers[i]) in.check_buffer(key, *buffers[i], i, params_[i]);
  }
  in.check_all_used();

  NoGradGuard guard;
  options = o;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (buffers[i]) load_buffer(momentum_[i], *buffers[i], params_[i]);
    else momentum_[i] = Tensor();
    started_[i] = buffers[i] != nullptr;
  }
}

// ---- Adam --------------------------------------------------------------------------------

std::vector<std::pair<std::string, Tensor>> Adam::state_dict() const {
  NamedTensors out = {{"adam.lr", scalar(options.lr)},
                      {"adam.beta1", scalar(options.beta1)},
                      {"adam.beta2", scalar(options.beta2)},
                      {"adam.eps", scalar(options.eps)},
                      {"adam.weight_decay", scalar(options.weight_decay)},
                      {"adam.decoupled_weight_decay", scalar(options.decoupled_weight_decay ? 1 : 0)},
                      {"adam.num_params", scalar(static_cast<double>(params_.size()))},
                      {"adam.step", scalar(static_cast<double>(steps_taken()))}};
  for (size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back("adam.exp_avg." + std::to_string(i), exp_avg_[i].detach());
    out.emplace_back("adam.exp_avg_sq." + std::to_string(i), exp_avg_sq_[i].detach());
  }
  return out;
}

void Adam::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  const char* op = "Adam::load_state_dict";
  StateReader in(state, op);
  AdamOptions o;
  o.lr = in.scalar("adam.lr");
  o.beta1 = in.scalar("adam.beta1");
  o.beta2 = in.scalar("adam.beta2");
  o.eps = in.scalar("adam.eps");
  o.weight_decay = in.scalar("adam.weight_decay");
  o.decoupled_weight_decay = in.scalar("adam.decoupled_weight_decay") != 0;
  SG_CHECK(o.lr >= 0 && o.eps >= 0 && o.weight_decay >= 0, op, ": negative hyper-parameter in the state dict");
  SG_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, op,
           ": the state dict's betas are not in [0, 1)");
  const int64_t n = in.count("adam.num_params");
  SG_CHECK(n == static_cast<int64_t>(params_.size()), op, ": the state dict is for ", n,
           " parameters, this optimizer has ", params_.size());
  const int64_t steps = in.count("adam.step");
  std::vector<const Tensor*> avg(params_.size()), avg_sq(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string k1 = "adam.exp_avg." + std::to_string(i), k2 = "adam.exp_avg_sq." + std::to_string(i);
    avg[i] = &in.require(k1);
    avg_sq[i] = &in.require(k2);
    in.check_buffer(k1, *avg[i], i, params_[i]);
    in.check_buffer(k2, *avg_sq[i], i, params_[i]);
  }
  in.check_all_used();

  NoGradGuard guard;
  options = o;
  set_steps_taken(steps);
  for (size_t i = 0; i < params_.size(); ++i) {
    load_buffer(exp_avg_[i], *avg[i], params_[i]);
    load_buffer(exp_avg_sq_[i], *avg_sq[i], params_[i]);
  }
}

}  // namespace sg::optim
