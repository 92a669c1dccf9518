// Structured matrix products and their backward, all through one structured GEMM.
//
// The structure table (core/structures.h) gives the result's structure of each pair of operand
// structures; the device's backend then runs the product (CPU: Eigen GEMM for Dense·Dense, the blocked
// structured GEMM otherwise; CUDA: cuBLAS for Dense·Dense and for float64 products of Symmetric
// matrices with stored mirrors, the structured kernel otherwise). Every product, forward and backward,
// is one call
//   C = alpha · op(A) · op(B)
// with operand descriptors (the structure of op(X), transposed or not) and the structure of the part
// of C computed, so backward computes only what each input's structure needs:
//   dA = proj_A(G · op(B)ᵀ),  dB = proj_B(op(A)ᵀ · G),  G projected onto C's structure,
// where proj for an Upper input is the Upper output (only i <= j is computed), and for a Symmetric
// input the full product followed by (X + Xᵀ)/2.
#include <structgrad/ops/matmul.h>

#include <atomic>

#include <structgrad/autograd/node.h>
#include <structgrad/ops/elementwise.h>
#include <structgrad/ops/reduce.h>
#include "ops/op_util.h"
#include "ops/output_pool.h"
#include <structgrad/ops/shape.h>

namespace sg {

using detail::GemmOperand;

namespace {

std::atomic<Precision> current_precision{Precision::Float32};

/// The descriptor of op(X) for a tensor of structure s read transposed or not. A tensor holds its
/// structure's invariant (exact zeros outside its stored part, a bit-exact mirror), so the kernels may
/// use them as stored. A symmetric operand reads the same either way, so its flag stays clear.
GemmOperand operand(Structure s, bool trans) {
  const bool symmetric = detail::traits(s).symmetric;
  return {detail::op_structure(s, trans), trans && !symmetric, detail::is_triangular(s), symmetric};
}

/// The descriptor of op(X)ᵀ read from the same storage: the trans flag flips, and so does the
/// structure (a Symmetric operand reads the same either way).
GemmOperand flipped(GemmOperand d) {
  if (detail::traits(d.structure).symmetric) return d;
  d.trans = !d.trans;
  d.structure = detail::traits(d.structure).transpose;
  return d;
}

/// The descriptor of op(a)ᵀ read from the copy the forward wrote (product's `at`; a Dense or Upper a
/// not transposed): outer-major, Lower for an Upper a, its zeros vouched as far as GemmProblem::at
/// promises.
GemmOperand transposed_copy_operand(Structure s) {
  return {detail::op_structure(s, true), false, detail::is_triangular(s)};
}

/// The descriptor of an upstream gradient read through its output's structure s: unprojected, so
/// nothing outside the structure is known to be zero, nor the lower triangle to mirror the upper.
GemmOperand gradient_operand(Structure s, bool trans) {
  GemmOperand d = operand(s, trans);
  d.zeros_stored = false;
  d.mirror_stored = false;
  return d;
}

/// The elements between neighbouring matrices of an operand of a batched product over `batch`
/// matrices: 0 for one matrix the batch shares.
int64_t operand_stride(const Tensor& x, int64_t batch) {
  const int64_t count = detail::matrix_count(x);
  SG_CHECK(count == 1 || count == batch, "gemm: internal error, an operand of shape ", x.shape(),
           " in a batch of ", batch, " products");
  return count == 1 ? 0 : x.size(-2) * x.size(-1);
}

/// c = alpha · op(a) · op(b) into c [..., m, n] (each matrix of c from the matrices of a and b at its
/// place; an operand of one matrix is shared by the batch), no autograd; `c_zeros_stored` as
/// GemmProblem's, and `at` as gemm_raw's. Returns whether the backend wrote op(a)ᵀ into *at.
bool gemm_into(Tensor& c, const Tensor& a, GemmOperand da, const Tensor& b, GemmOperand db, Structure mask,
               double alpha, Precision precision, bool c_zeros_stored, Tensor* at) {
  const int64_t m = da.trans ? a.size(-1) : a.size(-2);
  const int64_t k = da.trans ? a.size(-2) : a.size(-1);
  const int64_t n = db.trans ? b.size(-2) : b.size(-1);
  const int64_t batch = detail::matrix_count(c);
  if (m == 0 || n == 0 || batch == 0) return false;
  if (k == 0) {  // an empty sum: exact zeros, whatever the structures (no kernel sees k = 0)
    detail::backend_of(a).fill(c, 0.0);
    return false;
  }
  detail::GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = da;
  p.b = db;
  p.mask = mask;
  p.alpha = alpha;
  p.tf32 = a.dtype() == DType::Float32 && precision == Precision::TF32;
  p.a_data = a.data_ptr();
  p.b_data = b.data_ptr();
  p.c_data = c.data_ptr();
  p.lda = a.size(-1);
  p.ldb = b.size(-1);
  p.ldc = n;
  p.batch = batch;
  p.batch_stride_a = operand_stride(a, batch);
  p.batch_stride_b = operand_stride(b, batch);
  p.batch_stride_c = m * n;
  p.c_zeros_stored = c_zeros_stored;
  detail::Backend& backend = detail::backend_of(a);
  Tensor at_buffer;
  if (at != nullptr && batch == 1 && backend.writes_transposed_a(p, a.dtype())) {
    SG_CHECK(!da.trans, "gemm_raw: op(a)ᵀ is asked for only of an a read as it lies");
    at_buffer = detail::make_tensor({k, m}, a.dtype(), a.device());
    p.at = at_buffer.data_ptr();
  }
  const bool wrote_at = backend.gemm(p, a.dtype()) && at != nullptr;
  if (wrote_at) *at = at_buffer;
  return wrote_at;
}

/// C = alpha · op(a) · op(b), no autograd. a: [..., m, k] (or [..., k, m] when trans), b: [..., k, n]
/// (or [..., n, k]), each a batch of the product's batch shape or one matrix the batch shares.
/// `at`: where given and the backend offers it, the product also writes op(a)ᵀ into a [k, m] tensor
/// (GemmProblem::at; one product only), which *at then holds (left undefined otherwise).
Tensor gemm_raw(const Tensor& a, GemmOperand da, const Tensor& b, GemmOperand db, Structure mask, double alpha,
                Tensor* at = nullptr, Precision precision = matmul_precision()) {
  const int64_t m = da.trans ? a.size(-1) : a.size(-2);
  const int64_t n = db.trans ? b.size(-2) : b.size(-1);
  Shape shape = a.dim() == 2 && b.dim() == 2 ? Shape{} : detail::broadcast_batch_shape("matmul", a, b);
  shape.push_back(m);
  shape.push_back(n);
  // An UpperTriangular output on a CUDA device comes from the matmul op's pool: a block an earlier
  // output of its shape left with its zeros below the diagonal, where there is one, which the product
  // then leaves as they are (GemmProblem::c_zeros_stored).
  detail::UpperOutput pooled;
  const bool pool = mask == Structure::UpperTriangular && a.device().is_cuda() && shape.size() == 2;
  if (pool) pooled = detail::take_upper_output(m, n, a.dtype(), a.device());
  Tensor c = pool ? pooled.tensor : detail::make_tensor(shape, a.dtype(), a.device(), mask);
  gemm_into(c, a, da, b, db, mask, alpha, precision, pooled.zeros_held, at);
  if (pool) pooled.written();
  return c;
}

/// alpha · op(a) · op(b) as a tensor of structure `out`, which says what part is computed: an output
/// the kernels write (detail::is_output_mask) directly; any other, a LowerTriangular one, as the
/// transposed product of the transposed structure, triu(op(b)ᵀ · op(a)ᵀ), and one transpose of it.
Tensor structured_product(Structure out, const Tensor& a, GemmOperand da, const Tensor& b, GemmOperand db,
                          double alpha, Tensor* at = nullptr, Precision precision = matmul_precision()) {
  if (detail::is_output_mask(out)) return gemm_raw(a, da, b, db, out, alpha, at, precision);
  const Tensor t = gemm_raw(b, flipped(db), a, flipped(da), detail::traits(out).transpose, alpha, nullptr, precision);
  Shape shape = t.shape();
  std::swap(shape[shape.size() - 2], shape[shape.size() - 1]);
  Tensor c = detail::make_tensor(shape, a.dtype(), a.device(), out);
  if (c.numel() > 0) detail::backend_of(a).transpose(t, c);
  return c;
}

/// proj_s(alpha · op(a) · op(b)) for an input of structure s (the table's gradient projection): the
/// part s keeps, computed alone, or the full product then (X + Xᵀ)/2 for Symmetric.
Tensor projected_product(Structure s, const Tensor& a, GemmOperand da, const Tensor& b, GemmOperand db, double alpha) {
  if (detail::traits(s).gradient_projection == detail::Projection::Symmetrize)
    return sym(gemm_raw(a, da, b, db, Structure::Dense, alpha));
  return structured_product(s, a, da, b, db, alpha);
}

/// The gradient g of a batched product's operand x summed to x's shape where the batch shared x (or
/// broadcast it), keeping its projected structure: a sum of matrices of one structure has it.
Tensor summed_over_batch(const Tensor& g, const Tensor& x) {
  if (!g.defined() || g.shape() == x.shape()) return g;
  return detail::alias_with(detail::sum_to(g, x.shape()), x.shape(), g.structure());
}

/// The differentiable product C = op(a)·op(b) with the structure rule of the table, for matrices or
/// batches of them (each operand of the product's batch shape or one matrix the batch shares).
Tensor product(const char* name, const Tensor& a, bool ta, const Tensor& b, bool tb) {
  const Structure sa = a.structure(), sb = b.structure();
  const GemmOperand da = operand(sa, ta), db = operand(sb, tb);
  // Upper when both op(a) and op(b) are upper, Lower when both are lower (the structure table's rule).
  const Structure result = detail::product_structure(da.structure, db.structure);
  // dB = op(a)ᵀ·G reads op(a)ᵀ, which the CUDA TF32 kernels take outer-major only: a copy of a. The
  // forward lets the kernel that reads a's tiles anyway write it (GemmProblem::at); the backward then
  // reads it instead of copying a. It is kept from the forward to the backward: a [k, m] tensor per
  // such product.
  Tensor at;
  const bool offer_at = !ta && !tb && (sa == Structure::Dense || sa == Structure::UpperTriangular) &&
                        result != Structure::LowerTriangular && a.dim() == 2 && b.dim() == 2 &&
                        autograd::needs_record({b});
  Tensor c = structured_product(result, a, da, b, db, 1.0, offer_at ? &at : nullptr);
  if (!autograd::needs_record({a, b})) return c;

  const Structure sc = c.structure();  // Dense, Upper or Lower
  const bool saved_at = at.defined();
  auto backward = [sa, sb, sc, ta, tb, saved_at](autograd::BackwardContext& ctx) {
    // G unprojected: read through C's structure, an Upper descriptor ignores its lower
    // triangle, which is the projection onto C's structure without the triu copy.
    const Tensor& g = ctx.grad_outputs[0];
    const Tensor &a_saved = ctx.saved[0], &b_saved = ctx.saved[1];
    Tensor da_grad, db_grad;
    if (ctx.needs(0)) {
      // dop(a) = G · op(b)ᵀ;  when a was read transposed, da = op(b) · Gᵀ.
      da_grad = ta ? projected_product(sa, b_saved, operand(sb, tb), g, gradient_operand(sc, true), 1.0)
                   : projected_product(sa, g, gradient_operand(sc, false), b_saved, operand(sb, !tb), 1.0);
    }
    if (ctx.needs(1)) {
      // dop(b) = op(a)ᵀ · G;  when b was read transposed, db = Gᵀ · op(a). op(a)ᵀ from the forward's
      // copy where it wrote one: the same values, outer-major (a Lower operand for an Upper a).
      if (saved_at)
        db_grad = projected_product(sb, ctx.saved[2], transposed_copy_operand(sa), g, gradient_operand(sc, false), 1.0);
      else
        db_grad = tb ? projected_product(sb, g, gradient_operand(sc, true), a_saved, operand(sa, ta), 1.0)
                     : projected_product(sb, a_saved, operand(sa, !ta), g, gradient_operand(sc, false), 1.0);
    }
    // An operand the batch shared gets the sum of its gradients over the batch.
    return std::vector<Tensor>{summed_over_batch(da_grad, a_saved), summed_over_batch(db_grad, b_saved)};
  };
  std::vector<Tensor> saved{a, b};
  if (saved_at) saved.push_back(at);
  autograd::record(name, {a, b}, {c}, saved, std::move(backward)).reads_gradients_through_structure = true;
  return c;
}

// ---- the out-style entry points ----------------------------------------------------------

/// Checks an operand of an out-style product: defined, on a's device and of a's dtype, a matrix or a
/// batch of them of a's batch shape, square when read as UpperTriangular or Symmetric.
void check_out_operand(const char* op, const char* what, const Tensor& t, Structure as, const Tensor& a) {
  SG_CHECK(t.defined(), op, ": ", what, " is undefined");
  detail::check_floating(op, t);
  SG_CHECK(t.device() == a.device(), op, ": expected every tensor on ", a.device(), ", got ", what, " on ",
           t.device());
  SG_CHECK(t.dtype() == a.dtype(), op, ": expected every tensor of dtype ", a.dtype(), ", got ", what, " of dtype ",
           t.dtype());
  const detail::MatrixBatch view = detail::matrix_batch(op, what, t);
  SG_CHECK(as == Structure::Dense || view.square(), op, ": ", what, " read as ", as, " must be square, got shape ",
           t.shape());
  SG_CHECK(view.batch_shape == Shape(a.shape().begin(), a.shape().end() - 2), op, ": expected ", what,
           " of the batch shape of a ", a.shape(), ", got shape ", t.shape(),
           " (broadcast the operands to one batch shape first)");
}

/// The shape of a batch of rows × cols matrices of a's batch shape.
Shape batch_with(const Tensor& a, int64_t rows, int64_t cols) {
  Shape shape(a.shape().begin(), a.shape().end() - 2);
  shape.push_back(rows);
  shape.push_back(cols);
  return shape;
}

/// True when the byte ranges of x and y overlap.
bool overlap(const Tensor& x, const Tensor& y) {
  const auto* xb = static_cast<const char*>(x.data_ptr());
  const auto* yb = static_cast<const char*>(y.data_ptr());
  return x.nbytes() > 0 && y.nbytes() > 0 && xb < yb + y.nbytes() && yb < xb + x.nbytes();
}

/// Checks an output of an out-style product: as check_out_operand, of `shape`, Dense-tagged (the
/// product may hold what another tag's invariant excludes), and apart from `others` (inputs and
/// other outputs).
void check_output(const char* op, const char* what, const Tensor& out, const Shape& shape, const Tensor& a,
                  std::initializer_list<const Tensor*> others) {
  check_out_operand(op, what, out, Structure::Dense, a);
  SG_CHECK(out.shape() == shape, op, ": expected ", what, " of shape ", shape, ", got ", out.shape());
  SG_CHECK(out.structure() == Structure::Dense, op, ": expected ", what, " to be a Dense tensor, got one tagged ",
           out.structure());
  for (const Tensor* other : others) SG_CHECK(!overlap(out, *other), op, ": ", what, " overlaps another argument");
}

/// Marks an out-style product's output as written in place (after every check has passed).
void bump_version(const Tensor& out) {
  if (out.defined()) out.impl().storage->version++;
}

/// Writes proj_s(op(x)·op(y)) into out (the table's gradient projection), operands read through their
/// structures: the part s keeps computed alone where the kernels write it (the Upper mask), else the
/// full product then projected (tril, or (X + Xᵀ)/2).
void projected_product_into(Tensor& out, Structure s, const Tensor& x, GemmOperand dx, const Tensor& y,
                            GemmOperand dy, double alpha, Precision precision) {
  const bool direct = detail::is_output_mask(s) && detail::traits(s).gradient_projection != detail::Projection::Symmetrize;
  if (direct) {
    gemm_into(out, x, dx, y, dy, s, alpha, precision, false, nullptr);
    return;
  }
  Tensor full = detail::empty_like(out);
  gemm_into(full, x, dx, y, dy, Structure::Dense, alpha, precision, false, nullptr);
  if (full.numel() > 0) detail::project_into(detail::traits(s).gradient_projection, s, full, out);
}

}  // namespace

namespace detail {
Tensor product_raw(const Tensor& a, bool ta, const Tensor& b, bool tb, Structure out, double alpha) {
  return structured_product(out, a, operand(a.structure(), ta), b, operand(b.structure(), tb), alpha, nullptr,
                            Precision::Float32);
}
}  // namespace detail

void set_matmul_precision(Precision precision) { current_precision.store(precision); }

Precision matmul_precision() { return current_precision.load(); }

Tensor matmul(const Tensor& a, const Tensor& b) {
  detail::check_same_device_dtype("matmul", a, b);
  detail::check_floating("matmul", a);
  SG_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: shapes ", a.shape(), " and ", b.shape(),
           " cannot be multiplied (expected vectors, matrices or batches of matrices)");
  const int64_t b_rows = b.dim() == 1 ? b.size(0) : b.size(-2);
  SG_CHECK(a.shape().back() == b_rows, "matmul: shapes ", a.shape(), " and ", b.shape(), " cannot be multiplied");
  // A vector operand is a matrix of one row (a) or one column (b), that dimension then dropped.
  if (a.dim() == 1 || b.dim() == 1) {
    const Tensor c = matmul(a.dim() == 1 ? reshape(a, {1, a.size(0)}) : a, b.dim() == 1 ? reshape(b, {b.size(0), 1}) : b);
    if (a.dim() == 1 && b.dim() == 1) return reshape(c, {1});
    Shape shape = c.shape();
    shape.erase(shape.end() - (b.dim() == 1 ? 1 : 2));
    return reshape(c, shape);
  }
  const Shape batch = detail::broadcast_batch_shape("matmul", a, b);  // the batch shapes must broadcast
  const Structure rule = detail::product_structure(a.structure(), b.structure());
  Tensor c = product("matmul", detail::batch_broadcast(a, batch), false, detail::batch_broadcast(b, batch), false);
  SG_CHECK(c.structure() == rule, "matmul: internal error, the product of ", a.structure(), " and ",
           b.structure(), " came out ", c.structure());
  return c;
}

UpperTriangular matmul(const UpperTriangular& a, const UpperTriangular& b) {
  return UpperTriangular(matmul(static_cast<const Tensor&>(a), static_cast<const Tensor&>(b)));
}

LowerTriangular matmul(const LowerTriangular& a, const LowerTriangular& b) {
  return LowerTriangular(matmul(static_cast<const Tensor&>(a), static_cast<const Tensor&>(b)));
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  detail::check_same_device_dtype("linear", x, w);
  detail::check_floating("linear", x);
  detail::matrix_batch("linear", "the input", x);
  detail::matrix_batch("linear", "the weight", w);
  SG_CHECK(w.dim() == 2, "linear: expected the weight to be one matrix [out, in], got shape ", w.shape());
  SG_CHECK(x.size(-1) == w.size(1), "linear: input of shape ", x.shape(), " does not fit weight of shape ", w.shape(),
           " (expected input [batch, ", w.size(1), "])");
  if (bias.defined()) {
    SG_CHECK(bias.device() == x.device(), "linear: bias on ", bias.device(), " but input on ", x.device());
    SG_CHECK(bias.dtype() == x.dtype(), "linear: bias of dtype ", bias.dtype(), " but input of dtype ", x.dtype());
    SG_CHECK(bias.dim() == 1 && bias.size(0) == w.size(0), "linear: bias of shape ", bias.shape(),
             " does not fit weight of shape ", w.shape());
  }
  Tensor y = product("linear", x, false, w, true);
  if (!bias.defined()) return y;
  return add(y, bias);
}

Symmetric gram(const Tensor& a) {
  detail::check_floating("gram", a);
  detail::matrix_batch("gram", "the operand", a);
  const Structure sa = a.structure();
  Tensor c = gemm_raw(a, operand(sa, false), a, operand(sa, true), Structure::Symmetric, 1.0);
  if (autograd::needs_record({a})) {
    autograd::record("gram", {a}, {c}, {a}, [sa](autograd::BackwardContext& ctx) {
      // d(a·aᵀ) with G symmetric: dA = (G + Gᵀ)·a = 2·G·a. The engine hands this node G projected
      // onto C's structure (gram does not read it through the structure), a Symmetric tensor whose
      // mirror is stored, so G passes as operand(Symmetric) does.
      const Tensor& g = ctx.grad_outputs[0];
      return std::vector<Tensor>{
          projected_product(sa, g, operand(Structure::Symmetric, false), ctx.saved[0], operand(sa, false), 2.0)};
    });
  }
  return Symmetric(c);
}

void matmul_out(Tensor& out, const Tensor& a, Structure a_as, const Tensor& b, Structure b_as, Precision precision) {
  constexpr const char* op = "matmul_out";
  SG_CHECK(a.defined(), op, ": a is undefined");
  check_out_operand(op, "a", a, a_as, a);
  check_out_operand(op, "b", b, b_as, a);
  SG_CHECK(a.size(-1) == b.size(-2), op, ": shapes ", a.shape(), " and ", b.shape(), " cannot be multiplied");
  check_output(op, "out", out, batch_with(a, a.size(-2), b.size(-1)), a, {&a, &b});
  bump_version(out);
  // A product of two lower operands comes out lower of itself: read through the structures, the
  // entries above the diagonal are sums of exact zeros.
  const bool both_upper = a_as == Structure::UpperTriangular && b_as == Structure::UpperTriangular;
  const Structure mask = both_upper ? Structure::UpperTriangular : Structure::Dense;
  gemm_into(out, a, gradient_operand(a_as, false), b, gradient_operand(b_as, false), mask, 1.0, precision, false,
            nullptr);
}

void matmul_backward_out(const Tensor& grad, const Tensor& a, Structure a_as, const Tensor& b, Structure b_as,
                         Tensor& a_grad, Tensor& b_grad, Precision precision) {
  constexpr const char* op = "matmul_backward_out";
  SG_CHECK(a.defined(), op, ": a is undefined");
  check_out_operand(op, "a", a, a_as, a);
  check_out_operand(op, "b", b, b_as, a);
  SG_CHECK(a.size(-1) == b.size(-2), op, ": shapes ", a.shape(), " and ", b.shape(), " cannot be multiplied");
  check_out_operand(op, "grad", grad, Structure::Dense, a);
  SG_CHECK(grad.shape() == batch_with(a, a.size(-2), b.size(-1)), op, ": expected grad of shape ",
           batch_with(a, a.size(-2), b.size(-1)), ", got ", grad.shape());
  // The product's structure: G is read through it, so an Upper product ignores G's lower triangle.
  const Structure sc = detail::product_structure(a_as, b_as);
  if (a_grad.defined()) check_output(op, "a_grad", a_grad, a.shape(), a, {&a, &b, &grad});
  if (b_grad.defined()) {
    check_output(op, "b_grad", b_grad, b.shape(), a, {&a, &b, &grad});
    if (a_grad.defined()) SG_CHECK(!overlap(a_grad, b_grad), op, ": a_grad overlaps b_grad");
  }
  bump_version(a_grad);
  bump_version(b_grad);
  if (a_grad.defined())  // G · bᵀ
    projected_product_into(a_grad, a_as, grad, gradient_operand(sc, false), b, gradient_operand(b_as, true), 1.0,
                           precision);
  if (b_grad.defined())  // aᵀ · G
    projected_product_into(b_grad, b_as, a, gradient_operand(a_as, true), grad, gradient_operand(sc, false), 1.0,
                           precision);
}

void gram_out(Tensor& out, const Tensor& a, Structure a_as, Precision precision) {
  constexpr const char* op = "gram_out";
  SG_CHECK(a.defined(), op, ": a is undefined");
  check_out_operand(op, "a", a, a_as, a);
  check_output(op, "out", out, batch_with(a, a.size(-2), a.size(-2)), a, {&a});
  bump_version(out);
  gemm_into(out, a, gradient_operand(a_as, false), a, gradient_operand(a_as, true), Structure::Symmetric, 1.0,
            precision, false, nullptr);
}

void gram_backward_out(const Tensor& grad, const Tensor& a, Structure a_as, Tensor& a_grad, Precision precision) {
  constexpr const char* op = "gram_backward_out";
  SG_CHECK(a.defined(), op, ": a is undefined");
  check_out_operand(op, "a", a, a_as, a);
  check_out_operand(op, "grad", grad, Structure::Dense, a);
  SG_CHECK(grad.shape() == batch_with(a, a.size(-2), a.size(-2)), op, ": expected grad of shape ",
           batch_with(a, a.size(-2), a.size(-2)), ", got ", grad.shape());
  check_output(op, "a_grad", a_grad, a.shape(), a, {&a, &grad});
  bump_version(a_grad);
  // d(a·aᵀ) = (G + Gᵀ)·a = 2·sym(G)·a; sym(G) stores its mirror, so it is read as operand(Symmetric) is.
  Tensor g = sym(grad.detach());
  projected_product_into(a_grad, a_as, g, operand(Structure::Symmetric, false), a, gradient_operand(a_as, false), 2.0,
                         precision);
}

}  // namespace sg
