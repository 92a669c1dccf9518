// structgrad's products and linear algebra as PyTorch operators (the structgrad:: namespace of torch.ops).
//
// Each operator takes torch tensors, views their memory as structgrad tensors (sg::from_blob, no
// copy), and runs structgrad on them: the products through its out-style entry points into outputs
// that torch allocated, the linear algebra through its batched ops, whose results torch then holds
// without a copy (at::from_blob over structgrad's memory). On CUDA the work is queued on torch's
// current stream and every allocation comes from torch's caching allocator, so the ops follow torch's
// stream semantics like its own. The autograd formulas are here (the Autograd dispatch key), so a call
// costs no Python beyond torch.ops; the fake (meta) implementations for torch.compile are in Python
// (structgrad/torch/__init__.py).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <string>
#include <tuple>
#include <vector>

#include <structgrad/structgrad.h>

#ifdef SG_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace {

using Sizes = std::vector<int64_t>;

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

std::string shape_of(const at::Tensor& t) { return sg::shape_str(Sizes(t.sizes().begin(), t.sizes().end())); }

/// The batch dimensions of t [..., rows, cols].
Sizes batch_of(const at::Tensor& t) { return Sizes(t.sizes().begin(), t.sizes().end() - 2); }

/// batch + [rows, cols].
Sizes with_matrix(Sizes batch, int64_t rows, int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

int64_t count_of(const Sizes& batch) {
  int64_t count = 1;
  for (int64_t d : batch) count *= d;
  return count;
}

/// A structgrad view of a torch tensor. Layout is handled here (structgrad's tensors are packed
/// row-major); dtype, device, shape and structure rules are structgrad's own checks, whose messages
/// name the op the same way on every device. A strided input is read through a contiguous copy, never
/// as it lies.
struct View {
  at::Tensor memory;  // keeps the (possibly copied) data alive for the call
  sg::Tensor view;
};

View view_of(const char* op, const at::Tensor& t) {
  View v;
  v.memory = t.contiguous();
  const sg::TensorOptions options = sg::TensorOptions().dtype(dtype_of(op, t)).device(device_of(op, t));
  try {
    v.view = sg::from_blob(v.memory.data_ptr(), Sizes(t.sizes().begin(), t.sizes().end()), options);
  } catch (const sg::Error& e) {
    SG_FAIL(op, ": ", e.what());
  }
  return v;
}

/// Checks that t is a matrix or a batch of them [..., rows, cols]; `what` names it in the message.
void check_matrices(const char* op, const char* what, const at::Tensor& t) {
  SG_CHECK(t.defined(), op, ": ", what, " is undefined");
  SG_CHECK(t.dim() >= 2, op, ": expected ", what, " to be a matrix or a batch of matrices, got shape ", shape_of(t));
}

/// Checks that t is a square matrix or a batch of them [..., n, n].
void check_square(const char* op, const char* what, const at::Tensor& t) {
  check_matrices(op, what, t);
  SG_CHECK(t.size(-1) == t.size(-2), op, ": expected ", what, " to be a square matrix or a batch of them, got shape ",
           shape_of(t));
}

/// view_of a matrix or batch of matrices.
View matrix(const char* op, const char* what, const at::Tensor& t) {
  check_matrices(op, what, t);
  return view_of(op, t);
}

/// v's memory tagged `structure` without checking it. torch.linalg reads one triangle of a matrix and
/// never looks at the other; structgrad's factorizations and solves likewise read only the triangle the
/// tag names (a Symmetric tensor's lower triangle for the Cholesky factorization).
View tagged(View v, sg::Structure structure) {
  v.view = sg::detail::alias_with(v.view, v.view.shape(), structure);
  return v;
}

sg::Structure triangle(bool upper) { return upper ? sg::Structure::UpperTriangular : sg::Structure::LowerTriangular; }

/// A torch tensor over the memory of a structgrad result, without a copy: the torch tensor holds the
/// structgrad tensor, which gives its memory back (on CUDA to torch's caching allocator, where it came
/// from) when torch frees the tensor.
at::Tensor wrap(const sg::Tensor& t) {
  at::ScalarType type = at::kLong;
  if (t.dtype() == sg::DType::Float32) type = at::kFloat;
  if (t.dtype() == sg::DType::Float64) type = at::kDouble;
  const at::Device device = t.is_cuda() ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(t.device().index))
                                        : at::Device(at::kCPU);
  const Sizes sizes(t.shape().begin(), t.shape().end());
  return at::from_blob(
      t.data_ptr(), sizes, [owner = t](void*) { (void)owner; }, at::TensorOptions().dtype(type).device(device),
      device);
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
/// errors are rethrown with the torch op's name first, unless they name it already (structgrad's
/// cholesky for the cholesky op); torch turns them into Python RuntimeErrors.
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
    const std::string message = e.what();
    if (message.rfind(std::string(op) + ": ", 0) == 0) throw;
    SG_FAIL(op, ": ", message);
  }
}

/// An output of `like`'s dtype and device, or an empty tensor standing for "not computed".
at::Tensor output_or_none(bool needed, const at::Tensor& like, at::IntArrayRef shape) {
  return needed ? at::empty(shape, like.options().memory_format(at::MemoryFormat::Contiguous))
                : at::empty({0}, like.options());
}

// ---- products ----------------------------------------------------------------------------------

/// structgrad's out-style products take operands of one batch shape; torch.matmul's broadcasting of
/// the batch dimensions is done here, one of three ways:
/// - Same: the batch shapes match (two matrices, or two batches of one shape): the operands as given;
/// - Fold: a Dense a [..., m, k] against one matrix b: a read as one [count·m, k] matrix (a view), the
///   batch one tall product, as torch.matmul folds it; b's gradient comes out summed over the batch;
/// - Expand: otherwise each operand is expanded to the broadcast batch (a copy of one whose batch is
///   stretched), and a gradient is summed back over the dimensions its operand was stretched along.
enum class Layout { Same, Fold, Expand };

struct Product {
  Layout layout = Layout::Same;
  Sizes out;        // the product's shape: the broadcast batch + [m, n]
  at::Tensor a, b;  // the operands as structgrad reads them (folded or expanded)
};

/// The broadcast of a's and b's batch shapes (aligned on the right; a 1 or a missing dimension
/// stretches), or an error naming `op` and both shapes.
Sizes broadcast_batch(const char* op, const at::Tensor& a, const at::Tensor& b) {
  const Sizes x = batch_of(a), y = batch_of(b);
  Sizes out(std::max(x.size(), y.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t dx = i < x.size() ? x[x.size() - 1 - i] : 1;
    const int64_t dy = i < y.size() ? y[y.size() - 1 - i] : 1;
    SG_CHECK(dx == dy || dx == 1 || dy == 1, op, ": shapes ", shape_of(a), " and ", shape_of(b),
             " cannot be multiplied (their batch dimensions do not broadcast)");
    out[out.size() - 1 - i] = dx == 1 ? dy : dx;
  }
  return out;
}

Product product_of(const char* op, const at::Tensor& a, sg::Structure sa, const at::Tensor& b) {
  check_matrices(op, "a", a);
  check_matrices(op, "b", b);
  SG_CHECK(a.size(-1) == b.size(-2), op, ": shapes ", shape_of(a), " and ", shape_of(b), " cannot be multiplied");
  const Sizes batch = broadcast_batch(op, a, b);
  Product p;
  p.out = with_matrix(batch, a.size(-2), b.size(-1));
  if (batch_of(a) == batch && batch_of(b) == batch) {
    p.a = a;
    p.b = b;
  } else if (sa == sg::Structure::Dense && count_of(batch_of(b)) == 1) {
    p.layout = Layout::Fold;
    p.a = a.reshape({count_of(batch_of(a)) * a.size(-2), a.size(-1)});
    p.b = b.reshape({b.size(-2), b.size(-1)});
  } else {
    p.layout = Layout::Expand;
    p.a = a.expand(with_matrix(batch, a.size(-2), a.size(-1)));
    p.b = b.expand(with_matrix(batch, b.size(-2), b.size(-1)));
  }
  return p;
}

at::Tensor structured_matmul(const at::Tensor& a, const at::Tensor& b, c10::string_view a_structure,
                             c10::string_view b_structure) {
  constexpr const char* op = "structured_matmul";
  const sg::Structure sa = parse_structure(op, a_structure), sb = parse_structure(op, b_structure);
  const Product p = product_of(op, a, sa, b);
  View ma = view_of(op, p.a), mb = view_of(op, p.b);
  at::Tensor out = at::empty(p.out, a.options().memory_format(at::MemoryFormat::Contiguous));
  // Folded, the product writes out as the one [count·m, n] matrix it is.
  View mc = view_of(op, p.layout == Layout::Fold ? out.view({p.a.size(0), p.b.size(1)}) : out);
  on_device_of(op, a, [&] { sg::matmul_out(mc.view, ma.view, sa, mb.view, sb, precision_for(a)); });
  return out;
}

std::tuple<at::Tensor, at::Tensor> structured_matmul_backward(const at::Tensor& grad, const at::Tensor& a,
                                                             const at::Tensor& b, c10::string_view a_structure,
                                                             c10::string_view b_structure,
                                                             std::array<bool, 2> output_mask) {
  constexpr const char* op = "structured_matmul_backward";
  const sg::Structure sa = parse_structure(op, a_structure), sb = parse_structure(op, b_structure);
  const Product p = product_of(op, a, sa, b);
  check_matrices(op, "grad", grad);
  at::Tensor g = grad;
  // da, db: the gradients of a's and b's shapes; da_out, db_out: what structgrad writes (the same
  // memory seen as the folded matrices, or the full batch when expanded).
  at::Tensor da, db, da_out, db_out;
  if (p.layout == Layout::Expand) {
    da_out = output_or_none(output_mask[0], a, p.a.sizes());
    db_out = output_or_none(output_mask[1], b, p.b.sizes());
  } else {
    da = da_out = output_or_none(output_mask[0], a, a.sizes());
    db = db_out = output_or_none(output_mask[1], b, b.sizes());
  }
  if (p.layout == Layout::Fold) {
    SG_CHECK(grad.sizes().equals(p.out), op, ": expected grad of shape ", sg::shape_str(p.out), ", got ",
             shape_of(grad));
    g = grad.reshape({p.a.size(0), p.b.size(1)});
    if (output_mask[0]) da_out = da.view({p.a.size(0), p.a.size(1)});
    if (output_mask[1]) db_out = db.view({p.b.size(0), p.b.size(1)});
  }
  View mg = view_of(op, g), ma = view_of(op, p.a), mb = view_of(op, p.b);
  on_device_of(op, a, [&] {
    sg::Tensor sda, sdb;
    if (output_mask[0]) sda = view_of(op, da_out).view;
    if (output_mask[1]) sdb = view_of(op, db_out).view;
    sg::matmul_backward_out(mg.view, ma.view, sa, mb.view, sb, sda, sdb, precision_for(a));
  });
  if (p.layout == Layout::Expand) {  // each gradient summed over the dimensions its operand was stretched along
    da = output_mask[0] ? at::sum_to(da_out, a.sizes()) : da_out;
    db = output_mask[1] ? at::sum_to(db_out, b.sizes()) : db_out;
  }
  return {da, db};
}

at::Tensor gram(const at::Tensor& a, c10::string_view a_structure) {
  constexpr const char* op = "gram";
  const sg::Structure sa = parse_structure(op, a_structure);
  View ma = matrix(op, "a", a);
  at::Tensor out =
      at::empty(with_matrix(batch_of(a), a.size(-2), a.size(-2)), a.options().memory_format(at::MemoryFormat::Contiguous));
  View mc = view_of(op, out);
  on_device_of(op, a, [&] { sg::gram_out(mc.view, ma.view, sa, precision_for(a)); });
  return out;
}

at::Tensor gram_backward(const at::Tensor& grad, const at::Tensor& a, c10::string_view a_structure) {
  constexpr const char* op = "gram_backward";
  const sg::Structure sa = parse_structure(op, a_structure);
  View mg = matrix(op, "grad", grad), ma = matrix(op, "a", a);
  at::Tensor da = at::empty(a.sizes(), a.options().memory_format(at::MemoryFormat::Contiguous));
  View mda = view_of(op, da);
  on_device_of(op, a, [&] { sg::gram_backward_out(mg.view, ma.view, sa, mda.view, precision_for(a)); });
  return da;
}

// ---- linear algebra: torch.linalg's conventions over structgrad's batched ops ----------------------

/// The matrices of A [..., n, n] as torch's Cholesky reads them, for structgrad's, which reads a
/// Symmetric tensor's lower triangle: A's lower triangle, or with `upper` its upper one (torch then
/// reads that triangle), which is the lower triangle of Aᵀ.
View cholesky_input(const char* op, const at::Tensor& a, bool upper) {
  check_square(op, "A", a);
  return tagged(view_of(op, upper ? a.mT() : a), sg::Structure::Symmetric);
}

/// The factor as torch returns it: L, or with `upper` U = Lᵀ (contiguous, like L).
at::Tensor factor_as(const at::Tensor& l, bool upper) { return upper ? l.mT().contiguous() : l; }

at::Tensor cholesky(const at::Tensor& a, bool upper) {
  constexpr const char* op = "cholesky";
  const View ma = cholesky_input(op, a, upper);
  at::Tensor l;
  on_device_of(op, a, [&] { l = wrap(sg::cholesky(ma.view)); });
  return factor_as(l, upper);
}

std::tuple<at::Tensor, at::Tensor> cholesky_ex(const at::Tensor& a, bool upper, bool check_errors) {
  constexpr const char* op = "cholesky_ex";
  const View ma = cholesky_input(op, a, upper);
  at::Tensor l, info;
  on_device_of(op, a, [&] {
    if (check_errors) {  // an error for a matrix that is not positive definite: the codes are read back
      l = wrap(sg::cholesky(ma.view));
      info = at::zeros(batch_of(a), a.options().dtype(at::kLong));
      return;
    }
    const sg::CholeskyResult r = sg::cholesky_ex(ma.view);  // info [...] int64, nothing read back
    l = wrap(r.L);
    info = wrap(r.info);
  });
  return {factor_as(l, upper), info};
}

/// dA of L = cholesky(A) (or U = cholesky(A, upper=True), with grad = dU): symmetric, torch's
/// gradient. With `upper`, L = Uᵀ and dL = dUᵀ.
at::Tensor cholesky_backward(const at::Tensor& grad, const at::Tensor& l, bool upper) {
  constexpr const char* op = "cholesky_backward";
  check_square(op, "L", l);
  SG_CHECK(grad.sizes().equals(l.sizes()), op, ": expected grad of shape ", shape_of(l), ", got ", shape_of(grad));
  const View ml = tagged(view_of(op, upper ? l.mT() : l), sg::Structure::LowerTriangular);
  const View mg = view_of(op, upper ? grad.mT() : grad);
  at::Tensor da;
  on_device_of(op, l, [&] { da = wrap(sg::linalg_backward::cholesky(ml.view, mg.view)); });
  return da;
}

at::Tensor solve_triangular(const at::Tensor& a, const at::Tensor& b, bool upper, bool left, bool unitriangular) {
  constexpr const char* op = "solve_triangular";
  check_square(op, "A", a);
  const View ma = tagged(view_of(op, a), triangle(upper)), mb = matrix(op, "B", b);
  at::Tensor x;
  on_device_of(op, a, [&] { x = wrap(sg::solve_triangular(ma.view, mb.view, left, unitriangular)); });
  return x;
}

/// (dA, dB) of X = solve_triangular(A, B): dA of A's shape, in A's triangle (a zero diagonal when
/// unitriangular), summed over the batch where A was broadcast; dB of X's shape (autograd sums it to B's).
std::tuple<at::Tensor, at::Tensor> solve_triangular_backward(const at::Tensor& grad, const at::Tensor& a,
                                                            const at::Tensor& x, bool upper, bool left,
                                                            bool unitriangular, std::array<bool, 2> output_mask) {
  constexpr const char* op = "solve_triangular_backward";
  check_square(op, "A", a);
  check_matrices(op, "X", x);
  SG_CHECK(grad.sizes().equals(x.sizes()), op, ": expected grad of shape ", shape_of(x), ", got ", shape_of(grad));
  const View ma = tagged(view_of(op, a), triangle(upper)), mx = view_of(op, x), mg = view_of(op, grad);
  at::Tensor da = at::empty({0}, a.options()), db = at::empty({0}, x.options());
  on_device_of(op, a, [&] {
    const auto [sda, sdb] = sg::linalg_backward::solve_triangular(ma.view, mx.view, mg.view, left, unitriangular,
                                                                  output_mask[0], output_mask[1]);
    if (output_mask[0]) da = wrap(sda);
    if (output_mask[1]) db = wrap(sdb);
  });
  if (output_mask[0] && !da.sizes().equals(a.sizes())) da = at::sum_to(da, a.sizes());
  return {da, db};
}

at::Tensor logdet(const at::Tensor& a) {
  constexpr const char* op = "logdet";
  const View ma = cholesky_input(op, a, false);
  at::Tensor value;
  on_device_of(op, a, [&] { value = wrap(sg::logdet(ma.view)); });
  return value;
}

/// log det A and the Cholesky factor L it comes from (the backward's input), for the recorded logdet.
std::tuple<at::Tensor, at::Tensor> logdet_and_factor(const at::Tensor& a) {
  constexpr const char* op = "logdet";
  const View ma = cholesky_input(op, a, false);
  at::Tensor l;
  on_device_of(op, a, [&] { l = wrap(sg::cholesky(ma.view)); });
  // log det A = 2·Σ log lᵢᵢ
  return {l.diagonal(0, -2, -1).log().sum(at::IntArrayRef{-1}).mul(2), l};
}

/// dA = grad · A⁻¹ of log det A, from A's factor L, for grad of the batch shape [...].
at::Tensor logdet_backward(const at::Tensor& grad, const at::Tensor& l) {
  constexpr const char* op = "logdet_backward";
  check_square(op, "L", l);
  SG_CHECK(grad.sizes().equals(batch_of(l)), op, ": expected grad of shape ", sg::shape_str(batch_of(l)), ", got ",
           shape_of(grad));
  const View ml = tagged(view_of(op, l), sg::Structure::LowerTriangular), mg = view_of(op, grad);
  at::Tensor da;
  on_device_of(op, l, [&] { da = wrap(sg::linalg_backward::logdet(ml.view, mg.view)); });
  return da;
}

// ---- autograd: the projected gradients, from structgrad's backward kernels -------------------

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// The backward formulas are first order: their ops run below autograd. A backward with
/// create_graph (the only one that runs with grad mode on) would get a second-order gradient that
/// silently lacks their terms, so it is refused.
void check_first_order(const char* op) {
  SG_CHECK(!at::GradMode::is_enabled(), op,
           ": second-order gradients (backward with create_graph=True) are not supported");
}

/// The op `name` of this library, called through the dispatcher (below autograd here).
template <typename Signature>
c10::TypedOperatorHandle<Signature> op_handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

using TensorPair = std::tuple<at::Tensor, at::Tensor>;
using MatmulSignature = at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view, c10::string_view);
using MatmulBackwardSignature = TensorPair(const at::Tensor&, const at::Tensor&, const at::Tensor&, c10::string_view,
                                           c10::string_view, std::array<bool, 2>);
using GramSignature = at::Tensor(const at::Tensor&, c10::string_view);
using GramBackwardSignature = at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view);
using CholeskySignature = at::Tensor(const at::Tensor&, bool);
using CholeskyExSignature = TensorPair(const at::Tensor&, bool, bool);
using CholeskyBackwardSignature = at::Tensor(const at::Tensor&, const at::Tensor&, bool);
using SolveSignature = at::Tensor(const at::Tensor&, const at::Tensor&, bool, bool, bool);
using SolveBackwardSignature = TensorPair(const at::Tensor&, const at::Tensor&, const at::Tensor&, bool, bool, bool,
                                          std::array<bool, 2>);
using LogdetSignature = at::Tensor(const at::Tensor&);
using LogdetAndFactorSignature = TensorPair(const at::Tensor&);
using LogdetBackwardSignature = at::Tensor(const at::Tensor&, const at::Tensor&);

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
    check_first_order("structured_matmul");
    const variable_list saved = ctx->get_saved_variables();
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
    check_first_order("gram");
    const variable_list saved = ctx->get_saved_variables();
    return {op.call(grads[0], saved[0], ctx->saved_data["a_structure"].toStringRef()), at::Tensor()};
  }
};

/// cholesky and cholesky_ex: the factor (L or U) is saved, and A's gradient is the symmetric one of
/// torch.linalg.cholesky.
at::Tensor cholesky_gradient(AutogradContext* ctx, const at::Tensor& grad) {
  static const auto op = op_handle<CholeskyBackwardSignature>("structgrad::cholesky_backward");
  check_first_order("cholesky");
  const variable_list saved = ctx->get_saved_variables();
  return op.call(grad, saved[0], ctx->saved_data["upper"].toBool());
}

class CholeskyFunction : public torch::autograd::Function<CholeskyFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, bool upper) {
    static const auto op = op_handle<CholeskySignature>("structgrad::cholesky");
    at::Tensor l;
    {
      at::AutoDispatchBelowADInplaceOrView below;
      l = op.call(a, upper);
    }
    ctx->save_for_backward({l});
    ctx->saved_data["upper"] = upper;
    return l;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {cholesky_gradient(ctx, grads[0]), at::Tensor()};
  }
};

class CholeskyExFunction : public torch::autograd::Function<CholeskyExFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& a, bool upper, bool check_errors) {
    static const auto op = op_handle<CholeskyExSignature>("structgrad::cholesky_ex");
    at::Tensor l, info;
    {
      at::AutoDispatchBelowADInplaceOrView below;
      std::tie(l, info) = op.call(a, upper, check_errors);
    }
    ctx->mark_non_differentiable({info});
    ctx->save_for_backward({l});
    ctx->saved_data["upper"] = upper;
    return {l, info};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {cholesky_gradient(ctx, grads[0]), at::Tensor(), at::Tensor()};
  }
};

class SolveTriangularFunction : public torch::autograd::Function<SolveTriangularFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b, bool upper, bool left,
                            bool unitriangular) {
    static const auto op = op_handle<SolveSignature>("structgrad::solve_triangular");
    at::Tensor x;
    {
      at::AutoDispatchBelowADInplaceOrView below;
      x = op.call(a, b, upper, left, unitriangular);
    }
    ctx->save_for_backward({a, x});
    ctx->saved_data["upper"] = upper;
    ctx->saved_data["left"] = left;
    ctx->saved_data["unitriangular"] = unitriangular;
    return x;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto op = op_handle<SolveBackwardSignature>("structgrad::solve_triangular_backward");
    check_first_order("solve_triangular");
    const variable_list saved = ctx->get_saved_variables();
    const std::array<bool, 2> needs = {ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    auto [da, db] = op.call(grads[0], saved[0], saved[1], ctx->saved_data["upper"].toBool(),
                            ctx->saved_data["left"].toBool(), ctx->saved_data["unitriangular"].toBool(), needs);
    // dB has X's shape; where B's batch was broadcast, autograd sums it to B's shape.
    return {needs[0] ? da : at::Tensor(), needs[1] ? db : at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class LogdetFunction : public torch::autograd::Function<LogdetFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a) {
    static const auto op = op_handle<LogdetAndFactorSignature>("structgrad::logdet_and_factor");
    at::Tensor value, l;
    {
      at::AutoDispatchBelowADInplaceOrView below;
      std::tie(value, l) = op.call(a);
    }
    ctx->save_for_backward({l});
    return value;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto op = op_handle<LogdetBackwardSignature>("structgrad::logdet_backward");
    check_first_order("logdet");
    const variable_list saved = ctx->get_saved_variables();
    return {op.call(grads[0], saved[0])};
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

at::Tensor cholesky_autograd(const at::Tensor& a, bool upper) {
  if (!records({&a})) {
    static const auto op = op_handle<CholeskySignature>("structgrad::cholesky");
    at::AutoDispatchBelowADInplaceOrView below;
    return op.call(a, upper);
  }
  return CholeskyFunction::apply(a, upper);
}

TensorPair cholesky_ex_autograd(const at::Tensor& a, bool upper, bool check_errors) {
  if (!records({&a})) {
    static const auto op = op_handle<CholeskyExSignature>("structgrad::cholesky_ex");
    at::AutoDispatchBelowADInplaceOrView below;
    return op.call(a, upper, check_errors);
  }
  const variable_list out = CholeskyExFunction::apply(a, upper, check_errors);
  return {out[0], out[1]};
}

at::Tensor solve_triangular_autograd(const at::Tensor& a, const at::Tensor& b, bool upper, bool left,
                                     bool unitriangular) {
  if (!records({&a, &b})) {
    static const auto op = op_handle<SolveSignature>("structgrad::solve_triangular");
    at::AutoDispatchBelowADInplaceOrView below;
    return op.call(a, b, upper, left, unitriangular);
  }
  return SolveTriangularFunction::apply(a, b, upper, left, unitriangular);
}

at::Tensor logdet_autograd(const at::Tensor& a) {
  if (!records({&a})) {
    static const auto op = op_handle<LogdetSignature>("structgrad::logdet");
    at::AutoDispatchBelowADInplaceOrView below;
    return op.call(a);
  }
  return LogdetFunction::apply(a);
}

// The backward ops (and logdet_and_factor, the recorded logdet's forward) are not differentiable
// themselves (first-order gradients); their Autograd kernels only step below autograd, as the
// fallback would, without boxing the call.
template <typename Signature>
struct BelowAutograd;

template <typename Return, typename... Args>
struct BelowAutograd<Return(Args...)> {
  template <const char* name>
  static Return call(Args... args) {
    static const auto op = op_handle<Return(Args...)>(name);
    at::AutoDispatchBelowADInplaceOrView below;
    return op.call(args...);
  }
};

constexpr char kMatmulBackward[] = "structgrad::structured_matmul_backward";
constexpr char kGramBackward[] = "structgrad::gram_backward";
constexpr char kCholeskyBackward[] = "structgrad::cholesky_backward";
constexpr char kSolveBackward[] = "structgrad::solve_triangular_backward";
constexpr char kLogdetAndFactor[] = "structgrad::logdet_and_factor";
constexpr char kLogdetBackward[] = "structgrad::logdet_backward";

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
  // The linear algebra, with torch.linalg's names, argument conventions and gradients.
  m.def("cholesky(Tensor A, *, bool upper=False) -> Tensor");
  m.def("cholesky_ex(Tensor A, *, bool upper=False, bool check_errors=False) -> (Tensor L, Tensor info)");
  m.def("cholesky_backward(Tensor grad, Tensor L, bool upper) -> Tensor");
  m.def("solve_triangular(Tensor A, Tensor B, *, bool upper, bool left=True, bool unitriangular=False) -> Tensor");
  m.def(
      "solve_triangular_backward(Tensor grad, Tensor A, Tensor X, bool upper, bool left, bool unitriangular, "
      "bool[2] output_mask) -> (Tensor, Tensor)");
  m.def("logdet(Tensor A) -> Tensor");
  m.def("logdet_and_factor(Tensor A) -> (Tensor logdet, Tensor L)");
  m.def("logdet_backward(Tensor grad, Tensor L) -> Tensor");
  m.def("built_with_cuda() -> bool", &built_with_cuda);
}

namespace {
/// The kernels are the same functions on both devices: they view memory and call structgrad.
void register_kernels(torch::Library& m) {
  m.impl("structured_matmul", &structured_matmul);
  m.impl("structured_matmul_backward", &structured_matmul_backward);
  m.impl("gram", &gram);
  m.impl("gram_backward", &gram_backward);
  m.impl("cholesky", &cholesky);
  m.impl("cholesky_ex", &cholesky_ex);
  m.impl("cholesky_backward", &cholesky_backward);
  m.impl("solve_triangular", &solve_triangular);
  m.impl("solve_triangular_backward", &solve_triangular_backward);
  m.impl("logdet", &logdet);
  m.impl("logdet_and_factor", &logdet_and_factor);
  m.impl("logdet_backward", &logdet_backward);
}
}  // namespace

TORCH_LIBRARY_IMPL(structgrad, CPU, m) { register_kernels(m); }

TORCH_LIBRARY_IMPL(structgrad, Autograd, m) {
  m.impl("structured_matmul", &structured_matmul_autograd);
  m.impl("gram", &gram_autograd);
  m.impl("cholesky", &cholesky_autograd);
  m.impl("cholesky_ex", &cholesky_ex_autograd);
  m.impl("solve_triangular", &solve_triangular_autograd);
  m.impl("logdet", &logdet_autograd);
  m.impl("structured_matmul_backward", &BelowAutograd<MatmulBackwardSignature>::call<kMatmulBackward>);
  m.impl("gram_backward", &BelowAutograd<GramBackwardSignature>::call<kGramBackward>);
  m.impl("cholesky_backward", &BelowAutograd<CholeskyBackwardSignature>::call<kCholeskyBackward>);
  m.impl("solve_triangular_backward", &BelowAutograd<SolveBackwardSignature>::call<kSolveBackward>);
  m.impl("logdet_and_factor", &BelowAutograd<LogdetAndFactorSignature>::call<kLogdetAndFactor>);
  m.impl("logdet_backward", &BelowAutograd<LogdetBackwardSignature>::call<kLogdetBackward>);
}

TORCH_LIBRARY_IMPL(structgrad, CUDA, m) { register_kernels(m); }
