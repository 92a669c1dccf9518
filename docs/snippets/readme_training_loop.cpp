// README.md's training loop, verbatim (tests/docs/test_docs.cpp keeps the two in sync): fits a
// Gaussian's mean and precision factor U, an UpperTriangular parameter, with Adam.
#include <structgrad/structgrad.h>

int main() {
  auto x = sg::randn({1024, 16});                                  // data, rows are samples
  auto mu = sg::zeros({16}, sg::TensorOptions().requires_grad());
  auto w = sg::UpperTriangular::zeros(16).requires_grad_();        // a structured parameter
  sg::optim::Adam opt({mu, w}, {.lr = 0.05});
  for (int step = 0; step < 200; ++step) {
    opt.zero_grad();
    auto u = sg::with_diagonal(w, sg::exp(sg::diagonal(w)));       // still UpperTriangular
    auto z = sg::linear(x - mu, u);                                // (x − μ)·Uᵀ, structured kernel
    auto nll = 0.5 * sg::mean(sg::sum(sg::square(z), 1)) - sg::sum(sg::diagonal(w));
    nll.backward();                                                // w.grad() is upper triangular
    opt.step();
  }
}
