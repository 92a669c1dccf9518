// docs/api.md, "Counting host transfers": a training loop whose data stays on the GPU, checked by
// the host↔device copy counters. Built and run by CTest; on a machine without a GPU there is
// nothing to count and it only prints so. The guide describes it and names this file.
#include <structgrad/structgrad.h>

#include <iostream>
#include <memory>

int main() {
  if (!sg::cuda::is_available()) {
    std::cout << "no GPU: nothing moves between host and device\n";
    return 0;
  }
  auto x = sg::randn({4096, 8}, sg::kCUDA), y = sg::randn({4096, 1}, sg::kCUDA);  // made on the device
  sg::data::DataLoader loader({x, y}, sg::data::DataLoaderOptions().batch_size(256).shuffle());
  sg::nn::Sequential net({std::make_shared<sg::nn::Linear>(8, 64), std::make_shared<sg::nn::ReLU>(),
                          std::make_shared<sg::nn::Linear>(64, 1)});
  net.to(sg::kCUDA);
  sg::optim::Adam opt(net.parameters(), {.lr = 1e-3});
  auto epoch = [&] {
    for (const auto& batch : loader) {
      opt.zero_grad();
      sg::mse_loss(net.forward(batch[0]), batch[1]).backward();
      opt.step();
    }
  };
  epoch();                                                    // a first epoch may upload one-time setup
  const sg::cuda::TransferStats before = sg::cuda::transfer_stats();
  for (int e = 0; e < 5; ++e) epoch();
  const sg::cuda::TransferStats after = sg::cuda::transfer_stats();
  std::cout << after.host_to_device - before.host_to_device << " uploads, "
            << after.device_to_host - before.device_to_host << " downloads in 5 epochs\n";
  SG_CHECK(after.host_to_device == before.host_to_device && after.device_to_host == before.device_to_host,
           "the loop moves no data through the host");
}
