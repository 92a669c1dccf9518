// Structure-aware gradient checking (docs/semantics.md): central differences in float64 along
// directions inside each input's structure (per entry of the structure's basis — e_ij,
// i <= j for Upper; e_ii and e_ij + e_ji, i < j, for Symmetric; each matrix of a batch — and/or
// random in-structure directions),
// compared with backward; plus checks that backward is linear in the upstream gradient and
// repeatable.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <structgrad/core/tensor.h>

namespace sg::autograd {

/// Tolerances and what gradcheck checks. Example: `sg::GradcheckOptions o; o.random_directions = 4;`
struct GradcheckOptions {
  double eps = 1e-6;           ///< finite-difference step
  double atol = 1e-6;          ///< |numerical − analytical| <= atol + rtol·|numerical|
  double rtol = 1e-4;          ///< relative tolerance (see atol)
  bool per_entry = true;       ///< check every basis direction of every input
  int random_directions = 0;   ///< also check this many random in-structure directions
  bool check_linearity = true;      ///< grad(aW₁ + bW₂) == a·grad(W₁) + b·grad(W₂)
  bool check_repeatability = true;  ///< a second backward is bit-identical
  uint64_t seed = 1234;             ///< seed of W and of the random directions
};

/// The outcome of gradcheck; converts to bool. Example: `EXPECT_TRUE(r.ok) << r.message;`
struct GradcheckResult {
  bool ok = true;       ///< every check passed
  std::string message;  ///< names the input, the entry and both values on failure
  int64_t directions_checked = 0;  ///< how many directions were compared
  /// Same as ok. Example: `if (!sg::gradcheck(f, {x})) ...`
  explicit operator bool() const { return ok; }
};

/// Checks the gradients of f at `inputs` (float64; only inputs that require grad are
/// checked). f may return a tensor of any shape: the check uses L = ⟨W, f(x)⟩ for a fixed
/// random W. Example:
///   auto r = sg::autograd::gradcheck([](const std::vector<sg::Tensor>& in) {
///     return sg::matmul(in[0], in[1]); }, {U, S});
///   EXPECT_TRUE(r.ok) << r.message;
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace sg::autograd

namespace sg {
using autograd::gradcheck;
using autograd::GradcheckOptions;
using autograd::GradcheckResult;
}  // namespace sg
