// An MLP classifier on two interleaved spirals: cross_entropy with label smoothing, Dropout (on in
// training, off in evaluation), a cosine learning-rate schedule, and a checkpoint round trip (the
// reloaded network must give bit-identical logits). Prints the held-out accuracy, which must
// reach --min-accuracy. Runs on the CPU by default, --device cuda on a GPU; exits 77 when asked
// for CUDA where there is none.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common.h"

namespace {

/// Two spirals, one per class, with Gaussian noise: x [count, 2], int64 labels [count].
struct Data {
  sg::Tensor x, labels;
};

Data make_spirals(int64_t count, sg::TensorOptions opts) {
  const std::vector<double> t = sg::rand({count}, sg::kFloat64).to_vector();
  const std::vector<double> noise = sg::randn({count, 2}, sg::kFloat64).to_vector();
  std::vector<double> x(static_cast<size_t>(2 * count));
  std::vector<int64_t> labels(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t c = i % 2;
    const double r = 0.1 + t[static_cast<size_t>(i)], angle = 3.5 * M_PI * t[static_cast<size_t>(i)] + M_PI * c;
    x[static_cast<size_t>(2 * i)] = r * std::cos(angle) + 0.02 * noise[static_cast<size_t>(2 * i)];
    x[static_cast<size_t>(2 * i + 1)] = r * std::sin(angle) + 0.02 * noise[static_cast<size_t>(2 * i + 1)];
    labels[static_cast<size_t>(i)] = c;
  }
  return {sg::from_vector(x, {count, 2}, opts),
          sg::from_vector(labels, {count}, sg::TensorOptions().device(opts.device_))};
}

std::shared_ptr<sg::nn::Sequential> make_net(int64_t hidden, double dropout, sg::TensorOptions opts) {
  return std::make_shared<sg::nn::Sequential>(
      std::make_shared<sg::nn::Linear>(2, hidden, true, opts), std::make_shared<sg::nn::Tanh>(),
      std::make_shared<sg::nn::Linear>(hidden, hidden, true, opts), std::make_shared<sg::nn::Tanh>(),
      std::make_shared<sg::nn::Dropout>(dropout), std::make_shared<sg::nn::Linear>(hidden, 2, true, opts));
}

double accuracy(const sg::Tensor& logits, const sg::Tensor& labels) {
  return sg::mean(sg::eq(sg::argmax(logits, 1), labels)).item();
}

}  // namespace

int main(int argc, char** argv) {
  examples::Args args(argc, argv);
  const sg::Device device = args.device();
  if (args.cuda_missing("classifier")) return examples::kSkipped;
  sg::manual_seed(static_cast<uint64_t>(args.get_int("seed", 0)));
  const auto opts = sg::TensorOptions().dtype(args.dtype()).device(device);
  const int64_t samples = args.get_int("samples", 2048), epochs = args.get_int("epochs", 200);
  const double min_accuracy = args.get_double("min-accuracy", 0.95);
  const Data train_set = make_spirals(samples, opts), test_set = make_spirals(samples / 2, opts);
  std::printf("classifier: two spirals, %lld samples, device=%s\n", (long long)samples, device.str().c_str());

  auto net = make_net(args.get_int("hidden", 64), args.get_double("dropout", 0.1), opts);
  sg::optim::Adam opt(net->parameters(), {.lr = args.get_double("lr", 0.01)});
  sg::optim::lr_scheduler::CosineAnnealingLR schedule(opt, epochs, 1e-4);
  sg::data::DataLoader loader({train_set.x, train_set.labels},
                              sg::data::DataLoaderOptions().batch_size(args.get_int("batch", 128)).shuffle());
  for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
    net->train();
    for (const auto& batch : loader) {
      opt.zero_grad();
      const sg::Tensor loss = sg::cross_entropy(net->forward(batch[0]), batch[1], 0.05);
      loss.backward();
      opt.step();
    }
    schedule.step();
    if (!args.quiet && (epoch == 1 || epoch % 50 == 0 || epoch == epochs)) {
      sg::NoGradGuard no_grad;
      net->eval();
      std::printf("epoch %4lld  lr %.5f  held-out accuracy %.4f\n", (long long)epoch, opt.lr(),
                  accuracy(net->forward(test_set.x), test_set.labels));
    }
  }

  sg::NoGradGuard no_grad;
  net->eval();
  const sg::Tensor logits = net->forward(test_set.x);
  const double acc = accuracy(logits, test_set.labels);
  // The checkpoint round trip: a fresh network loads the file and gives the same logits, bit for bit.
  const std::string path = args.get("checkpoint", "classifier_checkpoint.npz");
  sg::nn::save(*net, path);
  auto reloaded = make_net(args.get_int("hidden", 64), args.get_double("dropout", 0.1), opts);
  sg::nn::load(*reloaded, path);
  reloaded->eval();
  const bool same = sg::equal(reloaded->forward(test_set.x), logits);
  std::remove(path.c_str());
  std::printf("held-out accuracy %.4f (threshold %.2f); reloaded checkpoint %s\n", acc, min_accuracy,
              same ? "gives identical logits" : "DIFFERS");
  return acc >= min_accuracy && same ? 0 : 1;
}
