// The arithmetic the backward engine does on gradients: it sums the gradients reaching a tensor
// and projects them onto its structure. Those are ops, a layer above autograd: autograd declares
// the table and the ops layer defines it (ops/tensor_methods.cpp), so autograd includes nothing from
// it, and the engine's call by name links the ops layer in.
#pragma once

#include <structgrad/core/tensor.h>

namespace sg::autograd {

struct GradientMath {
  Tensor (*add)(const Tensor& a, const Tensor& b) = nullptr;  ///< a + b, same shape
  /// g projected onto structure s (the structure table's gradient projection), tagged s
  Tensor (*project)(const Tensor& g, Structure s) = nullptr;
};

/// The engine's arithmetic, defined by the ops layer (ops/tensor_methods.cpp).
const GradientMath& gradient_math();

}  // namespace sg::autograd
