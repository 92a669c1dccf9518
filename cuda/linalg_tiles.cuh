// Device building blocks of the CUDA linear algebra (cuda/linalg_*.cu): strided views, staging into
// shared memory, and the diagonal-block tiles that the solve, inverse and Cholesky kernels load,
// invert and store, with the launch settings those kernels share. Internal to cuda/.
#pragma once

#include <atomic>
#include <cstdint>

#include "cuda/check.h"

namespace sg::detail::cuda::linalg {

inline constexpr int kWarp = 32;
inline constexpr int kBlockThreads = 256;  // threads of every linalg kernel but the element maps
inline constexpr int64_t kLeaf = 128;  // the diagonal blocks the recursions stop at (nb; the Cholesky may stop at half)

/// A strided view of a matrix: element (i, j) at data[i·row + j·col] (steps may be negative).
template <typename T>
struct View {
  T* data;
  int64_t row, col;
  __device__ T& operator()(int64_t i, int64_t j) const { return data[i * row + j * col]; }
};

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
// Every diagonal block is handled as a lower triangle: an upper one is read with its rows and columns
// reversed (P·U·P is lower for the reversal P), a transposed one with its two strides swapped.

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

/// One level of invert_off_diagonal_blocks: for each pair of neighbouring diagonal blocks of order S,
/// the first at j0 = 2S·p and the second at i0 = j0 + S, both inverted already, the block between them,
/// X_{i0,j0} = −X_{i0,i0}·(L_{i0,j0}·X_{j0,j0}), with the product in parentheses kept where that block
/// goes. Each thread holds R rows × 4 columns of a pair's block in registers, the rows RG apart and the
/// columns S/4 apart. All the block's threads call it, synchronised; it returns synchronised.
template <typename T, int NB, int S>
__device__ void invert_pairs(T* tile, int m) {
  constexpr int LD = NB + 1;
  constexpr int kPairs = NB / (2 * S), kPairThreads = kBlockThreads / kPairs;
  constexpr int C = 4, CG = S / C, RG = kPairThreads / CG, R = S / RG;
  static_assert(kPairs >= 1 && R >= 1 && R * RG == S, "invert_pairs: a whole pair's block per thread group");
  const int t = threadIdx.x % kPairThreads, ti = t / CG, tj = t % CG;
  const int j0 = 2 * S * static_cast<int>(threadIdx.x / kPairThreads), i0 = j0 + S;
  const bool active = i0 < m;
  auto x_at = [tile](int i, int j) -> T& { return tile[j * LD + i]; };
  // acc(u, v) = Σ_{k<S} row(u, k)·col(v, k) for the thread's rows i0 + ti + RG·u and columns j0 + tj + CG·v.
  T acc[R][C];
  auto product = [&](auto row, auto col) {
#pragma unroll
    for (int u = 0; u < R; ++u)
#pragma unroll
      for (int v = 0; v < C; ++v) acc[u][v] = T(0);
#pragma unroll 8
    for (int k = 0; k < S; ++k) {
      T rv[R], cv[C];
#pragma unroll
      for (int u = 0; u < R; ++u) rv[u] = row(ti + RG * u, k);
#pragma unroll
      for (int v = 0; v < C; ++v) cv[v] = col(tj + CG * v, k);
#pragma unroll
      for (int u = 0; u < R; ++u)
#pragma unroll
        for (int v = 0; v < C; ++v) acc[u][v] += rv[u] * cv[v];
    }
  };
  auto store = [&] {
#pragma unroll
    for (int u = 0; u < R; ++u)
#pragma unroll
      for (int v = 0; v < C; ++v)
        if (i0 + ti + RG * u < m) x_at(i0 + ti + RG * u, j0 + tj + CG * v) = acc[u][v];
  };
  if (active) {
    // P = L_{i0,j0}·X_{j0,j0}, X_{j0,j0}(k, j) zero for k < j.
    product([&](int i, int k) { return tile[(i0 + i) * LD + j0 + k]; },
            [&](int j, int k) { return k >= j ? x_at(j0 + k, j0 + j) : T(0); });
    store();
  }
  __syncthreads();
  if (active) {
    // X_{i0,j0} = −X_{i0,i0}·P, X_{i0,i0}(i, k) zero for k > i.
    product([&](int i, int k) { return k <= i ? -x_at(i0 + i, i0 + k) : T(0); },
            [&](int j, int k) { return x_at(i0 + k, j0 + j); });
  }
  __syncthreads();
  if (active) store();
  __syncthreads();
}

/// The blocks below the diagonal of X = L⁻¹, the second half of invert_lower_tile: with the inverses
/// X_ii of the diagonal 32-blocks in place (transposed, in the tile's upper triangle) and L's strict
/// lower triangle beside them, the inverses of ever larger diagonal blocks, each from its two halves
/// (invert_pairs): pairs of 32-blocks, then, in a tile of 128, the two halves. Rows and columns past m
/// hold the identity in both triangles. All the block's threads call it, synchronised; it returns
/// synchronised.
template <typename T, int NB>
__device__ void invert_off_diagonal_blocks(T* tile, int m) {
  static_assert(NB == 64 || NB == 128, "invert_off_diagonal_blocks: tiles of 64 or 128");
  invert_pairs<T, NB, 32>(tile, m);
  if constexpr (NB == 128) invert_pairs<T, NB, 64>(tile, m);
}

/// Inverts the lower triangular tile L (see load_lower_tile; rdiag holds its diagonal's
/// reciprocals) in place: X = L⁻¹ goes transposed into the tile's upper triangle, X(i, j) at
/// tile[j][i] for j ≤ i (the diagonal's slots too: L's diagonal is read only through rdiag), so L's
/// strict lower triangle, which the products below read, stays. Rows and columns from m on are left
/// out. The diagonal 32-blocks go one to a warp (column j of a block on lane j, a forward substitution
/// in registers); the blocks below follow from them (invert_off_diagonal_blocks). All the block's
/// threads call it; it returns synchronised.
template <typename T, int NB>
__device__ void invert_lower_tile(T* tile, const T* rdiag, int m) {
  constexpr int LD = NB + 1;
  constexpr int kWarps = kBlockThreads / kWarp;
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
  invert_off_diagonal_blocks<T, NB>(tile, m);
}

/// Writes the inverse held in an inverted tile (invert_lower_tile) through `out`: X(i, j) for j ≤ i < m,
/// exact zeros above the diagonal. A warp per row, its lanes walking j.
template <typename T, int NB>
__device__ void store_inverse(const T* tile, int m, View<T> out) {
  for (int i = threadIdx.x / kWarp; i < m; i += kBlockThreads / kWarp)
    for (int j = threadIdx.x % kWarp; j < m; j += kWarp) out(i, j) = j <= i ? tile[j * (NB + 1) + i] : T(0);
}

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

}  // namespace sg::detail::cuda::linalg
