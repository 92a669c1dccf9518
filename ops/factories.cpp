// Factories and the global counter-based generator.
#include <structgrad/ops/factories.h>

#include <cmath>
#include <mutex>
#include <type_traits>

#include "ops/op_util.h"

namespace sg {

namespace {
struct Generator {
  std::mutex mutex;
  uint64_t seed = 0x5EEDC0FFEEull;
  uint64_t offset = 0;
};
Generator& generator() {
  static Generator g;
  return g;
}

Tensor make(const char* op, const Shape& shape, const TensorOptions& o) {
  detail::check_shape(op, shape, o.dtype_);
  return detail::make_tensor(shape, o.dtype_, o.device_);
}

Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor filled(const char* op, const Shape& shape, double value, const TensorOptions& options) {
  Tensor t = make(op, shape, options);
  if (t.numel() > 0) detail::backend_of(t).fill(t, value);
  return finish(t, options);
}
}  // namespace

namespace detail {
std::pair<uint64_t, uint64_t> reserve_random(uint64_t count) {
  Generator& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  const uint64_t first = g.offset;
  g.offset += count;
  return {g.seed, first};
}
}  // namespace detail

void manual_seed(uint64_t seed) {
  Generator& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.seed = seed;
  g.offset = 0;
}

Tensor full(const Shape& shape, double value, TensorOptions options) { return filled("full", shape, value, options); }
Tensor zeros(const Shape& shape, TensorOptions options) { return filled("zeros", shape, 0.0, options); }
Tensor ones(const Shape& shape, TensorOptions options) { return filled("ones", shape, 1.0, options); }
Tensor zeros_like(const Tensor& t) {
  detail::check_defined("zeros_like", t);
  return zeros(t.shape(), TensorOptions().dtype(t.dtype()).device(t.device()));
}
Tensor ones_like(const Tensor& t) {
  detail::check_defined("ones_like", t);
  return ones(t.shape(), TensorOptions().dtype(t.dtype()).device(t.device()));
}

Tensor eye(int64_t n, TensorOptions options) {
  SG_CHECK(n >= 0, "eye: negative size ", n);
  detail::check_shape("eye", {n, n}, options.dtype_);
  Tensor z = zeros({n, n}, options.requires_grad(false));
  Tensor out = make("eye", {n, n}, options);
  if (n > 0) detail::backend_of(z).set_diagonal(z, ones({n}, options.requires_grad(false)), out);
  return finish(out, options);
}

namespace {
/// A tensor of `shape` on options' device from row-major host values of type T, converted to
/// options' dtype (`inferred` where the options name none).
template <typename T>
Tensor from_host_values(const std::vector<T>& values, const Shape& shape, const TensorOptions& options, DType inferred) {
  SG_CHECK(shape_numel(shape) == static_cast<int64_t>(values.size()), "from_vector: ", values.size(),
           " values do not fill shape ", shape);
  const DType dtype = options.dtype_or(inferred);
  detail::check_shape("from_vector", shape, dtype);
  Tensor host = detail::make_tensor(shape, dtype, kCPU);
  auto convert = [&](auto* p) {
    using Out = std::remove_pointer_t<decltype(p)>;
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<Out>(values[i]);
  };
  switch (dtype) {
    case DType::Float32: convert(static_cast<float*>(host.data_ptr())); break;
    case DType::Float64: convert(static_cast<double*>(host.data_ptr())); break;
    case DType::Int64: convert(static_cast<int64_t*>(host.data_ptr())); break;
  }
  return finish(host.to(options.device_), options);
}
}  // namespace

Tensor from_vector(const std::vector<double>& values, const Shape& shape, TensorOptions options) {
  return from_host_values(values, shape, options, DType::Float64);
}

Tensor from_vector(const std::vector<float>& values, const Shape& shape, TensorOptions options) {
  return from_host_values(values, shape, options, DType::Float32);
}

Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape, TensorOptions options) {
  return from_host_values(values, shape, options, DType::Int64);
}

Tensor from_vector(const std::vector<double>& values, TensorOptions options) {
  return from_vector(values, {static_cast<int64_t>(values.size())}, options);
}
Tensor from_vector(const std::vector<float>& values, TensorOptions options) {
  return from_vector(values, {static_cast<int64_t>(values.size())}, options);
}
Tensor from_vector(const std::vector<int64_t>& values, TensorOptions options) {
  return from_vector(values, {static_cast<int64_t>(values.size())}, options);
}

Tensor arange(double start, double end, double step, TensorOptions options) {
  SG_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
           "arange: start, end and step must be finite, got ", start, ", ", end, " and ", step);
  SG_CHECK(step != 0, "arange: step must be non-zero");
  const double count = std::ceil((end - start) / step);
  SG_CHECK(count < 9.007199254740992e15, "arange: [", start, ", ", end, ") in steps of ", step,
           " has too many elements");
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + step * static_cast<double>(i);
  return from_vector(v, {n}, options.dtype(options.dtype_));
}
Tensor arange(int64_t n, TensorOptions options) { return arange(0.0, static_cast<double>(n), 1.0, options); }

Tensor tensor(std::initializer_list<double> values, TensorOptions options) {
  return from_vector(std::vector<double>(values), {static_cast<int64_t>(values.size())}, options.dtype(options.dtype_));
}

Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, TensorOptions options) {
  const int64_t r = static_cast<int64_t>(rows.size());
  const int64_t c = r ? static_cast<int64_t>(rows.begin()->size()) : 0;
  std::vector<double> v;
  v.reserve(static_cast<size_t>(r * c));
  for (const auto& row : rows) {
    SG_CHECK(static_cast<int64_t>(row.size()) == c, "tensor: rows of unequal length (", row.size(), " vs ", c, ")");
    v.insert(v.end(), row.begin(), row.end());
  }
  return from_vector(v, {r, c}, options.dtype(options.dtype_));
}

namespace {
/// Why random numbers cannot be captured: each replay would draw the same ones.
constexpr const char* kSeededOnHost =
    "draws random numbers from a seed the host passes at launch, so every replay would repeat the captured "
    "draw; draw them into a static input before each replay";

Tensor random_tensor(const char* op, const Shape& shape, TensorOptions options, detail::RandomKind kind) {
  SG_CHECK(is_floating_point(options.dtype_), op, ": expected a floating-point dtype, got ", options.dtype_);
  Tensor t = make(op, shape, options);
  detail::refuse_under_capture(op, t.device(), kSeededOnHost);
  const auto [seed, offset] = detail::reserve_random(static_cast<uint64_t>(t.numel()));
  if (t.numel() > 0) detail::backend_of(t).random(t, kind, seed, offset);
  return finish(t, options);
}
}  // namespace

Tensor rand(const Shape& shape, TensorOptions options) {
  return random_tensor("rand", shape, options, detail::RandomKind::Uniform);
}
Tensor randn(const Shape& shape, TensorOptions options) {
  return random_tensor("randn", shape, options, detail::RandomKind::Normal);
}

}  // namespace sg

namespace sg {

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options) {
  SG_CHECK(low < high, "randint: expected low < high, got [", low, ", ", high, ")");
  SG_CHECK(!options.requires_grad_, "randint: integers cannot require gradients");
  const DType dtype = options.dtype_or(DType::Int64);
  Tensor t = make("randint", shape, options.dtype(DType::Int64));
  detail::refuse_under_capture("randint", t.device(), kSeededOnHost);
  const auto [seed, offset] = detail::reserve_random(static_cast<uint64_t>(t.numel()));
  const uint64_t span = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  if (t.numel() > 0) detail::backend_of(t).random_integers(t, low, span, seed, offset);
  return dtype == DType::Int64 ? t : t.to(dtype);
}

Tensor randperm(int64_t n, TensorOptions options) {
  SG_CHECK(n >= 0, "randperm: negative size ", n);
  SG_CHECK(!options.requires_grad_, "randperm: a permutation cannot require gradients");
  const DType dtype = options.dtype_or(DType::Int64);
  Tensor t = make("randperm", {n}, options.dtype(DType::Int64));
  detail::refuse_under_capture("randperm", t.device(), kSeededOnHost);
  const auto [seed, offset] = detail::reserve_random(static_cast<uint64_t>(n));
  if (n > 0) detail::backend_of(t).random_permutation(t, seed, offset);
  return dtype == DType::Int64 ? t : t.to(dtype);
}

}  // namespace sg
