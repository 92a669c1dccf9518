// Indexing, slicing and joining: each op checks its arguments, runs one gather or scatter
// kernel per operand (ops/backend.h's IndexMap), and records a backward made of the adjoint
// kernel — a gather's gradient is a scatter-add, a slice's a scatter into zeros.
#include <structgrad/ops/index.h>

#include <algorithm>

#include <structgrad/autograd/node.h>
#include <structgrad/ops/factories.h>
#include <structgrad/ops/shape.h>
#include "ops/op_util.h"

namespace sg {

using autograd::BackwardContext;
using detail::IndexMap;

namespace {

/// The [outer, extent, inner] view of `shape` around dimension d.
IndexMap view_around(const Shape& shape, int64_t d, int64_t count) {
  IndexMap m;
  m.outer = shape_numel(Shape(shape.begin(), shape.begin() + d));
  m.extent = shape[static_cast<size_t>(d)];
  m.inner = shape_numel(Shape(shape.begin() + d + 1, shape.end()));
  m.count = count;
  return m;
}

Shape with_size(Shape shape, int64_t d, int64_t size) {
  shape[static_cast<size_t>(d)] = size;
  return shape;
}

void check_index(const char* op, const Tensor& x, const Tensor& index) {
  SG_CHECK(index.defined(), op, ": the index is undefined");
  SG_CHECK(index.dtype() == DType::Int64, op, ": expected an int64 index, got ", index.dtype());
  SG_CHECK(index.device() == x.device(), op, ": the index is on ", index.device(), ", the tensor on ", x.device());
}

/// Throws naming `op` when an entry of index lies outside [0, extent) (reads it back on CUDA).
void check_in_range(const char* op, const Tensor& index, int64_t dim, int64_t extent) {
  detail::refuse_under_capture(op, index.device(), "reads its check of the index back to the host");
  const int64_t bad = detail::backend_of(index).find_bad_index(index, extent);
  if (bad < 0) return;
  const int64_t value = index.to(kCPU).data<int64_t>()[bad];
  SG_FAIL(op, ": index ", value, " is out of range for dimension ", dim, " of size ", extent);
}

Tensor gather_raw(const Tensor& x, const Shape& out_shape, const IndexMap& m) {
  Tensor out = detail::empty_on(x, out_shape);
  if (out.numel() > 0) detail::backend_of(x).gather(x, out, m);
  return out;
}


/// x (copied) with src added along the map.
Tensor add_scattered(const Tensor& x, const Tensor& src, const IndexMap& m) {
  Tensor out = detail::empty_like(x);
  if (out.numel() > 0) detail::backend_of(x).copy(x, out);
  if (src.numel() > 0) detail::backend_of(x).scatter(src, out, m, true);
  return out;
}

/// positions start + j·step, j < count, along d: forward gather, backward scatter into zeros.
Tensor strided_slice(const char* op, const Tensor& x, int64_t d, int64_t start, int64_t count, int64_t step,
                     Structure structure = Structure::Dense) {
  IndexMap m = view_around(x.shape(), d, count);
  m.start = start;
  m.step = step;
  Tensor out = gather_raw(x, with_size(x.shape(), d, count), m);
  if (structure != Structure::Dense) out = detail::alias_with(out, out.shape(), structure);
  if (autograd::needs_record({x})) {
    const Shape shape = x.shape();
    autograd::record(op, {x}, {out}, {}, [shape, m](BackwardContext& ctx) {
      return std::vector<Tensor>{detail::scatter_into_zeros(ctx.grad_outputs[0], shape, m, false)};
    });
  }
  return out;
}

Tensor index_select_impl(const Tensor& x, int64_t dim, const Tensor& index, bool check_range) {
  detail::check_defined("index_select", x);
  check_index("index_select", x, index);
  SG_CHECK(x.dim() >= 1, "index_select: expected a tensor of rank 1 or more, got shape ", x.shape());
  SG_CHECK(index.dim() <= 1, "index_select: expected a 1-D index, got shape ", index.shape());
  const int64_t d = detail::wrap_dim("index_select", dim, x.shape());
  if (check_range) check_in_range("index_select", index, d, x.size(d));
  const IndexMap m = view_around(x.shape(), d, index.numel());
  IndexMap with_index = m;
  with_index.index = &index;
  Tensor out = gather_raw(x, with_size(x.shape(), d, index.numel()), with_index);
  if (d < x.dim() - 2) out = detail::alias_with(out, out.shape(), x.structure());  // whole matrices, selected
  if (autograd::needs_record({x})) {
    const Shape shape = x.shape();
    autograd::record("index_select", {x}, {out}, {index}, [shape, m](BackwardContext& ctx) {
      IndexMap with_index = m;
      with_index.index = &ctx.saved[0];
      return std::vector<Tensor>{detail::scatter_into_zeros(ctx.grad_outputs[0], shape, with_index, true)};
    });
  }
  return out;
}

}  // namespace

namespace detail {
Tensor scatter_into_zeros(const Tensor& src, const Shape& shape, const IndexMap& m, bool accumulate) {
  Tensor out = zeros(shape, TensorOptions().dtype(src.dtype()).device(src.device()));
  if (src.numel() > 0) backend_of(src).scatter(src, out, m, accumulate);
  return out;
}
}  // namespace detail

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return index_select_impl(x, dim, index, true);
}

namespace detail {
Tensor index_select_trusted(const Tensor& x, int64_t dim, const Tensor& index) {
  return index_select_impl(x, dim, index, false);
}
}  // namespace detail

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  detail::check_defined("slice", x);
  SG_CHECK(x.dim() >= 1, "slice: expected a tensor of rank 1 or more, got shape ", x.shape());
  SG_CHECK(step >= 1, "slice: step must be positive, got ", step);
  const int64_t d = detail::wrap_dim("slice", dim, x.shape());
  const int64_t size = x.size(d);
  auto clamp_position = [size](int64_t p) { return std::clamp<int64_t>(p < 0 ? p + size : p, 0, size); };
  const int64_t first = clamp_position(start), last = std::max(first, clamp_position(end));
  const int64_t count = (last - first + step - 1) / step;
  return strided_slice("slice", x, d, first, count, step);
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  detail::check_defined("narrow", x);
  SG_CHECK(x.dim() >= 1, "narrow: expected a tensor of rank 1 or more, got shape ", x.shape());
  const int64_t d = detail::wrap_dim("narrow", dim, x.shape());
  SG_CHECK(start >= 0 && length >= 0 && start + length <= x.size(d), "narrow: [", start, ", ", start, " + ", length,
           ") does not lie inside dimension ", dim, " of shape ", x.shape());
  return strided_slice("narrow", x, d, start, length, 1);
}

Tensor block(const Tensor& x, int64_t row, int64_t col, int64_t rows, int64_t cols) {
  detail::check_defined("block", x);
  SG_CHECK(x.dim() == 2, "block: expected a matrix, got shape ", x.shape());
  SG_CHECK(row >= 0 && col >= 0 && rows >= 0 && cols >= 0 && row + rows <= x.size(0) && col + cols <= x.size(1),
           "block: ", rows, "×", cols, " at (", row, ", ", col, ") does not lie inside shape ", x.shape());
  const bool diagonal = row == col && rows == cols;
  const Structure s = diagonal ? x.structure() : Structure::Dense;
  if (rows == x.size(0) && cols == x.size(1)) return strided_slice("block", x, 0, 0, rows, 1, s);
  // Rows first, then columns: two gathers, each recorded with its adjoint.
  const Tensor band = strided_slice("block", x, 0, row, rows, 1);
  return strided_slice("block", band, 1, col, cols, 1, s);
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_defined("gather", x);
  check_index("gather", x, index);
  const int64_t d = detail::wrap_dim("gather", dim, x.shape());
  SG_CHECK(index.dim() == x.dim() && with_size(index.shape(), d, x.size(d)) == x.shape(), "gather: index of shape ",
           index.shape(), " does not fit a tensor of shape ", x.shape(), " along dimension ", dim,
           " (every other size must match)");
  check_in_range("gather", index, d, x.size(d));
  IndexMap m = view_around(x.shape(), d, index.size(d));
  m.per_element = true;
  IndexMap with_index = m;
  with_index.index = &index;
  Tensor out = gather_raw(x, index.shape(), with_index);
  if (autograd::needs_record({x})) {
    const Shape shape = x.shape();
    autograd::record("gather", {x}, {out}, {index}, [shape, m](BackwardContext& ctx) {
      IndexMap saved_index = m;
      saved_index.index = &ctx.saved[0];
      return std::vector<Tensor>{detail::scatter_into_zeros(ctx.grad_outputs[0], shape, saved_index, true)};
    });
  }
  return out;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_same_device_dtype("scatter_add", x, src);
  check_index("scatter_add", x, index);
  const int64_t d = detail::wrap_dim("scatter_add", dim, x.shape());
  SG_CHECK(index.shape() == src.shape(), "scatter_add: index of shape ", index.shape(), " and source of shape ",
           src.shape(), " differ");
  SG_CHECK(src.dim() == x.dim() && with_size(src.shape(), d, x.size(d)) == x.shape(), "scatter_add: source of shape ",
           src.shape(), " does not fit a tensor of shape ", x.shape(), " along dimension ", dim,
           " (every other size must match)");
  check_in_range("scatter_add", index, d, x.size(d));
  IndexMap m = view_around(x.shape(), d, src.size(d));
  m.per_element = true;
  IndexMap with_index = m;
  with_index.index = &index;
  Tensor out = add_scattered(x, src, with_index);
  if (autograd::needs_record({x, src})) {
    autograd::record("scatter_add", {x, src}, {out}, {index}, [m](BackwardContext& ctx) {
      const Tensor& g = ctx.grad_outputs[0];
      Tensor dsrc;
      if (ctx.needs(1)) {
        IndexMap saved_index = m;
        saved_index.index = &ctx.saved[0];
        dsrc = gather_raw(g, ctx.saved[0].shape(), saved_index);
      }
      return std::vector<Tensor>{ctx.needs(0) ? g : Tensor(), dsrc};
    });
  }
  return out;
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_same_device_dtype("index_add", x, src);
  check_index("index_add", x, index);
  SG_CHECK(index.dim() <= 1, "index_add: expected a 1-D index, got shape ", index.shape());
  const int64_t d = detail::wrap_dim("index_add", dim, x.shape());
  SG_CHECK(src.dim() == x.dim() && src.shape() == with_size(x.shape(), d, index.numel()), "index_add: source of shape ",
           src.shape(), " does not fit a tensor of shape ", x.shape(), " with ", index.numel(),
           " indices along dimension ", dim);
  check_in_range("index_add", index, d, x.size(d));
  IndexMap m = view_around(x.shape(), d, index.numel());
  IndexMap with_index = m;
  with_index.index = &index;
  Tensor out = add_scattered(x, src, with_index);
  if (autograd::needs_record({x, src})) {
    const Shape src_shape = src.shape();
    autograd::record("index_add", {x, src}, {out}, {index}, [m, src_shape](BackwardContext& ctx) {
      const Tensor& g = ctx.grad_outputs[0];
      Tensor dsrc;
      if (ctx.needs(1)) {
        IndexMap saved_index = m;
        saved_index.index = &ctx.saved[0];
        dsrc = gather_raw(g, src_shape, saved_index);
      }
      return std::vector<Tensor>{ctx.needs(0) ? g : Tensor(), dsrc};
    });
  }
  return out;
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  SG_CHECK(!tensors.empty(), "cat: expected at least one tensor");
  const Tensor& first = tensors.front();
  detail::check_defined("cat", first);
  SG_CHECK(first.dim() >= 1, "cat: expected tensors of rank 1 or more, got shape ", first.shape());
  const int64_t d = detail::wrap_dim("cat", dim, first.shape());
  int64_t total = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = tensors[k];
    detail::check_same_device_dtype("cat", first, t);
    SG_CHECK(t.dim() == first.dim() && with_size(t.shape(), d, first.size(d)) == first.shape(), "cat: tensor ", k,
             " of shape ", t.shape(), " does not match tensor 0 of shape ", first.shape(), " outside dimension ", dim);
    total += t.size(d);
  }
  const Shape out_shape = with_size(first.shape(), d, total);
  // Whole matrices of one structure, joined along a batch dimension, keep it.
  Structure s = d < first.dim() - 2 ? first.structure() : Structure::Dense;
  for (const Tensor& t : tensors)
    if (t.structure() != s) s = Structure::Dense;
  Tensor out = detail::empty_on(first, out_shape, s);
  std::vector<IndexMap> maps;
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    IndexMap m = view_around(out_shape, d, t.size(d));
    m.start = offset;
    offset += t.size(d);
    if (t.numel() > 0) detail::backend_of(t).scatter(t, out, m, false);
    maps.push_back(m);
  }
  if (autograd::needs_record(tensors)) {
    std::vector<Shape> shapes;
    for (const Tensor& t : tensors) shapes.push_back(t.shape());
    autograd::record("cat", tensors, {out}, {}, [maps, shapes](BackwardContext& ctx) {
      std::vector<Tensor> grads(maps.size());
      for (size_t k = 0; k < maps.size(); ++k)
        if (ctx.needs(k)) grads[k] = gather_raw(ctx.grad_outputs[0], shapes[k], maps[k]);
      return grads;
    });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  SG_CHECK(!tensors.empty(), "stack: expected at least one tensor");
  detail::check_defined("stack", tensors.front());
  const Shape& shape = tensors.front().shape();
  const int64_t rank = static_cast<int64_t>(shape.size()) + 1;
  const int64_t d = dim < 0 ? dim + rank : dim;
  SG_CHECK(d >= 0 && d < rank, "stack: dimension ", dim, " out of range for tensors of shape ", shape);
  Shape unsqueezed = shape;
  unsqueezed.insert(unsqueezed.begin() + d, 1);
  std::vector<Tensor> parts;
  for (size_t k = 0; k < tensors.size(); ++k) {
    detail::check_defined("stack", tensors[k]);
    SG_CHECK(tensors[k].shape() == shape, "stack: tensor ", k, " of shape ", tensors[k].shape(),
             " does not match tensor 0 of shape ", shape);
    parts.push_back(reshape(tensors[k], unsqueezed));  // keeps a structure when d is a batch dimension
  }
  return cat(parts, d);
}

}  // namespace sg
