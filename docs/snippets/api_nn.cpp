// docs/api.md, "Modules, Sequential and activations": a Sequential of layers and activations
// trained for a few steps with the progress line, and a module of one's own with a submodule and a
// parameter. Built and run by CTest; the guide shows it without its #include lines.
#include <structgrad/structgrad.h>

#include <iostream>
#include <memory>

struct Flow : sg::nn::Module {                                // a module of your own
  explicit Flow(int64_t n) {
    first = register_module("first", std::make_shared<sg::nn::UpperLinear>(n));  // U = I, b = 0
    scale = register_parameter("scale", sg::ones({n}));      // becomes a leaf requiring grad
  }
  sg::Tensor forward(const sg::Tensor& x) const { return sg::leaky_relu(first->forward(x), 0.5) * scale; }
  std::shared_ptr<sg::nn::UpperLinear> first;
  sg::Tensor scale;
};

int main() {
  sg::nn::Sequential net({std::make_shared<sg::nn::Linear>(4, 16), std::make_shared<sg::nn::Tanh>(),
                          std::make_shared<sg::nn::UpperLinear>(16), std::make_shared<sg::nn::LeakyReLU>(0.2)});
  net.push_back(std::make_shared<sg::nn::Functional>([](const sg::Tensor& h) { return 0.5 * h; }));
  net.push_back("head", std::make_shared<sg::nn::Linear>(16, 1));

  auto x = sg::randn({128, 4}), target = sg::reshape(sg::sum(sg::square(x), 1), {128, 1});
  sg::optim::Adam opt(net.parameters(), {.lr = 0.01});
  sg::nn::Progress progress(/*total_steps=*/50, /*every=*/25);
  for (int64_t step = 1; step <= 50; ++step) {
    opt.zero_grad();
    auto loss = sg::mse_loss(net.forward(x), target);         // each layer applied in turn
    loss.backward();
    opt.step();
    progress.update_lazy(step, [&] { return loss.item(); }); // reads the loss only when it prints
  }
  auto& upper = net.at<sg::nn::UpperLinear>(2);              // the layer as its own type

  Flow flow(4);
  auto h = flow.forward(x);                                   // [128, 4]
  flow.to(sg::kFloat64);                                      // in place: existing handles follow
  SG_CHECK(upper.weight.structure() == sg::Structure::UpperTriangular && net.size() == 6, "U stays upper");
  SG_CHECK(flow.parameters().size() == 3 && flow.scale.dtype() == sg::kFloat64 && h.size(1) == 4, "modules");
}
