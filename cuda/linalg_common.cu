// The shared host side of the CUDA linear algebra (cuda/linalg_common.cuh): the options' storage,
// Context::product with the small-tile kernel for the recursions' smallest products, and the zeros
// outside the diagonal blocks.
//  * small_product_kernel runs the recursions' smallest products (in float32 every extent ≤ 128 by
//    default) on tiles of 32 or 64, which spread over more SMs than the GEMM's 128-tiles.
#include "cuda/linalg_common.cuh"

#include <algorithm>
#include <mutex>

#include "cuda/kernel_util.cuh"

namespace sg::detail::cuda {

LinalgTuning linalg_tuning() { return tuning_state<LinalgTuning>().get(); }

void set_linalg_tuning(const LinalgTuning& options) { tuning_state<LinalgTuning>().set(options); }

}  // namespace sg::detail::cuda

namespace sg::detail::cuda::linalg {

namespace {

// ---- small products -----------------------------------------------------------------------

/// What small_product_kernel computes: C = alpha·op(A)·op(B), or C += … with `accumulate`, for
/// op(A) [m, k] and op(B) [k, n] read through views whose patterns (of a Dense, Upper or Lower
/// operand) say what is read: the zero triangle of a triangular operand never is.
template <typename T>
struct SmallProduct {
  View<const T> a;  ///< op(A)(i, p)
  View<const T> b;  ///< op(B)(p, j)
  Pattern a_pattern, b_pattern;  ///< op(A)(i, p) as operand A (outer i), op(B)(p, j) as B (outer j)
  T* c;
  int64_t ldc;
  int m, n, k;
  T alpha;
  bool accumulate;
};

/// One TILE × TILE block of C per CTA over the k-range where both operands can be non-zero
/// (structured_k_range), in rounds of kSteps k-steps of 32 staged through shared memory, every load of
/// a round in flight at once (one or two rounds at the default own_products_up_to_f32 of 128);
/// each thread holds TILE/16 × TILE/16 outputs (rows ty + 16u, columns tx + 16v). The products of the
/// recursions' lowest levels: a handful of 128-tiles would leave most SMs idle, these smaller tiles
/// spread over more of them.
template <typename T, int TILE>
__global__ void __launch_bounds__(kBlockThreads) small_product_kernel(SmallProduct<T> p) {
  constexpr int KS = 32, R = TILE / 16, LDS = TILE + 1;
  // As many k-steps a round as fit in 48 KB of static shared memory, at most four.
  constexpr int kSteps = std::min<int>(4, 48 * 1024 / (2 * KS * LDS * static_cast<int>(sizeof(T))));
  constexpr int KR = KS * kSteps;
  __shared__ T as[KR * LDS];  // op(A)'s round, k-major: as[q][i]
  __shared__ T bs[KR * LDS];  // op(B)'s round: bs[q][j]
  const int i0 = blockIdx.y * TILE, j0 = blockIdx.x * TILE;
  const KRange range =
      structured_k_range(p.a_pattern, p.b_pattern, i0, min(i0 + TILE, p.m), j0, min(j0 + TILE, p.n), p.k);
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  const bool a_along_k = p.a.col == 1 || p.a.col == -1;  // consecutive threads walk the unit step
  const bool b_along_j = p.b.col == 1 || p.b.col == -1;
  T acc[R][R];
#pragma unroll
  for (int u = 0; u < R; ++u)
#pragma unroll
    for (int v = 0; v < R; ++v) acc[u][v] = T(0);
  for (int64_t k0 = range.begin; k0 < range.end; k0 += KR) {
    // Both operands' round, every load issued before any store.
    constexpr int kPer = TILE * KR / kBlockThreads;
    T va[kPer], vb[kPer];
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int e = tid + u * kBlockThreads;
      const int i = a_along_k ? e / KR : e % TILE, qa = a_along_k ? e % KR : e / TILE;
      const int64_t gi = i0 + i, ga = k0 + qa;
      const bool a_inside = gi < p.m && ga < range.end && (p.a_pattern != Pattern::KAtMostOuter || ga <= gi) &&
                            (p.a_pattern != Pattern::KAtLeastOuter || ga >= gi);
      va[u] = a_inside ? p.a(gi, ga) : T(0);
      const int j = b_along_j ? e % TILE : e / KR, qb = b_along_j ? e / TILE : e % KR;
      const int64_t gj = j0 + j, gb = k0 + qb;
      const bool b_inside = gj < p.n && gb < range.end && (p.b_pattern != Pattern::KAtLeastOuter || gj <= gb) &&
                            (p.b_pattern != Pattern::KAtMostOuter || gj >= gb);
      vb[u] = b_inside ? p.b(gb, gj) : T(0);
    }
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int e = tid + u * kBlockThreads;
      as[(a_along_k ? e % KR : e / TILE) * LDS + (a_along_k ? e / KR : e % TILE)] = va[u];
      bs[(b_along_j ? e / TILE : e % KR) * LDS + (b_along_j ? e % TILE : e / KR)] = vb[u];
    }
    __syncthreads();
    const int steps = static_cast<int>(min(int64_t{KR}, range.end - k0));
#pragma unroll 8
    for (int q = 0; q < steps; ++q) {
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

// ---- element maps -----------------------------------------------------------------------

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

}  // namespace

template <typename T>
void Context::small_product(int64_t m, int64_t n, int64_t k, Operand a, Operand b, void* c, int64_t ldc, double alpha,
                            bool accumulate) const {
  const SmallProduct<T> p{op_view<T>(a), op_view<T>(b), a_pattern(a.desc), b_pattern(b.desc), static_cast<T*>(c), ldc,
                          static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), static_cast<T>(alpha),
                          accumulate};
  // 64-tiles once 32-tiles would be several waves.
  if (((m + 31) / 32) * ((n + 31) / 32) <= 4 * sm_count(device)) launch_small_product<T, 32>(device, p);
  else launch_small_product<T, 64>(device, p);
}

void Context::product(int64_t m, int64_t n, int64_t k, Operand a, Operand b, void* c, int64_t ldc, double alpha,
                      bool accumulate, bool dense) const {
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
    if (is_triangular(p.a.structure) && p.a.zeros_stored) p.a = GemmOperand{Structure::Dense, p.a.trans};
    if (is_triangular(p.b.structure) && p.b.zeros_stored) p.b = GemmOperand{Structure::Dense, p.b.trans};
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
void zero_off_blocks(const char* op, int device, T* out, int64_t n, int64_t block, bool upper) {
  launch_for_each(op, device, n * n, ZeroOffBlocksMap<T>{out, n, block, upper});
}

template void zero_off_blocks<float>(const char*, int, float*, int64_t, int64_t, bool);
template void zero_off_blocks<double>(const char*, int, double*, int64_t, int64_t, bool);

}  // namespace sg::detail::cuda::linalg
