// The kernel interface every device implements (ops/cpu/ with Eigen and loops, cuda/ with
// Thrust, custom kernels and cuBLAS). Ops in ops/ do the checks, the structure rules and
// the autograd records, then call exactly one of these per kernel. Kernels write into
// outputs the caller allocated on the right device; they never allocate outputs themselves.
#pragma once

#include <cstdint>
#include <vector>

#include <structgrad/core/tensor.h>
#include "ops/gemm_desc.h"

namespace sg::detail {

/// Elementwise y = f(x; alpha). Ops marked * map 0 to 0 (they keep UpperTriangular).
enum class UnaryOp : uint8_t {
  Neg,         // * -x
  Exp,         //   e^x
  Log,         //   ln x
  Sqrt,        // * sqrt x
  Square,      // * x^2
  Abs,         // * |x|
  Tanh,        // * tanh x
  Sigmoid,     //   1 / (1 + e^-x)
  Relu,        // * max(x, 0)
  LeakyRelu,   // * x > 0 ? x : alpha·x
  Softplus,    //   ln(1 + e^x), computed stably
  Step,        //   x > 0 ? 1 : 0
  Sign,        // * -1, 0 or 1
  AddScalar,   //   x + alpha
  MulScalar,   // * x · alpha
  DivScalar,   // * x / alpha
  RSubScalar,  //   alpha − x
  RDivScalar,  //   alpha / x
  PowScalar,   //   x^alpha
  RPowScalar,  //   alpha^x
  ClampMin,    //   max(x, alpha), NaN propagates
  ClampMax,    //   min(x, alpha), NaN propagates
  FiniteOrZero,  //   x, or 0 where x is ±inf
};

/// Elementwise z = f(a, b; alpha) with broadcasting. The *Grad ops are the fused
/// backward of the unary ops: a is the upstream gradient g, b is the forward input x
/// (or the forward output y where noted).
enum class BinaryOp : uint8_t {
  Add,            // a + b
  Sub,            // a − b
  Mul,            // a · b
  Div,            // a / b
  AddScaled,      // a + alpha·b
  ReluGrad,       // g · (x > 0)
  LeakyReluGrad,  // g · (x > 0 ? 1 : alpha)
  TanhGrad,       // g · (1 − y²),        b = y
  SigmoidGrad,    // g · y · (1 − y),     b = y
  SqrtGrad,       // g / (2y),            b = y
  AbsGrad,        // g · sign(x)
  SoftplusGrad,   // g · sigmoid(x)
  PowGrad,        // g · alpha · x^(alpha−1)
  SquareGrad,     // g · 2x
  SquaredDiff,    // (a − b)²
  First,          // a (with b's shape broadcast: a broadcasting copy)
  Maximum,        // max(a, b), NaN propagates
  Minimum,        // min(a, b), NaN propagates
  KeepWhere,      // b != 0 ? a : 0 (exactly 0, whatever a is)
  KeepWhereNot,   // b == 0 ? a : 0
  ClampMinGrad,   // x >= alpha ? g : 0
  ClampMaxGrad,   // x <= alpha ? g : 0
};

/// Comparisons: out = (a op b) ? 1 : 0, written in the output's floating dtype.
enum class CompareOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };

/// The most dimensions a broadcast keeps after merging neighbours that broadcast alike.
constexpr int kMaxBroadcastDims = 8;

/// How a and b map onto the output: the output's dimensions (merged where a and b broadcast
/// alike) and each operand's element stride along them, 0 where it is broadcast. Output element
/// (i₀, …, i_{dims−1}) reads a[Σ iₖ·a_stride[k]] and b[Σ iₖ·b_stride[k]]. `same` is true when a,
/// b and the output have one shape (the flat fast path).
struct Broadcast {
  int dims = 0;
  int64_t size[kMaxBroadcastDims] = {};
  int64_t a_stride[kMaxBroadcastDims] = {};
  int64_t b_stride[kMaxBroadcastDims] = {};
  bool same = false;
};

/// The index map of the gather and scatter kernels. Both tensors are viewed as [outer, extent,
/// inner] around the indexed dimension: the wide one (gather's source, scatter's destination) has
/// `extent` there, the compact one `count`. Compact position j maps to wide position
/// k = index[j] (a 1-D int64 index of `count` entries), k = index[o][j][i] (`per_element`: an
/// int64 index of the compact tensor's shape), or k = start + j·step without an index.
struct IndexMap {
  int64_t outer = 1, extent = 0, count = 0, inner = 1;
  const Tensor* index = nullptr;
  bool per_element = false;
  int64_t start = 0, step = 1;
};

enum class RandomKind : uint8_t { Uniform, Normal };

/// What arg_reduce finds along the reduced dimension: the largest or the smallest value.
enum class ArgReduce : uint8_t { Max, Min };

/// Hyper-parameters of the fused optimizer updates (optim/optim.cpp fills them).
struct SgdParams {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, first_step = true;
};
struct AdamParams {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;  // 1-based, for bias correction
  bool decoupled_weight_decay = false;  // AdamW
};
/// One parameter of a multi-tensor optimizer step, with its gradient and state (same dtype and size).
struct AdamSlot {
  Tensor* param;
  const Tensor* grad;
  Tensor* exp_avg;
  Tensor* exp_avg_sq;
};
struct SgdSlot {
  Tensor* param;
  const Tensor* grad;
  Tensor* momentum;  ///< null without momentum
  bool first_step;   ///< the momentum buffer starts as the gradient
};

class Backend {
 public:
  virtual ~Backend() = default;

  /// out[i] = value.
  virtual void fill(Tensor& out, double value) = 0;
  /// dst = src; same device, same numel; dtypes may differ (converting copy).
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  /// Host bytes in/out of a tensor of this device (nbytes() bytes, same dtype).
  virtual void copy_from_host(const void* host, Tensor& dst) = 0;
  virtual void copy_to_host(const Tensor& src, void* host) = 0;

  virtual void unary(UnaryOp op, const Tensor& x, Tensor& out, double alpha) = 0;
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out,
                      const Broadcast& bc, double alpha) = 0;
  /// out = (a op b) ? 1 : 0 with broadcasting; a and b share a dtype (int64 too), out is floating.
  virtual void compare(CompareOp op, const Tensor& a, const Tensor& b, Tensor& out, const Broadcast& bc) = 0;
  /// out[o·inner + i] = Σ_r x[(o·reduce + r)·inner + i]; deterministic order.
  virtual void sum(const Tensor& x, Tensor& out, int64_t outer, int64_t reduce, int64_t inner) = 0;
  /// For x viewed as [outer, reduce, inner] (reduce ≥ 1): indices[o·inner + i] = the first r with the
  /// largest (or smallest) x[o][r][i], a NaN counting as larger and smaller than every number;
  /// values (when defined) = that element.
  virtual void arg_reduce(ArgReduce kind, const Tensor& x, Tensor& values, Tensor& indices, int64_t outer,
                          int64_t reduce, int64_t inner) = 0;

  /// out[o][j][i] = x[o][k][i] with k from `m` (see IndexMap); any dtype, indices already checked.
  virtual void gather(const Tensor& x, Tensor& out, const IndexMap& m) = 0;
  /// out[o][k][i] = src[o][j][i], or += with `accumulate` (atomically where indices repeat).
  virtual void scatter(const Tensor& src, Tensor& out, const IndexMap& m, bool accumulate) = 0;
  /// The first position i with index[i] outside [0, extent), or −1. Synchronises.
  virtual int64_t find_bad_index(const Tensor& index, int64_t extent) = 0;

  // The matrix methods below take batches: x of shape [..., r, c] holds packed r × c matrices (the
  // leading dimensions are the batch, as ops/matrix_batch.h views it), and each matrix of the output
  // is computed from the matrix of x at its place.

  /// out = xᵀ per matrix: x [..., r, c], out [..., c, r].
  virtual void transpose(const Tensor& x, Tensor& out) = 0;
  /// out[i][j] = (j − i >= diagonal) ? x[i][j] : 0, per matrix of x [..., r, c].
  virtual void triu(const Tensor& x, Tensor& out, int64_t diagonal) = 0;
  /// out[i][j] = (j − i <= diagonal) ? x[i][j] : 0, per matrix of x [..., r, c].
  virtual void tril(const Tensor& x, Tensor& out, int64_t diagonal) = 0;
  /// out = (x + xᵀ)/2 per square matrix of x [..., n, n], mirrored bit for bit.
  virtual void symmetrize(const Tensor& x, Tensor& out) = 0;
  /// out[..., i] = x[..., i, i] for x [..., n, n].
  virtual void diagonal(const Tensor& x, Tensor& out) = 0;
  /// out = x with each matrix's diagonal replaced by d [..., n] (out may alias nothing).
  virtual void set_diagonal(const Tensor& x, const Tensor& d, Tensor& out) = 0;
  /// Row-major index into x [..., n, n] of the first entry that breaks `s`: a non-zero outside the
  /// structure's stored part, or for a symmetric one x[i][j] != x[j][i] bitwise (i < j); or −1.
  /// Synchronises.
  virtual int64_t find_structure_violation(const Tensor& x, Structure s) = 0;

  /// Counter-based random numbers: element i uses counter offset + i under `seed`, so the
  /// same seed gives the same numbers on every device.
  virtual void random(Tensor& out, RandomKind kind, uint64_t seed, uint64_t offset) = 0;
  /// int64 out[i] = low + an integer uniform in [0, span), counter offset + i under `seed`.
  virtual void random_integers(Tensor& out, int64_t low, uint64_t span, uint64_t seed, uint64_t offset) = 0;
  /// int64 out = a uniformly random permutation of 0 … n−1: i sorted by the random key of counter
  /// offset + i (ties by i), so every device gives the same permutation.
  virtual void random_permutation(Tensor& out, uint64_t seed, uint64_t offset) = 0;

  /// C = alpha·op(A)·op(B) with the descriptors of `p` (see gemm_desc.h), for each product of its
  /// batch (GemmProblem::batch). Dense·Dense with a Dense output may use the vendor GEMM; every
  /// structured case uses the structured kernel. Returns whether it also wrote op(A)ᵀ into p.at
  /// (GemmProblem::at; one product only).
  virtual bool gemm(const GemmProblem& p, DType dtype) = 0;
  /// Whether gemm(p) would also write op(A)ᵀ, given a buffer in p.at: a backend whose kernel reads
  /// A's tiles anyway may offer it to the backward. The CPU backend never does.
  virtual bool writes_transposed_a(const GemmProblem& p, DType dtype) { return false; }

  // The factorizations and solves take batches too: T [..., n, n] with X [..., n, k] or [..., k, n] of
  // the same batch, or one T [n, n] that the whole batch of X shares.

  /// Solves op(T)·X = B (`left`) or X·op(T) = B per matrix: x receives X, b holds B (b may be x
  /// itself: in place). op(T) = Tᵀ when `trans`, and `kind` (Upper or Lower) is the structure of op(T):
  /// T's other triangle is never read, nor its diagonal with `unit_diagonal` (taken as ones). Exact
  /// arithmetic (never TF32); the op checks the diagonals for zeros first.
  virtual void solve_triangular(const Tensor& t, Structure kind, bool trans, bool unit_diagonal, bool left,
                                const Tensor& b, Tensor& x) = 0;
  /// out = the lower Cholesky factor of each symmetric positive definite matrix of a [..., n, n] (its
  /// lower triangle read), exact zeros above the diagonal; info [...] (int64) = 0 per matrix, or the
  /// 1-based index of its first pivot that is not positive or not a number (that matrix of out then
  /// holds anything). Never synchronises.
  virtual void cholesky(const Tensor& a, Tensor& out, Tensor& info) = 0;
  /// out = T⁻¹ per matrix of T [..., n, n] read through `kind` (Upper or Lower, as stored), exact
  /// zeros in the other triangle; `unit_diagonal` as in solve_triangular.
  virtual void triangular_inverse(const Tensor& t, Structure kind, bool unit_diagonal, Tensor& out) = 0;
  /// ds = the gradient of S for L = cholesky(S) given dl (read through its lower triangle), in one
  /// fused kernel per batch, where the backend has one for this size; returns false (writing
  /// nothing) where it has not, and the op composes it from triangular_inverse and products.
  virtual bool cholesky_backward(const Tensor& l, const Tensor& dl, Tensor& ds) { return false; }

  /// Fused in-place optimizer updates of one parameter (see optim/optim.cpp).
  virtual void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& h) = 0;
  virtual void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                         const AdamParams& h) = 0;
  /// The multi-tensor forms: every slot (on this device) updated in one launch per dtype and 36 slots.
  /// Adam reads its step count from the device: `counter` (float64 [3] on this device) holds t and the
  /// bias corrections 1 − beta1^t, 1 − beta2^t, and is advanced to t + 1 first (h.step is ignored).
  /// Backends without them throw; the optimizers call them on CUDA only.
  virtual void adam_step_many(const std::vector<AdamSlot>& slots, const AdamParams& h, Tensor& counter);
  virtual void sgd_step_many(const std::vector<SgdSlot>& slots, const SgdParams& h);
};

/// The backend of a device (CPU always; CUDA when built with it and a device exists).
Backend& backend_for(Device device);
/// The backends this interface is implemented by, chosen when the library is built: the CPU one
/// (ops/cpu/), and the one of cuda:`device`, created on first use (cuda/; in a build without CUDA,
/// cuda/no_cuda/, which throws sg::Error naming the device).
Backend& cpu_backend();
Backend& cuda_backend(int device);

}  // namespace sg::detail
