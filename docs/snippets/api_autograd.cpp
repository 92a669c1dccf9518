// docs/api.md, "Autograd and gradcheck": backward, gradients of structured parameters, grad mode, a
// custom op with its own backward, and the structure-aware gradcheck. Built and run by CTest; the
// guide shows it without its #include lines.
#include <structgrad/structgrad.h>

// y = x³ elementwise with a hand-written backward (dy/dx = 3x²): the pattern every op follows.
sg::Tensor cube(const sg::Tensor& x) {
  sg::Tensor y;
  {
    sg::NoGradGuard no_record;                                // the forward's own ops are not recorded
    y = x * x * x;                                            // keeps x's structure (x³ maps 0 to 0)
  }
  if (sg::autograd::needs_record({x}))
    sg::autograd::record("cube", {x}, {y}, /*saved=*/{x}, [](sg::autograd::BackwardContext& ctx) {
      const sg::Tensor& g = ctx.grad_outputs[0];              // already projected onto y's structure
      const sg::Tensor& saved_x = ctx.saved[0];
      return std::vector<sg::Tensor>{3.0 * g * saved_x * saved_x};
    });
  return y;
}

int main() {
  auto w = sg::UpperTriangular::randn(8).requires_grad_();   // a structured parameter
  auto x = sg::randn({32, 8});
  auto loss = sg::mean(sg::square(sg::linear(x, w)));
  loss.backward();                                            // consumes the records it walks
  SG_CHECK(w.grad().structure() == sg::Structure::UpperTriangular, "triu of the dense gradient");

  auto again = sg::sum(sg::matmul(w, w));
  again.backward(/*retain_graph=*/true);                      // keep the records for a second pass
  again.backward();                                           // gradients accumulate, as in libtorch
  w.zero_grad();                                              // drops w.grad()
  auto y = sg::matmul(x, w);                                  // not a scalar: pass the upstream gradient
  y.backward(sg::ones_like(y));
  {
    sg::NoGradGuard no_grad;                                  // like torch::NoGradGuard
    SG_CHECK(!sg::matmul(x, w).requires_grad() && !w.detach().requires_grad(), "nothing recorded");
  }
  SG_CHECK(w.is_leaf() && !y.is_leaf() && y.requires_grad(), "leaves and results");

  // gradcheck (float64): central differences along directions inside each input's structure.
  auto U = sg::UpperTriangular::randn(5, sg::kFloat64).requires_grad_();
  auto S = sg::Symmetric::randn(5, sg::kFloat64).requires_grad_();
  sg::GradcheckResult r = sg::gradcheck(
      [](const std::vector<sg::Tensor>& in) { return cube(sg::matmul(in[0], in[1])); }, {U, S});
  SG_CHECK(r.ok, r.message);                                  // the message names the input and the entry
}
