// Fused kernels for batches of small matrices (cuda/linalg_batched.cuh).
//
// Each block copies its matrices into shared memory (rows padded by one element, so that a column
// is read without bank conflicts), works there, and writes its result once:
//   cholesky:           right-looking, one barrier per column: step k subtracts a(i,k)·a(j,k)/a(k,k)
//                       from the trailing lower triangle; the columns are scaled by 1/√a(k,k) at the
//                       end. A pivot that is not positive (or NaN) stops it and sets info = k + 1.
//   triangular solve:   forward substitution on the lower view of the system (an upper one is read
//                       with its rows and columns reversed), one barrier per row; the threads share
//                       the rows below the pivot and the right-hand sides. A right solve X·op(T) = B
//                       is op(T)ᵀ·Xᵀ = Bᵀ, read through the transposed index.
//   triangular inverse: the solve with B = I, written with exact zeros in the other triangle.
//   cholesky backward:  dS = sym(L⁻ᵀ·Φ(Lᵀ·dL)·L⁻¹) as Φ, then two solves with Lᵀ in place, then the
//                       symmetric part.
//   products:           C = alpha·op(A)·op(B) with both operands read through their structures
//                       and each entry summed over its structured k-range only.
#include "cuda/linalg_batched.cuh"

#include <atomic>
#include <cstddef>

#include "cuda/check.h"
#include "cuda/kernel_util.cuh"
#include "cuda/runtime.h"

namespace sg::detail::cuda::batched {
namespace {

constexpr int kBlockThreads = 256;
constexpr int kMaxDevices = 64;

/// The dynamic shared memory a block may take on `device` (its opt-in limit), read once.
size_t shared_limit(int device) {
  static std::atomic<int> limits[kMaxDevices];  // zero until read
  SG_CHECK(device >= 0 && device < kMaxDevices, "cuda batched kernels: device ", device, " out of range");
  int limit = limits[device].load(std::memory_order_relaxed);
  if (limit == 0) {
    SG_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    limits[device].store(limit, std::memory_order_relaxed);
  }
  return static_cast<size_t>(limit);
}

/// Lets `kernel` take `bytes` of dynamic shared memory: false (nothing set) where the device has
/// less. Setting the attribute costs little; it is set each time a launch asks for more than 48 KB.
template <typename Kernel>
bool fits_shared(Kernel kernel, size_t bytes, int device) {
  if (bytes > shared_limit(device)) return false;
  if (bytes > 48 * 1024)
    SG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  return true;
}

/// The number of matrices of t [..., r, c].
int64_t count_of(const Tensor& t) { return shape_numel(Shape(t.shape().begin(), t.shape().end() - 2)); }

/// Blocks for `count` matrices: the grid's x dimension (at most 2³¹ − 1).
unsigned blocks_for(const char* op, int64_t count) {
  SG_CHECK(count <= 0x7fffffff, "cuda ", op, ": a batch of ", count, " matrices is too large for one launch");
  return static_cast<unsigned>(count);
}

template <typename T>
__device__ T* shared_base() {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  return reinterpret_cast<T*>(shared_bytes);
}

/// A square matrix of order n in shared memory, rows padded to n + 1.
template <typename T>
struct SharedMatrix {
  T* data;
  int ld;
  __device__ T& operator()(int i, int j) const { return data[i * ld + j]; }
};

// ---- cholesky ------------------------------------------------------------------------------

/// Factors the lower triangle of `a` (order n) in place into L's unscaled columns; returns 0 or the
/// 1-based failing pivot. Every thread returns the same value.
template <typename T>
__device__ int factor_in_shared(SharedMatrix<T> a, int n) {
  for (int k = 0; k < n; ++k) {
    const T pivot = a(k, k);
    if (!(pivot > T(0))) return k + 1;  // also a NaN
    const int m = n - k - 1;
    for (int e = threadIdx.x; e < m * m; e += blockDim.x) {
      const int i = k + 1 + e / m, j = k + 1 + e % m;
      if (j <= i) a(i, j) -= a(i, k) * (a(j, k) / pivot);
    }
    __syncthreads();
  }
  return 0;
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads) cholesky_kernel(const T* a, T* l, long long* info, int n) {
  const SharedMatrix<T> s{shared_base<T>(), n + 1};
  const int64_t first = int64_t{blockIdx.x} * n * n;
  for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int i = e / n, j = e % n;
    if (j <= i) s(i, j) = a[first + e];
  }
  __syncthreads();
  const int failed = factor_in_shared(s, n);
  if (failed != 0 && threadIdx.x == 0) info[blockIdx.x] = failed;
  for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int i = e / n, j = e % n;
    T value = T(0);
    if (j == i) value = sqrt(s(j, j));
    else if (j < i) value = s(i, j) / sqrt(s(j, j));
    l[first + e] = value;
  }
}

// ---- triangular solves ---------------------------------------------------------------------

/// A system M·Y = B in shared memory: M lower triangular of order n (pitch n + 1), Y holding B on
/// entry and the solution on exit, `cols` columns at pitch `ldy`.
template <typename T>
__device__ void forward_substitute(SharedMatrix<T> m, T* y, int ldy, int n, int cols, bool unit) {
  for (int p = 0; p < n; ++p) {
    const T pivot = unit ? T(1) : m(p, p);
    const int below = n - p - 1;
    for (int e = threadIdx.x; e < below * cols; e += blockDim.x) {
      const int i = p + 1 + e / cols, c = e % cols;
      y[i * ldy + c] -= m(i, p) * (y[p * ldy + c] / pivot);
    }
    __syncthreads();
  }
  if (!unit)
    for (int e = threadIdx.x; e < n * cols; e += blockDim.x) y[e / cols * ldy + e % cols] /= m(e / cols, e / cols);
  __syncthreads();
}

/// How a block reads its system op(T)·X = B (left) or X·op(T) = B (right) as M·Y = B' with M lower:
/// M = op(T) (left) or op(T)ᵀ (right), its rows and columns reversed where that is upper; row i of
/// Y is row (or, right, column) `row(i)` of X.
struct SolveView {
  int n;
  bool left, reversed, read_transposed;  // read_transposed: M(i, p) = T[p][i] (before reversal)
  __device__ int row(int i) const { return reversed ? n - 1 - i : i; }
  /// T's storage index of M(i, p).
  __device__ int t_index(int i, int p) const {
    const int r = row(i), c = row(p);
    return read_transposed ? c * n + r : r * n + c;
  }
};

/// Loads the lower M of `view` from t into shared memory.
template <typename T>
__device__ void load_system(SharedMatrix<T> m, const T* t, const SolveView& view) {
  const int n = view.n;
  for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int i = e / n, p = e % n;
    if (p <= i) m(i, p) = t[view.t_index(i, p)];
  }
}

/// The solve: block (x: matrix, y: block of `chunk` right-hand sides). X [rows, cols] per matrix; the
/// right-hand sides are X's columns (left) or rows (right). b == nullptr solves against the identity
/// (the inverse) and writes exact zeros into the other triangle.
template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    solve_kernel(const T* t, int64_t t_step, const T* b, T* x, SolveView view, int k, int chunk, bool unit) {
  const int n = view.n;
  const SharedMatrix<T> m{shared_base<T>(), n + 1};
  T* y = shared_base<T>() + n * (n + 1);
  const int c0 = blockIdx.y * chunk, cols = min(chunk, k - c0);
  const int64_t x_first = int64_t{blockIdx.x} * n * k;
  load_system(m, t + blockIdx.x * t_step, view);
  // Y[i][c] = B'[row(i)][c0 + c]: left, x[row(i)·k + c0 + c]; right, x[(c0 + c)·n + row(i)].
  auto x_index = [&](int i, int c) {
    return view.left ? x_first + int64_t{view.row(i)} * k + c0 + c : x_first + int64_t{c0 + c} * n + view.row(i);
  };
  for (int e = threadIdx.x; e < n * cols; e += blockDim.x) {
    // Left: consecutive threads take consecutive columns of a row; right: consecutive rows of a column.
    const int i = view.left ? e / cols : e % n, c = view.left ? e % cols : e / n;
    y[i * chunk + c] = b ? b[x_index(i, c)] : T(view.row(i) == c0 + c ? 1 : 0);
  }
  __syncthreads();
  forward_substitute(m, y, chunk, n, cols, unit);
  for (int e = threadIdx.x; e < n * cols; e += blockDim.x) {
    const int i = view.left ? e / cols : e % n, c = view.left ? e % cols : e / n;
    T value = y[i * chunk + c];
    // The inverse of a lower M is lower: outside it, exact zeros whatever the arithmetic gave.
    if (!b && (view.reversed ? view.row(i) > c0 + c : view.row(i) < c0 + c)) value = T(0);
    x[x_index(i, c)] = value;
  }
}

/// The right-hand sides one block takes: all of them up to 64, else blocks of 64.
int solve_chunk(int64_t k) { return static_cast<int>(k < 64 ? k : 64); }

template <typename T>
bool launch_solve(const char* op, const T* t, int64_t t_step, const T* b, T* x, int64_t count, int64_t n, int64_t k,
                  Structure kind, bool trans, bool unit, bool left, int device) {
  if (n > kMaxOrder || count == 0 || k == 0) return n <= kMaxOrder;
  const int chunk = solve_chunk(k);
  const size_t bytes = (static_cast<size_t>(n) * (n + 1) + static_cast<size_t>(n) * chunk) * sizeof(T);
  const auto kernel = solve_kernel<T>;
  if (!fits_shared(kernel, bytes, device)) return false;
  // M = op(T) (left) or op(T)ᵀ (right); kind is op(T)'s structure.
  const bool m_upper = (kind == Structure::UpperTriangular) == left;
  const SolveView view{static_cast<int>(n), left, m_upper, trans == left};
  const dim3 grid(blocks_for(op, count), static_cast<unsigned>((k + chunk - 1) / chunk));
  SG_CHECK(grid.y <= 65535, "cuda ", op, ": ", k, " right-hand sides are too many for one launch");
  kernel<<<grid, kBlockThreads, bytes, stream(device)>>>(t, t_step, b, x, view, static_cast<int>(k), chunk, unit);
  SG_CUDA_CHECK_LAUNCH("solve_kernel");
  return true;
}

// ---- cholesky backward ---------------------------------------------------------------------

template <typename T>
__global__ void __launch_bounds__(kBlockThreads) cholesky_backward_kernel(const T* l, const T* dl, T* ds, int n) {
  const int ld = n + 1;
  const SharedMatrix<T> ls{shared_base<T>(), ld}, dls{shared_base<T>() + n * ld, ld},
      w{shared_base<T>() + 2 * n * ld, ld};
  const int64_t first = int64_t{blockIdx.x} * n * n;
  for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int i = e / n, j = e % n;
    ls(i, j) = j <= i ? l[first + e] : T(0);
    dls(i, j) = j <= i ? dl[first + e] : T(0);
  }
  __syncthreads();
  // Φ(Lᵀ·dL): (Lᵀ·dL)(i, j) = Σ_{p ≥ i} L(p, i)·dL(p, j) for j ≤ i, the diagonal halved, zero above.
  for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int i = e / n, j = e % n;
    T sum = T(0);
    if (j <= i)
      for (int p = i; p < n; ++p) sum += ls(p, i) * dls(p, j);
    w(i, j) = j == i ? sum / T(2) : sum;
  }
  __syncthreads();
  // Z = L⁻ᵀ·Φ: Lᵀ is upper, so the system is read reversed: M(i, p) = Lᵀ(n−1−i, n−1−p) = L(n−1−p, n−1−i).
  // Φ's rows reversed go to dls (dL is no longer needed), and M to w.
  const SharedMatrix<T> rev = w;
  for (int e = threadIdx.x; e < n * n; e += blockDim.x) dls(e / n, e % n) = w(n - 1 - e / n, e % n);
  __syncthreads();
  // M lower: M(i, p) = L(n−1−p, n−1−i); built in w (its old values are in dls).
  for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int i = e / n, p = e % n;
    rev(i, p) = p <= i ? ls(n - 1 - p, n - 1 - i) : T(0);
  }
  __syncthreads();
  forward_substitute(rev, dls.data, ld, n, n, false);  // dls = reversed rows of Z
  // Y = Z·L⁻¹, i.e. Lᵀ·Yᵀ = Zᵀ: the same M, right-hand sides the columns of Zᵀ = rows of Z. Yᵀ's
  // reversed rows: Yᵀ[n−1−i][c] = Z[c][n−1−i] = dls[n−1−c][n−1−i]; build them in ls (L is in M).
  for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int i = e / n, c = e % n;
    ls(i, c) = dls(n - 1 - c, n - 1 - i);
  }
  __syncthreads();
  forward_substitute(rev, ls.data, ld, n, n, false);  // ls(i, c) = Yᵀ[n−1−i][c] = Y[c][n−1−i]
  // dS = (Y + Yᵀ)/2: Y[r][s] = ls(n−1−s, r).
  for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int r = e / n, c = e % n;
    ds[first + e] = (ls(n - 1 - c, r) + ls(n - 1 - r, c)) / T(2);
  }
}

// ---- products ------------------------------------------------------------------------------

/// op(X)[i][j] for a product operand of `desc` stored at x (pitch ld, rows × cols as stored), the
/// value its structure gives: zero outside an Upper or Lower op(X), the mirrored upper triangle of a
/// Symmetric one.
template <typename T>
__device__ T operand_entry(const T* x, int64_t ld, const GemmOperand& desc, int i, int j) {
  switch (desc.structure) {
    case Structure::UpperTriangular:
      if (j < i) return T(0);
      break;
    case Structure::LowerTriangular:
      if (j > i) return T(0);
      break;
    case Structure::Symmetric:
      if (!desc.mirror_stored && i > j) {
        const int s = i;
        i = j;
        j = s;
      }
      return x[int64_t{i} * ld + j];  // a symmetric operand reads the same either way
    default: break;
  }
  return desc.trans ? x[int64_t{j} * ld + i] : x[int64_t{i} * ld + j];
}

struct ProductShape {
  int m, n, k;
  int64_t lda, ldb, ldc, stride_a, stride_b, stride_c;
  GemmOperand a, b;
  Structure mask;
  Pattern a_pattern, b_pattern;
};

template <typename T>
__global__ void __launch_bounds__(kBlockThreads) product_kernel(const T* a, const T* b, T* c, ProductShape s, T alpha) {
  T* as = shared_base<T>();             // op(A) [m][k + 1]
  T* bs = as + s.m * (s.k + 1);         // op(B) [k][n + 1]
  const T* ai = a + blockIdx.x * s.stride_a;
  const T* bi = b + blockIdx.x * s.stride_b;
  T* ci = c + blockIdx.x * s.stride_c;
  for (int e = threadIdx.x; e < s.m * s.k; e += blockDim.x) {
    // Consecutive threads read consecutive elements of the storage: op(A)'s rows, or Aᵀ's columns.
    const int i = s.a.trans ? e % s.m : e / s.k, p = s.a.trans ? e / s.m : e % s.k;
    as[i * (s.k + 1) + p] = operand_entry(ai, s.lda, s.a, i, p);
  }
  for (int e = threadIdx.x; e < s.k * s.n; e += blockDim.x) {
    const int p = s.b.trans ? e % s.k : e / s.n, j = s.b.trans ? e / s.k : e % s.n;
    bs[p * (s.n + 1) + j] = operand_entry(bi, s.ldb, s.b, p, j);
  }
  __syncthreads();
  const bool upper = s.mask != Structure::Dense;  // Upper, or Symmetric: the upper triangle computed
  for (int e = threadIdx.x; e < s.m * s.n; e += blockDim.x) {
    const int i = e / s.n, j = e % s.n;
    if (upper && j < i) {
      if (s.mask == Structure::UpperTriangular) ci[int64_t{i} * s.ldc + j] = T(0);
      continue;
    }
    const KRange r = structured_k_range(s.a_pattern, s.b_pattern, i, i + 1, j, j + 1, s.k);
    T sum = T(0);
    for (int p = static_cast<int>(r.begin); p < r.end; ++p) sum += as[i * (s.k + 1) + p] * bs[p * (s.n + 1) + j];
    sum *= alpha;
    ci[int64_t{i} * s.ldc + j] = sum;
    if (s.mask == Structure::Symmetric && j > i) ci[int64_t{j} * s.ldc + i] = sum;
  }
}

}  // namespace

bool cholesky(const Tensor& a, Tensor& out, Tensor& info, int device) {
  const int64_t n = a.size(-1), count = count_of(a);
  if (n > kMaxOrder) return false;
  if (count == 0 || n == 0) return true;
  bool launched = false;
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const size_t bytes = static_cast<size_t>(n) * (n + 1) * sizeof(T);
    const auto kernel = cholesky_kernel<T>;
    if (!fits_shared(kernel, bytes, device)) return;
    kernel<<<blocks_for("cholesky", count), kBlockThreads, bytes, stream(device)>>>(
        data_of<T>(a), data_of<T>(out), static_cast<long long*>(info.data_ptr()), static_cast<int>(n));
    SG_CUDA_CHECK_LAUNCH("cholesky_kernel");
    launched = true;
  });
  return launched;
}

bool cholesky_backward(const Tensor& l, const Tensor& dl, Tensor& ds, int device) {
  const int64_t n = l.size(-1), count = count_of(l);
  if (n > kMaxOrder) return false;
  if (count == 0 || n == 0) return true;
  bool launched = false;
  dispatch_dtype(l.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const size_t bytes = 3 * static_cast<size_t>(n) * (n + 1) * sizeof(T);
    const auto kernel = cholesky_backward_kernel<T>;
    if (!fits_shared(kernel, bytes, device)) return;
    kernel<<<blocks_for("cholesky backward", count), kBlockThreads, bytes, stream(device)>>>(
        data_of<T>(l), data_of<T>(dl), data_of<T>(ds), static_cast<int>(n));
    SG_CUDA_CHECK_LAUNCH("cholesky_backward_kernel");
    launched = true;
  });
  return launched;
}

bool solve_triangular(const Tensor& t, Structure kind, bool trans, bool unit_diagonal, bool left, const Tensor& b,
                      Tensor& x, int device) {
  const int64_t n = t.size(-1), k = left ? x.size(-1) : x.size(-2);
  if (n > kMaxOrder) return false;
  const int64_t t_step = count_of(t) == 1 ? 0 : n * n;
  bool launched = false;
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launched = launch_solve<T>("solve_triangular", data_of<T>(t), t_step, data_of<T>(b), data_of<T>(x), count_of(x), n,
                               k, kind, trans, unit_diagonal, left, device);
  });
  return launched;
}

bool triangular_inverse(const Tensor& t, Structure kind, bool unit_diagonal, Tensor& out, int device) {
  const int64_t n = t.size(-1);
  if (n > kMaxOrder) return false;
  bool launched = false;
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launched = launch_solve<T>("triangular_inverse", data_of<T>(t), n * n, nullptr, data_of<T>(out), count_of(t), n, n,
                               kind, false, unit_diagonal, true, device);
  });
  return launched;
}

bool gemm(const GemmProblem& p, DType dtype, int device) {
  if (p.m > kMaxOrder || p.n > kMaxOrder || p.k > kMaxOrder || p.accumulate || p.at != nullptr) return false;
  if (p.mask != Structure::Dense && p.mask != Structure::UpperTriangular && p.mask != Structure::Symmetric) return false;
  bool launched = false;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const size_t bytes = (static_cast<size_t>(p.m) * (p.k + 1) + static_cast<size_t>(p.k) * (p.n + 1)) * sizeof(T);
    const auto kernel = product_kernel<T>;
    if (!fits_shared(kernel, bytes, device)) return;
    ProductShape s{static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), p.lda, p.ldb, p.ldc,
                   p.batch_stride_a, p.batch_stride_b, p.batch_stride_c, p.a, p.b, p.mask, a_pattern(p.a),
                   b_pattern(p.b)};
    kernel<<<blocks_for("gemm", p.batch), kBlockThreads, bytes, stream(device)>>>(
        static_cast<const T*>(p.a_data), static_cast<const T*>(p.b_data), static_cast<T*>(p.c_data), s,
        static_cast<T>(p.alpha));
    SG_CUDA_CHECK_LAUNCH("product_kernel");
    launched = true;
  });
  return launched;
}

}  // namespace sg::detail::cuda::batched
