// The CUDA Cholesky factor (CudaBackend::cholesky): recursive over halves, the updates on
// Context::product (cuda/linalg_common.cuh), the diagonal blocks factored by the kernel below.
//  * cholesky_block_kernel factors one diagonal block and inverts its factor in one CTA: the leaves
//    of the recursive Cholesky.
#include <atomic>
#include <cstdint>

#include <structgrad/core/storage.h>
#include "cuda/kernel_util.cuh"
#include "cuda/linalg_batched.cuh"
#include "cuda/linalg_common.cuh"
#include "ops/matrix_batch.h"

namespace sg::detail::cuda::linalg {

namespace {

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

  Operand w_block(int64_t r0, int64_t c0, Structure kind, bool trans) const {
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
             w_block(lo, lo, Structure::UpperTriangular, true), l21, n, 1.0, false, zeros_in_w);
  update(mid, n2, lo, n1);
  run(mid, hi, wants_inverse);
  if (wants_inverse) {
    // W21 = −W22·(L21·W11).
    cx.product(n2, n1, n1, dense(l21, n), w_block(lo, lo, Structure::LowerTriangular, false), panel, n1, 1.0, false,
               zeros_in_w);
    cx.product(n2, n1, n2, w_block(mid, mid, Structure::LowerTriangular, false), dense(panel, n1), cx.at(w, mid * n + lo), n,
               -1.0, false, zeros_in_w);
  }
}

}  // namespace

}  // namespace sg::detail::cuda::linalg

namespace sg::detail::cuda {

using namespace linalg;

void CudaBackend::cholesky(const Tensor& a, Tensor& out, Tensor& info) {
  expect_on_device("cholesky", a);
  expect_on_device("cholesky", out);
  expect_on_device("cholesky", info);
  SG_CHECK(a.dim() >= 2 && a.size(-1) == a.size(-2) && out.shape() == a.shape() && out.dtype() == a.dtype(),
           "cuda cholesky: A ", a.shape(), " ", a.dtype(), " does not fit L ", out.shape(), " ", out.dtype());
  const int64_t count = matrix_count(a);
  SG_CHECK(info.numel() == count && info.dtype() == DType::Int64, "cuda cholesky: info must hold one int64 per matrix");
  if (count == 0) return;
  DeviceGuard guard(device_);
  if (batched::cholesky(a, out, info, device_)) return;  // writes every code
  SG_CUDA_CHECK(cudaMemsetAsync(info.data_ptr(), 0, info.nbytes(), stream(device_)));
  for (int64_t i = 0; i < count; ++i) {
    Tensor li = matrix_of(out, i);
    cholesky_one(matrix_of(a, i), li, static_cast<unsigned long long*>(info.data_ptr()) + i);
  }
}

bool CudaBackend::cholesky_backward(const Tensor& l, const Tensor& dl, Tensor& ds) {
  expect_on_device("cholesky_backward", l);
  expect_on_device("cholesky_backward", dl);
  expect_on_device("cholesky_backward", ds);
  SG_CHECK(l.dim() >= 2 && l.size(-1) == l.size(-2) && dl.shape() == l.shape() && ds.shape() == l.shape() &&
               dl.dtype() == l.dtype() && ds.dtype() == l.dtype(),
           "cuda cholesky_backward: L ", l.shape(), " ", l.dtype(), " does not fit dL ", dl.shape(), " ", dl.dtype(),
           " and dS ", ds.shape(), " ", ds.dtype());
  if (l.numel() == 0) return true;
  DeviceGuard guard(device_);
  return batched::cholesky_backward(l, dl, ds, device_);
}

void CudaBackend::cholesky_one(const Tensor& a, Tensor& out, unsigned long long* info_word) {
  const int64_t n = a.size(-1);
  const cudaStream_t s = stream(device_);
  if (n == 0) return;
  const LinalgTuning options = linalg_tuning();
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
    SG_CHECK(leaf_order == kLeaf || leaf_order == kLeaf / 2, "cuda cholesky: LinalgTuning::cholesky_leaf_",
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
    zero_off_blocks<T>("cholesky", device_, data_of<T>(out), n, leaf_order, true);
  });
}

}  // namespace sg::detail::cuda
