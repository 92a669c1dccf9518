// Sequential's registry and forward chain, and the activation layers, each a call of its
// elementwise op (whose backward the op records).
#include <structgrad/nn/sequential.h>

#include <structgrad/ops/compare.h>
#include <structgrad/ops/elementwise.h>
#include <structgrad/ops/factories.h>

namespace sg::nn {

Sequential::Sequential(std::vector<std::shared_ptr<Layer>> layers) {
  for (auto& layer : layers) push_back(std::move(layer));
}

Sequential::Sequential(std::vector<std::pair<std::string, std::shared_ptr<Layer>>> named_layers) {
  for (auto& [name, layer] : named_layers) push_back(name, std::move(layer));
}

void Sequential::append(const std::string& name, std::shared_ptr<Layer> layer) {
  SG_CHECK(layer != nullptr, "Sequential: layer '", name, "' is null");
  SG_CHECK(!name.empty() && name.find('.') == std::string::npos, "Sequential: layer name '", name,
           "' must be non-empty and without '.'");
  for (const auto& [existing, l] : layers_)
    SG_CHECK(existing != name, "Sequential: a layer named '", name, "' is already registered");
  register_module(name, layer);
  layers_.emplace_back(name, std::move(layer));
}

Tensor Sequential::forward(const Tensor& x) const {
  SG_CHECK(!layers_.empty(), "Sequential: forward on an empty Sequential (push_back a layer first)");
  Tensor y = layers_.front().second->forward(x);
  for (size_t i = 1; i < layers_.size(); ++i) y = layers_[i].second->forward(y);
  return y;
}

const std::shared_ptr<Layer>& Sequential::operator[](size_t i) const {
  SG_CHECK(i < layers_.size(), "Sequential: index ", i, " is out of range for ", layers_.size(), " layers");
  return layers_[i].second;
}

Tensor ReLU::forward(const Tensor& x) const { return relu(x); }
Tensor LeakyReLU::forward(const Tensor& x) const { return leaky_relu(x, negative_slope); }
Tensor Tanh::forward(const Tensor& x) const { return tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) const { return sigmoid(x); }
Tensor Softplus::forward(const Tensor& x) const { return softplus(x); }

Functional::Functional(std::function<Tensor(const Tensor&)> function) : function_(std::move(function)) {
  SG_CHECK(static_cast<bool>(function_), "Functional: the function is empty");
}

Tensor Functional::forward(const Tensor& x) const { return function_(x); }

Dropout::Dropout(double p) : p_(p) {
  SG_CHECK(p >= 0.0 && p <= 1.0, "Dropout: p must lie in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& x) const {
  if (!is_training() || p_ == 0.0) return x;
  if (p_ == 1.0) return x * 0.0;
  const Tensor keep = lt(rand(x.shape(), TensorOptions().dtype(x.dtype()).device(x.device())), 1.0 - p_);
  return x * keep * (1.0 / (1.0 - p_));
}

}  // namespace sg::nn
