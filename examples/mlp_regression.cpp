// Fits a small MLP (sg::nn::Sequential) to a smooth function of 4 inputs from noisy samples, in
// shuffled mini-batches (sg::data::DataLoader), and reports R² on held-out data, which must reach
// --min-r2 (0.9). The split, the batches and the loss stay on the device: on CUDA it counts the
// copies between host and device during training, which must be the one loss readout per epoch.
// Exits 77 when asked for CUDA where there is none.
#include <cmath>
#include <cstdio>
#include <memory>

#include "common.h"

namespace {

/// The function to learn, evaluated on the rows of x [n, 4].
sg::Tensor target_function(const sg::Tensor& x) {
  const sg::Tensor x0 = sg::narrow(x, 1, 0, 1), x1 = sg::narrow(x, 1, 1, 1);
  const sg::Tensor x2 = sg::narrow(x, 1, 2, 1), x3 = sg::narrow(x, 1, 3, 1);
  return sg::tanh(2.0 * x0) * sg::sigmoid(x1) + 0.5 * x2 * x2 - 0.3 * x3;
}

/// 1 − Σ(y − ŷ)² / Σ(y − ȳ)².
double r_squared(const sg::Tensor& prediction, const sg::Tensor& y) {
  const double residual = sg::sum(sg::square(prediction - y)).item();
  const double total = sg::sum(sg::square(y - sg::mean(y))).item();
  return 1.0 - residual / total;
}

}  // namespace

int main(int argc, char** argv) {
  examples::Args args(argc, argv);
  const sg::Device device = args.device();
  if (args.cuda_missing("mlp_regression")) return examples::kSkipped;
  const int64_t samples = args.get_int("samples", 4096), epochs = args.get_int("epochs", 30);
  const int64_t batch_size = args.get_int("batch", 64), hidden = args.get_int("hidden", 64);
  const double min_r2 = args.get_double("min-r2", 0.9);
  sg::manual_seed(static_cast<uint64_t>(args.get_int("seed", 0)));
  const auto opts = sg::TensorOptions().device(device);

  // Data, and an 80/20 split by a random permutation, all on the device.
  const sg::Tensor x = 2.0 * sg::rand({samples, 4}, opts) - 1.0;
  const sg::Tensor y = target_function(x) + 0.05 * sg::randn({samples, 1}, opts);
  const sg::Tensor order = sg::randperm(samples, opts);
  const int64_t train_count = samples * 4 / 5;
  const sg::Tensor train_rows = sg::narrow(order, 0, 0, train_count);
  const sg::Tensor test_rows = sg::narrow(order, 0, train_count, samples - train_count);
  const sg::Tensor x_train = sg::index_select(x, 0, train_rows), y_train = sg::index_select(y, 0, train_rows);
  const sg::Tensor x_test = sg::index_select(x, 0, test_rows), y_test = sg::index_select(y, 0, test_rows);

  sg::nn::Sequential net({std::make_shared<sg::nn::Linear>(4, hidden, true, opts), std::make_shared<sg::nn::Tanh>(),
                          std::make_shared<sg::nn::Linear>(hidden, hidden, true, opts), std::make_shared<sg::nn::Tanh>(),
                          std::make_shared<sg::nn::Linear>(hidden, 1, true, opts)});
  sg::optim::Adam opt(net.parameters(), {.lr = args.get_double("lr", 3e-3)});
  sg::data::DataLoader loader({x_train, y_train},
                              sg::data::DataLoaderOptions().batch_size(batch_size).shuffle().drop_last());
  std::printf("mlp_regression: samples=%lld epochs=%lld batches/epoch=%lld device=%s\n", (long long)samples,
              (long long)epochs, (long long)loader.size(), device.str().c_str());

  const bool on_cuda = device.is_cuda();
  const sg::cuda::TransferStats before = on_cuda ? sg::cuda::transfer_stats(device.index) : sg::cuda::TransferStats{};
  for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
    sg::Tensor epoch_loss = sg::zeros({}, opts);
    for (const auto& batch : loader) {
      opt.zero_grad();
      const sg::Tensor loss = sg::mse_loss(net.forward(batch[0]), batch[1]);
      loss.backward();
      opt.step();
      epoch_loss = epoch_loss + loss.detach();
    }
    const double mean_loss = epoch_loss.item() / static_cast<double>(loader.size());  // the one readout
    if (!args.quiet && (epoch == 1 || epoch % 5 == 0 || epoch == epochs))
      std::printf("epoch %3lld  train mse %.5f\n", (long long)epoch, mean_loss);
  }
  int status = 0;
  if (on_cuda) {
    const sg::cuda::TransferStats after = sg::cuda::transfer_stats(device.index);
    const uint64_t uploads = after.host_to_device - before.host_to_device;
    const uint64_t downloads = after.device_to_host - before.device_to_host;
    std::printf("host transfers while training: %llu uploads, %llu downloads (%lld loss readouts)\n",
                (unsigned long long)uploads, (unsigned long long)downloads, (long long)epochs);
    if (uploads != 0 || downloads != static_cast<uint64_t>(epochs)) status = 1;
  }
  const double r2 = r_squared(net.forward(x_test), y_test);
  std::printf("test R^2: %.4f (threshold %.2f)\n", r2, min_r2);
  return r2 >= min_r2 ? status : 1;
}
