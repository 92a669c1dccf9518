// Fused kernels for batches of small matrices (cuda/linalg_batched.cuh).
//
// Cholesky and its backward, n ≤ 32: a group of N lanes per matrix (N = 8, 16 or 32 ≥ n, several
// groups to a warp), lane j holding column j in registers, the order padded with the identity
// (which the arithmetic leaves unchanged):
//   forward:   right-looking: at step k lane k writes its (final, unscaled) column to shared memory,
//              and every lane j > k subtracts a(i, k)·a(j, k)/a(k, k) from its entries, column k read
//              16 bytes at a time; the columns are scaled by 1/√a(j, j) as they are written. A pivot
//              that is not positive (or NaN) sets info = k + 1.
//   backward:  dS = sym(L⁻ᵀ·Φ(Lᵀ·dL)·L⁻¹). L goes to shared memory, its rows read 16 bytes at a
//              time; lane j forms column j of Φ(Lᵀ·dL), solves Lᵀ·Z = Φ for it, takes
//              row j of Z through shared memory, solves Lᵀ·y = (row j of Z)ᵀ (y is row j of Y = Z·L⁻¹),
//              and writes (Y + Yᵀ)/2.
// Triangular solves, n ≤ 64: one thread per right-hand side holds its column of Y in registers and
// substitutes forward through the lower view of the system (an upper one read with its rows and
// columns reversed; a right solve X·op(T) = B read as op(T)ᵀ·Xᵀ = Bᵀ), the system's rows read from
// shared memory 16 bytes at a time by all threads at once. The triangular inverse is the solve with
// B = I, written with exact zeros in the other triangle.
// Products, every extent ≤ kMaxOrder: op(A)ᵀ and op(B) go to shared memory with zeros outside their
// structures; each thread accumulates one column of an 8-row tile over the tile's structured k-range.
// Larger orders, up to kMaxOrder, take one thread block per matrix in shared memory (rows padded by
// one element, so that a column is read without bank conflicts), one barrier per step:
//   cholesky:           step k subtracts a(i,k)·a(j,k)/a(k,k) from the trailing lower triangle; the
//                       columns are scaled by 1/√a(k,k) at the end.
//   triangular solve:   forward substitution, the threads sharing the rows below the pivot and the
//                       right-hand sides.
//   cholesky backward:  Φ, then two solves with Lᵀ in place, then the symmetric part.
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

// ---- groups of lanes, n ≤ 32 -----------------------------------------------------------------

constexpr int kGroupThreads = 128;  // threads per block of the group kernels

/// The group order for n ≤ 32: the smallest of 8, 16 and 32 that holds it.
int group_order(int64_t n) { return n <= 8 ? 8 : n <= 16 ? 16 : 32; }

/// Values read from shared memory at once: four floats or two doubles (16 bytes, aligned).
template <typename T>
constexpr int kPack = 16 / sizeof(T);

__device__ inline void load_pack(const float* p, float (&v)[4]) {
  const float4 t = *reinterpret_cast<const float4*>(p);
  v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
}
__device__ inline void load_pack(const double* p, double (&v)[2]) {
  const double2 t = *reinterpret_cast<const double2*>(p);
  v[0] = t.x, v[1] = t.y;
}

template <int N>
constexpr int kForwardPitch = N + 4;  // rows of the columns in shared memory, 16-byte aligned

template <typename T, int N>
__global__ void __launch_bounds__(kGroupThreads)
    cholesky_group_kernel(const T* a, T* l, long long* info, int n, int64_t count) {
  constexpr int P = kForwardPitch<N>, W = kPack<T>;
  const int j = threadIdx.x % N, group = threadIdx.x / N;
  const int64_t m = int64_t{blockIdx.x} * (kGroupThreads / N) + group;
  const bool owns = m < count && j < n;  // the lane holds a column of a matrix of the batch
  const int64_t first = m * n * n;
  T* columns = shared_base<T>() + group * N * P;  // row k: column k as step k leaves it
  T c[N];  // column j of the lower triangle; an identity column past the order or the batch
#pragma unroll
  for (int i = 0; i < N; ++i) c[i] = owns && i < n && i >= j ? a[first + i * n + j] : T(i == j ? 1 : 0);
  int failed = 0;
  T diagonal = T(1);  // a(j, j) when step j reaches it
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (k >= n) break;
    // Lane k's column is final (unscaled): it goes to shared memory for the others to read.
    if (j == k) {
      diagonal = c[k];
#pragma unroll
      for (int i = k; i < N; ++i) columns[k * P + i] = c[i];
    }
    __syncwarp();
    const T d = columns[k * P + k];
    if (failed == 0 && !(d > T(0))) failed = k + 1;  // also a NaN
    // a(i, j) −= a(i, k)·a(j, k)/a(k, k) for the columns j > k (a zero factor leaves the others).
    const T factor = j > k ? columns[k * P + j] / d : T(0);
#pragma unroll
    for (int i0 = (k + 1) / W * W; i0 < N; i0 += W) {
      T v[W];
      load_pack(columns + k * P + i0, v);
#pragma unroll
      for (int q = 0; q < W; ++q)
        if (i0 + q > k) c[i0 + q] -= v[q] * factor;
    }
  }
  // L(i, j) = a(i, j)/√a(j, j).
  if (owns) {
    const T root = sqrt(diagonal), inv = T(1) / root;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (i >= n) break;
      l[first + i * n + j] = i > j ? c[i] * inv : i == j ? root : T(0);
    }
  }
  if (m < count && j == 0) info[m] = failed;
}

/// x = L⁻ᵀ·x for the lower L whose rows are ls (pitch P, zeros above the diagonal) and whose
/// diagonal's reciprocals are rd: back substitution a column of Lᵀ (a row of L) at a time, each
/// row read 16 bytes at a time.
template <typename T, int N, int P>
__device__ void solve_transposed(const T* ls, const T* rd, T (&x)[N]) {
  constexpr int W = kPack<T>;
#pragma unroll
  for (int p = N - 1; p >= 0; --p) {
    x[p] *= rd[p];
#pragma unroll
    for (int i0 = 0; i0 < p; i0 += W) {
      T v[W];
      load_pack(ls + p * P + i0, v);
#pragma unroll
      for (int q = 0; q < W; ++q)
        if (i0 + q < p) x[i0 + q] -= v[q] * x[p];
    }
  }
}

template <int N>
constexpr int kBackwardPitch = N + 4;  // rows of L, 16-byte aligned

/// The shared memory of one group of the backward, in elements: L, a transpose buffer, 1 / L(i, i).
template <int N>
constexpr int kBackwardElements = N * kBackwardPitch<N> + N * (N + 1) + N;

template <typename T, int N>
__global__ void __launch_bounds__(kGroupThreads)
    cholesky_backward_group_kernel(const T* l, const T* dl, T* ds, int n, int64_t count) {
  constexpr int P = kBackwardPitch<N>, W = kPack<T>;
  const int j = threadIdx.x % N, group = threadIdx.x / N;
  const int64_t m = int64_t{blockIdx.x} * (kGroupThreads / N) + group;
  const bool owns = m < count && j < n;
  const int64_t first = m * n * n;
  T* ls = shared_base<T>() + group * kBackwardElements<N>;  // L [N][P]
  T* w = ls + N * P;                                        // [N][N + 1], for transposes
  T* rd = w + N * (N + 1);                                  // 1 / L(i, i)
  // L's lower triangle to shared memory and column j of dL's to registers. An identity L and a zero
  // dL pad the order to N.
  T x[N];
#pragma unroll
  for (int p = 0; p < N; ++p) {
    const bool stored = owns && p < n && p >= j;
    ls[p * P + j] = stored ? l[first + p * n + j] : T(p == j ? 1 : 0);
    x[p] = stored ? dl[first + p * n + j] : T(0);
  }
  rd[j] = T(1) / ls[j * P + j];
  __syncwarp();
  // Column j of Φ(Lᵀ·dL): (Lᵀ·dL)(i, j) = Σ_p L(p, i)·dL(p, j), a row of L at a time; kept for i ≥ j,
  // the diagonal halved.
  T y[N];
#pragma unroll
  for (int i = 0; i < N; ++i) y[i] = T(0);
#pragma unroll
  for (int p = 0; p < N; ++p) {
#pragma unroll
    for (int i0 = 0; i0 <= p; i0 += W) {
      T v[W];
      load_pack(ls + p * P + i0, v);
#pragma unroll
      for (int q = 0; q < W; ++q) y[i0 + q] += v[q] * x[p];
    }
  }
#pragma unroll
  for (int i = 0; i < N; ++i) y[i] = i > j ? y[i] : i == j ? y[i] * T(0.5) : T(0);
  __syncwarp();  // keeps the compiler from mixing the two loops' loads (registers spill otherwise)
  solve_transposed<T, N, P>(ls, rd, y);  // column j of Z = L⁻ᵀ·Φ
  // Row j of Z, then Lᵀ·yᵀ = (row j of Z)ᵀ: x becomes row j of Y = Z·L⁻¹.
#pragma unroll
  for (int i = 0; i < N; ++i) w[i * (N + 1) + j] = y[i];
  __syncwarp();
#pragma unroll
  for (int c = 0; c < N; ++c) x[c] = w[j * (N + 1) + c];
  solve_transposed<T, N, P>(ls, rd, x);
  __syncwarp();
#pragma unroll
  for (int c = 0; c < N; ++c) w[j * (N + 1) + c] = x[c];
  __syncwarp();
  // dS(i, j) = (Y(i, j) + Y(j, i)) / 2: Y(i, j) from row i in shared memory, Y(j, i) this lane's.
  if (owns) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (i >= n) break;
      ds[first + i * n + j] = (w[i * (N + 1) + j] + x[i]) * T(0.5);
    }
  }
}

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
  if (threadIdx.x == 0) info[blockIdx.x] = failed;
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

/// The thread-per-right-hand-side solve: block (x: matrix, y: block of right-hand sides), M of order
/// N (n padded with the identity) in shared memory, row-major, then 1 / M(i, i); each thread holds
/// its column of Y in registers. b == nullptr solves against the identity, as solve_kernel does.
template <typename T, int N>
__global__ void __launch_bounds__(kGroupThreads)
    solve_columns_kernel(const T* t, int64_t t_step, const T* b, T* x, SolveView view, int k, bool unit) {
  constexpr int W = kPack<T>;
  const int n = view.n;
  T* ms = shared_base<T>();
  T* rd = ms + N * N;
  const T* tm = t + int64_t{blockIdx.x} * t_step;
  for (int e = threadIdx.x; e < N * N; e += blockDim.x) {
    const int i = e / N, p = e % N;
    T v = T(i == p ? 1 : 0);
    if (i < n && p < i) v = tm[view.t_index(i, p)];
    if (i < n && p == i && !unit) v = tm[view.t_index(i, p)];
    ms[e] = v;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < N; i += blockDim.x) rd[i] = T(1) / ms[i * N + i];
  __syncthreads();
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= k) return;
  const int64_t x_first = int64_t{blockIdx.x} * n * k;
  // Y[i][c] = B'[row(i)][c]: left, x[row(i)·k + c]; right, x[c·n + row(i)].
  auto x_index = [&](int i) {
    return view.left ? x_first + int64_t{view.row(i)} * k + c : x_first + int64_t{c} * n + view.row(i);
  };
  T y[N];
#pragma unroll
  for (int i = 0; i < N; ++i) y[i] = i >= n ? T(0) : b ? b[x_index(i)] : T(view.row(i) == c ? 1 : 0);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (i >= n) break;
    T s = y[i];
#pragma unroll
    for (int p0 = 0; p0 < i; p0 += W) {
      T v[W];
      load_pack(ms + i * N + p0, v);
#pragma unroll
      for (int q = 0; q < W; ++q)
        if (p0 + q < i) s -= v[q] * y[p0 + q];
    }
    y[i] = s * rd[i];
  }
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (i >= n) break;
    // The inverse of a lower M is lower: outside it, exact zeros whatever the arithmetic gave.
    const bool zero = !b && (view.reversed ? view.row(i) > c : view.row(i) < c);
    x[x_index(i)] = zero ? T(0) : y[i];
  }
}

/// The right-hand sides one block takes: all of them up to 64, else blocks of 64.
int solve_chunk(int64_t k) { return static_cast<int>(k < 64 ? k : 64); }

/// Launches solve_columns_kernel of order N for the system `view`, k right-hand sides.
template <typename T, int N>
bool launch_solve_columns(const char* op, const T* t, int64_t t_step, const T* b, T* x, int64_t count, int64_t k,
                          const SolveView& view, bool unit, int device) {
  const size_t bytes = static_cast<size_t>(N * N + N) * sizeof(T);
  const auto kernel = solve_columns_kernel<T, N>;
  if (!fits_shared(kernel, bytes, device)) return false;
  const int threads = static_cast<int>(std::min<int64_t>((k + 31) / 32 * 32, kGroupThreads));
  const dim3 grid(blocks_for(op, count), static_cast<unsigned>((k + threads - 1) / threads));
  SG_CHECK(grid.y <= 65535, "cuda ", op, ": ", k, " right-hand sides are too many for one launch");
  kernel<<<grid, threads, bytes, stream(device)>>>(t, t_step, b, x, view, static_cast<int>(k), unit);
  SG_CUDA_CHECK_LAUNCH("solve_columns_kernel");
  return true;
}

template <typename T>
bool launch_solve(const char* op, const T* t, int64_t t_step, const T* b, T* x, int64_t count, int64_t n, int64_t k,
                  Structure kind, bool trans, bool unit, bool left, int device) {
  if (n > kMaxOrder || count == 0 || k == 0) return n <= kMaxOrder;
  // M = op(T) (left) or op(T)ᵀ (right); kind is op(T)'s structure.
  const bool m_upper = (kind == Structure::UpperTriangular) == left;
  const SolveView view{static_cast<int>(n), left, m_upper, trans == left};
  if (n <= 8) return launch_solve_columns<T, 8>(op, t, t_step, b, x, count, k, view, unit, device);
  if (n <= 16) return launch_solve_columns<T, 16>(op, t, t_step, b, x, count, k, view, unit, device);
  if (n <= 32) return launch_solve_columns<T, 32>(op, t, t_step, b, x, count, k, view, unit, device);
  if (n <= 64) return launch_solve_columns<T, 64>(op, t, t_step, b, x, count, k, view, unit, device);
  const int chunk = solve_chunk(k);
  const size_t bytes = (static_cast<size_t>(n) * (n + 1) + static_cast<size_t>(n) * chunk) * sizeof(T);
  const auto kernel = solve_kernel<T>;
  if (!fits_shared(kernel, bytes, device)) return false;
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
  int a_pitch, b_pitch;  // of op(A)ᵀ [k][a_pitch] and op(B) [k][b_pitch] in shared memory
  int64_t lda, ldb, ldc, stride_a, stride_b, stride_c;
  GemmOperand a, b;
  Structure mask;
  Pattern a_pattern, b_pattern;
};

/// Rows of C one thread accumulates: a column's entries in 8 consecutive rows.
constexpr int kProductRows = 8;

/// op(X) [rows][cols] into shared memory at s, entry (i, p) at s[p·pitch + i] (transposed) or
/// s[i·pitch + p]; the warps walk X's storage along its rows, so that the reads are coalesced.
template <typename T>
__device__ void load_operand(T* s, int pitch, bool transposed, const T* x, int64_t ld, const GemmOperand& desc,
                             int rows, int cols) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  // Stored row r, column c: op(X)(i, p) with (i, p) = (r, c), or (c, r) where op(X) = Xᵀ.
  const int stored_rows = desc.trans ? cols : rows, stored_cols = desc.trans ? rows : cols;
  for (int r = warp; r < stored_rows; r += warps)
    for (int c = lane; c < stored_cols; c += 32) {
      const int i = desc.trans ? c : r, p = desc.trans ? r : c;
      s[transposed ? p * pitch + i : i * pitch + p] = operand_entry(x, ld, desc, i, p);
    }
}

template <typename T>
__global__ void __launch_bounds__(kGroupThreads) product_kernel(const T* a, const T* b, T* c, ProductShape s, T alpha) {
  constexpr int W = kPack<T>;
  T* at = shared_base<T>();          // op(A)ᵀ [k][a_pitch], zero past row m
  T* bs = at + s.k * s.a_pitch;      // op(B) [k][b_pitch]
  const T* ai = a + blockIdx.x * s.stride_a;
  const T* bi = b + blockIdx.x * s.stride_b;
  T* ci = c + blockIdx.x * s.stride_c;
  for (int e = threadIdx.x; e < s.k * (s.a_pitch - s.m); e += blockDim.x)
    at[e / (s.a_pitch - s.m) * s.a_pitch + s.m + e % (s.a_pitch - s.m)] = T(0);
  load_operand(at, s.a_pitch, true, ai, s.lda, s.a, s.m, s.k);
  load_operand(bs, s.b_pitch, false, bi, s.ldb, s.b, s.k, s.n);
  __syncthreads();
  const bool upper = s.mask != Structure::Dense;  // Upper, or Symmetric: the upper triangle computed
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  // Warp w takes rows i0 = 8w, 8w + 8·warps, …; its lanes the columns j0 + lane.
  for (int i0 = kProductRows * warp; i0 < s.m; i0 += kProductRows * warps)
    for (int j0 = 0; j0 < s.n; j0 += 32) {
      const int j = j0 + lane;
      const bool below = upper && j0 + 31 < i0;  // the whole tile below the diagonal
      T acc[kProductRows] = {};
      if (!below) {
        const KRange r =
            structured_k_range(s.a_pattern, s.b_pattern, i0, min(i0 + kProductRows, s.m), j0, min(j0 + 32, s.n), s.k);
        for (int p = static_cast<int>(r.begin); p < r.end; ++p) {
          const T bv = j < s.n ? bs[p * s.b_pitch + j] : T(0);
#pragma unroll
          for (int q0 = 0; q0 < kProductRows; q0 += W) {
            T av[W];
            load_pack(at + p * s.a_pitch + i0 + q0, av);
#pragma unroll
            for (int q = 0; q < W; ++q) acc[q0 + q] += av[q] * bv;
          }
        }
      }
      if (j >= s.n) continue;
#pragma unroll
      for (int q = 0; q < kProductRows; ++q) {
        const int i = i0 + q;
        if (i >= s.m) break;
        if (upper && j < i) {
          if (s.mask == Structure::UpperTriangular) ci[int64_t{i} * s.ldc + j] = T(0);
          continue;
        }
        const T value = alpha * acc[q];
        ci[int64_t{i} * s.ldc + j] = value;
        if (s.mask == Structure::Symmetric && j > i) ci[int64_t{j} * s.ldc + i] = value;
      }
    }
}

}  // namespace

namespace {

/// Launches cholesky_group_kernel of order N.
template <typename T, int N>
void launch_cholesky_group(const T* a, T* l, long long* info, int64_t n, int64_t count, int device) {
  constexpr int64_t groups = kGroupThreads / N;
  const size_t bytes = static_cast<size_t>(groups * N * kForwardPitch<N>) * sizeof(T);  // under 48 KB
  cholesky_group_kernel<T, N><<<blocks_for("cholesky", (count + groups - 1) / groups), kGroupThreads, bytes,
                                 stream(device)>>>(a, l, info, static_cast<int>(n), count);
  SG_CUDA_CHECK_LAUNCH("cholesky_group_kernel");
}

/// Launches cholesky_backward_group_kernel of order N; false where its shared memory does not fit.
template <typename T, int N>
bool launch_cholesky_backward_group(const T* l, const T* dl, T* ds, int64_t n, int64_t count, int device) {
  constexpr int64_t groups = kGroupThreads / N;
  const size_t bytes = static_cast<size_t>(groups * kBackwardElements<N>) * sizeof(T);
  const auto kernel = cholesky_backward_group_kernel<T, N>;
  if (!fits_shared(kernel, bytes, device)) return false;
  kernel<<<blocks_for("cholesky backward", (count + groups - 1) / groups), kGroupThreads, bytes, stream(device)>>>(
      l, dl, ds, static_cast<int>(n), count);
  SG_CUDA_CHECK_LAUNCH("cholesky_backward_group_kernel");
  return true;
}

}  // namespace

bool cholesky(const Tensor& a, Tensor& out, Tensor& info, int device) {
  const int64_t n = a.size(-1), count = count_of(a);
  if (n > kMaxOrder) return false;
  if (count == 0) return true;
  bool launched = false;
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto* codes = static_cast<long long*>(info.data_ptr());
    if (n <= 32) {
      const int order = group_order(n);
      if (order == 8) launch_cholesky_group<T, 8>(data_of<T>(a), data_of<T>(out), codes, n, count, device);
      if (order == 16) launch_cholesky_group<T, 16>(data_of<T>(a), data_of<T>(out), codes, n, count, device);
      if (order == 32) launch_cholesky_group<T, 32>(data_of<T>(a), data_of<T>(out), codes, n, count, device);
      launched = true;
      return;
    }
    const size_t bytes = static_cast<size_t>(n) * (n + 1) * sizeof(T);
    const auto kernel = cholesky_kernel<T>;
    if (!fits_shared(kernel, bytes, device)) return;
    kernel<<<blocks_for("cholesky", count), kBlockThreads, bytes, stream(device)>>>(data_of<T>(a), data_of<T>(out),
                                                                                   codes, static_cast<int>(n));
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
    if (n <= 32) {
      const int order = group_order(n);
      const T *lp = data_of<T>(l), *dlp = data_of<T>(dl);
      T* dsp = data_of<T>(ds);
      if (order == 8) launched = launch_cholesky_backward_group<T, 8>(lp, dlp, dsp, n, count, device);
      if (order == 16) launched = launch_cholesky_backward_group<T, 16>(lp, dlp, dsp, n, count, device);
      if (order == 32) launched = launch_cholesky_backward_group<T, 32>(lp, dlp, dsp, n, count, device);
      return;
    }
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
    // op(A)ᵀ's rows hold whole 8-row tiles and start 16-byte aligned; op(B)'s are padded by one.
    const int a_pitch = static_cast<int>((p.m + kProductRows - 1) / kProductRows * kProductRows + 4);
    const int b_pitch = static_cast<int>(p.n + 1);
    const size_t bytes = static_cast<size_t>(p.k) * (a_pitch + b_pitch) * sizeof(T);
    const auto kernel = product_kernel<T>;
    if (!fits_shared(kernel, bytes, device)) return;
    ProductShape s{static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), a_pitch, b_pitch, p.lda, p.ldb,
                   p.ldc, p.batch_stride_a, p.batch_stride_b, p.batch_stride_c, p.a, p.b, p.mask, a_pattern(p.a),
                   b_pattern(p.b)};
    kernel<<<blocks_for("gemm", p.batch), kGroupThreads, bytes, stream(device)>>>(
        static_cast<const T*>(p.a_data), static_cast<const T*>(p.b_data), static_cast<T*>(p.c_data), s,
        static_cast<T>(p.alpha));
    SG_CUDA_CHECK_LAUNCH("product_kernel");
    launched = true;
  });
  return launched;
}

}  // namespace sg::detail::cuda::batched
