// Parameter containers and layers, like torch::nn: a Module registers named parameters and
// submodules; parameters() collects them recursively; to(device) moves them in place (every
// handle stays valid). A Layer is a Module with one forward(x), which sg::nn::Sequential chains.
// Layers: Linear (dense), UpperLinear (y = x·Uᵀ + b with U UpperTriangular) and
// SymmetricBilinear (q = xᵀSx with S Symmetric).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <structgrad/core/tensor.h>
#include <structgrad/ops/structure.h>

namespace sg::nn {

/// A container of named parameters and submodules, like torch::nn::Module.
/// Example: `sg::nn::Module model; model.register_module("layer0", layer);`
class Module {
 public:
  virtual ~Module() = default;

  /// Registers `t` as a parameter (a leaf requiring grad) and returns it.
  /// Example: `weight = register_parameter("weight", sg::randn({4, 4}));`
  Tensor register_parameter(const std::string& name, Tensor t);
  /// Registers a submodule; its parameters appear as "name.param".
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }
  /// Every parameter of this module and its submodules. Example: `sg::optim::Adam opt(model.parameters(), {});`
  std::vector<Tensor> parameters() const;
  /// Parameters with dotted names ("layer0.weight").
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  /// Moves every parameter to `device` in place (existing handles follow).
  void to(Device device);
  /// Converts every parameter to `dtype` in place.
  void to(DType dtype);
  /// Drops every parameter's gradient.
  void zero_grad();
  /// The parameters by dotted name, detached and sharing their storage (clone() for a
  /// snapshot); what sg::nn::save writes. Example: `sg::save_npz("model.npz", model.state_dict());`
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  /// Copies `state` into the parameters in place (every handle stays valid), converting only
  /// the device. Names must match exactly; shapes and dtypes must agree; a structured parameter
  /// keeps its tag and the incoming values must satisfy its invariant. Everything is checked
  /// before anything is written. Example: `model.load_state_dict(sg::load_npz("model.npz"));`
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);
  /// Sets training mode (the default) on this module and every submodule: sg::nn::Dropout draws
  /// its masks only in training. Example: `net.train(); ...; net.eval();`
  void train(bool on = true);
  /// train(false): evaluation mode. Example: `net.eval(); auto y = net.forward(x);`
  void eval() { train(false); }
  /// Whether the module is in training mode. Example: `if (net.is_training()) ...`
  bool is_training() const { return training_; }

 private:
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// A Module with one input and one output, the unit sg::nn::Sequential chains.
/// Example: `struct Scale : sg::nn::Layer { sg::Tensor forward(const sg::Tensor& x) const override { return 2.0 * x; } };`
class Layer : public Module {
 public:
  /// The layer applied to `x`. Example: `auto y = layer->forward(x);`
  virtual Tensor forward(const Tensor& x) const = 0;
};

/// y = x·Wᵀ + b, W [out, in] dense. Example: `auto layer = std::make_shared<sg::nn::Linear>(16, 8);`
class Linear : public Layer {
 public:
  /// W [out, in] and b [out], initialised uniformly in ±1/√in like PyTorch. Example: `sg::nn::Linear fc(16, 8);`
  Linear(int64_t in, int64_t out, bool bias = true, TensorOptions options = {});
  /// x [batch, in] → [batch, out]. Example: `auto y = fc.forward(x);`
  Tensor forward(const Tensor& x) const override;
  /// @{
  /// The parameters W [out, in] and b [out] (b undefined without bias).
  Tensor weight, bias;
  /// @}
};

/// y = x·Uᵀ + b with U UpperTriangular (n×n), initialised to the identity: the product runs
/// the structured kernel and U.grad() stays upper. Example: `sg::nn::UpperLinear flow_layer(8);`
class UpperLinear : public Layer {
 public:
  /// U = I (n×n) and b = 0. Example: `sg::nn::UpperLinear layer(8);`
  explicit UpperLinear(int64_t n, bool bias = true, TensorOptions options = {});
  /// x [batch, n] → x·Uᵀ + b. Example: `auto y = layer.forward(x);`
  Tensor forward(const Tensor& x) const override;
  UpperTriangular weight;  ///< U, an UpperTriangular parameter
  Tensor bias;             ///< b [n] (undefined without bias)
};

/// q_b = x_bᵀ S x_b for each row x_b of x [batch, n], S Symmetric (n×n), initialised to 0.
/// Example: `sg::nn::SymmetricBilinear q(8); auto y = q.forward(x);  // [batch]`
class SymmetricBilinear : public Layer {
 public:
  /// S = 0 (n×n). Example: `sg::nn::SymmetricBilinear q(8);`
  explicit SymmetricBilinear(int64_t n, TensorOptions options = {});
  /// x [batch, n] → [batch] with q_b = x_bᵀ S x_b. Example: `auto y = q.forward(x);`
  Tensor forward(const Tensor& x) const override;
  Symmetric weight;  ///< S, a Symmetric parameter
};

namespace detail {
/// Replaces t's storage by a copy on `device` / of `dtype`, keeping the impl (and so every
/// handle). Only for leaves outside any graph.
void move_in_place(Tensor& t, Device device, DType dtype);
}  // namespace detail

}  // namespace sg::nn
