// CUDA linear algebra: triangular solves, Cholesky factors and triangular inverses. Their N³ work
// runs on the library's GEMM (CudaBackend::gemm: cuBLAS for the Dense·Dense updates, the structured
// GEMM for products with a triangular operand), always in exact arithmetic; the diagonal blocks get
// kernels of their own:
//  * invert_blocks_kernel inverts every kLeaf × kLeaf diagonal block of a triangular matrix in one
//    launch, one CTA per block: the leaves of the blocked solve and of the triangular inverse;
//  * cholesky_block_kernel factors one diagonal block and inverts its factor in one CTA: the leaves
//    of the recursive Cholesky;
//  * solve_few_columns_kernel solves with a few right-hand sides in one launch: a CTA per block row
//    (and group of columns), which inverts its diagonal block, then subtracts the solved rows above
//    it as a counter in global memory says they are ready.
// Every diagonal block is handled as a lower triangle: an upper one is read with its rows and columns
// reversed (P·U·P is lower for the reversal P), a transposed one with its two strides swapped.
#include "cuda/linalg.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <type_traits>

#include <structgrad/core/storage.h>
#include "cuda/cuda_backend.h"
#include "cuda/kernel_util.cuh"

namespace sg::detail::cuda {

namespace {

std::mutex options_mutex;
LinalgOptions current_options;

constexpr int kWarp = 32;
constexpr int kBlockThreads = 256;  // threads of every kernel here but the element maps
constexpr int64_t kLeaf = 128;      // the diagonal blocks the recursions stop at (nb)

/// A strided view of a matrix: element (i, j) at data[i·row + j·col] (steps may be negative).
template <typename T>
struct View {
  T* data;
  int64_t row, col;
  __device__ T& operator()(int64_t i, int64_t j) const { return data[i * row + j * col]; }
};

__device__ __forceinline__ unsigned int load_acquire(const unsigned int* p) {
  unsigned int v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void store_release(unsigned int* p, unsigned int v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// ---- diagonal blocks in shared memory ---------------------------------------------------
// A tile is NB × NB in shared memory with rows of NB + 1 (column walks hit distinct banks). Rows and
// columns past the block's order m hold the identity, so every kernel runs whole 32-blocks.

/// Loads the lower triangle of the m × m matrix a into the tile (the identity past m; with `unit`,
/// ones on the diagonal, which is then not read) and the diagonal's reciprocals into rdiag.
/// Consecutive threads walk whichever of a's steps is ±1.
template <typename T, int NB>
__device__ void load_lower_tile(View<const T> a, int m, bool unit, T* tile, T* rdiag) {
  constexpr int LD = NB + 1;
  const bool down_columns = a.row == 1 || a.row == -1;
  for (int e = threadIdx.x; e < NB * NB; e += kBlockThreads) {
    const int i = down_columns ? e % NB : e / NB, j = down_columns ? e / NB : e % NB;
    T v = T(0);
    if (i < m && j < m) {
      if (j < i || (j == i && !unit)) v = a(i, j);
      else if (j == i) v = T(1);
    } else if (i == j) {
      v = T(1);
    }
    tile[i * LD + j] = v;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < NB; i += kBlockThreads) rdiag[i] = T(1) / tile[i * LD + i];
  __syncthreads();
}

/// X = L⁻¹ for the lower triangular tile L (see load_lower_tile) with diagonal reciprocals rdiag:
/// X's rows and columns below m, exact zeros above the diagonal. X may be shared or global memory.
/// The diagonal 32-blocks go one to a warp (column j of the block on lane j, a forward substitution
/// in registers); the blocks below follow diagonal by diagonal, X_ij = −X_ii·Σ_{j≤p<i} L_ip·X_pj.
/// All the block's threads call it; it returns synchronised.
template <typename T, int NB>
__device__ void invert_lower_tile(const T* L, const T* rdiag, View<T> X, int m) {
  constexpr int LD = NB + 1;
  constexpr int kWarps = kBlockThreads / kWarp;
  constexpr int kRows = kWarp / kWarps;  // rows of a 32-block per thread in the block products
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int blocks = (m + kWarp - 1) / kWarp;
  for (int b = warp; b < blocks; b += kWarps) {
    const int b0 = b * kWarp;
    // x holds Σ_{q<i} L_iq·x_q until x_i is known.
    T x[kWarp];
#pragma unroll
    for (int i = 0; i < kWarp; ++i) x[i] = T(0);
#pragma unroll
    for (int p = 0; p < kWarp; ++p) {
      const T xp = ((p == lane ? T(1) : T(0)) - x[p]) * rdiag[b0 + p];
      x[p] = xp;
#pragma unroll
      for (int i = p + 1; i < kWarp; ++i) x[i] += L[(b0 + i) * LD + b0 + p] * xp;
    }
    if (b0 + lane < m) {
#pragma unroll
      for (int i = 0; i < kWarp; ++i)
        if (b0 + i < m) X(b0 + i, b0 + lane) = i >= lane ? x[i] : T(0);
    }
  }
  // The 32-blocks above the diagonal.
  for (int e = threadIdx.x; e < m * m; e += kBlockThreads) {
    const int r = e / m, c = e - r * m;
    if (c / kWarp > r / kWarp) X(r, c) = T(0);
  }
  __syncthreads();
  for (int d = 1; d < blocks; ++d) {
    // S_ij = Σ_{j≤p<i} L_ip·X_pj for i = j + d, written where X_ij goes.
    for (int j = 0; j + d < blocks; ++j) {
      const int i0 = (j + d) * kWarp, j0 = j * kWarp;
      T acc[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r] = T(0);
      for (int p = j0; p < i0; ++p) {
        const T xv = X(p, j0 + lane);
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r] += L[(i0 + warp * kRows + r) * LD + p] * xv;
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        if (i0 + warp * kRows + r < m) X(i0 + warp * kRows + r, j0 + lane) = acc[r];
    }
    __syncthreads();
    // X_ij = −X_ii·S_ij, every product read before any is written.
    T out[NB / kWarp][kRows];
#pragma unroll
    for (int j = 0; j < NB / kWarp; ++j) {
      if (j + d < blocks) {
        const int i0 = (j + d) * kWarp, j0 = j * kWarp;
#pragma unroll
        for (int r = 0; r < kRows; ++r) out[j][r] = T(0);
        for (int q = 0; q < kWarp && i0 + q < m; ++q) {
          const T sv = X(i0 + q, j0 + lane);
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            const int row = warp * kRows + r;
            if (q <= row && i0 + row < m) out[j][r] -= X(i0 + row, i0 + q) * sv;
          }
        }
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < NB / kWarp; ++j) {
      if (j + d < blocks) {
        const int i0 = (j + d) * kWarp, j0 = j * kWarp;
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          if (i0 + warp * kRows + r < m) X(i0 + warp * kRows + r, j0 + lane) = out[j][r];
      }
    }
    __syncthreads();
  }
}

/// The lower view of diagonal block p (first row p0, order m) of op(T) for T [n, n]: op(T) = Tᵀ with
/// `trans`, its rows and columns reversed with `reversed` (an upper op(T)).
template <typename T>
__device__ View<const T> lower_block_view(const T* t, int64_t n, int64_t p0, int m, bool trans, bool reversed) {
  if (!reversed) return {t + p0 * n + p0, trans ? 1 : n, trans ? n : 1};
  const int64_t last = p0 + m - 1;
  return {t + last * n + last, trans ? -1 : -n, trans ? -n : -1};
}

/// Inverts every diagonal block of op(T) (T [n, n], see lower_block_view), one CTA per block: block
/// p's inverse goes to out + p·out_step with rows of ldo, exact zeros in its other triangle.
template <typename T, int NB>
__global__ void __launch_bounds__(kBlockThreads)
    invert_blocks_kernel(const T* t, int64_t n, bool trans, bool reversed, bool unit, T* out, int64_t out_step,
                         int64_t ldo) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* tile = reinterpret_cast<T*>(shared_bytes);
  T* rdiag = tile + NB * (NB + 1);
  const int64_t p0 = int64_t{blockIdx.x} * NB;
  const int m = static_cast<int>(min(int64_t{NB}, n - p0));
  load_lower_tile<T, NB>(lower_block_view(t, n, p0, m, trans, reversed), m, unit, tile, rdiag);
  T* o = out + int64_t{blockIdx.x} * out_step;
  const View<T> x = reversed ? View<T>{o + (m - 1) * (ldo + 1), -ldo, -1} : View<T>{o, ldo, 1};
  invert_lower_tile<T, NB>(tile, rdiag, x, m);
}

// ---- Cholesky leaves --------------------------------------------------------------------

/// Factors the 32 × 32 block of the tile at (c0, c0) in place on one warp (row i on lane i, the
/// right-looking update in registers) and stores its pivots' reciprocals in rdiag. Returns the first
/// pivot (0 … 31) that is not positive, NaN included, or −1; the warp's lanes agree.
template <typename T, int NB>
__device__ int factor_diagonal_block(T* tile, T* rdiag, int c0) {
  constexpr int LD = NB + 1;
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = threadIdx.x % kWarp;
  T* row = tile + (c0 + lane) * LD + c0;
  T a[kWarp];
#pragma unroll
  for (int q = 0; q < kWarp; ++q) a[q] = q <= lane ? row[q] : T(0);
  int failed = -1;
  T pivot = __shfl_sync(kAll, a[0], 0);
#pragma unroll
  for (int p = 0; p < kWarp; ++p) {
    if (!(pivot > T(0)) && failed < 0) failed = p;
    const T s = sqrt(pivot), r = T(1) / s;
    const T l = lane == p ? s : a[p] * r;
    a[p] = l;
    if (lane == p) rdiag[c0 + p] = r;
    if (p + 1 < kWarp) {
      // The next pivot from its own lane's update, one shuffle shorter than through a[p + 1].
      pivot = __shfl_sync(kAll, a[p + 1] - l * l, p + 1);
#pragma unroll
      for (int q = p + 1; q < kWarp; ++q) a[q] -= l * __shfl_sync(kAll, l, q);
    }
  }
#pragma unroll
  for (int q = 0; q < kWarp; ++q)
    if (q <= lane) row[q] = a[q];
  return failed;
}

/// Factors the SPD block a [m, m] (m ≤ NB, rows of lda; its lower triangle read) in one CTA: a = L·Lᵀ
/// with L written over a (exact zeros above the diagonal) and L⁻¹ into w (rows of ldw, zeros above
/// the diagonal). Right-looking over 32-column panels: the panel's diagonal block on one warp, the
/// rows below it by forward substitution (a thread per row), the trailing lower triangle in 4 × 4
/// register tiles. The first pivot that is not positive, as a 1-based column of the whole matrix
/// (first_col + its column), goes into *info unless an earlier one is there.
template <typename T, int NB>
__global__ void __launch_bounds__(kBlockThreads)
    cholesky_block_kernel(T* a, int64_t lda, int m, T* w, int64_t ldw, unsigned long long* info,
                          int64_t first_col) {
  constexpr int LD = NB + 1;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* tile = reinterpret_cast<T*>(shared_bytes);
  T* rdiag = tile + NB * LD;
  for (int e = threadIdx.x; e < NB * NB; e += kBlockThreads) {
    const int i = e / NB, j = e % NB;
    T v = T(0);
    if (i < m && j < m) {
      if (j <= i) v = a[i * lda + j];
    } else if (i == j) {
      v = T(1);
    }
    tile[i * LD + j] = v;
  }
  __syncthreads();
  const int tid = threadIdx.x;
  for (int c0 = 0; c0 < m; c0 += kWarp) {
    if (tid < kWarp) {
      const int failed = factor_diagonal_block<T, NB>(tile, rdiag, c0);
      if (failed >= 0 && tid == 0 && c0 + failed < m)
        atomicCAS(info, 0ull, static_cast<unsigned long long>(first_col + c0 + failed + 1));
    }
    __syncthreads();
    const int rest = c0 + kWarp, below = m - rest;
    if (below <= 0) break;
    // L_rc = A_rc·L_cc⁻ᵀ, a row per thread.
    for (int t = tid; t < below; t += kBlockThreads) {
      T* row = tile + (rest + t) * LD + c0;
      T x[kWarp];
#pragma unroll
      for (int q = 0; q < kWarp; ++q) x[q] = row[q];
#pragma unroll
      for (int p = 0; p < kWarp; ++p) {
        const T xp = x[p] * rdiag[c0 + p];
        x[p] = xp;
#pragma unroll
        for (int q = p + 1; q < kWarp; ++q) x[q] -= tile[(c0 + q) * LD + c0 + p] * xp;
      }
#pragma unroll
      for (int q = 0; q < kWarp; ++q) row[q] = x[q];
    }
    __syncthreads();
    // A22 −= L_rc·L_rcᵀ on its lower triangle, a 4 × 4 tile per thread.
    const int tiles = (below + 3) / 4;
    for (int e = tid; e < tiles * (tiles + 1) / 2; e += kBlockThreads) {
      int ti = static_cast<int>((sqrtf(8.0f * static_cast<float>(e) + 1.0f) - 1.0f) * 0.5f);
      while ((ti + 1) * (ti + 2) / 2 <= e) ++ti;
      while (ti * (ti + 1) / 2 > e) --ti;
      const int tj = e - ti * (ti + 1) / 2;
      const int r0 = rest + 4 * ti, s0 = rest + 4 * tj;
      T acc[4][4];
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int v = 0; v < 4; ++v) acc[u][v] = T(0);
#pragma unroll 4
      for (int p = 0; p < kWarp; ++p) {
        T lr[4], ls[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          lr[u] = tile[(r0 + u) * LD + c0 + p];
          ls[u] = tile[(s0 + u) * LD + c0 + p];
        }
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
          for (int v = 0; v < 4; ++v) acc[u][v] += lr[u] * ls[v];
      }
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int v = 0; v < 4; ++v)
          if (r0 + u < m && s0 + v <= r0 + u) tile[(r0 + u) * LD + s0 + v] -= acc[u][v];
    }
    __syncthreads();
  }
  invert_lower_tile<T, NB>(tile, rdiag, View<T>{w, ldw, 1}, m);
  for (int e = tid; e < m * m; e += kBlockThreads) {
    const int i = e / m, j = e - i * m;
    a[i * lda + j] = j <= i ? tile[i * LD + j] : T(0);
  }
}

// ---- solves with few right-hand sides ---------------------------------------------------

/// What solve_few_columns_kernel solves: L·X = B in place for the lower view L(i, j) of op(T) over
/// the whole matrix (an upper op(T) reversed, a right solve as its transpose), X(i, c) a view of x.
template <typename T>
struct FewColumnsArgs {
  const T* l;
  int64_t l_row, l_col;
  T* x;
  int64_t x_row, x_col;
  int64_t n, k;
  bool unit;
  int chunks;           ///< groups of KC columns
  unsigned int* next;   ///< the next CTA's block: b·chunks + chunk, claimed in order
  unsigned int* ready;  ///< ready[chunk]: how many block rows of the chunk are solved
};

/// L·X = B for the BS rows of block b and the KC columns of one chunk, in one CTA: the block's
/// diagonal inverse first (while the blocks above are solved), then for each block j < b, as soon as
/// ready[chunk] passes j, B_b −= L_bj·X_j (L_bj loaded before the wait), finally X_b = L_bb⁻¹·B_b
/// written and ready[chunk] raised. CTAs claim blocks in order from a counter, so each waits only on
/// CTAs that run. COLS: L's columns are contiguous (|l_row| = 1), so lanes walk rows; else lanes
/// walk columns.
template <typename T, int BS, int KC, bool COLS>
__global__ void __launch_bounds__(kBlockThreads) solve_few_columns_kernel(FewColumnsArgs<T> args) {
  constexpr int LD = BS + 1;
  constexpr int kWarps = kBlockThreads / kWarp;
  constexpr int kR = COLS ? BS / kWarp : BS / kWarps;  // rows of the block per thread
  constexpr int kQ = COLS ? BS / kWarps : BS / kWarp;  // columns of L_bj per thread
  constexpr int kParts = kBlockThreads / BS;           // threads per row of the final product
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* tile = reinterpret_cast<T*>(shared_bytes);
  T* inverse = tile + BS * LD;
  T* rdiag = inverse + BS * LD;
  __shared__ unsigned int claimed, seen[2];
  const int tid = threadIdx.x, warp = tid / kWarp, lane = tid % kWarp;
  if (tid == 0) claimed = atomicAdd(args.next, 1u);
  __syncthreads();
  const int64_t b = claimed / args.chunks;
  const int chunk = static_cast<int>(claimed % args.chunks);
  const int64_t row0 = b * BS, col0 = int64_t{chunk} * KC;
  const int m = static_cast<int>(min(int64_t{BS}, args.n - row0));
  const int kc = static_cast<int>(min(int64_t{KC}, args.k - col0));
  const View<const T> l{args.l, args.l_row, args.l_col};
  const View<T> x{args.x, args.x_row, args.x_col};

  load_lower_tile<T, BS>(View<const T>{args.l + row0 * (args.l_row + args.l_col), args.l_row, args.l_col}, m,
                         args.unit, tile, rdiag);
  invert_lower_tile<T, BS>(tile, rdiag, View<T>{inverse, LD, 1}, m);

  auto row_of = [&](int r) { return COLS ? lane + kWarp * r : warp * kR + r; };
  auto col_of = [&](int q) { return COLS ? warp * kQ + q : lane + kWarp * q; };
  // Each thread's partial sums of the block's rows; one lane (or warp) starts from B.
  const bool adds_b = COLS ? warp == 0 : lane == 0;
  T acc[kR][KC];
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int c = 0; c < KC; ++c)
      acc[r][c] = adds_b && row_of(r) < m && c < kc ? x(row0 + row_of(r), col0 + c) : T(0);

  int64_t known = 0;  // block rows known to be solved
  int parity = 0;
  for (int64_t j = 0; j < b; ++j) {
    const int64_t q0 = j * BS;  // block j is whole: only the last block can be short
    T lv[kR][kQ];
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int q = 0; q < kQ; ++q) lv[r][q] = row_of(r) < m ? l(row0 + row_of(r), q0 + col_of(q)) : T(0);
    if (j >= known) {
      if (tid == 0) {
        unsigned int v;
        while ((v = load_acquire(args.ready + chunk)) <= j) {
        }
        seen[parity] = v;
        __threadfence();
      }
      __syncthreads();
      known = seen[parity];
      parity ^= 1;
    }
    T xv[kQ][KC];
#pragma unroll
    for (int q = 0; q < kQ; ++q)
#pragma unroll
      for (int c = 0; c < KC; ++c) xv[q][c] = c < kc ? __ldcg(&x(q0 + col_of(q), col0 + c)) : T(0);
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int q = 0; q < kQ; ++q)
#pragma unroll
        for (int c = 0; c < KC; ++c) acc[r][c] -= lv[r][q] * xv[q][c];
  }

  // The block's right-hand side, reduced into shared memory (the tile is free now).
  T* red = tile;                           // COLS: [warps][BS][KC]
  T* rhs = tile + kWarps * BS * KC;        // [BS][KC]
  T* parts = rhs + BS * KC;                // [kParts][BS][KC]
  if constexpr (COLS) {
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int c = 0; c < KC; ++c) red[(warp * BS + row_of(r)) * KC + c] = acc[r][c];
    __syncthreads();
    for (int e = tid; e < BS * KC; e += kBlockThreads) {
      T s = T(0);
#pragma unroll
      for (int w = 0; w < kWarps; ++w) s += red[w * BS * KC + e];
      rhs[e] = s;
    }
  } else {
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int c = 0; c < KC; ++c) {
        T v = acc[r][c];
#pragma unroll
        for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
        if (lane == 0) rhs[row_of(r) * KC + c] = v;
      }
  }
  __syncthreads();
  // X_b = L_bb⁻¹·rhs: kParts threads per row, each over a slice of the columns.
  {
    const int row = tid % BS, part = tid / BS;
    constexpr int kSpan = BS / kParts;
    T y[KC];
#pragma unroll
    for (int c = 0; c < KC; ++c) y[c] = T(0);
    if (row < m) {
      const int end = min(row + 1, (part + 1) * kSpan);
      for (int q = part * kSpan; q < end; ++q) {
        const T iv = inverse[row * LD + q];
#pragma unroll
        for (int c = 0; c < KC; ++c) y[c] += iv * rhs[q * KC + c];
      }
    }
#pragma unroll
    for (int c = 0; c < KC; ++c) parts[(part * BS + row) * KC + c] = y[c];
  }
  __syncthreads();
  for (int e = tid; e < BS * KC; e += kBlockThreads) {
    const int row = e / KC, c = e % KC;
    if (row < m && c < kc) {
      T s = T(0);
#pragma unroll
      for (int p = 0; p < kParts; ++p) s += parts[(p * BS + row) * KC + c];
      x(row0 + row, col0 + c) = s;
    }
  }
  __syncthreads();
  if (tid == 0) {
    __threadfence();
    store_release(args.ready + chunk, static_cast<unsigned int>(b + 1));
  }
}

// ---- element maps -----------------------------------------------------------------------

/// out[i][j] = a[i][j] on and below the diagonal of an n × n matrix (the Cholesky's working copy).
template <typename T>
struct CopyLowerMap {
  const T* a;
  T* out;
  int64_t n;
  __device__ void operator()(int64_t e) const {
    const int64_t i = e / n, j = e - i * n;
    if (j <= i) out[e] = a[e];
  }
};

/// Exact zeros in the strict upper (or lower) triangle of an n × n matrix outside its diagonal
/// blocks of `block`, which the block kernels write themselves.
template <typename T>
struct ZeroOffBlocksMap {
  T* out;
  int64_t n, block;
  bool upper;
  __device__ void operator()(int64_t e) const {
    const int64_t i = e / n, j = e - i * n;
    if ((upper ? j > i : j < i) && i / block != j / block) out[e] = T(0);
  }
};

// ---- host side --------------------------------------------------------------------------

/// Shared memory of a tile kernel: two tiles (or one and the caller's) and the reciprocals.
template <typename T, int NB>
constexpr size_t tile_bytes(int tiles) {
  return (static_cast<size_t>(tiles) * NB * (NB + 1) + NB) * sizeof(T);
}

/// Lets `kernel` take `bytes` of dynamic shared memory (beyond the default 48 KB) on `device`, once
/// per device and kernel (`done` is the kernel's own set of devices).
template <typename Kernel>
void allow_shared(Kernel kernel, size_t bytes, int device, std::atomic<uint64_t>& done) {
  const uint64_t bit = uint64_t{1} << device;
  if (done.load(std::memory_order_acquire) & bit) return;
  SG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  done.fetch_or(bit, std::memory_order_acq_rel);
}

/// The leaves' order (float64 tiles of 128 take 133 KB of shared memory, float32 66 KB).
template <typename T>
constexpr int leaf_order() {
  return static_cast<int>(kLeaf);
}

/// Block rows of the few-columns solve: 128 in float32, 64 in float64 (two tiles in shared memory).
template <typename T>
constexpr int few_columns_block() {
  return sizeof(T) == 4 ? 128 : 64;
}

/// The split point of [lo, hi): half of its leaves (rounded up) on the first side.
int64_t split(int64_t lo, int64_t hi) {
  const int64_t blocks = (hi - lo + kLeaf - 1) / kLeaf;
  return lo + kLeaf * ((blocks + 1) / 2);
}

/// An operand of one product: its storage, row stride and descriptor.
struct Operand {
  const void* data;
  int64_t ld;
  GemmOperand desc;
};

Operand dense(const void* data, int64_t ld, bool trans = false) {
  return {data, ld, GemmOperand{OperandKind::Dense, trans}};
}

/// What one call works with: the backend's GEMM, the dtype and the options read once.
struct Context {
  CudaBackend& backend;
  DType dtype;
  size_t bytes;  // of an element
  bool dense_triangles;
  int device;

  template <typename P>
  P* at(P* base, int64_t elements) const {
    using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
    return reinterpret_cast<P*>(reinterpret_cast<Byte*>(base) + elements * static_cast<int64_t>(bytes));
  }

  /// C = alpha·op(A)·op(B) (C += … with `accumulate`: Dense operands only) on the backend's GEMM,
  /// never in TF32. A triangular operand with its zeros stored goes as Dense where the options say.
  void product(int64_t m, int64_t n, int64_t k, Operand a, Operand b, void* c, int64_t ldc, double alpha = 1.0,
               bool accumulate = false) const {
    GemmProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.a = a.desc;
    p.b = b.desc;
    if (dense_triangles) {
      if (is_triangular(p.a.kind) && p.a.zeros_stored) p.a = GemmOperand{OperandKind::Dense, p.a.trans};
      if (is_triangular(p.b.kind) && p.b.zeros_stored) p.b = GemmOperand{OperandKind::Dense, p.b.trans};
    }
    p.alpha = alpha;
    p.tf32 = false;
    p.a_data = a.data;
    p.b_data = b.data;
    p.c_data = c;
    p.lda = a.ld;
    p.ldb = b.ld;
    p.ldc = ldc;
    p.accumulate = accumulate;
    backend.gemm(p, dtype);
  }
};

/// The blocked solve op(T)·X = B (left) or X·op(T) = B, recursive over halves split at multiples of
/// kLeaf: solve the half op(T) reaches first, subtract its product from the other half's right-hand
/// side (an accumulating Dense product), solve the other half. A leaf is one product with its block's
/// inverse. The right-hand sides are kept in w, a copy of x, so the leaves write X out of place.
struct BlockedSolve {
  const Context& cx;
  const void* t;
  int64_t n;
  bool trans;
  OperandKind kind;  // of op(T)
  bool left;
  void* x;
  void* w;
  int64_t k;
  const void* inverses;  // block p's inverse at p·kLeaf², rows of kLeaf, zeros stored

  /// op(T)[r0…, c0…] as a Dense operand.
  Operand block(int64_t r0, int64_t c0) const {
    return dense(cx.at(t, trans ? c0 * n + r0 : r0 * n + c0), n, trans);
  }

  void run(int64_t lo, int64_t hi) const {
    if (hi - lo <= kLeaf) {
      const int64_t m = hi - lo;
      GemmOperand d{kind, false};
      d.zeros_stored = true;
      const Operand inverse{cx.at(inverses, lo * kLeaf), kLeaf, d};
      if (left) cx.product(m, k, m, inverse, dense(cx.at(w, lo * k), k), cx.at(x, lo * k), k);
      else cx.product(k, m, m, dense(cx.at(w, lo), n), inverse, cx.at(x, lo), n);
      return;
    }
    const int64_t mid = split(lo, hi);
    // op(T) lower on the left, upper on the right: the first rows are solved first.
    const bool forward = left == (kind == OperandKind::Lower);
    const int64_t f0 = forward ? lo : mid, f1 = forward ? mid : hi;
    const int64_t s0 = forward ? mid : lo, s1 = forward ? hi : mid;
    run(f0, f1);
    if (left) cx.product(s1 - s0, k, f1 - f0, block(s0, f0), dense(cx.at(x, f0 * k), k), cx.at(w, s0 * k), k, -1.0, true);
    else cx.product(k, s1 - s0, f1 - f0, dense(cx.at(x, f0), n), block(f0, s0), cx.at(w, s0), n, -1.0, true);
    run(s0, s1);
  }
};

/// Launches invert_blocks_kernel over the diagonal blocks of op(T).
template <typename T>
void invert_blocks(int device, const T* t, int64_t n, bool trans, OperandKind kind, bool unit, T* out,
                   int64_t out_step, int64_t ldo) {
  constexpr int NB = leaf_order<T>();
  const auto kernel = invert_blocks_kernel<T, NB>;
  const size_t bytes = tile_bytes<T, NB>(1);
  static std::atomic<uint64_t> shared_set{0};
  allow_shared(kernel, bytes, device, shared_set);
  const unsigned blocks = static_cast<unsigned>((n + NB - 1) / NB);
  kernel<<<blocks, kBlockThreads, bytes, stream(device)>>>(t, n, trans, kind == OperandKind::Upper, unit, out,
                                                            out_step, ldo);
  SG_CUDA_CHECK_LAUNCH("invert_blocks_kernel");
}

template <typename T, int KC, bool COLS>
void launch_few_columns(int device, const FewColumnsArgs<T>& args, int64_t blocks) {
  constexpr int BS = few_columns_block<T>();
  const auto kernel = solve_few_columns_kernel<T, BS, KC, COLS>;
  const size_t bytes = tile_bytes<T, BS>(2);
  static std::atomic<uint64_t> shared_set{0};
  allow_shared(kernel, bytes, device, shared_set);
  const int64_t grid = blocks * args.chunks;
  SG_CHECK(grid <= INT32_MAX, "cuda solve_triangular: ", grid, " blocks are too many");
  kernel<<<static_cast<unsigned>(grid), kBlockThreads, bytes, stream(device)>>>(args);
  SG_CUDA_CHECK_LAUNCH("solve_few_columns_kernel");
}

/// The one-launch solve (few right-hand sides): L·X' = B' for the lower view of op(T) (left) or of
/// op(T)ᵀ (right: X·op(T) = B is op(T)ᵀ·Xᵀ = Bᵀ), reversed where that view is upper.
template <typename T>
void solve_few_columns(int device, const T* t, int64_t n, OperandKind kind, bool trans, bool unit, bool left, T* x,
                       int64_t k) {
  constexpr int BS = few_columns_block<T>();
  if (!left) {
    trans = !trans;
    kind = kind == OperandKind::Lower ? OperandKind::Upper : OperandKind::Lower;
  }
  const bool reversed = kind == OperandKind::Upper;
  FewColumnsArgs<T> args{};
  // L(i, j) = op(T)(ρ(i), ρ(j)), ρ the reversal when `reversed`.
  args.l = reversed ? t + (n - 1) * (n + 1) : t;
  const int64_t step_row = trans ? 1 : n, step_col = trans ? n : 1;
  args.l_row = reversed ? -step_row : step_row;
  args.l_col = reversed ? -step_col : step_col;
  // X'(i, c): x[ρ(i)][c] (left, x [n, k]) or x[c][ρ(i)] (right, x [k, n]).
  const int64_t x_row = left ? k : 1;
  args.x = reversed ? x + (n - 1) * x_row : x;
  args.x_row = reversed ? -x_row : x_row;
  args.x_col = left ? 1 : n;
  args.n = n;
  args.k = k;
  args.unit = unit;
  const bool one = k == 1;
  constexpr int kChunk = 4;
  args.chunks = static_cast<int>(one ? 1 : (k + kChunk - 1) / kChunk);
  const int64_t blocks = (n + BS - 1) / BS;
  Storage words((1 + static_cast<size_t>(args.chunks)) * sizeof(unsigned int), Device(DeviceType::CUDA, device));
  args.next = static_cast<unsigned int*>(words.data);
  args.ready = args.next + 1;
  SG_CUDA_CHECK(cudaMemsetAsync(words.data, 0, words.nbytes, stream(device)));
  const bool cols = args.l_row == 1 || args.l_row == -1;
  if (one) {
    if (cols) launch_few_columns<T, 1, true>(device, args, blocks);
    else launch_few_columns<T, 1, false>(device, args, blocks);
  } else {
    if (cols) launch_few_columns<T, kChunk, true>(device, args, blocks);
    else launch_few_columns<T, kChunk, false>(device, args, blocks);
  }
  // `words` goes back to the cache here; its next user is queued behind the kernel.
}

/// The recursive Cholesky of out (n × n, its lower triangle holding A's) with the inverses of the
/// factor's diagonal blocks carried along in w: for [lo, hi) split at mid,
///   L11 = chol(A11) (and W11 = L11⁻¹), L21 = A21·W11ᵀ, A22 −= L21·L21ᵀ, L22 = chol(A22),
/// and where the caller needs W = L⁻¹ of the whole range too, W21 = −W22·(L21·W11). A range that is
/// no parent's first half needs no W of its own, so the inverses cost N³/24 of the N³/6.
struct BlockedCholesky {
  const Context& cx;
  void* out;
  void* w;
  void* panel;  // scratch for A21 and L21·W11
  int64_t n;
  unsigned long long* info;
  bool zeros_in_w;  // w was zeroed first (then its triangles may go to the GEMM as Dense)
  int64_t split_update_from;

  void run(int64_t lo, int64_t hi, bool wants_inverse) const;
  void update(int64_t r0, int64_t size, int64_t lo, int64_t k) const;
  template <typename T>
  void leaf(int64_t lo, int64_t m) const;

  Operand w_block(int64_t r0, int64_t c0, OperandKind kind, bool trans) const {
    GemmOperand d{kind, trans};
    d.zeros_stored = zeros_in_w;
    return {cx.at(static_cast<const void*>(w), r0 * n + c0), n, d};
  }
};

template <typename T>
void BlockedCholesky::leaf(int64_t lo, int64_t m) const {
  constexpr int NB = leaf_order<T>();
  const auto kernel = cholesky_block_kernel<T, NB>;
  const size_t bytes = tile_bytes<T, NB>(1);
  static std::atomic<uint64_t> shared_set{0};
  allow_shared(kernel, bytes, cx.device, shared_set);
  kernel<<<1, kBlockThreads, bytes, stream(cx.device)>>>(cx.at(static_cast<T*>(out), lo * n + lo), n,
                                                         static_cast<int>(m), cx.at(static_cast<T*>(w), lo * n + lo),
                                                         n, info, lo);
  SG_CUDA_CHECK_LAUNCH("cholesky_block_kernel");
}

/// out[r0…r0+size, r0…] −= P·Pᵀ on the lower triangle, for the rows r0… of the panel L21 (columns
/// lo…lo+k of out): one accumulating product, or two halves and the product between them.
void BlockedCholesky::update(int64_t r0, int64_t size, int64_t lo, int64_t k) const {
  if (size < split_update_from || size <= kLeaf) {
    const void* p = cx.at(static_cast<const void*>(out), r0 * n + lo);
    cx.product(size, size, k, dense(p, n), dense(p, n, true), cx.at(out, r0 * n + r0), n, -1.0, true);
    return;
  }
  const int64_t half = split(0, size);
  update(r0, half, lo, k);
  const void* top = cx.at(static_cast<const void*>(out), r0 * n + lo);
  const void* bottom = cx.at(static_cast<const void*>(out), (r0 + half) * n + lo);
  cx.product(size - half, half, k, dense(bottom, n), dense(top, n, true), cx.at(out, (r0 + half) * n + r0), n, -1.0,
             true);
  update(r0 + half, size - half, lo, k);
}

void BlockedCholesky::run(int64_t lo, int64_t hi, bool wants_inverse) const {
  if (hi - lo <= kLeaf) {
    if (cx.dtype == DType::Float32) leaf<float>(lo, hi - lo);
    else leaf<double>(lo, hi - lo);
    return;
  }
  const int64_t mid = split(lo, hi), n1 = mid - lo, n2 = hi - mid;
  run(lo, mid, true);
  // L21 = A21·W11ᵀ, with A21 copied out first (the product writes where it reads).
  const size_t row_bytes = static_cast<size_t>(n1) * cx.bytes;
  SG_CUDA_CHECK(cudaMemcpy2DAsync(panel, row_bytes, cx.at(static_cast<const void*>(out), mid * n + lo),
                                  static_cast<size_t>(n) * cx.bytes, row_bytes, static_cast<size_t>(n2),
                                  cudaMemcpyDeviceToDevice, stream(cx.device)));
  void* l21 = cx.at(out, mid * n + lo);
  cx.product(n2, n1, n1, dense(panel, n1), w_block(lo, lo, OperandKind::Upper, true), l21, n);
  update(mid, n2, lo, n1);
  run(mid, hi, wants_inverse);
  if (wants_inverse) {
    // W21 = −W22·(L21·W11).
    cx.product(n2, n1, n1, dense(l21, n), w_block(lo, lo, OperandKind::Lower, false), panel, n1);
    cx.product(n2, n1, n2, w_block(mid, mid, OperandKind::Lower, false), dense(panel, n1), cx.at(w, mid * n + lo), n,
               -1.0);
  }
}

/// The order of the largest first half in the recursions over [0, n): every product's scratch fits
/// in its square.
int64_t largest_half(int64_t n) { return n <= kLeaf ? n : split(0, n); }

}  // namespace

LinalgOptions linalg_options() {
  std::lock_guard<std::mutex> lock(options_mutex);
  return current_options;
}

void set_linalg_options(const LinalgOptions& options) {
  std::lock_guard<std::mutex> lock(options_mutex);
  current_options = options;
}

void CudaBackend::solve_triangular(const Tensor& t, OperandKind kind, bool trans, bool unit_diagonal, bool left,
                                   Tensor& x) {
  expect_on_device("solve_triangular", t);
  expect_on_device("solve_triangular", x);
  SG_CHECK(is_triangular(kind), "cuda solve_triangular: op(T) must be Upper or Lower");
  SG_CHECK(t.dim() == 2 && t.size(0) == t.size(1) && x.dim() == 2 && t.dtype() == x.dtype(),
           "cuda solve_triangular: T ", t.shape(), " ", t.dtype(), " does not fit X ", x.shape(), " ", x.dtype());
  const int64_t n = t.size(0), k = left ? x.size(1) : x.size(0);
  SG_CHECK((left ? x.size(0) : x.size(1)) == n, "cuda solve_triangular: T ", t.shape(), " does not fit X ",
           x.shape());
  if (n == 0 || k == 0) return;
  DeviceGuard guard(device_);
  const LinalgOptions options = linalg_options();
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (k <= options.few_columns) {
      solve_few_columns<T>(device_, data_of<T>(t), n, kind, trans, unit_diagonal, left, data_of<T>(x), k);
      return;
    }
    const Context cx{*this, t.dtype(), sizeof(T),
                     sizeof(T) == 4 ? options.dense_triangles_f32 : options.dense_triangles_f64, device_};
    const int64_t blocks = (n + kLeaf - 1) / kLeaf;
    Storage inverses(static_cast<size_t>(blocks * kLeaf * kLeaf) * sizeof(T), Device(DeviceType::CUDA, device_));
    Storage rhs(x.nbytes(), Device(DeviceType::CUDA, device_));
    invert_blocks<T>(device_, data_of<T>(t), n, trans, kind, unit_diagonal, static_cast<T*>(inverses.data),
                     kLeaf * kLeaf, kLeaf);
    SG_CUDA_CHECK(cudaMemcpyAsync(rhs.data, x.data_ptr(), x.nbytes(), cudaMemcpyDeviceToDevice, stream(device_)));
    const BlockedSolve solve{cx, t.data_ptr(), n, trans, kind, left, x.data_ptr(), rhs.data, k, inverses.data};
    solve.run(0, n);
  });
}

void CudaBackend::cholesky(const Tensor& a, Tensor& out, Tensor& info) {
  expect_on_device("cholesky", a);
  expect_on_device("cholesky", out);
  expect_on_device("cholesky", info);
  SG_CHECK(a.dim() == 2 && a.size(0) == a.size(1) && out.shape() == a.shape() && out.dtype() == a.dtype(),
           "cuda cholesky: A ", a.shape(), " ", a.dtype(), " does not fit L ", out.shape(), " ", out.dtype());
  SG_CHECK(info.numel() == 1 && info.dtype() == DType::Int64, "cuda cholesky: info must be one int64");
  const int64_t n = a.size(0);
  DeviceGuard guard(device_);
  const cudaStream_t s = stream(device_);
  auto* info_word = static_cast<unsigned long long*>(info.data_ptr());
  SG_CUDA_CHECK(cudaMemsetAsync(info_word, 0, sizeof(unsigned long long), s));
  if (n == 0) return;
  const LinalgOptions options = linalg_options();
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (out.data_ptr() != a.data_ptr())
      launch_for_each("cholesky", device_, n * n, CopyLowerMap<T>{data_of<T>(a), data_of<T>(out), n});
    const bool dense_triangles = sizeof(T) == 4 ? options.dense_triangles_f32 : options.dense_triangles_f64;
    const Context cx{*this, a.dtype(), sizeof(T), dense_triangles, device_};
    const int64_t half = largest_half(n);
    Storage w(static_cast<size_t>(n * n) * sizeof(T), Device(DeviceType::CUDA, device_));
    Storage panel(static_cast<size_t>(std::max<int64_t>(1, half * half)) * sizeof(T),
                  Device(DeviceType::CUDA, device_));
    // Dense reads of W's triangles need its zeros: the leaves write their blocks', the rest is cleared.
    if (dense_triangles && n > kLeaf) SG_CUDA_CHECK(cudaMemsetAsync(w.data, 0, w.nbytes, s));
    const BlockedCholesky chol{cx,   out.data_ptr(), w.data,          panel.data, n, info_word,
                               dense_triangles, options.split_update_from};
    chol.run(0, n, false);
    launch_for_each("cholesky", device_, n * n, ZeroOffBlocksMap<T>{data_of<T>(out), n, kLeaf, true});
  });
}

void CudaBackend::triangular_inverse(const Tensor& t, OperandKind kind, bool unit_diagonal, Tensor& out) {
  expect_on_device("triangular_inverse", t);
  expect_on_device("triangular_inverse", out);
  SG_CHECK(is_triangular(kind), "cuda triangular_inverse: T must be Upper or Lower");
  SG_CHECK(t.dim() == 2 && t.size(0) == t.size(1) && out.shape() == t.shape() && out.dtype() == t.dtype(),
           "cuda triangular_inverse: T ", t.shape(), " ", t.dtype(), " does not fit the output ", out.shape(), " ",
           out.dtype());
  SG_CHECK(out.data_ptr() != t.data_ptr(), "cuda triangular_inverse: the output must not alias T");
  const int64_t n = t.size(0);
  if (n == 0) return;
  DeviceGuard guard(device_);
  const LinalgOptions options = linalg_options();
  const bool lower = kind == OperandKind::Lower;
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Context cx{*this, t.dtype(), sizeof(T),
                     sizeof(T) == 4 ? options.dense_triangles_f32 : options.dense_triangles_f64, device_};
    T* o = data_of<T>(out);
    launch_for_each("triangular_inverse", device_, n * n, ZeroOffBlocksMap<T>{o, n, kLeaf, lower});
    invert_blocks<T>(device_, data_of<T>(t), n, false, kind, unit_diagonal, o, kLeaf * (n + 1), n);
    if (n <= kLeaf) return;
    const int64_t half = largest_half(n);
    Storage scratch(static_cast<size_t>(half * half) * sizeof(T), Device(DeviceType::CUDA, device_));
    void* tmp = scratch.data;
    GemmOperand tri{kind, false};
    tri.zeros_stored = true;  // the other triangle is zero everywhere by now
    auto inv = [&](int64_t r0) { return Operand{o + r0 * n + r0, n, tri}; };
    // Bottom-up: inv([A 0; B C]) = [A⁻¹ 0; −C⁻¹·B·A⁻¹ C⁻¹] and its upper mirror.
    auto run = [&](auto& self, int64_t lo, int64_t hi) -> void {
      if (hi - lo <= kLeaf) return;
      const int64_t mid = split(lo, hi), n1 = mid - lo, n2 = hi - mid;
      self(self, lo, mid);
      self(self, mid, hi);
      if (lower) {
        cx.product(n2, n1, n1, dense(data_of<T>(t) + mid * n + lo, n), inv(lo), tmp, n1);
        cx.product(n2, n1, n2, inv(mid), dense(tmp, n1), o + mid * n + lo, n, -1.0);
      } else {
        cx.product(n1, n2, n1, inv(lo), dense(data_of<T>(t) + lo * n + mid, n), tmp, n2);
        cx.product(n1, n2, n2, dense(tmp, n2), inv(mid), o + lo * n + mid, n, -1.0);
      }
    };
    run(run, 0, n);
  });
}

}  // namespace sg::detail::cuda
