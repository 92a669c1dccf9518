// docs/api.md and docs/graphs.md, "CUDA graphs": a training step captured once and replayed. Built
// and run by CTest; without a GPU it does nothing.
#include <structgrad/structgrad.h>

#include <cmath>

int main() {
  if (!sg::cuda::is_available()) return 0;
  auto u = sg::UpperTriangular::eye(64, sg::kCUDA).requires_grad_();
  auto mu = sg::zeros({64}, sg::TensorOptions().device(sg::kCUDA).requires_grad());
  auto x = sg::randn({1024, 64}, sg::kCUDA);                 // a static input: replays read it
  sg::optim::Adam opt({u, mu}, {.lr = 1e-2});                 // fused: its step count lives on the GPU
  sg::Tensor loss;
  auto step = [&] {
    opt.zero_grad();
    loss = 0.5 * sg::mean(sg::sum(sg::square(sg::linear(x - mu, u)), 1)) - sg::sum(sg::log(sg::abs(sg::diagonal(u))));
    loss.backward();
    opt.step();
  };
  sg::cuda::Graph graph;
  graph.capture(step);                                        // 3 eager warm-up steps, then one captured
  for (int i = 0; i < 100; ++i) {
    x.copy_(sg::randn({1024, 64}, sg::kCUDA));                // new data into the static input
    graph.replay();                                           // the whole step: one launch
  }
  graph.check_errors();                                       // the captured ops' own checks
  const double last = loss.item();                            // read after replay, never inside

  SG_CHECK(std::isfinite(last) && opt.steps_taken() == 103, "graph snippet: ", last, " after ", opt.steps_taken(), " steps");
  return 0;
}
