// The CUDA triangular solve with a few right-hand sides (LinalgTuning::few_columns), in one launch;
// CudaBackend::solve_triangular (cuda/linalg_solve.cu) calls solve_few_columns for it.
//  * solve_few_columns_kernel solves with a few right-hand sides in one launch: a CTA per block row
//    (and group of columns), which inverts its diagonal block, then subtracts the solved rows above
//    it as a counter in global memory says they are ready.
#include <atomic>
#include <cstdint>

#include <structgrad/core/storage.h>
#include "cuda/kernel_util.cuh"
#include "cuda/linalg_common.cuh"

namespace sg::detail::cuda::linalg {

namespace {

__device__ __forceinline__ unsigned int load_acquire(const unsigned int* p) {
  unsigned int v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void store_release(unsigned int* p, unsigned int v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

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

/// Block rows of the few-columns solve: 128 in float32, 64 in float64 (its two tiles in shared memory).
template <typename T>
constexpr int few_columns_block() {
  return sizeof(T) == 4 ? 128 : 64;
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

}  // namespace

template <typename T>
void solve_few_columns(int device, const T* t, int64_t n, Structure kind, bool trans, bool unit, bool left, T* x,
                       int64_t k) {
  constexpr int BS = few_columns_block<T>();
  if (!left) {
    trans = !trans;
    kind = kind == Structure::LowerTriangular ? Structure::UpperTriangular : Structure::LowerTriangular;
  }
  const bool reversed = kind == Structure::UpperTriangular;
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

template void solve_few_columns<float>(int, const float*, int64_t, Structure, bool, bool, bool, float*, int64_t);
template void solve_few_columns<double>(int, const double*, int64_t, Structure, bool, bool, bool, double*,
                                        int64_t);

}  // namespace sg::detail::cuda::linalg
