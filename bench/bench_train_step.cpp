// Per-step time of small structured training loops, eager and (on CUDA, with --graph) as replays
// of one captured CUDA graph. gaussian_precision and gp_regression are written step for step as
// their libtorch counterparts in bench/libtorch/train_step.cpp, so the two can be run side by side:
//   gaussian_precision  precision UᵀU, U upper:  ½·mean‖U(x − μ)‖² − Σ log|Uᵢᵢ|, batch 1024, Adam 1e-2;
//   triangular_flow     six layers z = leaky_relu(U·x + b) on 4096 2-D points (the example's step);
//   gp_regression       the Gaussian-process NLL of n points: Cholesky, solve, logdet, forward and
//                       backward, float32, Adam on three log-scales.
// 20 warm-up steps, then the mean wall time of --steps steps ending with loss.item(). Adam is the
// fused one; --per-parameter adds eager rows with a launch per parameter (AdamOptions::fused = false).
// Usage: bench_train_step [--devices cpu,cuda] [--models gaussian_precision,triangular_flow,gp_regression]
//                         [--n 16,256] [--gp-n 1024] [--steps 500] [--graph] [--per-parameter]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <structgrad/structgrad.h>

#include "bench/bench_util.h"
#include "examples/triangular_flow_model.h"

namespace {

/// A model's training step and its last loss.
struct Workload {
  std::function<void()> step;
  std::function<double()> loss;
  std::shared_ptr<void> state;  // keeps the model alive
};

Workload gaussian_precision(sg::Device device, int64_t n, bool fused) {
  struct State {
    sg::UpperTriangular u;
    sg::Tensor mu, x, loss;
    std::unique_ptr<sg::optim::Adam> opt;
  };
  auto s = std::make_shared<State>();
  const auto opts = sg::TensorOptions().device(device);
  s->u = sg::UpperTriangular::eye(n, opts);
  s->u.requires_grad_();
  s->mu = sg::zeros({n}, opts.requires_grad());
  s->x = sg::randn({1024, n}, opts);
  s->opt = std::make_unique<sg::optim::Adam>(std::vector<sg::Tensor>{s->u, s->mu},
                                             sg::optim::AdamOptions{.lr = 1e-2, .fused = fused});
  State* m = s.get();
  return {[m] {
            m->opt->zero_grad();
            const sg::Tensor z = sg::linear(m->x - m->mu, m->u);  // rows U(x − μ): the structured kernel on Uᵀ
            m->loss = 0.5 * sg::mean(sg::sum(sg::square(z), 1)) - sg::sum(sg::log(sg::abs(sg::diagonal(m->u))));
            m->loss.backward();
            m->opt->step();
          },
          [m] { return m->loss.item(); }, s};
}

Workload triangular_flow(sg::Device device, bool fused) {
  struct State {
    std::vector<std::shared_ptr<sg::nn::UpperLinear>> flow;
    sg::nn::Module model;
    sg::Tensor x, loss;
    std::unique_ptr<sg::optim::Adam> opt;
  };
  auto s = std::make_shared<State>();
  const auto opts = sg::TensorOptions().device(device);
  for (int k = 0; k < 6; ++k)
    s->flow.push_back(s->model.register_module("layer" + std::to_string(k), std::make_shared<sg::nn::UpperLinear>(2, true, opts)));
  s->x = sg::randn({4096, 2}, opts);
  s->opt = std::make_unique<sg::optim::Adam>(s->model.parameters(), sg::optim::AdamOptions{.lr = 5e-3, .fused = fused});
  State* m = s.get();
  return {[m] {
            m->opt->zero_grad();
            m->loss = examples::flow_nll(m->flow, m->x, 0.7);
            m->loss.backward();
            m->opt->step();
          },
          [m] { return m->loss.item(); }, s};
}

Workload gp_regression(sg::Device device, int64_t n, bool fused) {
  struct State {
    sg::Tensor d2, eye, y, log_ell, log_sigma, log_noise, loss;
    std::unique_ptr<sg::optim::Adam> opt;
  };
  auto s = std::make_shared<State>();
  const auto opts = sg::TensorOptions().device(device);
  const sg::Tensor x = sg::rand({n, 1}, opts) * 6.0 - 3.0;
  s->d2 = sg::square(x - sg::transpose(x));
  s->eye = sg::eye(n, opts);
  s->y = sg::tanh(3.0 * x) + 0.1 * sg::randn({n, 1}, opts);
  s->log_ell = sg::full({}, 0.0, opts.requires_grad());
  s->log_sigma = sg::full({}, 0.0, opts.requires_grad());
  s->log_noise = sg::full({}, -1.0, opts.requires_grad());
  s->opt = std::make_unique<sg::optim::Adam>(std::vector<sg::Tensor>{s->log_ell, s->log_sigma, s->log_noise},
                                             sg::optim::AdamOptions{.lr = 1e-3, .fused = fused});
  State* m = s.get();
  return {[m] {
            m->opt->zero_grad();
            const sg::Symmetric k = sg::sym(sg::exp(2.0 * m->log_sigma) * sg::exp(m->d2 * (-0.5 * sg::exp(-2.0 * m->log_ell))) +
                                            sg::exp(2.0 * m->log_noise) * m->eye);
            const sg::LowerTriangular l = sg::cholesky_ex(k).L;
            const sg::Tensor z = sg::solve_triangular(l, m->y);
            m->loss = 0.5 * sg::sum(sg::square(z)) + sg::logdet(l);
            m->loss.backward();
            m->opt->step();
          },
          [m] { return m->loss.item(); }, s};
}

/// Mean microseconds per step of `steps` steps after 20 warm-up ones; graphed: the steps replay one
/// graph captured after the warm-up.
double step_microseconds(const Workload& w, sg::Device device, bool graphed, int steps, double* final_loss) {
  std::unique_ptr<sg::cuda::Graph> graph;
  if (graphed) {
    graph = std::make_unique<sg::cuda::Graph>(device.index);
    graph->capture(w.step, 20);
  } else {
    for (int i = 0; i < 20; ++i) w.step();
  }
  if (device.is_cuda()) sg::cuda::synchronize(device.index);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) {
    if (graphed) graph->replay();
    else w.step();
  }
  *final_loss = w.loss();  // waits for the device
  const auto stop = std::chrono::steady_clock::now();
  if (graph) graph->check_errors();
  return std::chrono::duration<double, std::micro>(stop - start).count() / steps;
}

}  // namespace

int main(int argc, char** argv) {
  std::string devices = sg::cuda::is_available() ? "cpu,cuda" : "cpu";
  std::string models = "gaussian_precision", sizes = "16,256";
  int64_t gp_n = 1024;
  int steps = 500;
  bool graph = false, per_parameter = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--graph") {
      graph = true;
      continue;
    }
    if (flag == "--per-parameter") {
      per_parameter = true;
      continue;
    }
    if (i + 1 >= argc) flag.clear();  // a flag without its value
    if (flag == "--devices") devices = argv[++i];
    else if (flag == "--models") models = argv[++i];
    else if (flag == "--n") sizes = argv[++i];
    else if (flag == "--gp-n") gp_n = std::stoll(argv[++i]);
    else if (flag == "--steps") steps = std::stoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_train_step [--devices cpu,cuda] [--models gaussian_precision,triangular_flow,"
                           "gp_regression] [--n 16,256] [--gp-n 1024] [--steps 500] [--graph] [--per-parameter]\n");
      return 2;
    }
  }
  try {
    for (const std::string& name : bench::split(devices)) {
      const sg::Device device(name);
      for (const std::string& model : bench::split(models)) {
        std::vector<std::pair<std::string, std::function<Workload(bool)>>> runs;
        if (model == "gaussian_precision") {
          for (const std::string& n : bench::split(sizes))
            runs.push_back({"n=" + n + " batch=1024",
                            [&, n](bool fused) { return gaussian_precision(device, std::stoll(n), fused); }});
        } else if (model == "triangular_flow") {
          runs.push_back({"layers=6 batch=4096", [&](bool fused) { return triangular_flow(device, fused); }});
        } else if (model == "gp_regression") {
          runs.push_back({"n=" + std::to_string(gp_n), [&](bool fused) { return gp_regression(device, gp_n, fused); }});
        } else {
          std::fprintf(stderr, "bench_train_step: unknown model '%s'\n", model.c_str());
          return 2;
        }
        enum class Mode { Eager, PerParameter, Graphed };
        for (const auto& [label, make] : runs) {
          for (Mode mode : {Mode::Eager, Mode::PerParameter, Mode::Graphed}) {
            if (mode == Mode::Graphed && !(graph && device.is_cuda())) continue;
            if (mode == Mode::PerParameter && !(per_parameter && device.is_cuda())) continue;
            sg::manual_seed(0);
            const Workload w = make(mode != Mode::PerParameter);
            double loss = 0;
            const double us = step_microseconds(w, device, mode == Mode::Graphed, steps, &loss);
            const char* mode_name = mode == Mode::Eager ? "eager" : mode == Mode::Graphed ? "graphed" : "eager per-parameter";
            std::printf("structgrad %s %s %s %s: %.1f us/step (loss %.4f)\n", name.c_str(), model.c_str(),
                        label.c_str(), mode_name, us, loss);
          }
        }
      }
    }
  } catch (const sg::Error& e) {
    std::fprintf(stderr, "bench_train_step: %s\n", e.what());
    return 1;
  }
  return 0;
}
