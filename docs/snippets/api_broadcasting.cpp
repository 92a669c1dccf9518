// docs/api.md, "Broadcasting and the structure of broadcast operands": NumPy broadcasting at any
// rank, reductions along any dimension, and the structure of a result when one operand is
// broadcast. Built and run by CTest; the guide shows it verbatim.
#include <structgrad/structgrad.h>

#include <string>

int main() {
  auto x = sg::randn({8, 1, 5}), y = sg::randn({3, 1});
  auto z = x * y + sg::randn({5});                            // [8, 1, 5] ⊙ [3, 1] + [5] → [8, 3, 5]
  auto per_batch = sg::sum(z, 1);                             // [8, 5]
  auto centered = z - sg::mean(z, -1, /*keepdim=*/true);      // [8, 3, 5] − [8, 3, 1]

  const int64_t n = 4;
  auto U = sg::UpperTriangular::randn(n);
  auto S = sg::Symmetric::randn(n);
  auto row = sg::randn({n}), column = sg::randn({n, 1}), scalar = sg::full({}, 2.0);
  sg::UpperTriangular scaled = sg::exp(row) * U;              // a row, a column or a scalar keeps Upper,
  sg::UpperTriangular scaled_too = U * column;                // in either order
  sg::Tensor by_scalar = scalar * U, sym_scaled = S * scalar; // Upper, Symmetric
  sg::Tensor one_side = row * S;                              // scales one side of S only: Dense
  sg::Tensor batched = sg::mul(U, sg::randn({3, n, n}));      // U itself is broadcast: Dense [3, n, n]

  std::string message;
  try {
    sg::UpperTriangular wrong = U * sg::randn({3, n, n});     // the typed overload holds for rank ≤ 2 only
  } catch (const sg::Error& e) {
    message = e.what();                                       // names mul and both shapes
  }

  auto w = sg::randn({n}, sg::TensorOptions().requires_grad());
  sg::sum(sg::square(w * sg::randn({6, 7, n}))).backward();   // the gradient is summed back to [n]

  SG_CHECK(z.dim() == 3 && z.size(1) == 3 && per_batch.size(1) == 5 && centered.size(2) == 5, "broadcast");
  SG_CHECK(scaled.n() == n && scaled_too.n() == n && by_scalar.structure() == sg::Structure::UpperTriangular, "upper");
  SG_CHECK(sym_scaled.structure() == sg::Structure::Symmetric && one_side.structure() == sg::Structure::Dense, "sym");
  SG_CHECK(batched.structure() == sg::Structure::Dense && batched.dim() == 3, "a broadcast structured operand");
  SG_CHECK(message.rfind("mul: ", 0) == 0 && w.grad().shape() == sg::Shape({n}), message);
}
