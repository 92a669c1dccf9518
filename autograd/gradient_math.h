// The arithmetic the backward engine does on gradients: it sums the gradients reaching a tensor
// and projects them onto its structure. Those are ops, a layer above autograd; the ops layer hands
// them in when the library is loaded (ops/tensor_methods.cpp), so autograd includes nothing from it.
#pragma once

#include <structgrad/core/tensor.h>

namespace sg::autograd {

struct GradientMath {
  Tensor (*add)(const Tensor& a, const Tensor& b) = nullptr;  ///< a + b, same shape
  /// g projected onto structure s (the structure table's gradient projection), tagged s
  Tensor (*project)(const Tensor& g, Structure s) = nullptr;
};

/// Installs the engine's arithmetic (the ops layer, once, at load).
void set_gradient_math(const GradientMath& math);

}  // namespace sg::autograd
