// docs/api.md, "Ops": elementwise math with broadcasting, reductions, shape ops, products and
// losses. Every op here is differentiable. Built and run by CTest; the guide shows the body of
// main() before its checks.
#include <structgrad/structgrad.h>

int main() {
  auto a = sg::randn({4, 3}), b = sg::randn({4, 3});
  auto row = sg::randn({3}), column = sg::randn({4, 1});

  auto mixed = (a + b) * column - row / sg::exp(b);           // add, mul, sub, div: elementwise, broadcasting
  auto act = sg::leaky_relu(a, 0.2) + sg::softplus(a) + sg::pow(a, 3.0) + sg::log(sg::abs(a) + 1.0);
  auto z = sg::randn({8, 1, 5}) * sg::randn({3, 1});          // [8, 1, 5] ⊙ [3, 1] → [8, 3, 5]

  auto total = sg::sum(a);                                    // 0-d tensor
  auto centered = z - sg::mean(z, -1, /*keepdim=*/true);      // [8, 3, 5] − [8, 3, 1]

  const auto param = sg::TensorOptions().requires_grad();
  auto w = sg::randn({5, 3}, param), bias = sg::zeros({5}, param);
  auto y = sg::linear(a, w, bias);                            // a·wᵀ + bias, like torch's linear: [4, 5]
  sg::Symmetric g = sg::gram(a);                              // a·aᵀ, one triangle computed: [4, 4]
  auto loss = sg::mse_loss(y, sg::zeros({4, 5}));             // mean((y − target)²)
  loss.backward();                                            // bias.grad() is summed back to [5]

  SG_CHECK(mixed.numel() + act.numel() == 24 && total.dim() == 0, "elementwise");
  SG_CHECK(centered.size(1) == 3, "reductions");
  SG_CHECK(g.n() == 4 && bias.grad().shape() == sg::Shape({5}), "products");
}
