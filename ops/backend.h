// The kernel interface every device implements (ops/cpu/ with Eigen and loops, cuda/ with
// Thrust, custom kernels and cuBLAS). Ops in ops/ do the checks, the structure rules and
// the autograd records, then call exactly one of these per kernel. Kernels write into
// outputs the caller allocated on the right device; they never allocate outputs themselves.
#pragma once

#include <cstdint>

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
};

/// Elementwise z = f(a, b; alpha) with 2-D broadcasting. The *Grad ops are the fused
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
  SquaredDiff,    // (a − b)²
  First,          // a (with b's shape broadcast: a broadcasting copy)
};

/// How a and b map onto the output, viewed as a [rows, cols] matrix: element (r, c) of the
/// output reads a[r·a_rs + c·a_cs] and b[r·b_rs + c·b_cs]. `same` is true when a, b and the
/// output have one shape (strides 1 along the flat index, the fast path).
struct Broadcast2D {
  int64_t rows = 0, cols = 0;
  int64_t a_rs = 0, a_cs = 0, b_rs = 0, b_cs = 0;
  bool same = false;
};

enum class RandomKind : uint8_t { Uniform, Normal };

/// Hyper-parameters of the fused optimizer updates (autograd/optim.h fills them).
struct SgdParams {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, first_step = true;
};
struct AdamParams {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;  // 1-based, for bias correction
  bool decoupled_weight_decay = false;  // AdamW
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
                      const Broadcast2D& bc, double alpha) = 0;
  /// out[o·inner + i] = Σ_r x[(o·reduce + r)·inner + i]; deterministic order.
  virtual void sum(const Tensor& x, Tensor& out, int64_t outer, int64_t reduce, int64_t inner) = 0;

  /// out = xᵀ for x of shape [r, c].
  virtual void transpose(const Tensor& x, Tensor& out) = 0;
  /// out[i][j] = (j − i >= diagonal) ? x[i][j] : 0, for x of shape [r, c].
  virtual void triu(const Tensor& x, Tensor& out, int64_t diagonal) = 0;
  /// out = (x + xᵀ)/2 for square x, mirrored bit for bit.
  virtual void symmetrize(const Tensor& x, Tensor& out) = 0;
  /// out[i] = x[i][i] for square x.
  virtual void diagonal(const Tensor& x, Tensor& out) = 0;
  /// out = x with its diagonal replaced by d (out may alias nothing).
  virtual void set_diagonal(const Tensor& x, const Tensor& d, Tensor& out) = 0;
  /// Row-major index of the first entry that breaks `s` (Upper: i > j and x != 0;
  /// Symmetric: i < j and x[i][j] != x[j][i] bitwise), or −1. Synchronises.
  virtual int64_t find_structure_violation(const Tensor& x, Structure s) = 0;

  /// Counter-based random numbers: element i uses counter offset + i under `seed`, so the
  /// same seed gives the same numbers on every device.
  virtual void random(Tensor& out, RandomKind kind, uint64_t seed, uint64_t offset) = 0;

  /// C = alpha·op(A)·op(B) with the descriptors of `p` (see gemm_desc.h). Dense·Dense with a
  /// Full mask may use the vendor GEMM; every structured case uses the structured kernel. Returns
  /// whether it also wrote op(A)ᵀ into p.at (GemmProblem::at).
  virtual bool gemm(const GemmProblem& p, DType dtype) = 0;
  /// Whether gemm(p) would also write op(A)ᵀ, given a buffer in p.at: a backend whose kernel reads
  /// A's tiles anyway may offer it to the backward. The CPU backend never does.
  virtual bool writes_transposed_a(const GemmProblem& p, DType dtype) { return false; }

  /// Fused in-place optimizer updates of one parameter (see autograd/optim.h).
  virtual void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& h) = 0;
  virtual void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                         const AdamParams& h) = 0;
};

/// The backend of a device (CPU always; CUDA when built with it and a device exists).
Backend& backend_for(Device device);
/// The backends this interface is implemented by, chosen when the library is built: the CPU one
/// (ops/cpu/), and the one of cuda:`device`, created on first use (cuda/; in a build without CUDA,
/// cuda/no_cuda/, which throws sg::Error naming the device).
Backend& cpu_backend();
Backend& cuda_backend(int device);

}  // namespace sg::detail
