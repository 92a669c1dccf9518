// sg::nn::Sequential, a Layer that applies its layers in order (like torch::nn::Sequential),
// and the activations it holds between them: layers without parameters that call the
// elementwise ops (sg::relu, sg::tanh, ...) or any function (Functional).
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <structgrad/core/error.h>
#include <structgrad/core/tensor.h>
#include <structgrad/nn/module.h>

namespace sg::nn {

/// Layers applied in order, each to the previous one's output; the layers are submodules named
/// "0", "1", ... (or as given), so parameters, state_dict and to(device) reach through it.
/// Example: `sg::nn::Sequential net({std::make_shared<sg::nn::Linear>(4, 16), std::make_shared<sg::nn::Tanh>()});`
class Sequential : public Layer {
 public:
  /// An empty Sequential; add layers with push_back. Example: `sg::nn::Sequential net;`
  Sequential() = default;
  /// The layers in order, named "0", "1", ... Example: `sg::nn::Sequential net({fc1, relu, fc2});`
  Sequential(std::vector<std::shared_ptr<Layer>> layers);
  /// The same from a braced list (preferred over the variadic form below for `net({a, b})`).
  Sequential(std::initializer_list<std::shared_ptr<Layer>> layers)
      : Sequential(std::vector<std::shared_ptr<Layer>>(layers)) {}
  /// The layers in order under the given names. Example: `sg::nn::Sequential net({{"fc", fc}, {"act", relu}});`
  Sequential(std::vector<std::pair<std::string, std::shared_ptr<Layer>>> named_layers);
  /// The layers passed one by one, as libtorch's Sequential takes them, so that make_shared works.
  /// Example: `auto net = std::make_shared<sg::nn::Sequential>(fc1, std::make_shared<sg::nn::ReLU>(), fc2);`
  template <typename First, typename... Rest,
            typename = std::enable_if_t<std::is_convertible_v<First, std::shared_ptr<Layer>>>>
  explicit Sequential(First first, Rest... rest)
      : Sequential(std::vector<std::shared_ptr<Layer>>{std::move(first), std::move(rest)...}) {}

  /// Appends `layer` under the name of its index ("0", "1", ...) and returns it.
  /// Example: `net.push_back(std::make_shared<sg::nn::ReLU>());`
  template <typename L>
  std::shared_ptr<L> push_back(std::shared_ptr<L> layer) {
    return push_back(std::to_string(layers_.size()), std::move(layer));
  }
  /// Appends `layer` under `name` (unique within this Sequential) and returns it.
  /// Example: `auto head = net.push_back("head", std::make_shared<sg::nn::Linear>(16, 1));`
  template <typename L>
  std::shared_ptr<L> push_back(const std::string& name, std::shared_ptr<L> layer) {
    append(name, layer);
    return layer;
  }

  /// Each layer applied in turn to x. An empty Sequential throws sg::Error, as libtorch's does.
  /// Example: `auto y = net.forward(x);`
  Tensor forward(const Tensor& x) const override;

  /// The number of layers. Example: `for (size_t i = 0; i < net.size(); ++i) ...`
  size_t size() const { return layers_.size(); }
  /// True when there are no layers. Example: `if (!net.is_empty()) y = net.forward(x);`
  bool is_empty() const { return layers_.empty(); }
  /// The i-th layer (sg::Error when i is out of range). Example: `auto first = net[0];`
  const std::shared_ptr<Layer>& operator[](size_t i) const;
  /// The i-th layer as its type; sg::Error when i is out of range or the layer is another type.
  /// Example: `auto& fc = net.at<sg::nn::Linear>(0); fc.weight.grad();`
  template <typename L>
  L& at(size_t i) const {
    L* layer = dynamic_cast<L*>((*this)[i].get());
    SG_CHECK(layer != nullptr, "Sequential: layer ", i, " ('", layers_[i].first, "') is not of the requested type");
    return *layer;
  }
  /// The layers with their names, in order. Example: `for (const auto& [name, layer] : net.named_layers()) ...`
  const std::vector<std::pair<std::string, std::shared_ptr<Layer>>>& named_layers() const { return layers_; }

 private:
  void append(const std::string& name, std::shared_ptr<Layer> layer);
  std::vector<std::pair<std::string, std::shared_ptr<Layer>>> layers_;
};

/// max(x, 0), elementwise. Example: `net.push_back(std::make_shared<sg::nn::ReLU>());`
class ReLU : public Layer {
 public:
  /// sg::relu(x). Example: `auto h = sg::nn::ReLU().forward(x);`
  Tensor forward(const Tensor& x) const override;
};

/// x > 0 ? x : negative_slope·x, elementwise. Example: `std::make_shared<sg::nn::LeakyReLU>(0.2)`
class LeakyReLU : public Layer {
 public:
  /// The slope for negative inputs (0.01 as in PyTorch). Example: `sg::nn::LeakyReLU act(0.2);`
  explicit LeakyReLU(double negative_slope = 0.01) : negative_slope(negative_slope) {}
  /// sg::leaky_relu(x, negative_slope). Example: `auto h = act.forward(x);`
  Tensor forward(const Tensor& x) const override;
  double negative_slope;  ///< the slope for x ≤ 0
};

/// tanh x, elementwise. Example: `net.push_back(std::make_shared<sg::nn::Tanh>());`
class Tanh : public Layer {
 public:
  /// sg::tanh(x). Example: `auto h = sg::nn::Tanh().forward(x);`
  Tensor forward(const Tensor& x) const override;
};

/// 1 / (1 + e⁻ˣ), elementwise. Example: `net.push_back(std::make_shared<sg::nn::Sigmoid>());`
class Sigmoid : public Layer {
 public:
  /// sg::sigmoid(x). Example: `auto p = sg::nn::Sigmoid().forward(logits);`
  Tensor forward(const Tensor& x) const override;
};

/// ln(1 + eˣ), elementwise. Example: `net.push_back(std::make_shared<sg::nn::Softplus>());`
class Softplus : public Layer {
 public:
  /// sg::softplus(x). Example: `auto h = sg::nn::Softplus().forward(x);`
  Tensor forward(const Tensor& x) const override;
};

/// In training, each element zeroed with probability p and the rest scaled by 1/(1 − p); in eval
/// mode (Module::eval) the identity. Example: `net.push_back(std::make_shared<sg::nn::Dropout>(0.2));`
class Dropout : public Layer {
 public:
  /// p in [0, 1] (sg::Error otherwise). Example: `sg::nn::Dropout drop(0.5);`
  explicit Dropout(double p = 0.5);
  /// x·mask/(1 − p) in training, x in eval mode. Example: `auto h = drop.forward(x);`
  Tensor forward(const Tensor& x) const override;
  /// The drop probability. Example: `drop.p()`
  double p() const { return p_; }

 private:
  double p_;
};

/// Any function of one tensor as a layer without parameters, like torch::nn::Functional.
/// Example: `std::make_shared<sg::nn::Functional>([](const sg::Tensor& x) { return sg::leaky_relu(x, 0.5); })`
class Functional : public Layer {
 public:
  /// Wraps `function` (sg::Error when it is empty). Example: `sg::nn::Functional square(sg::square);`
  explicit Functional(std::function<Tensor(const Tensor&)> function);
  /// function(x). Example: `auto y = square.forward(x);`
  Tensor forward(const Tensor& x) const override;

 private:
  std::function<Tensor(const Tensor&)> function_;
};

}  // namespace sg::nn
