// The CPU backend: elementwise ops as plain loops over the shared functors (ops/functors.h),
// deterministic reductions, shape kernels, and the structured GEMM (Eigen GEMM for
// Dense·Dense, the blocked structured GEMM for everything else). Large loops use OpenMP.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/backend.h"
#include "ops/matrix_batch.h"
#include "ops/cpu/cpu_gemm.h"
#include "ops/cpu/cpu_linalg.h"
#include "ops/functors.h"
#include "ops/optim_math.h"

namespace sg::detail {
namespace {

// Elementwise loops below this many elements stay on one thread (see cpu::kMinParallelMacs:
// a parallel region costs about 60 µs on the 2-core VMs, about 2^17 elements of work).
constexpr int64_t kParallelThreshold = 1 << 17;

template <typename T>
T* ptr(const Tensor& t) { return static_cast<T*>(t.data_ptr()); }

/// body(i) for i < n, on the OpenMP threads when `parallel`. A loop that stays on one thread
/// enters no OpenMP construct: libgomp allocates and frees a team even for a parallel region whose
/// `if` is false, and those allocations (each consolidating malloc's free lists) took a tenth of a
/// d = 16 training step of bench_train_step.
template <typename F>
void parallel_for(int64_t n, bool parallel, F&& body) {
  if (parallel) {
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  for (int64_t i = 0; i < n; ++i) body(i);
}

/// body(i) for i < n as one SIMD loop per thread: the iterations must be independent (each
/// touches element i of arrays that do not overlap). Large loops split over the OpenMP threads.
template <typename F>
void vector_loop(int64_t n, F&& body) {
  if (n >= kParallelThreshold) {
#pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) body(i);
}

/// Calls f(T{}) with T = float or double; the floating-point kernels take no int64.
template <typename F>
void dispatch_dtype(DType dtype, F&& f) {
  SG_CHECK(is_floating_point(dtype), "cpu kernel: expected a floating-point tensor, got ", dtype);
  if (dtype == DType::Float32) f(float{});
  else f(double{});
}

/// Calls f(T{}) with T = float, double or int64_t: the kernels that move or compare values.
template <typename F>
void dispatch_any(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: f(float{}); break;
    case DType::Float64: f(double{}); break;
    case DType::Int64: f(int64_t{}); break;
  }
}

/// Calls f(std::integral_constant<Op, op>{}) for the runtime `op`, so that each op's loop is
/// compiled on its own: the switch of apply_unary / apply_binary folds away and the loop
/// vectorises. An op past `last` (one added to the enum later) gets f(op), the generic loop.
template <typename Op, Op last, typename F, int... I>
void dispatch_op(Op op, F&& f, std::integer_sequence<int, I...>) {
  const bool found = ((static_cast<int>(op) == I ? (f(std::integral_constant<Op, static_cast<Op>(I)>{}), true) : false) || ...);
  if (!found) f(op);
}
template <typename Op, Op last, typename F>
void dispatch_op(Op op, F&& f) {
  dispatch_op<Op, last>(op, std::forward<F>(f), std::make_integer_sequence<int, static_cast<int>(last) + 1>{});
}

/// Runs row(out offset, a offset, b offset, length, a step, b step) over a broadcast's output, one
/// call per run of its last dimension, in parallel when large.
template <typename F>
void for_each_broadcast_row(const Broadcast& bc, int64_t n, F&& row) {
  if (n == 0) return;
  const int64_t last = bc.dims > 0 ? bc.size[bc.dims - 1] : 1;
  const int64_t a_step = bc.dims > 0 ? bc.a_stride[bc.dims - 1] : 0;
  const int64_t b_step = bc.dims > 0 ? bc.b_stride[bc.dims - 1] : 0;
  parallel_for(n / last, n > kParallelThreshold, [&](int64_t r) {
    int64_t ao = 0, bo = 0;
    if (bc.dims == 2) {  // a matrix against a row or a column: no division
      ao = r * bc.a_stride[0];
      bo = r * bc.b_stride[0];
    } else {
      broadcast_offsets(bc, r * last, ao, bo);
    }
    row(r * last, ao, bo, last, a_step, b_step);
  });
}

/// o[c] = op(a[c·a_step], b[c·b_step]) for c < count, with the steps of a broadcast's last
/// dimension (1, or 0 for a broadcast operand) as their own loops so that they vectorise.
template <typename T, typename Op>
void binary_row(Op op, const T* a, int64_t a_step, const T* b, int64_t b_step, T* o, int64_t count, T alpha) {
  if (a_step == 1 && b_step == 1) {
    for (int64_t c = 0; c < count; ++c) o[c] = apply_binary<T>(op, a[c], b[c], alpha);
  } else if (a_step == 1 && b_step == 0) {
    const T bv = *b;
    for (int64_t c = 0; c < count; ++c) o[c] = apply_binary<T>(op, a[c], bv, alpha);
  } else if (a_step == 0 && b_step == 1) {
    const T av = *a;
    for (int64_t c = 0; c < count; ++c) o[c] = apply_binary<T>(op, av, b[c], alpha);
  } else if (a_step == 0 && b_step == 0) {  // one value along the row (expand's broadcast copy)
    std::fill_n(o, count, apply_binary<T>(op, *a, *b, alpha));
  } else {
    for (int64_t c = 0; c < count; ++c) o[c] = apply_binary<T>(op, a[c * a_step], b[c * b_step], alpha);
  }
}

/// Σ x[r] for r < n in double: eight interleaved partial sums (lane l adds x[l], x[l + 8], ...)
/// combined pairwise, then the n mod 8 last elements in order. A fixed order, so the result is
/// deterministic, and independent lanes, so the loop vectorises where one running sum would wait
/// on each add.
template <typename T>
double sum_contiguous(const T* x, int64_t n) {
  constexpr int64_t kLanes = 8;
  double lane[kLanes] = {};
  const int64_t whole = n / kLanes * kLanes;
  for (int64_t r = 0; r < whole; r += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lane[l] += static_cast<double>(x[r + l]);
  double total = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
  for (int64_t r = whole; r < n; ++r) total += static_cast<double>(x[r]);
  return total;
}

class CpuBackend final : public Backend {
 public:
  void fill(Tensor& out, double value) override {
    dispatch_any(out.dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* o = ptr<T>(out);
      const T v = static_cast<T>(value);
      const int64_t n = out.numel();
      for (int64_t i = 0; i < n; ++i) o[i] = v;
    });
  }

  void copy(const Tensor& src, Tensor& dst) override {
    if (src.dtype() == dst.dtype()) {
      std::memcpy(dst.data_ptr(), src.data_ptr(), src.nbytes());
      return;
    }
    const int64_t n = src.numel();
    dispatch_any(src.dtype(), [&](auto from_zero) {
      using From = decltype(from_zero);
      dispatch_any(dst.dtype(), [&](auto to_zero) {
        using To = decltype(to_zero);
        const From* from = ptr<From>(src);
        To* to = ptr<To>(dst);
        for (int64_t i = 0; i < n; ++i) to[i] = static_cast<To>(from[i]);
      });
    });
  }

  void copy_from_host(const void* host, Tensor& dst) override { std::memcpy(dst.data_ptr(), host, dst.nbytes()); }
  void copy_to_host(const Tensor& src, void* host) override { std::memcpy(host, src.data_ptr(), src.nbytes()); }

  void unary(UnaryOp op, const Tensor& x, Tensor& out, double alpha) override {
    dispatch_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* in = ptr<T>(x);
      T* o = ptr<T>(out);
      const int64_t n = x.numel();
      const T a = static_cast<T>(alpha);
      dispatch_op<UnaryOp, UnaryOp::FiniteOrZero>(op, [&](auto op_c) {
        parallel_for(n, n > kParallelThreshold, [&](int64_t i) { o[i] = apply_unary<T>(op_c, in[i], a); });
      });
    });
  }

  void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, const Broadcast& bc,
              double alpha) override {
    dispatch_dtype(out.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* pa = ptr<T>(a);
      const T* pb = ptr<T>(b);
      T* o = ptr<T>(out);
      const T al = static_cast<T>(alpha);
      dispatch_op<BinaryOp, BinaryOp::ClampMaxGrad>(op, [&](auto op_c) {
        if (bc.same) {
          const int64_t n = out.numel();
          parallel_for(n, n > kParallelThreshold, [&](int64_t i) { o[i] = apply_binary<T>(op_c, pa[i], pb[i], al); });
          return;
        }
        for_each_broadcast_row(bc, out.numel(), [&](int64_t i, int64_t ao, int64_t bo, int64_t count, int64_t a_step,
                                                    int64_t b_step) {
          binary_row<T>(op_c, pa + ao, a_step, pb + bo, b_step, o + i, count, al);
        });
      });
    });
  }

  void compare(CompareOp op, const Tensor& a, const Tensor& b, Tensor& out, const Broadcast& bc) override {
    dispatch_any(a.dtype(), [&](auto in_zero) {
      using In = decltype(in_zero);
      dispatch_dtype(out.dtype(), [&](auto out_zero) {
        using Out = decltype(out_zero);
        const In* pa = ptr<In>(a);
        const In* pb = ptr<In>(b);
        Out* o = ptr<Out>(out);
        if (bc.same) {
          const int64_t n = out.numel();
          for (int64_t i = 0; i < n; ++i) o[i] = apply_compare<In>(op, pa[i], pb[i]) ? Out(1) : Out(0);
          return;
        }
        for_each_broadcast_row(bc, out.numel(), [&](int64_t i, int64_t ao, int64_t bo, int64_t count, int64_t a_step,
                                                    int64_t b_step) {
          for (int64_t c = 0; c < count; ++c)
            o[i + c] = apply_compare<In>(op, pa[ao + c * a_step], pb[bo + c * b_step]) ? Out(1) : Out(0);
        });
      });
    });
  }

  void sum(const Tensor& x, Tensor& out, int64_t outer, int64_t reduce, int64_t inner) override {
    dispatch_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* in = ptr<T>(x);
      T* o = ptr<T>(out);
      if (inner == 1) {
        for (int64_t q = 0; q < outer; ++q) o[q] = static_cast<T>(sum_contiguous(in + q * reduce, reduce));
        return;
      }
      // Rows of `inner` sums in double, added row after row: one vectorised pass per row.
      std::vector<double> acc(static_cast<size_t>(inner));
      for (int64_t q = 0; q < outer; ++q) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t r = 0; r < reduce; ++r) {
          const T* row = in + (q * reduce + r) * inner;
          for (int64_t i = 0; i < inner; ++i) acc[static_cast<size_t>(i)] += static_cast<double>(row[i]);
        }
        for (int64_t i = 0; i < inner; ++i) o[q * inner + i] = static_cast<T>(acc[static_cast<size_t>(i)]);
      }
    });
  }

  void arg_reduce(ArgReduce kind, const Tensor& x, Tensor& values, Tensor& indices, int64_t outer, int64_t reduce,
                  int64_t inner) override {
    dispatch_any(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* in = ptr<T>(x);
      T* v = values.defined() ? ptr<T>(values) : nullptr;
      int64_t* idx = ptr<int64_t>(indices);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const T* column = in + o * reduce * inner + i;
          int64_t best = 0;
          for (int64_t r = 1; r < reduce; ++r)
            if (arg_better<T>(kind, column[r * inner], column[best * inner])) best = r;
          idx[o * inner + i] = best;
          if (v) v[o * inner + i] = column[best * inner];
        }
    });
  }

  void gather(const Tensor& x, Tensor& out, const IndexMap& m) override {
    dispatch_any(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* in = ptr<T>(x);
      T* o = ptr<T>(out);
      const int64_t* index = m.index ? ptr<int64_t>(*m.index) : nullptr;
      const int64_t n = m.outer * m.count * m.inner;
      parallel_for(n, n > kParallelThreshold, [&](int64_t t) {
        const int64_t i = t % m.inner, rest = t / m.inner;
        const int64_t j = rest % m.count, q = rest / m.count;
        o[t] = in[(q * m.extent + index_position(m, index, q, j, i)) * m.inner + i];
      });
    });
  }

  void scatter(const Tensor& src, Tensor& out, const IndexMap& m, bool accumulate) override {
    dispatch_any(src.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* in = ptr<T>(src);
      T* o = ptr<T>(out);
      const int64_t* index = m.index ? ptr<int64_t>(*m.index) : nullptr;
      const int64_t n = m.outer * m.count * m.inner;
      // In order, on one thread: repeated indices add up deterministically.
      for (int64_t t = 0; t < n; ++t) {
        const int64_t i = t % m.inner, rest = t / m.inner;
        const int64_t j = rest % m.count, q = rest / m.count;
        T& target = o[(q * m.extent + index_position(m, index, q, j, i)) * m.inner + i];
        target = accumulate ? target + in[t] : in[t];
      }
    });
  }

  int64_t find_bad_index(const Tensor& index, int64_t extent) override {
    const int64_t* p = ptr<int64_t>(index);
    const int64_t n = index.numel();
    for (int64_t i = 0; i < n; ++i)
      if (p[i] < 0 || p[i] >= extent) return i;
    return -1;
  }

  void transpose(const Tensor& x, Tensor& out) override {
    const MatrixBatch v = matrix_batch("cpu transpose", nullptr, x);
    dispatch_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const int64_t rows = v.rows, cols = v.cols;
      constexpr int64_t B = 32;
      for (int64_t b = 0; b < v.count(); ++b) {
        const T* in = ptr<T>(x) + b * rows * cols;
        T* o = ptr<T>(out) + b * rows * cols;
        for (int64_t i0 = 0; i0 < rows; i0 += B)
          for (int64_t j0 = 0; j0 < cols; j0 += B)
            for (int64_t i = i0; i < std::min(i0 + B, rows); ++i)
              for (int64_t j = j0; j < std::min(j0 + B, cols); ++j) o[j * rows + i] = in[i * cols + j];
      }
    });
  }

  void triu(const Tensor& x, Tensor& out, int64_t diagonal) override { triangle(x, out, diagonal, false); }
  void tril(const Tensor& x, Tensor& out, int64_t diagonal) override { triangle(x, out, diagonal, true); }

  void symmetrize(const Tensor& x, Tensor& out) override {
    const MatrixBatch v = square_batch("cpu symmetrize", nullptr, x);
    dispatch_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const int64_t n = v.rows;
      for (int64_t b = 0; b < v.count(); ++b) {
        const T* in = ptr<T>(x) + b * n * n;
        T* o = ptr<T>(out) + b * n * n;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = i; j < n; ++j) {
            // One expression for both entries: the mirror is bit-exact.
            const T value = (in[i * n + j] + in[j * n + i]) * T(0.5);
            o[i * n + j] = value;
            o[j * n + i] = value;
          }
      }
    });
  }

  void diagonal(const Tensor& x, Tensor& out) override {
    const MatrixBatch v = square_batch("cpu diagonal", nullptr, x);
    dispatch_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const int64_t n = v.rows;
      for (int64_t b = 0; b < v.count(); ++b)
        for (int64_t i = 0; i < n; ++i) ptr<T>(out)[b * n + i] = ptr<T>(x)[(b * n + i) * n + i];
    });
  }

  void set_diagonal(const Tensor& x, const Tensor& d, Tensor& out) override {
    const MatrixBatch v = square_batch("cpu set_diagonal", nullptr, x);
    if (!out.is_same(x)) std::memcpy(out.data_ptr(), x.data_ptr(), x.nbytes());
    dispatch_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const int64_t n = v.rows;
      for (int64_t b = 0; b < v.count(); ++b)
        for (int64_t i = 0; i < n; ++i) ptr<T>(out)[(b * n + i) * n + i] = ptr<T>(d)[b * n + i];
    });
  }

  int64_t find_structure_violation(const Tensor& x, Structure s) override {
    const MatrixBatch v = square_batch("cpu find_structure_violation", nullptr, x);
    const StructureTraits& traits_of_s = traits(s);
    int64_t found = -1;
    dispatch_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const int64_t n = v.rows;
      for (int64_t e = 0; e < x.numel(); ++e) {
        const T* in = ptr<T>(x) + e / (n * n) * n * n;
        const int64_t i = e / n % n, j = e % n;
        const uint8_t part = i > j ? kBelowDiagonal : i == j ? kOnDiagonal : kAboveDiagonal;
        const bool bad = (!(traits_of_s.stored & part) && in[i * n + j] != T(0)) ||
                         (traits_of_s.symmetric && i < j && std::memcmp(&in[i * n + j], &in[j * n + i], sizeof(T)) != 0);
        if (bad) {
          found = e;
          break;
        }
      }
    });
    return found;
  }

  void random(Tensor& out, RandomKind kind, uint64_t seed, uint64_t offset) override {
    dispatch_dtype(out.dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* o = ptr<T>(out);
      const int64_t n = out.numel();
      parallel_for(n, n > kParallelThreshold, [&](int64_t i) {
        const uint64_t counter = offset + static_cast<uint64_t>(i);
        o[i] = static_cast<T>(kind == RandomKind::Uniform ? random_uniform(seed, counter) : random_normal(seed, counter));
      });
    });
  }

  void random_integers(Tensor& out, int64_t low, uint64_t span, uint64_t seed, uint64_t offset) override {
    int64_t* o = ptr<int64_t>(out);
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i)
      o[i] = low + static_cast<int64_t>(random_below(seed, offset + static_cast<uint64_t>(i), span));
  }

  void random_permutation(Tensor& out, uint64_t seed, uint64_t offset) override {
    const int64_t n = out.numel();
    std::vector<std::pair<uint64_t, int64_t>> keyed(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) keyed[static_cast<size_t>(i)] = {random_key(seed, offset + static_cast<uint64_t>(i)), i};
    std::sort(keyed.begin(), keyed.end());  // (key, i): ties go by i, as the device's stable sort
    int64_t* o = ptr<int64_t>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = keyed[static_cast<size_t>(i)].second;
  }

  bool gemm(const GemmProblem& p, DType dtype) override {
    // Dense·Dense through Eigen's GEMM; every structured product through the blocked
    // structured GEMM (tile skipping, k-ranges). reference_gemm stays the tests' oracle. A batch
    // runs product by product.
    const bool dense = p.a.structure == Structure::Dense && p.b.structure == Structure::Dense && p.mask == Structure::Dense;
    SG_CHECK(p.batch >= 0, "cpu gemm: negative batch ", p.batch);
    SG_CHECK(p.batch <= 1 || p.batch_stride_c != 0, "cpu gemm: the products of a batch write one C each, got C's stride 0");
    cpu::with_threads_for(p.m * p.n * p.k * p.batch, [&] {
      for (int64_t i = 0; i < p.batch; ++i) {
        const GemmProblem q = p.batch == 1 ? p : batch_item(p, i, element_size(dtype));
        if (dense) cpu::dense_gemm(q, dtype);
        else cpu::blocked_gemm(q, dtype);
      }
    });
    return false;
  }

  // One matrix runs on the threads with_threads_for allows; a batch spreads its matrices over them.
  void solve_triangular(const Tensor& t, Structure kind, bool trans, bool unit_diagonal, bool left, const Tensor& b,
                        Tensor& x) override {
    const int64_t n = t.size(-1);
    cpu::with_threads_for(n * x.numel() / 2, [&] { cpu::solve_triangular(t, kind, trans, unit_diagonal, left, b, x); });
  }
  void cholesky(const Tensor& a, Tensor& out, Tensor& info) override {
    const int64_t n = a.size(-1);
    cpu::with_threads_for(n * a.numel() / 6, [&] { cpu::cholesky(a, out, info); });
  }
  void triangular_inverse(const Tensor& t, Structure kind, bool unit_diagonal, Tensor& out) override {
    const int64_t n = t.size(-1);
    cpu::with_threads_for(n * t.numel() / 2, [&] { cpu::triangular_inverse(t, kind, unit_diagonal, out); });
  }

  // The optimizer math is ops/optim_math.h's, shared with the CUDA kernels.
  void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& h) override {
    dispatch_dtype(param.dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* __restrict p = ptr<T>(param);
      const T* __restrict g = ptr<T>(grad);
      const SgdCoefficients<T> c = sgd_coefficients<T>(h);
      // The loops capture by value: coefficients read through a reference stay per-iteration
      // loads, and GCC vectorises no loop that loads their bool flags.
      if (!momentum_buf.defined()) {
        vector_loop(param.numel(), [p, g, c](int64_t i) {
          T unused = T(0);
          p[i] = sgd_update<T>(p[i], g[i], unused, c);
        });
        return;
      }
      T* __restrict buf = ptr<T>(momentum_buf);
      vector_loop(param.numel(), [p, g, buf, c](int64_t i) { p[i] = sgd_update<T>(p[i], g[i], buf[i], c); });
    });
  }

  void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                 const AdamParams& h) override {
    dispatch_dtype(param.dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* __restrict p = ptr<T>(param);
      const T* __restrict g = ptr<T>(grad);
      T* __restrict m = ptr<T>(exp_avg);
      T* __restrict v = ptr<T>(exp_avg_sq);
      const AdamCoefficients<T> c = adam_coefficients<T>(h);
      vector_loop(param.numel(), [p, g, m, v, c](int64_t i) { adam_update<T>(p[i], g[i], m[i], v[i], c); });
    });
  }

 private:
  /// triu (lower = false: entries with j − i >= diagonal kept) or tril (lower = true: j − i <= diagonal).
  static void triangle(const Tensor& x, Tensor& out, int64_t diagonal, bool lower) {
    const MatrixBatch v = matrix_batch(lower ? "cpu tril" : "cpu triu", nullptr, x);
    dispatch_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* in = ptr<T>(x);
      T* o = ptr<T>(out);
      const int64_t rows = v.rows, cols = v.cols;
      for (int64_t e = 0; e < x.numel(); ++e) {
        const int64_t i = e / cols % rows, j = e % cols;
        const bool keep = lower ? j - i <= diagonal : j - i >= diagonal;
        o[e] = keep ? in[e] : T(0);
      }
    });
  }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace sg::detail
