// The seam between core and the layers above it. Tensor's methods that run kernels or record
// autograd (to, clone, copy_, fill_, dense, backward, set_grad's projection) reach them through
// this table, as libtorch's Tensor methods reach their kernels through its dispatcher: core
// declares what it needs and the ops layer defines it (ops/tensor_methods.cpp), so no core header
// or source includes anything from above. Core calls the table's function by name: every program
// that uses a Tensor method links the ops layer in, from a static library too.
#pragma once

#include <structgrad/core/tensor.h>

namespace sg::detail {

struct TensorMethods {
  /// A copy of `src` on `device` as `dtype`, not recorded (the kernels of Tensor::to, clone).
  Tensor (*copy_to)(const Tensor& src, Device device, DType dtype) = nullptr;
  /// Tensor::to(Device) and Tensor::to(DType): the copy, recorded when `src` requires grad.
  Tensor (*to_device)(const Tensor& src, Device device) = nullptr;
  Tensor (*to_dtype)(const Tensor& src, DType dtype) = nullptr;
  /// Tensor::copy_ and Tensor::fill_ (their checks included).
  void (*copy_into)(Tensor& dst, const Tensor& src) = nullptr;
  void (*fill)(Tensor& t, double value) = nullptr;
  /// Tensor::dense: the same values as a Dense tensor, a differentiable identity.
  Tensor (*dense)(const Tensor& t) = nullptr;
  /// Tensor::backward (gradient undefined: a scalar loss's ones).
  void (*backward)(const Tensor& root, const Tensor& gradient, bool retain_graph) = nullptr;
  /// A gradient projected onto a structure (Tensor::set_grad).
  Tensor (*project_gradient)(const Tensor& g, Structure structure) = nullptr;
  /// The name of the op whose record produced `t` (for error messages).
  const char* (*producer_name)(const Tensor& t) = nullptr;
};

/// The table, defined by the ops layer (ops/tensor_methods.cpp).
const TensorMethods& tensor_methods();

}  // namespace sg::detail
