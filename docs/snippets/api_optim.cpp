// docs/api.md, "Optimizers": SGD and Adam (AdamW) update parameters in place, outside the tape; a
// structured parameter stays structured. Built and run by CTest; the guide shows the body of main()
// before its checks.
#include <structgrad/structgrad.h>

int main() {
  auto w = sg::UpperTriangular::zeros(4).requires_grad_();
  auto s = sg::Symmetric::zeros(4).requires_grad_();
  sg::optim::SGD sgd({w}, {.lr = 0.1, .momentum = 0.9});
  sg::optim::Adam adam({s}, {.lr = 0.05});
  sg::optim::Adam adamw({w}, {.lr = 1e-3, .weight_decay = 0.01, .decoupled_weight_decay = true});
  for (int step = 0; step < 100; ++step) {
    if (step == 50) adam.options.lr = 0.02;                   // a schedule: change options between steps
    sgd.zero_grad();
    adam.zero_grad();
    auto loss = sg::sum(sg::square(w - sg::UpperTriangular::eye(4))) + sg::sum(sg::square(s - sg::Symmetric::eye(4)));
    loss.backward();
    sgd.step();
    adam.step();
  }
  SG_CHECK(w.structure() == sg::Structure::UpperTriangular && s.structure() == sg::Structure::Symmetric, "kept");
  SG_CHECK(sg::sum(sg::square(w - sg::UpperTriangular::eye(4))).item() < 1e-3, "SGD converged");
  SG_CHECK(adam.steps_taken() == 100 && adamw.steps_taken() == 0, "steps");
}
