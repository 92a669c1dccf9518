// docs/api.md, "Optimizers": SGD and Adam (AdamW) update parameters in place, outside the tape;
// a structured parameter stays structured. Built and run by CTest; the guide shows it verbatim.
#include <structgrad/structgrad.h>

int main() {
  auto w = sg::UpperTriangular::zeros(4).requires_grad_();
  auto target = sg::UpperTriangular::eye(4);
  sg::optim::SGD sgd({w}, {.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < 100; ++step) {
    sgd.zero_grad();
    auto loss = sg::sum(sg::square(w - target));
    loss.backward();
    sgd.step();
  }
  SG_CHECK(w.structure() == sg::Structure::UpperTriangular, "still upper triangular");
  SG_CHECK(sg::sum(sg::square(w - target)).item() < 1e-3, "SGD converged");

  auto s = sg::Symmetric::zeros(4).requires_grad_();
  sg::optim::Adam adam({s}, {.lr = 0.05});
  sg::optim::Adam adamw({w}, {.lr = 1e-3, .weight_decay = 0.01, .decoupled_weight_decay = true});
  adam.options.lr = 0.02;                                     // a schedule: change options between steps
  adam.zero_grad();
  sg::sum(sg::square(s - sg::Symmetric::eye(4))).backward();
  adam.step();
  SG_CHECK(adam.steps_taken() == 1 && adamw.steps_taken() == 0, "steps");
  SG_CHECK(s.structure() == sg::Structure::Symmetric, "still symmetric");
}
