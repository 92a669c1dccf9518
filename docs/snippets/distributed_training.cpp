// docs/distributed.md: a data-parallel training loop. CTest builds and runs it; it returns at once
// unless started by scripts/launch.sh on a machine with GPUs and a build with NCCL:
//   scripts/launch.sh 2 build/tests/snippet_distributed_training
#include <structgrad/structgrad.h>

#include <cstdlib>
#include <iostream>

int main() {
  if (!sg::distributed::built_with_nccl() || !sg::cuda::is_available() || !std::getenv("RANK")) {
    std::cout << "not started by scripts/launch.sh on a GPU machine with NCCL: nothing to run\n";
    return 0;
  }
  sg::distributed::init();                                   // RANK, WORLD_SIZE, ... from the launcher
  const sg::Device device = sg::distributed::device();       // cuda:LOCAL_RANK
  sg::nn::UpperLinear layer(16, true, device);               // U upper triangular, and b
  sg::distributed::DataParallel dp(layer);                   // rank 0's values on every rank
  sg::optim::Adam opt(layer.parameters(), {.lr = 1e-2});
  sg::manual_seed(sg::distributed::rank());                  // each rank its own share of the data
  auto x = sg::randn({256, 16}, device);
  sg::Tensor loss;
  for (int step = 0; step < 20; ++step) {
    opt.zero_grad();
    loss = sg::mean(sg::square(layer.forward(x) - 2.0 * x));
    loss.backward();
    dp.synchronize_gradients();                              // mean over the ranks, in buckets
    opt.step();                                              // the same update on every rank
  }
  auto mean_loss = loss.detach().clone();
  sg::distributed::all_reduce(mean_loss, sg::distributed::ReduceOp::Mean);
  if (sg::distributed::rank() == 0) std::cout << "mean loss over ranks: " << mean_loss.item() << "\n";
  SG_CHECK(layer.weight.grad().structure() == sg::Structure::UpperTriangular, "the mean gradient stays upper");
  sg::distributed::finalize();
}
