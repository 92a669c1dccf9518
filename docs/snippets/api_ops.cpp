// docs/api.md, "Ops": elementwise math with broadcasting, reductions, shape ops, products and
// losses. Every op here is differentiable. Built and run by CTest; the guide shows the body of
// main() before its checks.
#include <structgrad/structgrad.h>

int main() {
  auto a = sg::randn({4, 3}), b = sg::randn({4, 3});
  auto row = sg::randn({3}), column = sg::randn({4, 1});

  auto mixed = (a + b) * column - row / sg::exp(b);           // add, mul, sub, div: elementwise, broadcasting
  auto affine = 0.5 * a + 1.0;                                // scalars on either side
  auto act = sg::leaky_relu(a, 0.2) + sg::softplus(a) + sg::pow(a, 3.0) + sg::log(sg::abs(a) + 1.0);
  auto signs = sg::sign(a) * sg::pow(2.0, b);                 // −1, 0 or 1 times 2ᵇ (a scalar base)
  auto z = sg::randn({8, 1, 5}) * sg::randn({3, 1});          // [8, 1, 5] ⊙ [3, 1] → [8, 3, 5]

  auto total = sg::sum(a);                                    // 0-d tensor
  auto kept = sg::sum(a, 1, /*keepdim=*/true);                // [4, 1]
  auto centered = z - sg::mean(z, -1, /*keepdim=*/true);      // [8, 3, 5] − [8, 3, 1]

  auto at = sg::transpose(a);                                 // [3, 4] (a copy)
  auto flat = sg::reshape(a, {-1});                           // [12], a view
  auto square = sg::randn({3, 3});
  auto positive = sg::with_diagonal(square, sg::exp(sg::diagonal(square)));  // keeps square's structure

  auto c = sg::matmul(a, at);                                 // [4, 4]
  auto mv = sg::matmul(a, sg::randn({3}));                    // matrix·vector: [4]
  const auto param = sg::TensorOptions().requires_grad();
  auto w = sg::randn({5, 3}, param), bias = sg::zeros({5}, param);
  auto y = sg::linear(a, w, bias);                            // a·wᵀ + bias, like torch's linear: [4, 5]
  sg::Symmetric g = sg::gram(a);                              // a·aᵀ, one triangle computed: [4, 4]
  auto loss = sg::mse_loss(y, sg::zeros({4, 5}));             // mean((y − target)²)
  loss.backward();                                            // bias.grad() is summed back to [5]

  SG_CHECK(mixed.numel() + affine.numel() + act.numel() + signs.numel() + flat.numel() == 60 && total.dim() == 0,
           "elementwise");
  SG_CHECK(kept.size(1) == 1 && centered.size(1) == 3 && positive.size(0) == 3, "reductions");
  SG_CHECK(c.size(1) == 4 && mv.dim() == 1 && g.n() == 4 && bias.grad().shape() == sg::Shape({5}), "products");
}
