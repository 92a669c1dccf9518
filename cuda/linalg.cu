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
//    it as a counter in global memory says they are ready;
//  * small_product_kernel runs the recursions' smallest products (in float32 every extent ≤ 128 by
//    default) on tiles of 32 or 64, which spread over more SMs than the GEMM's 128-tiles.
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
constexpr int64_t kLeaf = 128;      // the diagonal blocks the recursions stop at (nb; the Cholesky may stop at half)

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

/// Stages kTotal elements into shared memory, the block's threads taking e = threadIdx.x, +256, …:
/// each thread issues kBatch of its loads (load(e), which may read global memory) before it stores any
/// of them (store(e, value)), so it waits one memory latency per batch rather than per element.
template <int kTotal, int kBatch, class Load, class Store>
__device__ __forceinline__ void stage(Load load, Store store) {
  static_assert(kTotal % (kBlockThreads * kBatch) == 0, "stage: whole batches of the block's threads");
  for (int base = threadIdx.x; base < kTotal; base += kBlockThreads * kBatch) {
    decltype(load(0)) v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) v[u] = load(base + u * kBlockThreads);
#pragma unroll
    for (int u = 0; u < kBatch; ++u) store(base + u * kBlockThreads, v[u]);
  }
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
  auto row = [=](int e) { return down_columns ? e % NB : e / NB; };
  auto col = [=](int e) { return down_columns ? e / NB : e % NB; };
  stage<NB * NB, NB * NB / kBlockThreads < 16 ? NB * NB / kBlockThreads : 16>(
      [=](int e) {
        const int i = row(e), j = col(e);
        const bool stored = i < m && j < m && (j < i || (j == i && !unit));
        return stored ? a(i, j) : (i == j ? T(1) : T(0));
      },
      [=](int e, T v) { tile[row(e) * LD + col(e)] = v; });
  __syncthreads();
  for (int i = threadIdx.x; i < NB; i += kBlockThreads) rdiag[i] = T(1) / tile[i * LD + i];
  __syncthreads();
}

/// Inverts the lower triangular tile L (see load_lower_tile; rdiag holds its diagonal's
/// reciprocals) in place: X = L⁻¹ goes transposed into the tile's upper triangle, X(i, j) at
/// tile[j][i] for j ≤ i (the diagonal's slots too: L's diagonal is read only through rdiag), so L's
/// strict lower triangle, which the products below read, stays. Rows and columns from m on are left
/// out. The diagonal 32-blocks go one to a warp (column j of a block on lane j, a forward substitution
/// in registers); the blocks below follow diagonal by diagonal, X_ij = −X_ii·Σ_{j≤p<i} L_ip·X_pj, with
/// S_ij = Σ L_ip·X_pj kept where X_ij goes. All the block's threads call it; it returns synchronised.
template <typename T, int NB>
__device__ void invert_lower_tile(T* tile, const T* rdiag, int m) {
  constexpr int LD = NB + 1;
  constexpr int kWarps = kBlockThreads / kWarp;
  constexpr int kRows = kWarp / kWarps;  // rows of a 32-block per thread in the block products
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int blocks = (m + kWarp - 1) / kWarp;
  auto x_at = [tile](int i, int j) -> T& { return tile[j * LD + i]; };
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
      for (int i = p + 1; i < kWarp; ++i) x[i] += tile[(b0 + i) * LD + b0 + p] * xp;
    }
    if (b0 + lane < m) {
#pragma unroll
      for (int i = 0; i < kWarp; ++i)
        if (i >= lane && b0 + i < m) x_at(b0 + i, b0 + lane) = x[i];
    }
  }
  __syncthreads();
  for (int d = 1; d < blocks; ++d) {
    // S_ij = Σ_{j≤p<i} L_ip·X_pj for i = j + d (X_jj read inside its lower triangle only).
    for (int j = 0; j + d < blocks; ++j) {
      const int i0 = (j + d) * kWarp, j0 = j * kWarp, col = j0 + lane;
      T acc[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r] = T(0);
      for (int p = j0; p < i0; ++p) {
        const T xv = p >= col ? x_at(p, col) : T(0);
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r] += tile[(i0 + warp * kRows + r) * LD + p] * xv;
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        if (i0 + warp * kRows + r < m) x_at(i0 + warp * kRows + r, col) = acc[r];
    }
    __syncthreads();
    // X_ij = −X_ii·S_ij, every product read before any is written.
    T out[NB / kWarp][kRows];
#pragma unroll
    for (int j = 0; j < NB / kWarp; ++j) {
      if (j + d < blocks) {
        const int i0 = (j + d) * kWarp, col = j * kWarp + lane;
#pragma unroll
        for (int r = 0; r < kRows; ++r) out[j][r] = T(0);
        for (int q = 0; q < kWarp && i0 + q < m; ++q) {
          const T sv = x_at(i0 + q, col);
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            const int row = warp * kRows + r;
            if (q <= row && i0 + row < m) out[j][r] -= x_at(i0 + row, i0 + q) * sv;
          }
        }
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < NB / kWarp; ++j) {
      if (j + d < blocks) {
        const int i0 = (j + d) * kWarp, col = j * kWarp + lane;
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          if (i0 + warp * kRows + r < m) x_at(i0 + warp * kRows + r, col) = out[j][r];
      }
    }
    __syncthreads();
  }
}

/// Writes the inverse held in an inverted tile (invert_lower_tile) through `out`: X(i, j) for j ≤ i < m,
/// exact zeros above the diagonal. A warp per row, its lanes walking j.
template <typename T, int NB>
__device__ void store_inverse(const T* tile, int m, View<T> out) {
  for (int i = threadIdx.x / kWarp; i < m; i += kBlockThreads / kWarp)
    for (int j = threadIdx.x % kWarp; j < m; j += kWarp) out(i, j) = j <= i ? tile[j * (NB + 1) + i] : T(0);
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
  invert_lower_tile<T, NB>(tile, rdiag, m);
  T* o = out + int64_t{blockIdx.x} * out_step;
  store_inverse<T, NB>(tile, m, reversed ? View<T>{o + (m - 1) * (ldo + 1), -ldo, -1} : View<T>{o, ldo, 1});
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
    // 1/√pivot in one step (rsqrt is within 2 ulp), the pivot's root as its product with it.
    T r;
    if constexpr (sizeof(T) == 4) r = rsqrtf(pivot);
    else r = rsqrt(pivot);
    const T s = pivot * r;
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
/// with L written to l (rows of ldl, exact zeros above the diagonal) and L⁻¹ to w (rows of ldw, zeros
/// above the diagonal). Right-looking over 32-column panels: the panel's diagonal block on one warp, the
/// rows below it by forward substitution (a thread per row), the trailing lower triangle in 4 × 4
/// register tiles. The first pivot that is not positive, as a 1-based column of the whole matrix
/// (first_col + its column), goes into *info unless an earlier one is there.
template <typename T, int NB>
__global__ void __launch_bounds__(kBlockThreads)
    cholesky_block_kernel(const T* a, int64_t lda, T* l, int64_t ldl, int m, T* w, int64_t ldw,
                          unsigned long long* info, int64_t first_col) {
  constexpr int LD = NB + 1;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* tile = reinterpret_cast<T*>(shared_bytes);
  T* rdiag = tile + NB * LD;
  stage<NB * NB, 16>(
      [=](int e) {
        const int i = e / NB, j = e % NB;
        return i < m && j <= i ? a[i * lda + j] : (i == j ? T(1) : T(0));
      },
      [=](int e, T v) { tile[(e / NB) * LD + e % NB] = v; });
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
  // L first: the inverse takes its diagonal's slots. A warp per row.
  for (int i = tid / kWarp; i < m; i += kBlockThreads / kWarp)
    for (int j = tid % kWarp; j < m; j += kWarp) l[i * ldl + j] = j <= i ? tile[i * LD + j] : T(0);
  __syncthreads();
  invert_lower_tile<T, NB>(tile, rdiag, m);
  store_inverse<T, NB>(tile, m, View<T>{w, ldw, 1});
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

/// Shared memory of solve_few_columns_kernel, in elements: two tiles, the reciprocals, and the
/// right-hand side, partial solution, previous block, partial sums and (COLS) per-warp sums.
template <int BS, int KC>
constexpr int few_columns_elements() {
  return 2 * BS * (BS + 1) + BS + 3 * BS * KC + (kBlockThreads / BS) * BS * KC + (kBlockThreads / kWarp) * BS * KC;
}

/// Waits until ready[chunk] passes `block` (one thread spins with acquire loads, the block then meets
/// at a barrier, so every thread's later loads see the rows it guards). `known` caches the last count
/// seen; `seen` alternates between two slots so that a slot is rewritten only after a barrier.
__device__ __forceinline__ void wait_for_block(const unsigned int* ready, int64_t block, int64_t& known,
                                               int& parity, unsigned int* seen) {
  if (block < known) return;
  if (threadIdx.x == 0) {
    unsigned int v;
    while ((v = load_acquire(ready)) <= block) {
    }
    seen[parity] = v;
  }
  __syncthreads();
  known = seen[parity];
  parity ^= 1;
}

/// L·X = B for the BS rows of block b and the KC columns of one chunk, in one CTA. First, while the
/// blocks above are being solved: the inverse of L_bb and G = L_bb⁻¹·L_b,b−1. Then for each block
/// j < b − 1, as soon as ready[chunk] passes j, B_b −= L_bj·X_j (L_bj loaded before the wait), and
/// Y = L_bb⁻¹·B_b. Last, once X_{b−1} is ready, X_b = Y − G·X_{b−1}: one block product between two
/// blocks' solutions. CTAs claim blocks in order from a counter, so each waits only on CTAs that
/// run. COLS: L's columns are contiguous (|l_row| = 1), so lanes walk rows; else lanes walk columns.
template <typename T, int BS, int KC, bool COLS>
__global__ void __launch_bounds__(kBlockThreads) solve_few_columns_kernel(FewColumnsArgs<T> args) {
  constexpr int LD = BS + 1;
  constexpr int kWarps = kBlockThreads / kWarp;
  constexpr int kR = COLS ? BS / kWarp : BS / kWarps;  // rows of the block per thread
  constexpr int kQ = COLS ? BS / kWarps : BS / kWarp;  // columns of L_bj per thread
  constexpr int kParts = kBlockThreads / BS;           // threads per row of a block product
  constexpr int kSpan = BS / kParts;
  constexpr int kG = BS / 16;                          // rows and columns of G per thread
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* tile = reinterpret_cast<T*>(shared_bytes);  // L_bb, then its inverse (invert_lower_tile)
  T* g = tile + BS * LD;                         // L_b,b−1, then G
  T* rdiag = g + BS * LD;
  T* rhs = rdiag + BS;                           // [BS][KC]
  T* y = rhs + BS * KC;                          // [BS][KC]
  T* prev = y + BS * KC;                         // [BS][KC]: X_{b−1}
  T* parts = prev + BS * KC;                     // [kParts][BS][KC]
  T* red = parts + kParts * BS * KC;             // COLS: [kWarps][BS][KC]
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
  const unsigned int* ready = args.ready + chunk;

  load_lower_tile<T, BS>(View<const T>{args.l + row0 * (args.l_row + args.l_col), args.l_row, args.l_col}, m,
                         args.unit, tile, rdiag);
  invert_lower_tile<T, BS>(tile, rdiag, m);
  if (b > 0) {
    // G = L_bb⁻¹·L_b,b−1, a kG × kG register tile per thread (rows ty + 16u, columns tx + 16v).
    const int64_t q0 = row0 - BS;
    auto row = [](int e) { return COLS ? e % BS : e / BS; };
    auto col = [](int e) { return COLS ? e / BS : e % BS; };
    stage<BS * BS, BS * BS / kBlockThreads < 16 ? BS * BS / kBlockThreads : 16>(
        [=](int e) { return row(e) < m ? l(row0 + row(e), q0 + col(e)) : T(0); },
        [=](int e, T v) { g[row(e) * LD + col(e)] = v; });
    __syncthreads();
    const int ty = tid / 16, tx = tid % 16;
    T acc[kG][kG];
#pragma unroll
    for (int u = 0; u < kG; ++u)
#pragma unroll
      for (int v = 0; v < kG; ++v) acc[u][v] = T(0);
    for (int q = 0; q < BS; ++q) {
      T iv[kG], lv[kG];
#pragma unroll
      for (int u = 0; u < kG; ++u) iv[u] = q <= ty + 16 * u ? tile[q * LD + ty + 16 * u] : T(0);
#pragma unroll
      for (int v = 0; v < kG; ++v) lv[v] = g[q * LD + tx + 16 * v];
#pragma unroll
      for (int u = 0; u < kG; ++u)
#pragma unroll
        for (int v = 0; v < kG; ++v) acc[u][v] += iv[u] * lv[v];
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < kG; ++u)
#pragma unroll
      for (int v = 0; v < kG; ++v) g[(ty + 16 * u) * LD + tx + 16 * v] = acc[u][v];
  }

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
  for (int64_t j = 0; j + 1 < b; ++j) {
    const int64_t q0 = j * BS;  // block j is whole: only the last block can be short
    T lv[kR][kQ];
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int q = 0; q < kQ; ++q) lv[r][q] = row_of(r) < m ? l(row0 + row_of(r), q0 + col_of(q)) : T(0);
    wait_for_block(ready, j, known, parity, seen);
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

  // The block's right-hand side, reduced into shared memory.
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
  // Y = L_bb⁻¹·rhs: kParts threads per row, each over a slice of the columns.
  const int row = tid % BS, part = tid / BS;
  {
    T s[KC];
#pragma unroll
    for (int c = 0; c < KC; ++c) s[c] = T(0);
    if (row < m) {
      const int end = min(row + 1, (part + 1) * kSpan);
      for (int q = part * kSpan; q < end; ++q) {
        const T iv = tile[q * LD + row];
#pragma unroll
        for (int c = 0; c < KC; ++c) s[c] += iv * rhs[q * KC + c];
      }
    }
#pragma unroll
    for (int c = 0; c < KC; ++c) parts[(part * BS + row) * KC + c] = s[c];
  }
  __syncthreads();
  for (int e = tid; e < BS * KC; e += kBlockThreads) {
    T s = T(0);
#pragma unroll
    for (int p = 0; p < kParts; ++p) s += parts[p * BS * KC + e];
    y[e] = s;
  }
  if (b > 0) {
    // X_b = Y − G·X_{b−1}, once X_{b−1} is there.
    wait_for_block(ready, b - 1, known, parity, seen);
    for (int e = tid; e < BS * KC; e += kBlockThreads) {
      const int q = e / KC, c = e % KC;
      prev[e] = c < kc ? __ldcg(&x(row0 - BS + q, col0 + c)) : T(0);
    }
    __syncthreads();
    T s[KC];
#pragma unroll
    for (int c = 0; c < KC; ++c) s[c] = T(0);
    for (int q = part * kSpan; q < (part + 1) * kSpan; ++q) {
      const T gv = g[row * LD + q];
#pragma unroll
      for (int c = 0; c < KC; ++c) s[c] += gv * prev[q * KC + c];
    }
#pragma unroll
    for (int c = 0; c < KC; ++c) parts[(part * BS + row) * KC + c] = s[c];
  }
  __syncthreads();
  for (int e = tid; e < BS * KC; e += kBlockThreads) {
    const int r = e / KC, c = e % KC;
    if (r < m && c < kc) {
      T s = y[e];
      if (b > 0) {
#pragma unroll
        for (int p = 0; p < kParts; ++p) s -= parts[p * BS * KC + e];
      }
      x(row0 + r, col0 + c) = s;
    }
  }
  // Every thread's rows are written before the count says so (a barrier, then a release store).
  __syncthreads();
  if (tid == 0) store_release(args.ready + chunk, static_cast<unsigned int>(b + 1));
}

// ---- small products -----------------------------------------------------------------------

/// What small_product_kernel computes: C = alpha·op(A)·op(B), or C += … with `accumulate`, for
/// op(A) [m, k] and op(B) [k, n] read through views whose structure (Dense, Upper or Lower) says what
/// is read: the zero triangle of a triangular operand never is.
template <typename T>
struct SmallProduct {
  View<const T> a;  ///< op(A)(i, p)
  View<const T> b;  ///< op(B)(p, j)
  OperandKind a_kind, b_kind;
  T* c;
  int64_t ldc;
  int m, n, k;
  T alpha;
  bool accumulate;
};

/// One TILE × TILE block of C per CTA over the k-range where both operands can be non-zero
/// (structured_k_range), in k-steps of 32 staged through shared memory; each thread holds TILE/16 ×
/// TILE/16 outputs (rows ty + 16u, columns tx + 16v). The products of the recursions' lowest levels:
/// a handful of 128-tiles would leave most SMs idle, these smaller tiles spread over more of them.
template <typename T, int TILE>
__global__ void __launch_bounds__(kBlockThreads) small_product_kernel(SmallProduct<T> p) {
  constexpr int KS = 32, R = TILE / 16, LDS = TILE + 1;
  __shared__ T as[KS * LDS];  // op(A)'s k-step, k-major: as[q][i]
  __shared__ T bs[KS * LDS];  // op(B)'s k-step: bs[q][j]
  const int i0 = blockIdx.y * TILE, j0 = blockIdx.x * TILE;
  const KRange range =
      structured_k_range(p.a_kind, p.b_kind, i0, min(i0 + TILE, p.m), j0, min(j0 + TILE, p.n), p.k);
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  const bool a_along_k = p.a.col == 1 || p.a.col == -1;  // consecutive threads walk the unit step
  const bool b_along_j = p.b.col == 1 || p.b.col == -1;
  T acc[R][R];
#pragma unroll
  for (int u = 0; u < R; ++u)
#pragma unroll
    for (int v = 0; v < R; ++v) acc[u][v] = T(0);
  for (int64_t k0 = range.begin; k0 < range.end; k0 += KS) {
    // Both operands' k-steps, every load issued before any store.
    constexpr int kPer = TILE * KS / kBlockThreads;
    T va[kPer], vb[kPer];
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int e = tid + u * kBlockThreads;
      const int i = a_along_k ? e / KS : e % TILE, qa = a_along_k ? e % KS : e / TILE;
      const int64_t gi = i0 + i, ga = k0 + qa;
      const bool a_inside = gi < p.m && ga < range.end && (p.a_kind != OperandKind::Lower || ga <= gi) &&
                            (p.a_kind != OperandKind::Upper || ga >= gi);
      va[u] = a_inside ? p.a(gi, ga) : T(0);
      const int j = b_along_j ? e % TILE : e / KS, qb = b_along_j ? e / TILE : e % KS;
      const int64_t gj = j0 + j, gb = k0 + qb;
      const bool b_inside = gj < p.n && gb < range.end && (p.b_kind != OperandKind::Lower || gj <= gb) &&
                            (p.b_kind != OperandKind::Upper || gj >= gb);
      vb[u] = b_inside ? p.b(gb, gj) : T(0);
    }
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int e = tid + u * kBlockThreads;
      as[(a_along_k ? e % KS : e / TILE) * LDS + (a_along_k ? e / KS : e % TILE)] = va[u];
      bs[(b_along_j ? e / TILE : e % KS) * LDS + (b_along_j ? e % TILE : e / KS)] = vb[u];
    }
    __syncthreads();
#pragma unroll 8
    for (int q = 0; q < KS; ++q) {
      T av[R], bv[R];
#pragma unroll
      for (int u = 0; u < R; ++u) av[u] = as[q * LDS + ty + 16 * u];
#pragma unroll
      for (int v = 0; v < R; ++v) bv[v] = bs[q * LDS + tx + 16 * v];
#pragma unroll
      for (int u = 0; u < R; ++u)
#pragma unroll
        for (int v = 0; v < R; ++v) acc[u][v] += av[u] * bv[v];
    }
    __syncthreads();
  }
#pragma unroll
  for (int u = 0; u < R; ++u)
#pragma unroll
    for (int v = 0; v < R; ++v) {
      const int64_t gi = i0 + ty + 16 * u, gj = j0 + tx + 16 * v;
      if (gi < p.m && gj < p.n) {
        T* out = p.c + gi * p.ldc + gj;
        *out = p.accumulate ? *out + p.alpha * acc[u][v] : p.alpha * acc[u][v];
      }
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

/// Shared memory of a kernel on one tile and its reciprocals.
template <typename T, int NB>
constexpr size_t tile_bytes() {
  return (static_cast<size_t>(NB) * (NB + 1) + NB) * sizeof(T);
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

/// Block rows of the few-columns solve: 128 in float32, 64 in float64 (its two tiles in shared memory).
template <typename T>
constexpr int few_columns_block() {
  return sizeof(T) == 4 ? 128 : 64;
}

/// The split point of [lo, hi): half of its leaves of order `leaf` (rounded up) on the first side.
int64_t split(int64_t lo, int64_t hi, int64_t leaf = kLeaf) {
  const int64_t blocks = (hi - lo + leaf - 1) / leaf;
  return lo + leaf * ((blocks + 1) / 2);
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

/// op(X) of an operand as a view: element (i, j) of the [rows, cols] matrix op(X).
template <typename T>
View<const T> op_view(const Operand& x) {
  const T* data = static_cast<const T*>(x.data);
  return x.desc.trans ? View<const T>{data, 1, x.ld} : View<const T>{data, x.ld, 1};
}

template <typename T, int TILE>
void launch_small_product(int device, const SmallProduct<T>& p) {
  const dim3 grid(static_cast<unsigned>((p.n + TILE - 1) / TILE), static_cast<unsigned>((p.m + TILE - 1) / TILE));
  small_product_kernel<T, TILE><<<grid, kBlockThreads, 0, stream(device)>>>(p);
  SG_CUDA_CHECK_LAUNCH("small_product_kernel");
}

/// What one call works with: the backend's GEMM, the dtype and the options read once.
struct Context {
  CudaBackend& backend;
  DType dtype;
  size_t bytes;  // of an element
  int device;
  LinalgOptions options;

  template <typename P>
  P* at(P* base, int64_t elements) const {
    using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
    return reinterpret_cast<P*>(reinterpret_cast<Byte*>(base) + elements * static_cast<int64_t>(bytes));
  }

  bool dense_triangles() const {
    return dtype == DType::Float32 ? options.dense_triangles_f32 : options.dense_triangles_f64;
  }

  /// C = alpha·op(A)·op(B) (C += … with `accumulate`: Dense operands only, or any on the small
  /// kernel), never in TF32. Products whose every extent is at most the options' own_products_up_to
  /// run on small_product_kernel; the others on the backend's GEMM, where a triangular operand with its
  /// zeros stored goes as Dense if `dense` (cuBLAS).
  void product(int64_t m, int64_t n, int64_t k, Operand a, Operand b, void* c, int64_t ldc, double alpha = 1.0,
               bool accumulate = false, bool dense = false) const {
    if (m == 0 || n == 0) return;
    const int64_t own_up_to =
        dtype == DType::Float32 ? options.own_products_up_to_f32 : options.own_products_up_to_f64;
    if (std::max({m, n, k}) <= own_up_to) {
      if (dtype == DType::Float32) small_product<float>(m, n, k, a, b, c, ldc, alpha, accumulate);
      else small_product<double>(m, n, k, a, b, c, ldc, alpha, accumulate);
      return;
    }
    GemmProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.a = a.desc;
    p.b = b.desc;
    if (dense) {
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

  template <typename T>
  void small_product(int64_t m, int64_t n, int64_t k, Operand a, Operand b, void* c, int64_t ldc, double alpha,
                     bool accumulate) const {
    const SmallProduct<T> p{op_view<T>(a), op_view<T>(b), a.desc.kind, b.desc.kind, static_cast<T*>(c), ldc,
                            static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), static_cast<T>(alpha),
                            accumulate};
    // 64-tiles once 32-tiles would be several waves.
    if (((m + 31) / 32) * ((n + 31) / 32) <= 4 * sm_count(device)) launch_small_product<T, 32>(device, p);
    else launch_small_product<T, 64>(device, p);
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
      const bool as_dense = cx.options.dense_solve_leaves || cx.dense_triangles();
      if (left) cx.product(m, k, m, inverse, dense(cx.at(w, lo * k), k), cx.at(x, lo * k), k, 1.0, false, as_dense);
      else cx.product(k, m, m, dense(cx.at(w, lo), n), inverse, cx.at(x, lo), n, 1.0, false, as_dense);
      return;
    }
    const int64_t mid = split(lo, hi);
    // op(T) lower on the left, upper on the right: the first rows are solved first.
    const bool forward = left == (kind == OperandKind::Lower);
    const int64_t f0 = forward ? lo : mid, f1 = forward ? mid : hi;
    const int64_t s0 = forward ? mid : lo, s1 = forward ? hi : mid;
    run(f0, f1);
    if (left)
      cx.product(s1 - s0, k, f1 - f0, block(s0, f0), dense(cx.at(x, f0 * k), k), cx.at(w, s0 * k), k, -1.0, true);
    else
      cx.product(k, s1 - s0, f1 - f0, dense(cx.at(x, f0), n), block(f0, s0), cx.at(w, s0), n, -1.0, true);
    run(s0, s1);
  }
};

/// Launches invert_blocks_kernel over the diagonal blocks of op(T).
template <typename T>
void invert_blocks(int device, const T* t, int64_t n, bool trans, OperandKind kind, bool unit, T* out,
                   int64_t out_step, int64_t ldo) {
  constexpr int NB = static_cast<int>(kLeaf);
  const auto kernel = invert_blocks_kernel<T, NB>;
  const size_t bytes = tile_bytes<T, NB>();
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
  const size_t bytes = static_cast<size_t>(few_columns_elements<BS, KC>()) * sizeof(T);
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

/// The recursive Cholesky: A's lower triangle in `work` (the trailing updates go there), L into `out`,
/// and the inverses of the factor's diagonal blocks carried along in w. For [lo, hi) split at mid:
///   L11 = chol(A11) (and W11 = L11⁻¹), L21 = A21·W11ᵀ, A22 −= L21·L21ᵀ, L22 = chol(A22),
/// and where the caller needs W = L⁻¹ of the whole range too, W21 = −W22·(L21·W11). A range that is
/// no parent's first half needs no W of its own, so the inverses cost N³/24 of the N³/6.
struct BlockedCholesky {
  const Context& cx;
  void* work;
  void* out;
  void* w;
  void* panel;  // scratch for L21·W11
  int64_t n;
  int64_t leaf_order;  // the diagonal blocks the recursion stops at: kLeaf or kLeaf / 2
  unsigned long long* info;
  bool zeros_in_w;  // w was zeroed first (then its triangles may go to the GEMM as Dense)

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

template <typename T, int NB>
void launch_cholesky_block(const BlockedCholesky& chol, int64_t lo, int64_t m) {
  const Context& cx = chol.cx;
  const int64_t n = chol.n;
  const auto kernel = cholesky_block_kernel<T, NB>;
  const size_t bytes = tile_bytes<T, NB>();
  static std::atomic<uint64_t> shared_set{0};
  allow_shared(kernel, bytes, cx.device, shared_set);
  const int64_t at = lo * n + lo;
  kernel<<<1, kBlockThreads, bytes, stream(cx.device)>>>(
      cx.at(static_cast<const T*>(chol.work), at), n, cx.at(static_cast<T*>(chol.out), at), n,
      static_cast<int>(m), cx.at(static_cast<T*>(chol.w), at), n, chol.info, lo);
  SG_CUDA_CHECK_LAUNCH("cholesky_block_kernel");
}

template <typename T>
void BlockedCholesky::leaf(int64_t lo, int64_t m) const {
  if (m <= kLeaf / 2) launch_cholesky_block<T, static_cast<int>(kLeaf / 2)>(*this, lo, m);
  else launch_cholesky_block<T, static_cast<int>(kLeaf)>(*this, lo, m);
}

/// work[r0…r0+size, r0…] −= P·Pᵀ on the lower triangle, for the rows r0… of the panel P = L21
/// (columns lo…lo+k of out): one accumulating product, or two halves and the product between them.
void BlockedCholesky::update(int64_t r0, int64_t size, int64_t lo, int64_t k) const {
  if (size < cx.options.split_update_from || size <= kLeaf) {
    const void* p = cx.at(static_cast<const void*>(out), r0 * n + lo);
    cx.product(size, size, k, dense(p, n), dense(p, n, true), cx.at(work, r0 * n + r0), n, -1.0, true);
    return;
  }
  const int64_t half = split(0, size);
  update(r0, half, lo, k);
  const void* top = cx.at(static_cast<const void*>(out), r0 * n + lo);
  const void* bottom = cx.at(static_cast<const void*>(out), (r0 + half) * n + lo);
  cx.product(size - half, half, k, dense(bottom, n), dense(top, n, true), cx.at(work, (r0 + half) * n + r0), n,
             -1.0, true);
  update(r0 + half, size - half, lo, k);
}

void BlockedCholesky::run(int64_t lo, int64_t hi, bool wants_inverse) const {
  if (hi - lo <= leaf_order) {
    if (cx.dtype == DType::Float32) leaf<float>(lo, hi - lo);
    else leaf<double>(lo, hi - lo);
    return;
  }
  const int64_t mid = split(lo, hi, leaf_order), n1 = mid - lo, n2 = hi - mid;
  run(lo, mid, true);
  // L21 = A21·W11ᵀ.
  void* l21 = cx.at(out, mid * n + lo);
  cx.product(n2, n1, n1, dense(cx.at(static_cast<const void*>(work), mid * n + lo), n),
             w_block(lo, lo, OperandKind::Upper, true), l21, n, 1.0, false, zeros_in_w);
  update(mid, n2, lo, n1);
  run(mid, hi, wants_inverse);
  if (wants_inverse) {
    // W21 = −W22·(L21·W11).
    cx.product(n2, n1, n1, dense(l21, n), w_block(lo, lo, OperandKind::Lower, false), panel, n1, 1.0, false,
               zeros_in_w);
    cx.product(n2, n1, n2, w_block(mid, mid, OperandKind::Lower, false), dense(panel, n1), cx.at(w, mid * n + lo), n,
               -1.0, false, zeros_in_w);
  }
}

/// The order of the largest first half in the recursions over [0, n) with leaves of order `leaf`:
/// every product's scratch fits in its square.
int64_t largest_half(int64_t n, int64_t leaf = kLeaf) { return n <= leaf ? n : split(0, n, leaf); }

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
    const Context cx{*this, t.dtype(), sizeof(T), device_, options};
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
    const Context cx{*this, a.dtype(), sizeof(T), device_, options};
    const Device here(DeviceType::CUDA, device_);
    if (n <= kLeaf) {  // one leaf, straight from A
      Storage w(static_cast<size_t>(n * n) * sizeof(T), here);
      const BlockedCholesky leaf{cx, a.data_ptr(), out.data_ptr(), w.data, nullptr, n, kLeaf, info_word, false};
      leaf.run(0, n, false);
      return;
    }
    // The trailing updates go to a working copy of A's lower triangle.
    Storage work(static_cast<size_t>(n * n) * sizeof(T), here);
    launch_for_each("cholesky", device_, n * n, CopyLowerMap<T>{data_of<T>(a), static_cast<T*>(work.data), n});
    const int64_t leaf_order = sizeof(T) == 4 ? options.cholesky_leaf_f32 : options.cholesky_leaf_f64;
    SG_CHECK(leaf_order == kLeaf || leaf_order == kLeaf / 2, "cuda cholesky: LinalgOptions::cholesky_leaf_",
             sizeof(T) == 4 ? "f32" : "f64", " must be ", kLeaf / 2, " or ", kLeaf, ", got ", leaf_order);
    const int64_t half = largest_half(n, leaf_order);
    Storage w(static_cast<size_t>(n * n) * sizeof(T), here);
    Storage panel(static_cast<size_t>(half * half) * sizeof(T), here);
    // Dense reads of W's triangles need its zeros: the leaves write their blocks', the rest is cleared.
    const bool zeros_in_w = cx.dense_triangles();
    if (zeros_in_w) SG_CUDA_CHECK(cudaMemsetAsync(w.data, 0, w.nbytes, s));
    const BlockedCholesky chol{cx, work.data, out.data_ptr(), w.data, panel.data, n, leaf_order, info_word,
                               zeros_in_w};
    chol.run(0, n, false);
    // Above the diagonal blocks (which the leaves write whole), exact zeros.
    launch_for_each("cholesky", device_, n * n, ZeroOffBlocksMap<T>{data_of<T>(out), n, leaf_order, true});
  });
}

void CudaBackend::triangular_inverse(const Tensor& t, OperandKind kind, bool unit_diagonal, Tensor& out) {
  expect_on_device("triangular_inverse", t);
  expect_on_device("triangular_inverse", out);
  SG_CHECK(is_triangular(kind), "cuda triangular_inverse: T must be Upper or Lower");
  SG_CHECK(t.dim() == 2 && t.size(0) == t.size(1) && out.shape() == t.shape() && out.dtype() == t.dtype(),
           "cuda triangular_inverse: T ", t.shape(), " ", t.dtype(), " does not fit the output ", out.shape(), " ",
           out.dtype());
  const int64_t n = t.size(0);
  if (n == 0) return;
  SG_CHECK(out.data_ptr() != t.data_ptr(), "cuda triangular_inverse: the output must not alias T");
  DeviceGuard guard(device_);
  const LinalgOptions options = linalg_options();
  const bool lower = kind == OperandKind::Lower;
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Context cx{*this, t.dtype(), sizeof(T), device_, options};
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
    const bool dense_triangles = cx.dense_triangles();
    // Bottom-up: inv([A 0; B C]) = [A⁻¹ 0; −C⁻¹·B·A⁻¹ C⁻¹] and its upper mirror.
    auto run = [&](auto& self, int64_t lo, int64_t hi) -> void {
      if (hi - lo <= kLeaf) return;
      const int64_t mid = split(lo, hi), n1 = mid - lo, n2 = hi - mid;
      self(self, lo, mid);
      self(self, mid, hi);
      if (lower) {
        cx.product(n2, n1, n1, dense(data_of<T>(t) + mid * n + lo, n), inv(lo), tmp, n1, 1.0, false, dense_triangles);
        cx.product(n2, n1, n2, inv(mid), dense(tmp, n1), o + mid * n + lo, n, -1.0, false, dense_triangles);
      } else {
        cx.product(n1, n2, n1, inv(lo), dense(data_of<T>(t) + lo * n + mid, n), tmp, n2, 1.0, false, dense_triangles);
        cx.product(n1, n2, n2, dense(tmp, n2), inv(mid), o + lo * n + mid, n, -1.0, false, dense_triangles);
      }
    };
    run(run, 0, n);
  });
}

}  // namespace sg::detail::cuda
