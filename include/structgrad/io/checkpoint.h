// Checkpoints on disk: a module's parameters, an optimizer's state, or both in one file, all
// as .npz archives of named tensors (numpy.load reads them). Loading goes through
// Module::load_state_dict / Optimizer::load_state_dict, so every name, shape and dtype is checked.
#pragma once

#include <string>

#include <structgrad/optim/optim.h>
#include <structgrad/nn/module.h>
#include <structgrad/io/npy.h>

namespace sg::nn {

/// Writes module.state_dict() to an .npz file (one entry per parameter, dotted names).
/// Example: `sg::nn::save(model, "model.npz");`
void save(const Module& module, const std::string& path);
/// Loads a file written by sg::nn::save into `module` in place (see Module::load_state_dict).
/// Example: `sg::nn::load(model, "model.npz");`
void load(Module& module, const std::string& path);

}  // namespace sg::nn

namespace sg::optim {

/// Writes optimizer.state_dict() to an .npz file. Example: `sg::optim::save(opt, "adam.npz");`
void save(const Optimizer& optimizer, const std::string& path);
/// Loads a file written by sg::optim::save into `optimizer`. Example: `sg::optim::load(opt, "adam.npz");`
void load(Optimizer& optimizer, const std::string& path);

}  // namespace sg::optim

namespace sg {

/// Writes a training checkpoint: the module's parameters as "model.<name>" and the optimizer's
/// state as "optimizer.<key>", in one .npz file. Example: `sg::save_checkpoint("ckpt.npz", model, opt);`
void save_checkpoint(const std::string& path, const nn::Module& module, const optim::Optimizer& optimizer);
/// Restores a checkpoint written by save_checkpoint into a model and optimizer built the same
/// way, so training continues bit-identically. On an error neither is changed.
/// Example: `sg::load_checkpoint("ckpt.npz", model, opt);  // then keep calling opt.step()`
void load_checkpoint(const std::string& path, nn::Module& module, optim::Optimizer& optimizer);

}  // namespace sg
