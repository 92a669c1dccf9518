// CUDA triangular solves and triangular inverses (CudaBackend::solve_triangular, triangular_inverse):
// recursive over halves, the updates on Context::product (cuda/linalg_common.cuh), the diagonal blocks
// inverted by the kernel below; solves with few right-hand sides go to cuda/linalg_few_columns.cu.
//  * invert_blocks_kernel inverts every kLeaf × kLeaf diagonal block of a triangular matrix in one
//    launch, one CTA per block: the leaves of the blocked solve and of the triangular inverse.
#include <atomic>
#include <cstdint>

#include <structgrad/core/storage.h>
#include "cuda/kernel_util.cuh"
#include "cuda/linalg_batched.cuh"
#include "cuda/linalg_common.cuh"
#include "ops/matrix_batch.h"

namespace sg::detail::cuda::linalg {

namespace {

/// The lower view of diagonal block p (first row p0, order m) of op(T) for T [n, n]: op(T) = Tᵀ with
/// `trans`, its rows and columns reversed with `reversed` (an upper op(T)).
template <typename T>
__device__ View<const T> lower_block_view(const T* t, int64_t n, int64_t p0, int m, bool trans, bool reversed) {
  if (!reversed) return {t + p0 * n + p0, trans ? 1 : n, trans ? n : 1};
  const int64_t last = p0 + m - 1;
  return {t + last * n + last, trans ? -1 : -n, trans ? -n : -1};
}

/// Inverts every diagonal block of op(T) (T [n, n], see lower_block_view), one CTA per block: block
/// p's inverse goes to out + p·out_step with rows of ldo, exact zeros in its other triangle. One CTA
/// per SM is asked for (⌈n / NB⌉ CTAs are one wave up to n ≈ NB·SMs), which lets ptxas give a thread
/// up to 255 registers: none spill.
template <typename T, int NB>
__global__ void __launch_bounds__(kBlockThreads, 1)
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

/// The blocked solve op(T)·X = B (left) or X·op(T) = B, recursive over halves split at multiples of
/// kLeaf: solve the half op(T) reaches first, subtract its product from the other half's right-hand
/// side (an accumulating Dense product), solve the other half. A leaf is one product with its block's
/// inverse. The right-hand sides are kept in w, a copy of x, so the leaves write X out of place.
struct BlockedSolve {
  const Context& cx;
  const void* t;
  int64_t n;
  bool trans;
  Structure kind;  // of op(T)
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
    const bool forward = left == (kind == Structure::LowerTriangular);
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
void invert_blocks(int device, const T* t, int64_t n, bool trans, Structure kind, bool unit, T* out,
                   int64_t out_step, int64_t ldo) {
  constexpr int NB = static_cast<int>(kLeaf);
  const auto kernel = invert_blocks_kernel<T, NB>;
  const size_t bytes = tile_bytes<T, NB>();
  static std::atomic<uint64_t> shared_set{0};
  allow_shared(kernel, bytes, device, shared_set);
  const unsigned blocks = static_cast<unsigned>((n + NB - 1) / NB);
  kernel<<<blocks, kBlockThreads, bytes, stream(device)>>>(t, n, trans, kind == Structure::UpperTriangular, unit, out,
                                                            out_step, ldo);
  SG_CUDA_CHECK_LAUNCH("invert_blocks_kernel");
}

}  // namespace

}  // namespace sg::detail::cuda::linalg

namespace sg::detail::cuda {

using namespace linalg;

void CudaBackend::solve_triangular(const Tensor& t, Structure kind, bool trans, bool unit_diagonal, bool left,
                                   const Tensor& b, Tensor& x) {
  expect_on_device("solve_triangular", t);
  expect_on_device("solve_triangular", b);
  expect_on_device("solve_triangular", x);
  SG_CHECK(is_triangular(kind), "cuda solve_triangular: op(T) must be Upper or Lower");
  SG_CHECK(t.dim() >= 2 && t.size(-1) == t.size(-2) && x.dim() >= 2 && t.dtype() == x.dtype() &&
               b.shape() == x.shape() && b.dtype() == x.dtype(),
           "cuda solve_triangular: T ", t.shape(), " ", t.dtype(), " does not fit X ", x.shape(), " ", x.dtype(),
           " and B ", b.shape(), " ", b.dtype());
  const int64_t n = t.size(-1), k = left ? x.size(-1) : x.size(-2), count = matrix_count(x);
  SG_CHECK((left ? x.size(-2) : x.size(-1)) == n && (matrix_count(t) == 1 || matrix_count(t) == count),
           "cuda solve_triangular: T ", t.shape(), " does not fit X ", x.shape());
  if (n == 0 || k == 0 || count == 0) return;
  DeviceGuard guard(device_);
  if (batched::solve_triangular(t, kind, trans, unit_diagonal, left, b, x, device_)) return;
  if (b.data_ptr() != x.data_ptr())
    SG_CUDA_CHECK(cudaMemcpyAsync(x.data_ptr(), b.data_ptr(), x.nbytes(), cudaMemcpyDeviceToDevice, stream(device_)));
  const bool shared_t = matrix_count(t) == 1;
  for (int64_t i = 0; i < count; ++i) {
    const Tensor ti = shared_t ? t : matrix_of(t, i);
    Tensor xi = matrix_of(x, i);
    solve_one(ti, kind, trans, unit_diagonal, left, xi);
  }
}

void CudaBackend::solve_one(const Tensor& t, Structure kind, bool trans, bool unit_diagonal, bool left, Tensor& x) {
  const int64_t n = t.size(-1), k = left ? x.size(-1) : x.size(-2);
  const LinalgTuning options = linalg_tuning();
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

void CudaBackend::triangular_inverse(const Tensor& t, Structure kind, bool unit_diagonal, Tensor& out) {
  expect_on_device("triangular_inverse", t);
  expect_on_device("triangular_inverse", out);
  SG_CHECK(is_triangular(kind), "cuda triangular_inverse: T must be Upper or Lower");
  SG_CHECK(t.dim() >= 2 && t.size(-1) == t.size(-2) && out.shape() == t.shape() && out.dtype() == t.dtype(),
           "cuda triangular_inverse: T ", t.shape(), " ", t.dtype(), " does not fit the output ", out.shape(), " ",
           out.dtype());
  const int64_t n = t.size(-1), count = matrix_count(t);
  if (n == 0 || count == 0) return;
  SG_CHECK(out.data_ptr() != t.data_ptr(), "cuda triangular_inverse: the output must not alias T");
  DeviceGuard guard(device_);
  if (batched::triangular_inverse(t, kind, unit_diagonal, out, device_)) return;
  for (int64_t i = 0; i < count; ++i) {
    Tensor oi = matrix_of(out, i);
    inverse_one(matrix_of(t, i), kind, unit_diagonal, oi);
  }
}

void CudaBackend::inverse_one(const Tensor& t, Structure kind, bool unit_diagonal, Tensor& out) {
  const int64_t n = t.size(-1);
  const LinalgTuning options = linalg_tuning();
  const bool lower = kind == Structure::LowerTriangular;
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Context cx{*this, t.dtype(), sizeof(T), device_, options};
    T* o = data_of<T>(out);
    zero_off_blocks<T>("triangular_inverse", device_, o, n, kLeaf, lower);
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
