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
  auto loss = sg::mean(cube(sg::linear(x, w)));
  loss.backward(/*retain_graph=*/true);                      // keep the records for a second pass
  loss.backward();                                            // gradients accumulate, as in libtorch
  SG_CHECK(w.grad().structure() == sg::Structure::UpperTriangular, "triu of the dense gradient");
  w.zero_grad();                                              // drops w.grad()

  auto U = sg::UpperTriangular::randn(5, sg::kFloat64).requires_grad_();
  auto S = sg::Symmetric::randn(5, sg::kFloat64).requires_grad_();
  sg::GradcheckResult r = sg::gradcheck(
      [](const std::vector<sg::Tensor>& in) { return cube(sg::matmul(in[0], in[1])); }, {U, S});
  SG_CHECK(r.ok, r.message);                                  // the message names the input and the entry
}
