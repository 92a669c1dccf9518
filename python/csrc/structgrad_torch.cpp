// structgrad's products as PyTorch operators (the structgrad:: namespace of torch.ops).
//
// Each operator takes torch tensors, views their memory as structgrad tensors (sg::from_blob, no
// copy), and runs structgrad's out-style entry point into an output that torch allocated. On CUDA
// the work is queued on torch's current stream and every temporary comes from torch's caching
// allocator, so the ops follow torch's stream semantics like its own. The autograd formulas are
// here (the Autograd dispatch key), so a call costs no Python beyond torch.ops; the fake (meta)
// implementations for torch.compile are in Python (structgrad/torch/__init__.py).
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <string>

#include <structgrad/structgrad.h>

#ifdef SG_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace {

/// The structure named by a Python argument.
sg::Structure parse_structure(const char* op, c10::string_view name) {
  if (name == "dense") return sg::Structure::Dense;
  if (name == "upper") return sg::Structure::UpperTriangular;
  if (name == "lower") return sg::Structure::LowerTriangular;
  if (name == "symmetric") return sg::Structure::Symmetric;
  SG_FAIL(op, ": unknown structure '", std::string(name), "' (expected 'dense', 'upper', 'lower' or 'symmetric')");
}

sg::DType dtype_of(const char* op, const at::Tensor& t) {
  if (t.scalar_type() == at::kFloat) return sg::DType::Float32;
  if (t.scalar_type() == at::kDouble) return sg::DType::Float64;
  SG_FAIL(op, ": expected float32 or float64 tensors, got ", c10::toString(t.scalar_type()));
}

sg::Device device_of(const char* op, const at::Tensor& t) {
  if (t.device().is_cpu()) return sg::Device();
  SG_CHECK(t.device().is_cuda(), op, ": expected cpu or cuda tensors, got one on ", t.device().str());
  return sg::Device(sg::DeviceType::CUDA, t.device().index());
}

/// A structgrad view of a torch matrix. Rank and layout are checked here (structgrad's tensors are
/// packed row-major); dtype, device, shape and structure rules are structgrad's own checks, whose
/// messages name the op the same way on every device. A strided input is read through a contiguous
/// copy, never as it lies.
struct Matrix {
  at::Tensor memory;  // keeps the (possibly copied) data alive for the call
  sg::Tensor view;
};

Matrix matrix(const char* op, const char* what, const at::Tensor& t) {
  SG_CHECK(t.defined(), op, ": ", what, " is undefined");
  SG_CHECK(t.dim() == 2, op, ": expected ", what, " to be a matrix, got shape ",
           sg::shape_str(std::vector<int64_t>(t.sizes().begin(), t.sizes().end())));
  Matrix m;
  m.memory = t.contiguous();
  const sg::TensorOptions options = sg::TensorOptions().dtype(dtype_of(op, t)).device(device_of(op, t));
  try {
    m.view = sg::from_blob(m.memory.data_ptr(), {t.size(0), t.size(1)}, options);
  } catch (const sg::Error& e) {
    SG_FAIL(op, ": ", e.what());
  }
  return m;
}

/// float32 products on CUDA run in TF32 where torch allows it for its own matmuls.
sg::Precision precision_for(const at::Tensor& t) {
  const bool tf32 = t.is_cuda() && t.scalar_type() == at::kFloat && at::globalContext().allowTF32CuBLAS();
  return tf32 ? sg::Precision::TF32 : sg::Precision::Float32;
}

#ifdef SG_TORCH_CUDA
void* torch_allocate(size_t nbytes, int device, CUstream_st* stream) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  return c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(nbytes, stream);
}

void torch_deallocate(void* ptr, int) { c10::cuda::CUDACachingAllocator::raw_delete(ptr); }

/// structgrad takes every device allocation from torch's caching allocator, set once when the
/// first CUDA op runs (before structgrad has allocated anything).
void use_torch_allocator() {
  static const bool installed = [] {
    sg::cuda::use_external_allocator({&torch_allocate, &torch_deallocate});
    return true;
  }();
  (void)installed;
}

/// For one call: the tensor's device current and its torch stream structgrad's stream.
struct DeviceScope {
  explicit DeviceScope(const at::Tensor& t)
      : device_guard(t.device()),
        stream_guard((use_torch_allocator(), at::cuda::getCurrentCUDAStream(t.device().index()).stream()),
                     t.device().index()) {}
  c10::cuda::CUDAGuard device_guard;
  sg::cuda::StreamGuard stream_guard;
};
#endif

/// Runs `body` with the CUDA state of `t`'s device set up (nothing to do on the CPU). structgrad's
/// errors are rethrown with the torch op's name first; torch turns them into Python RuntimeErrors.
template <typename Body>
void on_device_of(const char* op, const at::Tensor& t, Body&& body) {
  SG_CHECK(!t.is_cuda() || sg::cuda::built_with_cuda(), op,
           ": this build of structgrad's PyTorch ops has no CUDA support");
  try {
#ifdef SG_TORCH_CUDA
    if (t.is_cuda()) {
      DeviceScope scope(t);
      body();
      return;
    }
#endif
    body();
  } catch (const sg::Error& e) {
    SG_FAIL(op, ": ", e.what());
  }
}

/// An output of `like`'s dtype and device, or an empty tensor standing for "not computed".
at::Tensor output_or_none(bool needed, const at::Tensor& like, at::IntArrayRef shape) {
  return needed ? at::empty(shape, like.options()) : at::empty({0}, like.options());
}

at::Tensor structured_matmul(const at::Tensor& a, const at::Tensor& b, c10::string_view a_structure,
                             c10::string_view b_structure) {
  constexpr const char* op = "structured_matmul";
  const sg::Structure sa = parse_structure(op, a_structure), sb = parse_structure(op, b_structure);
  Matrix ma = matrix(op, "a", a), mb = matrix(op, "b", b);
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options().memory_format(at::MemoryFormat::Contiguous));
  on_device_of(op, a, [&] {
    sg::Tensor c = sg::from_blob(out.data_ptr(), {out.size(0), out.size(1)},
                                 sg::TensorOptions().dtype(dtype_of(op, a)).device(device_of(op, a)));
    sg::matmul_out(c, ma.view, sa, mb.view, sb, precision_for(a));
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> structured_matmul_backward(const at::Tensor& grad, const at::Tensor& a,
                                                             const at::Tensor& b, c10::string_view a_structure,
                                                             c10::string_view b_structure,
                                                             std::array<bool, 2> output_mask) {
  constexpr const char* op = "structured_matmul_backward";
  const sg::Structure sa = parse_structure(op, a_structure), sb = parse_structure(op, b_structure);
  Matrix mg = matrix(op, "grad", grad), ma = matrix(op, "a", a), mb = matrix(op, "b", b);
  at::Tensor da = output_or_none(output_mask[0], a, a.sizes());
  at::Tensor db = output_or_none(output_mask[1], b, b.sizes());
  on_device_of(op, a, [&] {
    sg::Tensor sda, sdb;
    const sg::TensorOptions options = sg::TensorOptions().dtype(dtype_of(op, a)).device(device_of(op, a));
    if (output_mask[0]) sda = sg::from_blob(da.data_ptr(), {a.size(0), a.size(1)}, options);
    if (output_mask[1]) sdb = sg::from_blob(db.data_ptr(), {b.size(0), b.size(1)}, options);
    sg::matmul_backward_out(mg.view, ma.view, sa, mb.view, sb, sda, sdb, precision_for(a));
  });
  return {da, db};
}

at::Tensor gram(const at::Tensor& a, c10::string_view a_structure) {
  constexpr const char* op = "gram";
  const sg::Structure sa = parse_structure(op, a_structure);
  Matrix ma = matrix(op, "a", a);
  at::Tensor out = at::empty({a.size(0), a.size(0)}, a.options().memory_format(at::MemoryFormat::Contiguous));
  on_device_of(op, a, [&] {
    sg::Tensor c = sg::from_blob(out.data_ptr(), {out.size(0), out.size(1)},
                                 sg::TensorOptions().dtype(dtype_of(op, a)).device(device_of(op, a)));
    sg::gram_out(c, ma.view, sa, precision_for(a));
  });
  return out;
}

at::Tensor gram_backward(const at::Tensor& grad, const at::Tensor& a, c10::string_view a_structure) {
  constexpr const char* op = "gram_backward";
  const sg::Structure sa = parse_structure(op, a_structure);
  Matrix mg = matrix(op, "grad", grad), ma = matrix(op, "a", a);
  at::Tensor da = at::empty(a.sizes(), a.options().memory_format(at::MemoryFormat::Contiguous));
  on_device_of(op, a, [&] {
    sg::Tensor sda = sg::from_blob(da.data_ptr(), {a.size(0), a.size(1)},
                                   sg::TensorOptions().dtype(dtype_of(op, a)).device(device_of(op, a)));
    sg::gram_backward_out(mg.view, ma.view, sa, sda, precision_for(a));
  });
  return da;
}

// ---- autograd: the projected gradients, from structgrad's backward kernels -------------------

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// The backward formulas are first order: their ops run below autograd. With create_graph a
/// second-order gradient would silently lose their terms, so it is refused.
void check_first_order(const char* op, const at::Tensor& grad, const variable_list& saved) {
  bool recorded = grad.requires_grad();
  for (const at::Tensor& t : saved) recorded = recorded || t.requires_grad();
  SG_CHECK(!(at::GradMode::is_enabled() && recorded), op,
           ": second-order gradients (backward with create_graph=True) are not supported");
}

/// The op `name` of this library, called through the dispatcher (below autograd here).
template <typename Signature>
c10::TypedOperatorHandle<Signature> op_handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

using MatmulSignature = at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view, c10::string_view);
using MatmulBackwardSignature = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                   const at::Tensor&, c10::string_view,
                                                                   c10::string_view, std::array<bool, 2>);
using GramSignature = at::Tensor(const at::Tensor&, c10::string_view);
using GramBackwardSignature = at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view);

class StructuredMatmulFunction : public torch::autograd::Function<StructuredMatmulFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b,
                            const std::string& a_structure, const std::string& b_structure) {
    static const auto op = op_handle<MatmulSignature>("structgrad::structured_matmul");
    ctx->save_for_backward({a, b});
    ctx->saved_data["a_structure"] = a_structure;
    ctx->saved_data["b_structure"] = b_structure;
    at::AutoDispatchBelowADInplaceOrView below;
    return op.call(a, b, a_structure, b_structure);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto op = op_handle<MatmulBackwardSignature>("structgrad::structured_matmul_backward");
    const variable_list saved = ctx->get_saved_variables();
    check_first_order("structured_matmul", grads[0], saved);
    const std::array<bool, 2> needs = {ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    auto [da, db] = op.call(grads[0], saved[0], saved[1], ctx->saved_data["a_structure"].toStringRef(),
                            ctx->saved_data["b_structure"].toStringRef(), needs);
    return {needs[0] ? da : at::Tensor(), needs[1] ? db : at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class GramFunction : public torch::autograd::Function<GramFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const std::string& a_structure) {
    static const auto op = op_handle<GramSignature>("structgrad::gram");
    ctx->save_for_backward({a});
    ctx->saved_data["a_structure"] = a_structure;
    at::AutoDispatchBelowADInplaceOrView below;
    return op.call(a, a_structure);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto op = op_handle<GramBackwardSignature>("structgrad::gram_backward");
    const variable_list saved = ctx->get_saved_variables();
    check_first_order("gram", grads[0], saved);
    return {op.call(grads[0], saved[0], ctx->saved_data["a_structure"].toStringRef()), at::Tensor()};
  }
};

/// True when the call records for autograd: grad mode on and an input that requires grad.
bool records(std::initializer_list<const at::Tensor*> inputs) {
  if (!at::GradMode::is_enabled()) return false;
  for (const at::Tensor* t : inputs)
    if (t->requires_grad()) return true;
  return false;
}

at::Tensor structured_matmul_autograd(const at::Tensor& a, const at::Tensor& b, c10::string_view a_structure,
                                      c10::string_view b_structure) {
  if (!records({&a, &b})) {  // nothing to record: on to the kernel below autograd
    static const auto op = op_handle<MatmulSignature>("structgrad::structured_matmul");
    at::AutoDispatchBelowADInplaceOrView below;
    return op.call(a, b, a_structure, b_structure);
  }
  return StructuredMatmulFunction::apply(a, b, std::string(a_structure), std::string(b_structure));
}

at::Tensor gram_autograd(const at::Tensor& a, c10::string_view a_structure) {
  if (!records({&a})) {
    static const auto op = op_handle<GramSignature>("structgrad::gram");
    at::AutoDispatchBelowADInplaceOrView below;
    return op.call(a, a_structure);
  }
  return GramFunction::apply(a, std::string(a_structure));
}

// The backward ops are not differentiable themselves (first-order gradients); their Autograd
// kernels only step below autograd, as the fallback would, without boxing the call.
std::tuple<at::Tensor, at::Tensor> structured_matmul_backward_autograd(const at::Tensor& grad, const at::Tensor& a,
                                                                      const at::Tensor& b, c10::string_view a_structure,
                                                                      c10::string_view b_structure,
                                                                      std::array<bool, 2> output_mask) {
  static const auto op = op_handle<MatmulBackwardSignature>("structgrad::structured_matmul_backward");
  at::AutoDispatchBelowADInplaceOrView below;
  return op.call(grad, a, b, a_structure, b_structure, output_mask);
}

at::Tensor gram_backward_autograd(const at::Tensor& grad, const at::Tensor& a, c10::string_view a_structure) {
  static const auto op = op_handle<GramBackwardSignature>("structgrad::gram_backward");
  at::AutoDispatchBelowADInplaceOrView below;
  return op.call(grad, a, a_structure);
}

bool built_with_cuda() {
#ifdef SG_TORCH_CUDA
  return sg::cuda::built_with_cuda();
#else
  return false;
#endif
}

}  // namespace

TORCH_LIBRARY(structgrad, m) {
  m.set_python_module("structgrad.torch");
  m.def("structured_matmul(Tensor a, Tensor b, str a_structure, str b_structure) -> Tensor");
  m.def(
      "structured_matmul_backward(Tensor grad, Tensor a, Tensor b, str a_structure, str b_structure, "
      "bool[2] output_mask) -> (Tensor, Tensor)");
  m.def("gram(Tensor a, str a_structure) -> Tensor");
  m.def("gram_backward(Tensor grad, Tensor a, str a_structure) -> Tensor");
  m.def("built_with_cuda() -> bool", &built_with_cuda);
}

namespace {
/// The kernels are the same functions on both devices: they view memory and call structgrad.
void register_kernels(torch::Library& m) {
  m.impl("structured_matmul", &structured_matmul);
  m.impl("structured_matmul_backward", &structured_matmul_backward);
  m.impl("gram", &gram);
  m.impl("gram_backward", &gram_backward);
}
}  // namespace

TORCH_LIBRARY_IMPL(structgrad, CPU, m) { register_kernels(m); }

TORCH_LIBRARY_IMPL(structgrad, Autograd, m) {
  m.impl("structured_matmul", &structured_matmul_autograd);
  m.impl("gram", &gram_autograd);
  m.impl("structured_matmul_backward", &structured_matmul_backward_autograd);
  m.impl("gram_backward", &gram_backward_autograd);
}

TORCH_LIBRARY_IMPL(structgrad, CUDA, m) { register_kernels(m); }
