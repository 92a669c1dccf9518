// docs/api.md, "Modules": a model built from layers and its own parameter, trained for a few
// steps with the progress line. Built and run by CTest; the guide shows it verbatim.
#include <structgrad/structgrad.h>

#include <iostream>
#include <memory>

struct Flow : sg::nn::Module {
  explicit Flow(int64_t n) {
    first = register_module("first", std::make_shared<sg::nn::UpperLinear>(n));   // U = I, b = 0
    second = register_module("second", std::make_shared<sg::nn::UpperLinear>(n));
    scale = register_parameter("scale", sg::ones({n}));      // becomes a leaf requiring grad
  }
  sg::Tensor forward(const sg::Tensor& x) const {
    return second->forward(sg::leaky_relu(first->forward(x), 0.5)) * scale;
  }
  std::shared_ptr<sg::nn::UpperLinear> first, second;
  sg::Tensor scale;
};

int main() {
  Flow model(4);
  for (const auto& [name, p] : model.named_parameters())     // scale, first.weight, first.bias, ...
    std::cout << name << " " << p.structure() << "\n";
  sg::optim::Adam opt(model.parameters(), {.lr = 0.01});

  auto x = sg::randn({256, 4}), target = sg::randn({256, 4});
  sg::nn::Progress progress(/*total_steps=*/20, /*every=*/10);
  for (int64_t step = 1; step <= 20; ++step) {
    opt.zero_grad();
    auto loss = sg::mse_loss(model.forward(x), target);
    loss.backward();
    opt.step();
    progress.update_lazy(step, [&] { return loss.item(); }); // reads the loss only when it prints
  }
  SG_CHECK(model.first->weight.structure() == sg::Structure::UpperTriangular, "U stays upper");

  sg::nn::Linear dense_layer(4, 3);                           // y = x·Wᵀ + b, W [3, 4]
  sg::nn::SymmetricBilinear form(4);                          // q = xᵀSx per row, S symmetric
  auto h = dense_layer.forward(x);                            // [256, 3]
  auto q = form.forward(x);                                   // [256]
  model.zero_grad();
  model.to(sg::kFloat64);                                     // in place: existing handles follow
  SG_CHECK(h.size(1) == 3 && q.dim() == 1 && model.scale.dtype() == sg::kFloat64, "modules");
  SG_CHECK(model.parameters().size() == 5, "scale and two (weight, bias) pairs");
}
