// Helpers shared by the op files: allocating outputs on an input's device and reaching
// that device's backend. Internal.
#pragma once

#include <structgrad/core/tensor.h>
#include "ops/backend.h"

namespace sg::detail {

inline Backend& backend_of(const Tensor& t) { return backend_for(t.device()); }

inline Tensor empty_like(const Tensor& t, Structure s = Structure::Dense) {
  return make_tensor(t.shape(), t.dtype(), t.device(), s);
}

inline Tensor empty_on(const Tensor& like, const Shape& shape, Structure s = Structure::Dense) {
  return make_tensor(shape, like.dtype(), like.device(), s);
}

inline void check_defined(const char* op, const Tensor& t) {
  SG_CHECK(t.defined(), op, ": got an undefined tensor");
}

inline void check_square(const char* op, const Tensor& x) {
  check_defined(op, x);
  SG_CHECK(x.dim() == 2 && x.size(0) == x.size(1), op, ": expected a square matrix, got shape ", x.shape());
}

}  // namespace sg::detail

namespace sg::detail {
/// Elementwise kernels without autograd (used by backward closures and other ops).
Tensor unary_raw(UnaryOp op, const Tensor& x, double alpha);
Tensor binary_raw(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, double alpha,
                  Structure structure);
/// Broadcasts g to `shape` where g's elements repeat along rows (row_stride 0), columns
/// (col_stride 0) or both; `shape` viewed as [rows, cols].
Tensor expand_raw(const Tensor& g, const Shape& shape, int64_t rows, int64_t cols, int64_t g_row_stride,
                  int64_t g_col_stride);
}  // namespace sg::detail
