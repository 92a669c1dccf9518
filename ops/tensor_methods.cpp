// What core's Tensor methods and the autograd engine need from the ops layer, the tables that
// core/dispatch.h and autograd/gradient_math.h declare: device and dtype copies through the device's
// backend, the in-place writes, the differentiable to() and dense(), backward, and the engine's
// gradient sums and projections; and the method forms of the common ops (x.sum(), x.mT(), ...).
#include <structgrad/autograd/grad_mode.h>
#include <structgrad/autograd/node.h>
#include <structgrad/ops/compare.h>
#include <structgrad/ops/elementwise.h>
#include <structgrad/ops/reduce.h>
#include <structgrad/ops/shape.h>
#include <structgrad/ops/structure.h>

#include "autograd/gradient_math.h"
#include "core/dispatch.h"
#include "ops/backend.h"
#include "ops/op_util.h"

namespace sg::detail {

namespace {

Tensor copy_to(const Tensor& src, Device device, DType dtype) {
  Tensor out = make_tensor(src.shape(), dtype, device, src.structure());
  if (src.numel() == 0) return out;
  if (src.device() == device) {
    backend_for(device).copy(src, out);
  } else if (src.device().is_cpu()) {
    // Convert on the host first, then one upload.
    Tensor host = src.dtype() == dtype ? src : copy_to(src, src.device(), dtype);
    backend_for(device).copy_from_host(host.data_ptr(), out);
  } else if (device.is_cpu()) {
    Tensor host = make_tensor(src.shape(), src.dtype(), device, src.structure());
    backend_for(src.device()).copy_to_host(src, host.data_ptr());
    if (dtype != src.dtype()) return copy_to(host, device, dtype);
    return host;
  } else {
    // Between two GPUs: through the host (rare; peer copies are not needed here).
    return copy_to(copy_to(src, kCPU, src.dtype()), device, dtype);
  }
  return out;
}

Tensor to_device(const Tensor& src, Device device) {
  Tensor out = copy_to(src, device, src.dtype());
  if (autograd::needs_record({src})) {
    const Device from = src.device();
    autograd::record("to(device)", {src}, {out}, {}, [from](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{ctx.grad_outputs[0].to(from)};
    });
  }
  return out;
}

Tensor to_dtype(const Tensor& src, DType dtype) {
  Tensor out = copy_to(src, src.device(), dtype);
  if (autograd::needs_record({src})) {
    const DType from = src.dtype();
    autograd::record("to(dtype)", {src}, {out}, {}, [from](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{ctx.grad_outputs[0].to(from)};
    });
  }
  return out;
}

void check_writable(const char* op, const Tensor& t) {
  SG_CHECK(!(autograd::grad_mode_enabled() && t.requires_grad() && t.is_leaf()), op,
           ": a leaf that requires grad is being written in place; use sg::NoGradGuard");
}

void copy_into(Tensor& dst, const Tensor& src) {
  SG_CHECK(src.defined(), "copy_: the source is undefined");
  check_same_device_dtype("copy_", dst, src);
  SG_CHECK(src.shape() == dst.shape(), "copy_: source of shape ", src.shape(),
           " does not fit destination of shape ", dst.shape());
  check_writable("copy_", dst);
  if (dst.numel() > 0) backend_for(dst.device()).copy(src, dst);
  dst.impl().storage->version++;
}

void fill(Tensor& t, double value) {
  check_writable("fill_", t);
  if (t.numel() > 0) backend_for(t.device()).fill(t, value);
  t.impl().storage->version++;
}

Tensor dense(const Tensor& t) {
  Tensor out = alias_with(t, t.shape(), Structure::Dense);
  if (autograd::needs_record({t})) {
    autograd::record("dense", {t}, {out}, {}, [](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{ctx.grad_outputs[0]};
    });
  }
  return out;
}

const char* producer_name(const Tensor& t) {
  return t.impl().grad_fn ? t.impl().grad_fn->name.c_str() : "";
}

Tensor add_tensors(const Tensor& a, const Tensor& b) { return add(a, b); }

}  // namespace

const TensorMethods& tensor_methods() {
  static const TensorMethods methods = [] {
    TensorMethods m;
    m.copy_to = copy_to;
    m.to_device = to_device;
    m.to_dtype = to_dtype;
    m.copy_into = copy_into;
    m.fill = fill;
    m.dense = dense;
    m.backward = autograd::run_backward;
    m.project_gradient = autograd::project_gradient;
    m.producer_name = producer_name;
    return m;
  }();
  return methods;
}

}  // namespace sg::detail

namespace sg::autograd {

const GradientMath& gradient_math() {
  static const GradientMath math{detail::add_tensors, detail::project};
  return math;
}

}  // namespace sg::autograd

namespace sg {

Tensor Tensor::sum() const { return ::sg::sum(*this); }
Tensor Tensor::sum(int64_t dim, bool keepdim) const { return ::sg::sum(*this, dim, keepdim); }
Tensor Tensor::mean() const { return ::sg::mean(*this); }
Tensor Tensor::mean(int64_t dim, bool keepdim) const { return ::sg::mean(*this, dim, keepdim); }
Tensor Tensor::max() const { return ::sg::max(*this); }
Tensor Tensor::min() const { return ::sg::min(*this); }
Tensor Tensor::norm() const { return ::sg::norm(*this); }
Tensor Tensor::abs() const { return ::sg::abs(*this); }
Tensor Tensor::exp() const { return ::sg::exp(*this); }
Tensor Tensor::log() const { return ::sg::log(*this); }
Tensor Tensor::sqrt() const { return ::sg::sqrt(*this); }
Tensor Tensor::square() const { return ::sg::square(*this); }
Tensor Tensor::reshape(const Shape& shape) const { return ::sg::reshape(*this, shape); }

Tensor Tensor::t() const {
  SG_CHECK(dim() <= 2, "t: expected a tensor of at most 2 dimensions, got shape ", shape(),
           " (mT() transposes each matrix of a batch)");
  return ::sg::transpose(*this);
}

Tensor Tensor::mT() const {
  SG_CHECK(dim() >= 2, "mT: expected a matrix or a batch of them, got shape ", shape());
  return ::sg::transpose(*this);
}

}  // namespace sg
