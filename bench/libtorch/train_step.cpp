// libtorch's side of bench/bench_train_step.cpp: the same models and steps, eager and (with
// --graph, on CUDA) replayed from one at::cuda::CUDAGraph captured after warm-up on a side stream,
// as PyTorch's CUDA-graphs notes do it. Adam is libtorch's (per parameter; libtorch has no fused
// Adam); it keeps its step count on the host, so a graphed replay repeats the captured bias
// correction: the time is a graphed step's, the trajectory is not the eager one. Prints the lines
// bench_train_step prints, with "libtorch" first.
// Usage: libtorch_train_step [--devices cpu,cuda] [--models gaussian_precision,gp_regression]
//                            [--n 16,256] [--gp-n 1024] [--steps 500] [--graph]
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

struct Workload {
  std::function<void()> step;
  std::function<double()> loss;
  std::shared_ptr<void> state;
};

Workload gaussian_precision(torch::Device d, int64_t n) {
  struct State {
    torch::Tensor u, mu, x, loss;
    std::unique_ptr<torch::optim::Adam> opt;
  };
  auto s = std::make_shared<State>();
  s->u = torch::eye(n, d).requires_grad_();
  s->mu = torch::zeros({n}, d).requires_grad_();
  s->x = torch::randn({1024, n}, d);
  s->opt = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{s->u, s->mu}, torch::optim::AdamOptions(1e-2));
  State* m = s.get();
  return {[m] {
            m->opt->zero_grad();
            const auto ut = torch::triu(m->u);
            const auto z = torch::matmul(m->x - m->mu, ut.t());
            m->loss = 0.5 * z.pow(2).sum(1).mean() - torch::log(torch::abs(torch::diagonal(ut))).sum();
            m->loss.backward();
            m->opt->step();
          },
          [m] { return m->loss.item<double>(); }, s};
}

Workload gp_regression(torch::Device d, int64_t n) {
  struct State {
    torch::Tensor d2, eye, y, log_ell, log_sigma, log_noise, loss;
    std::unique_ptr<torch::optim::Adam> opt;
  };
  auto s = std::make_shared<State>();
  const auto x = torch::rand({n, 1}, d) * 6.0 - 3.0;
  s->d2 = (x - x.t()).pow(2);
  s->eye = torch::eye(n, d);
  s->y = torch::tanh(3.0 * x) + 0.1 * torch::randn({n, 1}, d);
  s->log_ell = torch::zeros({}, d).requires_grad_();
  s->log_sigma = torch::zeros({}, d).requires_grad_();
  s->log_noise = torch::full({}, -1.0, d).requires_grad_();
  s->opt = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{s->log_ell, s->log_sigma, s->log_noise},
                                                torch::optim::AdamOptions(1e-3));
  State* m = s.get();
  return {[m] {
            m->opt->zero_grad();
            const auto k = torch::exp(2.0 * m->log_sigma) * torch::exp(m->d2 * (-0.5 * torch::exp(-2.0 * m->log_ell))) +
                           torch::exp(2.0 * m->log_noise) * m->eye;
            const auto l = std::get<0>(torch::linalg_cholesky_ex(k));  // no host check: capturable
            const auto z = torch::linalg_solve_triangular(l, m->y, /*upper=*/false);
            m->loss = 0.5 * z.pow(2).sum() + 2.0 * torch::log(torch::diagonal(l)).sum();
            m->loss.backward();
            m->opt->step();
          },
          [m] { return m->loss.item<double>(); }, s};
}

double step_microseconds(const Workload& w, torch::Device d, bool graphed, int steps, double* final_loss) {
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  if (graphed) {
    // Warm-up and capture on a side stream, then replays on the current one.
    const auto main_stream = c10::cuda::getCurrentCUDAStream();
    auto side = c10::cuda::getStreamFromPool();
    at::cuda::CUDAEvent before, after;
    before.record(main_stream);
    before.block(side);
    {
      c10::cuda::CUDAStreamGuard guard(side);
      for (int i = 0; i < 20; ++i) w.step();
    }
    after.record(side);
    after.block(main_stream);
    graph = std::make_unique<at::cuda::CUDAGraph>();
    {
      auto capture = c10::cuda::getStreamFromPool();
      c10::cuda::CUDAStreamGuard guard(capture);
      graph->capture_begin();
      w.step();
      graph->capture_end();
    }
  } else {
    for (int i = 0; i < 20; ++i) w.step();
  }
  if (d.is_cuda()) torch::cuda::synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) {
    if (graphed) graph->replay();
    else w.step();
  }
  *final_loss = w.loss();
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(stop - start).count() / steps;
}

}  // namespace

int main(int argc, char** argv) {
  std::string devices = torch::cuda::is_available() ? "cpu,cuda" : "cpu";
  std::string models = "gaussian_precision", sizes = "16,256";
  int64_t gp_n = 1024;
  int steps = 500;
  bool graph = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--graph") {
      graph = true;
      continue;
    }
    if (i + 1 >= argc) flag.clear();
    if (flag == "--devices") devices = argv[++i];
    else if (flag == "--models") models = argv[++i];
    else if (flag == "--n") sizes = argv[++i];
    else if (flag == "--gp-n") gp_n = std::stoll(argv[++i]);
    else if (flag == "--steps") steps = std::stoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: libtorch_train_step [--devices cpu,cuda] [--models gaussian_precision,"
                           "gp_regression] [--n 16,256] [--gp-n 1024] [--steps 500] [--graph]\n");
      return 2;
    }
  }
  for (const std::string& name : split(devices)) {
    const torch::Device device(name);
    for (const std::string& model : split(models)) {
      std::vector<std::pair<std::string, std::function<Workload()>>> runs;
      if (model == "gaussian_precision") {
        for (const std::string& n : split(sizes))
          runs.push_back({"n=" + n + " batch=1024", [&, n] { return gaussian_precision(device, std::stoll(n)); }});
      } else if (model == "gp_regression") {
        runs.push_back({"n=" + std::to_string(gp_n), [&] { return gp_regression(device, gp_n); }});
      } else {
        std::fprintf(stderr, "libtorch_train_step: no libtorch counterpart of model '%s'\n", model.c_str());
        return 2;
      }
      for (const auto& [label, make] : runs) {
        for (bool graphed : {false, true}) {
          if (graphed && !(graph && device.is_cuda())) continue;
          torch::manual_seed(0);
          const Workload w = make();
          double loss = 0;
          const double us = step_microseconds(w, device, graphed, steps, &loss);
          std::printf("libtorch %s %s %s %s: %.1f us/step (loss %.4f)\n", name.c_str(), model.c_str(), label.c_str(),
                      graphed ? "graphed" : "eager", us, loss);
        }
      }
    }
  }
  return 0;
}
