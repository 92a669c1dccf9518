// Tensor's members, printing and the impl helpers. The members that run kernels or record
// autograd go through the table of the layers above (core/dispatch.h).
#include <structgrad/core/tensor.h>

#include <algorithm>
#include <iomanip>
#include <atomic>
#include <ostream>

#include "core/capture.h"
#include <structgrad/core/cuda_runtime_api.h>
#include "core/dispatch.h"

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

void check_floating(const char* op, const Tensor& t) {
  SG_CHECK(t.defined(), op, ": got an undefined tensor");
  SG_CHECK(is_floating_point(t.dtype()), op, ": expected a floating-point tensor, got ", t.dtype());
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

Tensor from_blob(void* data, const Shape& shape, TensorOptions options, std::function<void()> release) {
  detail::check_shape("from_blob", shape, options.dtype_);
  const size_t nbytes = static_cast<size_t>(shape_numel(shape)) * element_size(options.dtype_);
  SG_CHECK(data != nullptr || nbytes == 0, "from_blob: null data for shape ", shape, " of ", options.dtype_);
  const Device device = options.device_;
  SG_CHECK(device.is_cpu() || (device.index >= 0 && device.index < cuda::device_count()), "from_blob: ", device,
           " is not available (", cuda::device_count(), " CUDA device(s) found)");
  auto on_release = [release = std::move(release)](Storage&) {
    if (release) release();
  };
  auto storage = std::make_shared<Storage>(data, nbytes, options.device_, std::move(on_release));
  Tensor t = detail::make_tensor(std::move(storage), shape, options.dtype_, Structure::Dense);
  if (options.requires_grad_) t.requires_grad_(true);
  return t;
}

int64_t Tensor::size(int64_t d) const {
  const int64_t r = dim();
  const int64_t i = d < 0 ? d + r : d;
  SG_CHECK(i >= 0 && i < r, "size: dimension ", d, " out of range for a tensor of shape ", shape());
  return shape()[static_cast<size_t>(i)];
}

Tensor Tensor::to(Device device) const {
  SG_CHECK(defined(), "to: the tensor is undefined");
  if (device == this->device()) return *this;
  return detail::tensor_methods().to_device(*this, device);
}

Tensor Tensor::to(DType dtype) const {
  SG_CHECK(defined(), "to: the tensor is undefined");
  if (dtype == this->dtype()) return *this;
  return detail::tensor_methods().to_dtype(*this, dtype);
}

template <typename T>
std::vector<T> Tensor::to_vector_as() const {
  SG_CHECK(defined(), "to_vector: the tensor is undefined");
  detail::refuse_under_capture("to_vector", device(), "reads values back to the host");
  const int64_t n = numel();
  std::vector<T> out(static_cast<size_t>(n));
  if (n == 0) return out;
  const Tensor host = device().is_cpu() ? *this : detail::tensor_methods().copy_to(*this, kCPU, dtype());
  auto convert = [&](const auto* p) {
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<T>(p[i]);
  };
  switch (host.dtype()) {
    case DType::Float32: convert(static_cast<const float*>(host.data_ptr())); break;
    case DType::Float64: convert(static_cast<const double*>(host.data_ptr())); break;
    case DType::Int64: convert(static_cast<const int64_t*>(host.data_ptr())); break;
  }
  return out;
}
template std::vector<float> Tensor::to_vector_as<float>() const;
template std::vector<double> Tensor::to_vector_as<double>() const;
template std::vector<int64_t> Tensor::to_vector_as<int64_t>() const;

std::vector<double> Tensor::to_vector() const { return to_vector_as<double>(); }

double Tensor::item() const {
  SG_CHECK(defined(), "item: the tensor is undefined");
  SG_CHECK(numel() == 1, "item: expected a tensor with one element, got shape ", shape());
  detail::refuse_under_capture("item", device(), "reads a value back to the host");
  return to_vector()[0];
}

Tensor Tensor::clone() const {
  SG_CHECK(defined(), "clone: the tensor is undefined");
  return detail::tensor_methods().copy_to(*this, device(), dtype());
}

Tensor& Tensor::copy_(const Tensor& src) {
  SG_CHECK(defined(), "copy_: the destination is undefined");
  detail::tensor_methods().copy_into(*this, src);
  return *this;
}

Tensor& Tensor::fill_(double value) {
  SG_CHECK(defined(), "fill_: the tensor is undefined");
  detail::tensor_methods().fill(*this, value);
  return *this;
}

Tensor Tensor::dense() const {
  SG_CHECK(defined(), "dense: the tensor is undefined");
  if (structure() == Structure::Dense) return *this;
  return detail::tensor_methods().dense(*this);
}

// ---- autograd state ------------------------------------------------------------------------

bool Tensor::requires_grad() const { return impl().requires_grad || impl().grad_fn != nullptr; }

Tensor& Tensor::requires_grad_(bool on) {
  SG_CHECK(defined(), "requires_grad_: the tensor is undefined");
  SG_CHECK(!on || is_floating_point(dtype()), "requires_grad_: only floating-point tensors can require gradients, got ",
           dtype());
  SG_CHECK(is_leaf(), "requires_grad_: can only be set on a leaf tensor (this one was produced by '",
           detail::tensor_methods().producer_name(*this), "'); use detach() first");
  impl().requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const { return impl().grad_fn == nullptr; }

Tensor Tensor::grad() const {
  SG_CHECK(defined(), "grad: the tensor is undefined");
  return impl().grad ? Tensor(impl().grad) : Tensor();
}

void Tensor::zero_grad() {
  SG_CHECK(defined(), "zero_grad: the tensor is undefined");
  impl().grad.reset();
}

void Tensor::set_grad(const Tensor& g) {
  SG_CHECK(defined(), "set_grad: the tensor is undefined");
  if (!g.defined()) {
    impl().grad.reset();
    return;
  }
  SG_CHECK(g.shape() == shape() && g.dtype() == dtype() && g.device() == device(), "set_grad: gradient ",
           g.shape(), " ", g.dtype(), " on ", g.device(), " does not match tensor ", shape(), " ", dtype(),
           " on ", device());
  impl().grad = detail::tensor_methods().project_gradient(g, structure()).impl_ptr();
}

Tensor Tensor::detach() const {
  SG_CHECK(defined(), "detach: the tensor is undefined");
  auto impl_copy = std::make_shared<TensorImpl>();
  impl_copy->storage = impl().storage;
  impl_copy->shape = impl().shape;
  impl_copy->dtype = impl().dtype;
  impl_copy->structure = impl().structure;
  return Tensor(impl_copy);
}

void Tensor::backward(bool retain_graph) const {
  SG_CHECK(defined(), "backward: called on an undefined tensor");
  detail::tensor_methods().backward(*this, Tensor(), retain_graph);
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  SG_CHECK(gradient.defined(), "backward: the explicit gradient is undefined");
  detail::tensor_methods().backward(*this, gradient, retain_graph);
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) {
  if (!t.defined()) return out << "Tensor(undefined)";
  out << "Tensor(shape=" << t.shape() << ", dtype=" << t.dtype() << ", device=" << t.device()
      << ", structure=" << t.structure();
  if (t.requires_grad()) out << ", requires_grad";
  out << ")";
  const bool integers = t.dtype() == DType::Int64;
  const std::vector<double> v = integers ? std::vector<double>() : t.to_vector();
  const std::vector<int64_t> iv = integers ? t.to_vector_as<int64_t>() : std::vector<int64_t>();
  if (t.dim() == 0) return integers ? out << "\n" << iv[0] : out << "\n" << std::setprecision(5) << v[0];
  // Rank 1 prints one row; rank ≥ 2 prints rows of the last dimension, the others flattened.
  const int64_t cols = t.size(-1);
  const int64_t rows = t.dim() == 1 ? 1 : (cols ? t.numel() / cols : shape_numel({t.shape().begin(), t.shape().end() - 1}));
  const int64_t show = 6;
  auto print_row = [&](int64_t r) {
    out << "[";
    for (int64_t c = 0; c < cols; ++c) {
      if (cols > show && c == show / 2) {
        out << "  ...";
        c = cols - show / 2 - 1;
        continue;
      }
      const size_t i = static_cast<size_t>(r * cols + c);
      if (integers) out << std::setw(11) << iv[i];
      else out << std::setw(11) << std::setprecision(5) << v[i];
    }
    out << "]";
  };
  out << "\n";
  if (t.dim() == 1) {
    print_row(0);
    return out;
  }
  out << "[";
  for (int64_t r = 0; r < rows; ++r) {
    if (rows > show && r == show / 2) {
      out << (r ? "\n " : "") << " ...";
      r = rows - show / 2 - 1;
      continue;
    }
    if (r) out << "\n ";
    print_row(r);
  }
  return out << "]";
}

}  // namespace sg
