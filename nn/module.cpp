// Module registry, in-place moves, and the three layers.
#include <structgrad/nn/module.h>

#include <cmath>

#include <structgrad/autograd/grad_mode.h>
#include <structgrad/ops/elementwise.h>
#include <structgrad/ops/factories.h>
#include <structgrad/ops/matmul.h>
#include <structgrad/ops/reduce.h>

namespace sg::nn {

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  SG_CHECK(t.defined(), "register_parameter: parameter '", name, "' is undefined");
  for (const auto& [n, p] : params_) SG_CHECK(n != name, "register_parameter: '", name, "' is already registered");
  if (!t.is_leaf()) t = t.detach();
  if (!t.requires_grad()) t.requires_grad_(true);
  params_.emplace_back(name, t);
  return t;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out = params_;
  for (const auto& [name, child] : children_)
    for (auto& [n, p] : child->named_parameters()) out.emplace_back(name + "." + n, p);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, p] : named_parameters()) out.push_back(p);
  return out;
}

void detail::move_in_place(Tensor& t, Device device, DType dtype) {
  if (t.device() == device && t.dtype() == dtype) return;
  NoGradGuard guard;
  Tensor moved = t.detach().to(device).to(dtype);
  TensorImpl& impl = t.impl();
  impl.storage = moved.impl().storage;
  impl.dtype = dtype;
  impl.grad.reset();
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::to(Device device) {
  for (auto& [n, p] : named_parameters()) detail::move_in_place(p, device, p.dtype());
}
void Module::to(DType dtype) {
  for (auto& [n, p] : named_parameters()) detail::move_in_place(p, p.device(), dtype);
}
void Module::zero_grad() {
  for (auto& p : parameters()) p.zero_grad();
}

Linear::Linear(int64_t in, int64_t out, bool with_bias, TensorOptions o) {
  SG_CHECK(in > 0 && out > 0, "Linear: sizes must be positive, got ", in, " and ", out);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  NoGradGuard guard;
  weight = register_parameter("weight", (rand({out, in}, o.requires_grad(false)) * 2.0 - 1.0) * bound);
  if (with_bias) bias = register_parameter("bias", (rand({out}, o.requires_grad(false)) * 2.0 - 1.0) * bound);
}

Tensor Linear::forward(const Tensor& x) const { return linear(x, weight, bias); }

UpperLinear::UpperLinear(int64_t n, bool with_bias, TensorOptions o) {
  SG_CHECK(n > 0, "UpperLinear: size must be positive, got ", n);
  weight = UpperTriangular(register_parameter("weight", UpperTriangular::eye(n, o.requires_grad(false))));
  if (with_bias) bias = register_parameter("bias", zeros({n}, o.requires_grad(false)));
}

Tensor UpperLinear::forward(const Tensor& x) const { return linear(x, weight, bias); }

SymmetricBilinear::SymmetricBilinear(int64_t n, TensorOptions o) {
  SG_CHECK(n > 0, "SymmetricBilinear: size must be positive, got ", n);
  weight = Symmetric(register_parameter("weight", Symmetric::zeros(n, o.requires_grad(false))));
}

Tensor SymmetricBilinear::forward(const Tensor& x) const {
  SG_CHECK(x.defined(), "SymmetricBilinear: the input is undefined");
  SG_CHECK(x.device() == weight.device(), "SymmetricBilinear: input on ", x.device(), " but weight on ",
           weight.device());
  SG_CHECK(x.dtype() == weight.dtype(), "SymmetricBilinear: input of dtype ", x.dtype(), " but weight of dtype ",
           weight.dtype());
  SG_CHECK(x.dim() == 2 && x.size(1) == weight.n(), "SymmetricBilinear: input of shape ", x.shape(),
           " does not fit a form of size ", weight.n());
  return sum(matmul(x, weight) * x, 1);  // (x·S) ⊙ x summed per row: Dense·Symmetric product
}

}  // namespace sg::nn
