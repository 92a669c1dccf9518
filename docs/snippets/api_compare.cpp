// docs/api.md, "Comparisons and selection": masks, where, maximum, max / argmax
// along a dimension, and logsumexp, with the gradients they pass. Built and run by CTest; the guide
// shows the body of main() before its checks.
#include <structgrad/structgrad.h>

#include <cmath>
#include <vector>

int main() {
  auto logits = sg::tensor({{2.0, 1.0, 0.5}, {0.1, 0.3, 3.0}}, sg::kFloat64).requires_grad_();
  auto labels = sg::from_vector(std::vector<int64_t>{0, 1});

  auto predicted = sg::argmax(logits, 1);                     // int64 [2]: 0, 2
  auto accuracy = sg::mean(sg::eq(predicted, labels));        // masks are 0/1 (float32 for int64 inputs)
  auto [best, position] = sg::max(logits, 1);                 // values [2] and int64 positions [2]
  auto positive = sg::gt(logits, 1.0);                        // a float64 mask, not differentiable
  auto leaky = sg::where(positive, logits, 0.1 * logits);     // logits where the mask is 1
  auto at_least = sg::maximum(logits, sg::full({}, 0.5, sg::kFloat64));  // broadcasts; tie: half to each
  auto log_softmax = logits - sg::logsumexp(logits, 1, /*keepdim=*/true);
  auto nll = -sg::mean(sg::gather(log_softmax, 1, sg::reshape(labels, {2, 1})));

  nll.backward();                                             // rows of the gradient sum to zero
  const std::vector<double> g = logits.grad().to_vector();

  SG_CHECK(predicted.to_vector_as<int64_t>() == std::vector<int64_t>({0, 2}) && position.dtype() == sg::kInt64, "argmax");
  SG_CHECK(accuracy.item() == 0.5 && accuracy.dtype() == sg::kFloat32 && best.to_vector()[1] == 3.0, "accuracy, max");
  SG_CHECK(std::abs(leaky.to_vector()[1] - 0.1) < 1e-12, "where");
  SG_CHECK(sg::clamp(logits, 0.2, 2.5).to_vector()[5] == 2.5, "clamp");
  SG_CHECK(at_least.to_vector()[2] == 0.5 && std::abs(g[0] + g[1] + g[2]) < 1e-12 && g[0] < 0.0, "maximum, softmax");
}
