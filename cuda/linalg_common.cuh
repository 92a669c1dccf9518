// What the CUDA linear algebra's files share on the host: the per-call Context, whose product() runs
// every update of the recursions, the operands it takes, and the split of a range into halves.
// Defined in cuda/linalg_common.cu; the kernels' building blocks are in cuda/linalg_tiles.cuh.
//
// The triangular solves (cuda/linalg_solve.cu, cuda/linalg_few_columns.cu), Cholesky factors
// (cuda/linalg_cholesky.cu) and triangular inverses (cuda/linalg_solve.cu) run their N³ work on the
// library's GEMM (CudaBackend::gemm: cuBLAS for the Dense·Dense updates, the structured GEMM for
// products with a triangular operand), always in exact arithmetic; the diagonal blocks get kernels of
// their own, each described in its file, and the smallest products run on small_product_kernel
// (cuda/linalg_common.cu).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/cuda_backend.h"
#include "cuda/linalg_tuning.h"
#include "cuda/linalg_tiles.cuh"

namespace sg::detail::cuda::linalg {

/// The split point of [lo, hi): half of its leaves of order `leaf` (rounded up) on the first side.
inline int64_t split(int64_t lo, int64_t hi, int64_t leaf = kLeaf) {
  const int64_t blocks = (hi - lo + leaf - 1) / leaf;
  return lo + leaf * ((blocks + 1) / 2);
}

/// An operand of one product: its storage, row stride and descriptor.
struct Operand {
  const void* data;
  int64_t ld;
  GemmOperand desc;
};

inline Operand dense(const void* data, int64_t ld, bool trans = false) {
  return {data, ld, GemmOperand{Structure::Dense, trans}};
}

/// What one call works with: the backend's GEMM, the dtype and the options read once.
struct Context {
  CudaBackend& backend;
  DType dtype;
  size_t bytes;  // of an element
  int device;
  LinalgTuning options;

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
               bool accumulate = false, bool dense = false) const;

  /// product() on small_product_kernel (defined beside it, in cuda/linalg_common.cu).
  template <typename T>
  void small_product(int64_t m, int64_t n, int64_t k, Operand a, Operand b, void* c, int64_t ldc, double alpha,
                     bool accumulate) const;
};

/// The order of the largest first half in the recursions over [0, n) with leaves of order `leaf`:
/// every product's scratch fits in its square.
inline int64_t largest_half(int64_t n, int64_t leaf = kLeaf) { return n <= leaf ? n : split(0, n, leaf); }

/// The one-launch solve (few right-hand sides): L·X' = B' for the lower view of op(T) (left) or of
/// op(T)ᵀ (right: X·op(T) = B is op(T)ᵀ·Xᵀ = Bᵀ), reversed where that view is upper.
template <typename T>
void solve_few_columns(int device, const T* t, int64_t n, Structure kind, bool trans, bool unit, bool left, T* x,
                       int64_t k);

/// Exact zeros in the strict upper (or lower) triangle of out [n, n] outside its diagonal blocks of
/// `block`, which the block kernels write themselves; `op` names the launch in errors.
template <typename T>
void zero_off_blocks(const char* op, int device, T* out, int64_t n, int64_t block, bool upper);

}  // namespace sg::detail::cuda::linalg
