// Tensor members that move data (to, item, to_vector, clone, copy_, fill_), printing, and
// the impl helpers. Kernels come from the device's backend (ops/backend.h).
#include "core/tensor.h"

#include <algorithm>
#include <iomanip>
#include <ostream>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "ops/backend.h"

namespace sg {

namespace detail {

void check_shape(const char* op, const Shape& shape, DType dtype) {
  for (int64_t d : shape) SG_CHECK(d >= 0, op, ": negative dimension in shape ", shape);
  // numel · element size must fit in int64 (bytes are size_t, indices int64).
  int64_t bytes = static_cast<int64_t>(element_size(dtype));
  for (int64_t d : shape)
    SG_CHECK(!__builtin_mul_overflow(bytes, d, &bytes), op, ": shape ", shape, " has too many elements");
}

Tensor make_tensor(const Shape& shape, DType dtype, Device device, Structure structure) {
  check_shape("tensor", shape, dtype);
  return make_tensor(std::make_shared<Storage>(static_cast<size_t>(shape_numel(shape)) * element_size(dtype), device),
                     shape, dtype, structure);
}

Tensor make_tensor(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype, Structure structure) {
  check_shape("tensor", shape, dtype);
  SG_CHECK(static_cast<size_t>(shape_numel(shape)) * element_size(dtype) <= storage->nbytes, "tensor: shape ", shape,
           " of ", dtype, " does not fit a storage of ", storage->nbytes, " bytes");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = shape;
  impl->dtype = dtype;
  impl->structure = structure;
  return Tensor(impl);
}

Tensor alias_with(const Tensor& t, const Shape& shape, Structure structure) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.impl().storage;
  if (structure != t.structure() || shape != t.shape()) impl->storage->reinterpretations++;
  impl->shape = shape;
  impl->dtype = t.dtype();
  impl->structure = structure;
  return Tensor(impl);
}

void check_same_device_dtype(const char* op, const Tensor& a, const Tensor& b) {
  SG_CHECK(a.defined(), op, ": the first operand is undefined");
  SG_CHECK(b.defined(), op, ": the second operand is undefined");
  SG_CHECK(a.device() == b.device(), op, ": expected both operands on one device, got ", a.device(), " and ",
           b.device());
  SG_CHECK(a.dtype() == b.dtype(), op, ": expected both operands of one dtype, got ", a.dtype(), " and ",
           b.dtype());
}

}  // namespace detail

TensorImpl& Tensor::impl() const {
  SG_CHECK(impl_ != nullptr, "tensor: the tensor is undefined");
  return *impl_;
}

Tensor Tensor::empty(const Shape& shape, TensorOptions options) {
  detail::check_shape("empty", shape, options.dtype_);
  Tensor t = detail::make_tensor(shape, options.dtype_, options.device_);
  if (options.requires_grad_) t.requires_grad_(true);
  return t;
}

int64_t Tensor::size(int64_t d) const {
  const int64_t r = dim();
  const int64_t i = d < 0 ? d + r : d;
  SG_CHECK(i >= 0 && i < r, "size: dimension ", d, " out of range for a tensor of shape ", shape());
  return shape()[static_cast<size_t>(i)];
}

namespace {
Tensor copy_to(const Tensor& src, Device device, DType dtype) {
  Tensor out = detail::make_tensor(src.shape(), dtype, device, src.structure());
  if (src.numel() == 0) return out;
  if (src.device() == device) {
    detail::backend_for(device).copy(src, out);
  } else if (src.device().is_cpu()) {
    // Convert on the host first, then one upload.
    Tensor host = src.dtype() == dtype ? src : copy_to(src, src.device(), dtype);
    detail::backend_for(device).copy_from_host(host.data_ptr(), out);
  } else if (device.is_cpu()) {
    Tensor host = detail::make_tensor(src.shape(), src.dtype(), device, src.structure());
    detail::backend_for(src.device()).copy_to_host(src, host.data_ptr());
    if (dtype != src.dtype()) return copy_to(host, device, dtype);
    return host;
  } else {
    // Between two GPUs: through the host (rare; peer copies are not needed here).
    return copy_to(copy_to(src, kCPU, src.dtype()), device, dtype);
  }
  return out;
}
}  // namespace

Tensor Tensor::to(Device device) const {
  SG_CHECK(defined(), "to: the tensor is undefined");
  if (device == this->device()) return *this;
  Tensor out = copy_to(*this, device, dtype());
  if (autograd::needs_record({*this})) {
    const Device from = this->device();
    autograd::record("to(device)", {*this}, {out}, {}, [from](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{ctx.grad_outputs[0].to(from)};
    });
  }
  return out;
}

Tensor Tensor::to(DType dtype) const {
  SG_CHECK(defined(), "to: the tensor is undefined");
  if (dtype == this->dtype()) return *this;
  Tensor out = copy_to(*this, device(), dtype);
  if (autograd::needs_record({*this})) {
    const DType from = this->dtype();
    autograd::record("to(dtype)", {*this}, {out}, {}, [from](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{ctx.grad_outputs[0].to(from)};
    });
  }
  return out;
}

template <typename T>
std::vector<T> Tensor::to_vector_as() const {
  SG_CHECK(defined(), "to_vector: the tensor is undefined");
  const int64_t n = numel();
  std::vector<T> out(static_cast<size_t>(n));
  if (n == 0) return out;
  Tensor host = device().is_cpu() ? *this : copy_to(*this, kCPU, dtype());
  if (host.dtype() == DType::Float32) {
    const float* p = static_cast<const float*>(host.data_ptr());
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(p[i]);
  } else {
    const double* p = static_cast<const double*>(host.data_ptr());
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(p[i]);
  }
  return out;
}
template std::vector<float> Tensor::to_vector_as<float>() const;
template std::vector<double> Tensor::to_vector_as<double>() const;

std::vector<double> Tensor::to_vector() const { return to_vector_as<double>(); }

double Tensor::item() const {
  SG_CHECK(defined(), "item: the tensor is undefined");
  SG_CHECK(numel() == 1, "item: expected a tensor with one element, got shape ", shape());
  return to_vector()[0];
}

Tensor Tensor::clone() const {
  SG_CHECK(defined(), "clone: the tensor is undefined");
  Tensor out = detail::make_tensor(shape(), dtype(), device(), structure());
  if (numel() > 0) detail::backend_for(device()).copy(*this, out);
  return out;
}

Tensor& Tensor::copy_(const Tensor& src) {
  SG_CHECK(defined(), "copy_: the destination is undefined");
  SG_CHECK(src.defined(), "copy_: the source is undefined");
  detail::check_same_device_dtype("copy_", *this, src);
  SG_CHECK(src.shape() == shape(), "copy_: source of shape ", src.shape(), " does not fit destination of shape ",
           shape());
  SG_CHECK(!(autograd::grad_mode_enabled() && requires_grad() && is_leaf()),
           "copy_: a leaf that requires grad is being written in place; use sg::NoGradGuard");
  if (numel() > 0) detail::backend_for(device()).copy(src, *this);
  impl().storage->version++;
  return *this;
}

Tensor& Tensor::fill_(double value) {
  SG_CHECK(defined(), "fill_: the tensor is undefined");
  SG_CHECK(!(autograd::grad_mode_enabled() && requires_grad() && is_leaf()),
           "fill_: a leaf that requires grad is being written in place; use sg::NoGradGuard");
  if (numel() > 0) detail::backend_for(device()).fill(*this, value);
  impl().storage->version++;
  return *this;
}

Tensor Tensor::dense() const {
  SG_CHECK(defined(), "dense: the tensor is undefined");
  if (structure() == Structure::Dense) return *this;
  Tensor out = detail::alias_with(*this, shape(), Structure::Dense);
  if (autograd::needs_record({*this})) {
    autograd::record("dense", {*this}, {out}, {}, [](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{ctx.grad_outputs[0]};
    });
  }
  return out;
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) {
  if (!t.defined()) return out << "Tensor(undefined)";
  out << "Tensor(shape=" << t.shape() << ", dtype=" << t.dtype() << ", device=" << t.device()
      << ", structure=" << t.structure();
  if (t.requires_grad()) out << ", requires_grad";
  out << ")";
  const std::vector<double> v = t.to_vector();
  const int64_t rows = t.dim() == 2 ? t.size(0) : 1;
  const int64_t cols = t.dim() == 2 ? t.size(1) : t.numel();
  const int64_t show = 6;
  auto fmt = std::setw(11);
  out << "\n[";
  for (int64_t r = 0; r < rows; ++r) {
    if (rows > show && r == show / 2) {
      out << (r ? "\n " : "") << " ...";
      r = rows - show / 2 - 1;
      continue;
    }
    out << (r ? "\n [" : "[");
    for (int64_t c = 0; c < cols; ++c) {
      if (cols > show && c == show / 2) {
        out << "  ...";
        c = cols - show / 2 - 1;
        continue;
      }
      out << fmt << std::setprecision(5) << v[static_cast<size_t>(r * cols + c)];
    }
    out << "]";
  }
  return out << "]";
}

}  // namespace sg
