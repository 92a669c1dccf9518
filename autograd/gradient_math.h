// The arithmetic the backward engine does on gradients: it sums the gradients reaching a tensor
// and projects them onto its structure. Those are ops, a layer above autograd; the ops layer hands
// them in when the library is loaded (ops/tensor_methods.cpp), so autograd includes nothing from it.
#pragma once

#include <structgrad/core/tensor.h>

namespace sg::autograd {

struct GradientMath {
  Tensor (*add)(const Tensor& a, const Tensor& b) = nullptr;  ///< a + b, same shape
  Tensor (*triu)(const Tensor& g) = nullptr;                  ///< the projection onto UpperTriangular
  Tensor (*tril)(const Tensor& g) = nullptr;                  ///< the projection onto LowerTriangular
  Tensor (*sym)(const Tensor& g) = nullptr;                   ///< the projection onto Symmetric, (g + gᵀ)/2
};

/// Installs the engine's arithmetic (the ops layer, once, at load).
void set_gradient_math(const GradientMath& math);

}  // namespace sg::autograd
