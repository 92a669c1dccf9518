// Module, optimizer and combined checkpoints as .npz files: thin wrappers over save_npz /
// load_npz and the state dicts, plus the prefixing that keeps model and optimizer apart.
#include <structgrad/io/checkpoint.h>

namespace sg {
namespace {

const std::string kModelPrefix = "model.";
const std::string kOptimizerPrefix = "optimizer.";

bool take_prefix(const std::string& name, const std::string& prefix, std::string& rest) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  rest = name.substr(prefix.size());
  return true;
}

}  // namespace

namespace nn {
void save(const Module& module, const std::string& path) { save_npz(path, module.state_dict()); }
void load(Module& module, const std::string& path) {
  const NamedTensors state = load_npz(path);
  try {
    module.load_state_dict(state);
  } catch (const Error& e) {
    SG_FAIL("nn::load: ", path, ": ", e.what());
  }
}
}  // namespace nn

namespace optim {
void save(const Optimizer& optimizer, const std::string& path) { save_npz(path, optimizer.state_dict()); }
void load(Optimizer& optimizer, const std::string& path) {
  const NamedTensors state = load_npz(path);
  try {
    optimizer.load_state_dict(state);
  } catch (const Error& e) {
    SG_FAIL("optim::load: ", path, ": ", e.what());
  }
}
}  // namespace optim

void save_checkpoint(const std::string& path, const nn::Module& module, const optim::Optimizer& optimizer) {
  NamedTensors all;
  for (auto& [name, t] : module.state_dict()) all.emplace_back(kModelPrefix + name, t);
  for (auto& [name, t] : optimizer.state_dict()) all.emplace_back(kOptimizerPrefix + name, t);
  save_npz(path, all);
}

void load_checkpoint(const std::string& path, nn::Module& module, optim::Optimizer& optimizer) {
  NamedTensors model_state, optimizer_state;
  for (auto& [name, t] : load_npz(path)) {
    std::string rest;
    if (take_prefix(name, kModelPrefix, rest)) {
      model_state.emplace_back(rest, t);
    } else if (take_prefix(name, kOptimizerPrefix, rest)) {
      optimizer_state.emplace_back(rest, t);
    } else {
      SG_FAIL("load_checkpoint: ", path, " holds '", name,
              "', which is neither a model ('model.') nor an optimizer ('optimizer.') entry");
    }
  }
  // Keep a copy of the parameters so that an optimizer state that does not fit leaves the
  // module unchanged too.
  NamedTensors before;
  for (auto& [name, t] : module.state_dict()) before.emplace_back(name, t.clone());
  try {
    module.load_state_dict(model_state);
  } catch (const Error& e) {
    SG_FAIL("load_checkpoint: ", path, ": ", e.what());
  }
  try {
    optimizer.load_state_dict(optimizer_state);
  } catch (const Error& e) {
    module.load_state_dict(before);
    SG_FAIL("load_checkpoint: ", path, ": ", e.what());
  }
}

}  // namespace sg
