// Command-line flags shared by the examples: --device cpu|cuda, --dtype, --steps, --seed, --n,
// --quiet, --graph, plus example-specific ones read with get(); a training loop that runs its steps
// eagerly or as replays of one CUDA graph; and the median wall time of a call, for the examples
// that time the structured path against the dense one.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <structgrad/structgrad.h>

namespace examples {

/// The exit status CTest counts as a skipped test (SKIP_RETURN_CODE 77).
constexpr int kSkipped = 77;

struct Args {
  std::map<std::string, std::string> values;
  bool quiet = false;
  bool graph = false;  ///< --graph: train by replaying one captured CUDA graph (run_steps)

  Args(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--quiet") {
        quiet = true;
        continue;
      }
      if (a == "--graph") {
        graph = true;
        continue;
      }
      if (a.rfind("--", 0) != 0 || i + 1 >= argc) {
        std::cerr << "bad argument '" << a << "' (flags are --name value, --quiet or --graph)\n";
        std::exit(2);
      }
      values[a.substr(2)] = argv[++i];
    }
  }
  std::string get(const std::string& k, const std::string& fallback) const {
    auto it = values.find(k);
    return it == values.end() ? fallback : it->second;
  }
  long long get_int(const std::string& k, long long fallback) const { return std::stoll(get(k, std::to_string(fallback))); }
  double get_double(const std::string& k, double fallback) const { return std::stod(get(k, std::to_string(fallback))); }
  sg::Device device() const { return sg::Device(get("device", "cpu")); }
  /// --dtype float32 (the default) or float64.
  sg::DType dtype() const { return get("dtype", "float32") == "float64" ? sg::kFloat64 : sg::kFloat32; }
  /// True, after printing "<program>: no CUDA device here", when --device asks for CUDA and none is
  /// present: `if (args.cuda_missing("gp_regression")) return examples::kSkipped;`.
  bool cuda_missing(const char* program) const {
    if (!device().is_cuda() || sg::cuda::is_available()) return false;
    std::printf("%s: no CUDA device here\n", program);
    return true;
  }
};

/// Runs training steps 1..`steps`: `step()` (zero_grad, loss, backward, optimizer step), then `after(s)`
/// (printing, checks that read back), which returns false to stop. With --graph, the steps after three
/// warm-up ones replay one CUDA graph captured from `step`. Example: see gaussian_precision.cpp.
inline void run_steps(const Args& args, int64_t steps, const std::function<void()>& step,
                      const std::function<bool(int64_t)>& after) {
  if (!args.graph) {
    for (int64_t s = 1; s <= steps; ++s) {
      step();
      if (!after(s)) return;
    }
    return;
  }
  const sg::Device device = args.device();
  if (!device.is_cuda()) {
    std::cerr << "--graph needs --device cuda\n";
    std::exit(2);
  }
  const int64_t warmup = std::min<int64_t>(3, steps);
  int64_t done = 0;
  bool go_on = true;
  auto warm_step = [&] {  // the warm-up steps run eagerly on the graph's stream; the captured one does not
    step();
    if (++done <= warmup && go_on) go_on = after(done);
  };
  sg::cuda::Graph graph(device.index);
  graph.capture(warm_step, static_cast<int>(warmup));
  for (int64_t s = warmup + 1; s <= steps && go_on; ++s) {
    graph.replay();
    go_on = after(s);
  }
  graph.check_errors();  // the captured ops' own checks, on the last replay
}

/// The median milliseconds of `reps` calls of f on `device` (waited for on CUDA), after one warm-up.
inline double median_ms(const std::function<void()>& f, sg::Device device, int reps) {
  f();
  if (device.is_cuda()) sg::cuda::synchronize(device.index);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    if (device.is_cuda()) sg::cuda::synchronize(device.index);
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Trains `net` by Adam (--lr, default `lr`) on shuffled mini-batches (--batch, 128; the last partial
/// one dropped) of (x, y) for --epochs (60), minimising nll(x, y); prints the held-out NLL on
/// (test_x, test_y) every 10 epochs unless --quiet, and returns it at the end.
inline double train_nll(sg::nn::Module& net, const std::function<sg::Tensor(const sg::Tensor&, const sg::Tensor&)>& nll,
                        const sg::Tensor& x, const sg::Tensor& y, const sg::Tensor& test_x, const sg::Tensor& test_y,
                        const Args& args, const char* name, double lr = 3e-3) {
  sg::optim::Adam opt(net.parameters(), {.lr = args.get_double("lr", lr)});
  sg::data::DataLoader loader({x, y},
                              sg::data::DataLoaderOptions().batch_size(args.get_int("batch", 128)).shuffle().drop_last());
  const int64_t epochs = args.get_int("epochs", 60);
  for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
    for (const auto& batch : loader) {
      opt.zero_grad();
      const sg::Tensor loss = nll(batch[0], batch[1]);
      loss.backward();
      opt.step();
    }
    if (!args.quiet && (epoch == 1 || epoch % 10 == 0 || epoch == epochs)) {
      sg::NoGradGuard no_grad;
      std::printf("%-8s epoch %3lld  held-out NLL %.4f\n", name, (long long)epoch, nll(test_x, test_y).item());
    }
  }
  sg::NoGradGuard no_grad;
  return nll(test_x, test_y).item();
}

/// train_nll for a model with a `net` module and an `nll(x, y)` method, on data sets with `x` and
/// `y`. Example: `double held_out = examples::train_model_nll(model, train_set, test_set, args, "full");`
template <class Model, class Data>
double train_model_nll(const Model& model, const Data& train_set, const Data& test_set, const Args& args,
                       const char* name) {
  return train_nll(
      *model.net, [&](const sg::Tensor& x, const sg::Tensor& y) { return model.nll(x, y); }, train_set.x, train_set.y,
      test_set.x, test_set.y, args, name);
}

}  // namespace examples
