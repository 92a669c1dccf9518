// sg::Tensor: a cheap handle (shared_ptr<TensorImpl>) with value semantics, like
// torch::Tensor. Contiguous row-major storage on cpu or cuda:N, float32 or float64, and a
// Structure tag. Autograd state (requires_grad, grad, the record that produced it) lives
// on the impl; the tape itself is in autograd/.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <structgrad/core/error.h>
#include <structgrad/core/storage.h>
#include <structgrad/core/types.h>

namespace sg {

namespace autograd {
struct Node;
}

/// Options for factories, chainable like libtorch's:
/// `sg::zeros({2, 3}, sg::TensorOptions().dtype(sg::kFloat64).device("cuda:0"))`.
/// A DType or a Device converts to TensorOptions, so `sg::ones({3}, sg::kFloat64)` works.
struct TensorOptions {
  DType dtype_ = DType::Float32;  ///< float32 unless set
  Device device_ = Device();      ///< cpu unless set
  bool requires_grad_ = false;    ///< make the result a parameter (a leaf requiring grad)
  bool has_dtype_ = false;        ///< the dtype was set (factories that infer one respect it)

  TensorOptions() = default;
  /// @{
  /// Options with only the dtype or the device set, so both convert implicitly:
  /// `sg::zeros({2}, sg::kFloat64)`, `sg::zeros({2}, "cuda:0")`.
  TensorOptions(DType d) : dtype_(d), has_dtype_(true) {}
  TensorOptions(Device d) : device_(d) {}
  TensorOptions(const char* d) : device_(d) {}
  /// @}

  /// @{
  /// A copy with one option changed (chainable).
  /// Example: `sg::TensorOptions().dtype(sg::kFloat64).requires_grad()`.
  TensorOptions dtype(DType d) const { auto o = *this; o.dtype_ = d; o.has_dtype_ = true; return o; }
  /// The dtype set, or `fallback` where none was. Example: `options.dtype_or(sg::kInt64)`.
  DType dtype_or(DType fallback) const { return has_dtype_ ? dtype_ : fallback; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  TensorOptions requires_grad(bool r = true) const { auto o = *this; o.requires_grad_ = r; return o; }
  /// @}
};

/// What a Tensor handle points at: storage, shape, dtype, structure tag and autograd state.
/// Internal; use Tensor's accessors. Example: `t.impl().structure`.
struct TensorImpl {
  std::shared_ptr<Storage> storage;        ///< the data (shared by views)
  Shape shape;                             ///< outermost dimension first
  DType dtype = DType::Float32;            ///< element type
  Structure structure = Structure::Dense;  ///< the structure tag the ops maintain

  // Autograd state.
  bool requires_grad = false;             ///< set on leaves by the user
  std::shared_ptr<TensorImpl> grad;       ///< accumulated gradient of a leaf
  std::shared_ptr<autograd::Node> grad_fn;  ///< the record that produced this tensor, if any
  uint32_t output_nr = 0;                 ///< which output of grad_fn this is

  /// Number of elements. Example: `t.impl().numel()`.
  int64_t numel() const { return shape_numel(shape); }
  /// The storage's device. Example: `t.impl().device()`.
  Device device() const { return storage->device; }
};

/// An n-dimensional array on cpu or cuda:N with a dtype, a Structure tag and autograd state;
/// a cheap shared handle like torch::Tensor (copies share data). Make one with the factories:
/// `auto x = sg::randn({4, 3});`
class Tensor {
 public:
  /// An undefined tensor (like a default torch::Tensor). `defined()` is false.
  Tensor() = default;
  /// Wraps an impl (internal; the factories build tensors). Example: `sg::Tensor(t.impl_ptr())`.
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  /// Allocates an uninitialised tensor. Prefer the factories (sg::zeros, sg::randn, ...).
  static Tensor empty(const Shape& shape, TensorOptions options = {});

  /// False for a default-constructed tensor. Example: `if (w.grad().defined()) ...`
  bool defined() const { return impl_ != nullptr; }
  /// The shape, e.g. [1024, 16]. Example: `auto rows = x.shape()[0];`
  const Shape& shape() const { return impl().shape; }
  /// Number of dimensions. Example: `x.dim() == 2`.
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  /// Size of dimension `d`; negative d counts from the end.
  int64_t size(int64_t d) const;
  /// Number of elements. Example: `sg::zeros({2, 3}).numel() == 6`.
  int64_t numel() const { return impl().numel(); }
  /// Element type. Example: `x.dtype() == sg::kFloat32`.
  DType dtype() const { return impl().dtype; }
  /// Where the data lives. Example: `x.device() == sg::kCPU`.
  Device device() const { return impl().device(); }
  /// Dense, UpperTriangular or Symmetric. Example: `u.structure() == sg::Structure::UpperTriangular`.
  Structure structure() const { return impl().structure; }
  /// True on a CUDA device. Example: `if (x.is_cuda()) ...`
  bool is_cuda() const { return device().is_cuda(); }
  /// numel() × element size. Example: `sg::zeros({4}).nbytes() == 16`.
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(dtype()); }

  /// Raw pointer to the first element (host or device memory).
  void* data_ptr() const { return impl().storage->data; }
  /// Typed pointer; throws sg::Error when T does not match dtype().
  template <typename T>
  T* data() const;

  // ---- moving data -------------------------------------------------------------------
  /// Copy to another device (returns *this when already there). Differentiable.
  Tensor to(Device device) const;
  /// Convert to another dtype (returns *this when already of it). Differentiable.
  Tensor to(DType dtype) const;
  /// The value of a one-element tensor; throws sg::Error otherwise. Synchronises.
  double item() const;
  /// All elements as doubles, row-major. Synchronises when on a device.
  std::vector<double> to_vector() const;
  /// All elements as T (float, double or int64_t), row-major. Example: `auto v = t.to_vector_as<float>();`
  template <typename T>
  std::vector<T> to_vector_as() const;
  /// A contiguous copy with the same shape, dtype, device and structure (not recorded).
  Tensor clone() const;

  // ---- autograd ----------------------------------------------------------------------
  /// True for a parameter, or a result computed from one while grad mode was on.
  /// Example: `sg::matmul(w, x).requires_grad()`.
  bool requires_grad() const;
  /// Marks a leaf as a parameter whose gradient is accumulated into grad().
  /// Throws on a non-leaf. Returns *this. Example: `auto w = sg::randn({3, 3}).requires_grad_();`
  Tensor& requires_grad_(bool on = true);
  /// True when no recorded op produced this tensor.
  bool is_leaf() const;
  /// The accumulated gradient (undefined until a backward reaches this leaf). It has the
  /// structure of this tensor: grad of an UpperTriangular is upper, of a Symmetric symmetric.
  Tensor grad() const;
  /// Drops the accumulated gradient (like libtorch's zero_grad(set_to_none=true)).
  void zero_grad();
  /// Sets the accumulated gradient (used by optimizers and distributed training).
  void set_grad(const Tensor& g);
  /// A tensor sharing this storage, outside any graph and not requiring grad.
  Tensor detach() const;
  /// Reverse-mode pass from this scalar (or with an explicit upstream gradient of this
  /// shape). Consumes the records it walks unless retain_graph. Example: `loss.backward();`
  void backward(bool retain_graph = false) const;
  /// Backward with an explicit upstream gradient of this tensor's shape.
  /// Example: `y.backward(sg::ones_like(y));`
  void backward(const Tensor& gradient, bool retain_graph = false) const;

  /// The same values as a Dense tensor (forgets the structure). Differentiable identity.
  Tensor dense() const;

  // ---- method forms of the common ops, as libtorch writes them (each calls the sg:: op) ------
  /// @{
  /// x.sum() is sg::sum(x), x.sum(1) sg::sum(x, 1); likewise mean. Example: `auto loss = (y - t).square().mean();`
  Tensor sum() const;
  Tensor sum(int64_t dim, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(int64_t dim, bool keepdim = false) const;
  /// @}
  /// @{
  /// The whole-tensor max, min and 2-norm (sg::max(x), sg::min(x), sg::norm(x)). Example: `x.max().item()`
  Tensor max() const;
  Tensor min() const;
  Tensor norm() const;
  /// @}
  /// @{
  /// The elementwise ops of the same names. Example: `auto z = (x - mu).square();`
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor square() const;
  /// @}
  /// sg::reshape(x, shape). Example: `x.reshape({-1})`
  Tensor reshape(const Shape& shape) const;
  /// The transpose of a matrix (a 0-d or 1-D tensor is returned as is; more dimensions are an
  /// sg::Error: use mT()), as torch's t(). Example: `auto wt = w.t();`
  Tensor t() const;
  /// The transpose of each matrix of a batch [..., r, c], as torch's mT. Example: `auto lt = L.mT();`
  Tensor mT() const;

  // ---- in-place writes (not recorded; bump the storage version) ---------------------
  /// Copies `src` (same shape, dtype and device) into this tensor.
  Tensor& copy_(const Tensor& src);
  /// Sets every element to `value`.
  Tensor& fill_(double value);

  /// Internal access to the impl.
  TensorImpl& impl() const;
  /// The shared impl pointer (internal). Example: `auto p = t.impl_ptr();`
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  /// True when both handles refer to the same impl.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

/// A tensor over memory that another library owns (a torch::Tensor's, a NumPy array's): contiguous,
/// row-major, `shape` and `options`' dtype and device; no copy. `release` runs on the host when the
/// last tensor viewing it is gone; device memory must also outlive the work already queued on it. Dense; make it structured with
/// sg::as_upper / sg::as_symmetric. Example: `auto t = sg::from_blob(ptr, {n, n}, sg::kFloat64);`
Tensor from_blob(void* data, const Shape& shape, TensorOptions options = {}, std::function<void()> release = {});

/// Prints "Tensor(shape=[2, 2], dtype=float32, device=cpu, structure=Dense)" and the values.
std::ostream& operator<<(std::ostream& out, const Tensor& t);

namespace detail {
/// A new tensor impl with fresh storage, no autograd state.
Tensor make_tensor(const Shape& shape, DType dtype, Device device, Structure structure = Structure::Dense);
/// A new tensor impl over `storage` (its first bytes), no autograd state.
Tensor make_tensor(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype, Structure structure);
/// A new tensor viewing `t`'s storage with another shape and/or structure tag.
Tensor alias_with(const Tensor& t, const Shape& shape, Structure structure);
/// Checks that all tensors are defined, on one device and of one dtype; `op` names the caller.
void check_same_device_dtype(const char* op, const Tensor& a, const Tensor& b);
/// Checks that `t` is float32 or float64 ("add: expected a floating-point tensor, got int64").
void check_floating(const char* op, const Tensor& t);
/// Checks that `shape` has no negative dimension and that its bytes fit in int64; `op`
/// names the caller ("zeros: negative dimension in shape [2, -1]").
void check_shape(const char* op, const Shape& shape, DType dtype);
}  // namespace detail

template <typename T>
T* Tensor::data() const {
  constexpr DType want = std::is_integral_v<T> ? DType::Int64 : (sizeof(T) == 4 ? DType::Float32 : DType::Float64);
  static_assert(std::is_same_v<std::remove_const_t<T>, float> || std::is_same_v<std::remove_const_t<T>, double> ||
                    std::is_same_v<std::remove_const_t<T>, int64_t>,
                "data<T>: T must be float, double or int64_t");
  SG_CHECK(dtype() == want, "data<T>: tensor has dtype ", dtype(), ", requested ", dtype_name(want));
  return static_cast<T*>(data_ptr());
}

}  // namespace sg
