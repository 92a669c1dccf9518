// The matrix-batch view (matrix_batch.h): shapes, strides and the broadcast of batch dimensions.
#include "ops/matrix_batch.h"

#include <algorithm>
#include <sstream>
#include <string>

#include <structgrad/ops/shape.h>
#include "ops/op_util.h"

namespace sg::detail {

int64_t MatrixBatch::matrix_stride() const {
  // Step through the batch dimensions from the innermost: each must continue the one inside it.
  int64_t stride = -1, span = 1;
  for (size_t d = batch_shape.size(); d-- > 0;) {
    if (batch_shape[d] == 1) continue;  // a dimension of one matrix steps nowhere
    if (stride < 0) stride = batch_strides[d];
    else if (batch_strides[d] != stride * span) return -1;
    span *= batch_shape[d];
  }
  return stride < 0 ? rows * row_stride : stride;
}

Shape MatrixBatch::shape_with(int64_t r, int64_t c) const {
  Shape shape = batch_shape;
  shape.push_back(r);
  shape.push_back(c);
  return shape;
}

namespace {
/// "expected T to be a " or "expected a " (what null: the op's one operand).
std::string expected(const char* what) { return what ? std::string("expected ") + what + " to be a " : "expected a "; }
}  // namespace

MatrixBatch matrix_batch(const char* op, const char* what, const Tensor& t) {
  SG_CHECK(t.defined(), op, ": ", what ? what : "the operand", " is undefined");
  SG_CHECK(t.dim() >= 2, op, ": ", expected(what), "matrix or a batch of matrices, got shape ", t.shape());
  MatrixBatch v;
  const Shape& shape = t.shape();
  v.rows = shape[shape.size() - 2];
  v.cols = shape.back();
  v.row_stride = v.cols;
  v.batch_shape.assign(shape.begin(), shape.end() - 2);
  v.batch_strides.assign(v.batch_shape.size(), 0);
  int64_t next = v.rows * v.cols;
  for (size_t d = v.batch_shape.size(); d-- > 0;) {
    v.batch_strides[d] = next;
    next *= v.batch_shape[d];
  }
  return v;
}

MatrixBatch square_batch(const char* op, const char* what, const Tensor& t) {
  MatrixBatch v = matrix_batch(op, what, t);
  SG_CHECK(v.square(), op, ": ", expected(what), "square matrix or a batch of them, got shape ", t.shape());
  return v;
}

void broadcast_batches(const char* op, MatrixBatch& a, MatrixBatch& b) {
  const size_t rank = std::max(a.batch_shape.size(), b.batch_shape.size());
  auto aligned = [rank](const MatrixBatch& v) {
    MatrixBatch out = v;
    const size_t missing = rank - v.batch_shape.size();
    out.batch_shape.insert(out.batch_shape.begin(), missing, 1);
    out.batch_strides.insert(out.batch_strides.begin(), missing, 0);
    return out;
  };
  MatrixBatch x = aligned(a), y = aligned(b);
  for (size_t d = 0; d < rank; ++d) {
    int64_t& xs = x.batch_shape[d];
    int64_t& ys = y.batch_shape[d];
    SG_CHECK(xs == ys || xs == 1 || ys == 1, op, ": the batch shapes ", a.batch_shape, " and ", b.batch_shape,
             " cannot be broadcast");
    if (xs == 1 && ys != 1) {
      xs = ys;
      x.batch_strides[d] = 0;
    } else if (ys == 1 && xs != 1) {
      ys = xs;
      y.batch_strides[d] = 0;
    }
  }
  a = std::move(x);
  b = std::move(y);
}

MatrixBatch square_matrices(const char* op, const Tensor& t) {
  SG_CHECK(t.defined(), op, ": got an undefined tensor");
  check_floating(op, t);
  return square_batch(op, nullptr, t);
}

std::string matrix_name(const MatrixBatch& view, int64_t index) {
  if (view.single()) return "the matrix";
  std::ostringstream out;
  out << "matrix ";
  if (view.batch_shape.size() == 1) {
    out << index;
  } else {
    Shape position(view.batch_shape.size());
    for (size_t d = view.batch_shape.size(); d-- > 0;) {
      position[d] = view.batch_shape[d] ? index % view.batch_shape[d] : 0;
      index = view.batch_shape[d] ? index / view.batch_shape[d] : 0;
    }
    out << shape_str(position);
  }
  out << " of the batch";
  return out.str();
}

std::string matrix_position(const MatrixBatch& view, int64_t index) {
  return view.single() ? std::string() : " of " + matrix_name(view, index);
}

Shape broadcast_batch_shape(const char* op, const Tensor& a, const Tensor& b) {
  MatrixBatch va = matrix_batch(op, "a", a), vb = matrix_batch(op, "b", b);
  const size_t rank = std::min(va.batch_shape.size(), vb.batch_shape.size());
  for (size_t d = 1; d <= rank; ++d) {
    const int64_t x = va.batch_shape[va.batch_shape.size() - d], y = vb.batch_shape[vb.batch_shape.size() - d];
    SG_CHECK(x == y || x == 1 || y == 1, op, ": the batch shapes ", va.batch_shape, " and ", vb.batch_shape,
             " of shapes ", a.shape(), " and ", b.shape(), " cannot be broadcast");
  }
  broadcast_batches(op, va, vb);
  return va.batch_shape;
}

Tensor matrix_of(const Tensor& t, int64_t i) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  char* first = static_cast<char*>(t.data_ptr()) + static_cast<size_t>(i * rows * cols) * element_size(t.dtype());
  return from_blob(first, {rows, cols}, TensorOptions().dtype(t.dtype()).device(t.device()));
}

Tensor batch_broadcast(const Tensor& t, const Shape& batch_shape) {
  const Shape own(t.shape().begin(), t.shape().end() - 2);
  if (own == batch_shape || (shape_numel(own) == 1 && shape_numel(batch_shape) != 0)) return t;
  Shape shape = batch_shape;
  shape.push_back(t.size(-2));
  shape.push_back(t.size(-1));
  return broadcast_to(t, shape);
}

}  // namespace sg::detail
