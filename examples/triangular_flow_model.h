// The triangular flow of examples/triangular_flow.cpp, shared with bench/bench_cpu_gemm.cpp so
// the benchmark times exactly the example's step: K layers z = leaky_relu(U·x + b) (no
// activation after the last), U UpperTriangular, trained by exact likelihood.
#pragma once

#include <cmath>
#include <memory>
#include <vector>

#include <structgrad/structgrad.h>

namespace examples {

/// Mean negative log-likelihood of the rows of x under the flow, without the constant
/// (d/2)·log 2π: ½·mean‖z‖² − log|det| with log|det| = Σ_k Σ_i log|U_k,ii| plus log(slope) per
/// negative pre-activation (a constant per sample: no gradient flows through it).
inline sg::Tensor flow_nll(const std::vector<std::shared_ptr<sg::nn::UpperLinear>>& flow, const sg::Tensor& x,
                           double slope) {
  sg::Tensor z = x, logdet = sg::zeros({}, sg::TensorOptions().dtype(x.dtype()).device(x.device()));
  for (size_t k = 0; k < flow.size(); ++k) {
    z = flow[k]->forward(z);
    logdet = logdet + sg::sum(sg::log(sg::abs(sg::diagonal(flow[k]->weight))));
    if (k + 1 < flow.size()) {
      logdet = logdet + std::log(slope) * sg::mean(sg::sum(sg::step(-z), 1));
      z = sg::leaky_relu(z, slope);
    }
  }
  return 0.5 * sg::mean(sg::sum(sg::square(z), 1)) - logdet;
}

}  // namespace examples
