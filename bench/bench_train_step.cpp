// Per-step time of a small structured training loop, written step for step as its libtorch
// counterpart (a libtorch program of the same loop and model), so the two can be run side by side:
// a Gaussian fit with precision UᵀU, U upper (a structgrad UpperTriangular parameter),
//   loss = ½·mean‖U(x − μ)‖² − Σ log|Uᵢᵢ|,  batch 1024, Adam (lr 1e-2),
// 20 warm-up steps, then the mean wall time of 500 steps ending with loss.item().
// Usage: bench_train_step [--devices cpu,cuda] [--n 16,256] [--steps 500]
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <structgrad/structgrad.h>

#include "bench/bench_util.h"

namespace {

double step_microseconds(sg::Device device, int64_t n, int steps, double* final_loss) {
  sg::manual_seed(0);
  const auto opts = sg::TensorOptions().device(device);
  sg::UpperTriangular u = sg::UpperTriangular::eye(n, opts);
  u.requires_grad_();
  sg::Tensor mu = sg::zeros({n}, opts.requires_grad());
  const sg::Tensor x = sg::randn({1024, n}, opts);
  sg::optim::Adam opt({u, mu}, {.lr = 1e-2});
  sg::Tensor loss;
  auto step = [&] {
    opt.zero_grad();
    sg::Tensor z = sg::linear(x - mu, u);  // rows U(x − μ): the structured kernel on Uᵀ
    loss = 0.5 * sg::mean(sg::sum(sg::square(z), 1)) - sg::sum(sg::log(sg::abs(sg::diagonal(u))));
    loss.backward();
    opt.step();
  };
  for (int i = 0; i < 20; ++i) step();
  if (device.is_cuda()) sg::cuda::synchronize(device.index);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  *final_loss = loss.item();  // waits for the device
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(stop - start).count() / steps;
}

}  // namespace

int main(int argc, char** argv) {
  std::string devices = sg::cuda::is_available() ? "cpu,cuda" : "cpu";
  std::string sizes = "16,256";
  int steps = 500;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--devices") devices = argv[i + 1];
    else if (flag == "--n") sizes = argv[i + 1];
    else if (flag == "--steps") steps = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bench_train_step [--devices cpu,cuda] [--n 16,256] [--steps 500]\n");
      return 2;
    }
  }
  try {
    for (const std::string& name : bench::split(devices)) {
      const sg::Device device(name);
      for (const std::string& n : bench::split(sizes)) {
        double loss = 0;
        const double us = step_microseconds(device, std::stoll(n), steps, &loss);
        std::printf("structgrad %s n=%s batch=1024: %.1f us/step (loss %.4f)\n", name.c_str(), n.c_str(), us, loss);
        if (device.is_cuda()) {
          const auto stats = sg::cuda::allocator_stats(device.index);
          std::printf("  allocator: %llu cudaMalloc calls, %llu requests served\n",
                      static_cast<unsigned long long>(stats.num_device_mallocs),
                      static_cast<unsigned long long>(stats.num_allocations));
        }
      }
    }
  } catch (const sg::Error& e) {
    std::fprintf(stderr, "bench_train_step: %s\n", e.what());
    return 1;
  }
  return 0;
}
