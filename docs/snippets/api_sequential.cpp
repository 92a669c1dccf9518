// docs/api.md, "Sequential and activations": layers chained in a Sequential, its parameter
// names, a few training steps, and typed access to a layer. Built and run by CTest; the guide
// shows it verbatim.
#include <structgrad/structgrad.h>

#include <iostream>
#include <memory>

int main() {
  sg::nn::Sequential net({std::make_shared<sg::nn::Linear>(4, 16), std::make_shared<sg::nn::Tanh>(),
                          std::make_shared<sg::nn::UpperLinear>(16), std::make_shared<sg::nn::LeakyReLU>(0.2)});
  net.push_back(std::make_shared<sg::nn::Functional>([](const sg::Tensor& h) { return 0.5 * h; }));
  net.push_back("head", std::make_shared<sg::nn::Linear>(16, 1));
  for (const auto& [name, p] : net.named_parameters())       // 0.weight, 0.bias, 2.weight, ..., head.bias
    std::cout << name << " " << sg::shape_str(p.shape()) << "\n";

  auto x = sg::randn({128, 4}), target = sg::reshape(sg::sum(sg::square(x), 1), {128, 1});
  sg::optim::Adam opt(net.parameters(), {.lr = 0.01});
  const double first = sg::mse_loss(net.forward(x), target).item();
  double last = first;
  for (int step = 0; step < 50; ++step) {
    opt.zero_grad();
    auto loss = sg::mse_loss(net.forward(x), target);         // each layer applied in turn
    loss.backward();
    opt.step();
    last = loss.item();
  }
  SG_CHECK(last < 0.5 * first, "the loss halves: ", first, " -> ", last);
  auto& upper = net.at<sg::nn::UpperLinear>(2);              // the layer as its own type
  SG_CHECK(upper.weight.structure() == sg::Structure::UpperTriangular, "U stays upper");
  SG_CHECK(net.size() == 6 && net.parameters().size() == 6, "six layers, three with (weight, bias)");
}
