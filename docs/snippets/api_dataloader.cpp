// docs/api.md, "Mini-batches with DataLoader": a Sequential model trained with Adam on shuffled
// mini-batches that stay on the data's device. Built and run by CTest (on a machine without a GPU
// it takes the CPU path); the guide shows the body of main() before its checks.
#include <structgrad/structgrad.h>

#include <memory>

int main() {
  const sg::Device device = sg::cuda::is_available() ? sg::kCUDA : sg::kCPU;
  sg::manual_seed(0);
  auto x = sg::randn({1000, 3}, device);                      // features, one example per row
  auto y = sg::sum(sg::square(x), 1, /*keepdim=*/true);       // targets [1000, 1]
  sg::data::DataLoader loader({x, y}, sg::data::DataLoaderOptions().batch_size(100).shuffle());

  sg::nn::Sequential net({std::make_shared<sg::nn::Linear>(3, 32), std::make_shared<sg::nn::Tanh>(),
                          std::make_shared<sg::nn::Linear>(32, 1)});
  net.to(device);
  sg::optim::Adam opt(net.parameters(), {.lr = 0.01});
  for (int epoch = 0; epoch < 30; ++epoch) {
    for (const auto& batch : loader) {                        // a new order each epoch
      opt.zero_grad();
      auto loss = sg::mse_loss(net.forward(batch[0]), batch[1]);
      loss.backward();
      opt.step();
    }
  }

  const sg::data::DataLoader tail_dropped({x}, sg::data::DataLoaderOptions().batch_size(64).drop_last());
  SG_CHECK(loader.size() == 10 && tail_dropped.size() == 15 && loader.num_examples() == 1000, "batches per epoch");
  const double loss = sg::mse_loss(net.forward(x), y).item();
  const double baseline = sg::mean(sg::square(y - sg::mean(y))).item();
  SG_CHECK(loss < 0.5 * baseline, "the loss falls: ", loss, " against the variance ", baseline);
}
