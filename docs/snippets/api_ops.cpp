// docs/api.md, "Ops": elementwise math with broadcasting, reductions, shape ops, products and
// losses. Every op here is differentiable. Built and run by CTest; the guide shows it verbatim.
#include <structgrad/structgrad.h>

int main() {
  auto a = sg::randn({4, 3}), b = sg::randn({4, 3});
  auto row = sg::randn({3}), column = sg::randn({4, 1});

  // Elementwise; binary ops broadcast a row [n], a column [m, 1] or a scalar.
  auto sum_ab = a + b;                                        // also sg::add(a, b)
  auto centered = a - row;                                    // sg::sub
  auto weighted = a * column;                                 // sg::mul: elementwise, not matmul
  auto ratio = sg::div(a, sg::exp(b));                        // a / exp(b)
  auto affine = 0.5 * a + 1.0;                                // scalars on either side: + − * /
  auto unary = sg::neg(a) + sg::log(sg::abs(a) + 1.0) + sg::sqrt(sg::square(a)) + sg::tanh(a) +
               sg::sigmoid(a) + sg::relu(a) + sg::leaky_relu(a, 0.2) + sg::softplus(a) + sg::step(a) +
               sg::pow(a, 3.0);

  // Reductions.
  auto total = sg::sum(a);                                    // 0-d tensor
  auto per_row = sg::sum(a, 1);                               // [4]
  auto kept = sg::sum(a, 0, /*keepdim=*/true);                // [1, 3]
  auto average = sg::mean(a), column_means = sg::mean(a, 0);  // 0-d, [3]

  // Shape ops.
  auto at = sg::transpose(a);                                 // [3, 4] (a copy)
  auto flat = sg::reshape(a, {-1});                           // [12], a view
  auto square = sg::randn({3, 3});
  auto d = sg::diagonal(square);                              // [3]
  auto positive = sg::with_diagonal(square, sg::exp(d));      // keeps square's structure

  // Products (see "Structured matrices" for the structure of the result).
  auto c = sg::matmul(a, at);                                 // [4, 4]
  auto mv = sg::matmul(a, sg::randn({3}));                    // matrix·vector: [4]
  auto y = sg::linear(a, sg::randn({5, 3}), sg::randn({5}));  // a·Wᵀ + b, like torch's linear: [4, 5]
  sg::Symmetric g = sg::gram(a);                              // a·aᵀ, one triangle computed: [4, 4]

  // Losses.
  auto loss = sg::mse_loss(y, sg::zeros({4, 5}));            // mean((y − target)²)

  SG_CHECK(per_row.size(0) == 4 && kept.size(0) == 1 && column_means.size(0) == 3 && flat.size(0) == 12, "ops");
  SG_CHECK(c.size(1) == 4 && mv.dim() == 1 && y.size(1) == 5 && g.n() == 4 && loss.dim() == 0, "ops");
  SG_CHECK(sum_ab.numel() + centered.numel() + weighted.numel() + ratio.numel() + affine.numel() == 60, "ops");
  SG_CHECK(unary.numel() == 12 && total.numel() == 1 && average.numel() == 1 && positive.size(0) == 3, "ops");
}
