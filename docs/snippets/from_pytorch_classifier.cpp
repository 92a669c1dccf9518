// docs/from_pytorch.md: an MLP classifier with Dropout, a cosine schedule, label smoothing and a
// checkpoint round trip, beside the PyTorch program of the same steps.
// Built and run by CTest; the guide shows the body of main() before its checks.
#include <structgrad/structgrad.h>

#include <cstdio>
#include <memory>

int main() {
  namespace nn = sg::nn;
  sg::manual_seed(0);
  auto x = sg::rand({2048, 2}) * 2.0 - 1.0;
  auto c = sg::gt(sg::narrow(x, 1, 0, 1) * sg::narrow(x, 1, 1, 1), 0.0).reshape({2048}).to(sg::kInt64);  // XOR
  auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(2, 64), std::make_shared<nn::Tanh>(),
                                              std::make_shared<nn::Linear>(64, 64), std::make_shared<nn::Tanh>(),
                                              std::make_shared<nn::Dropout>(0.1), std::make_shared<nn::Linear>(64, 2));
  sg::optim::Adam opt(net->parameters(), {.lr = 0.01});
  sg::optim::lr_scheduler::CosineAnnealingLR schedule(opt, 50);
  sg::data::DataLoader loader({x, c}, sg::data::DataLoaderOptions().batch_size(128).shuffle());
  for (int epoch = 0; epoch < 50; ++epoch) {
    net->train();
    for (const auto& batch : loader) {
      auto loss = sg::cross_entropy(net->forward(batch[0]), batch[1], 0.05);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    schedule.step();
  }
  nn::save(*net, "classifier.npz");
  nn::load(*net, "classifier.npz");
  net->eval();
  double accuracy = sg::mean(sg::eq(sg::argmax(net->forward(x), 1), c)).item();

  std::remove("classifier.npz");
  SG_CHECK(accuracy > 0.95, "the classifier separates the quadrants: ", accuracy);
  return 0;
}
