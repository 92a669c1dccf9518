// The plain Eigen reference for every structured product: build op(A) and op(B) as dense
// matrices through triangularView / selfadjointView (so only the triangle a descriptor
// allows is ever read), multiply, apply the output mask. Tests compare every fast path here.
#include <Eigen/Dense>

#include <structgrad/core/error.h>
#include "ops/cpu/cpu_gemm.h"

namespace sg::detail::cpu {
namespace {

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// op(X) as a dense matrix of `rows`×`cols`, honouring the descriptor; storage rows `ld` apart
// (0: packed).
template <typename S, typename T>
RowMat<T> logical_operand(const void* data, GemmOperand d, int64_t rows, int64_t cols, int64_t ld) {
  const int64_t srows = d.trans ? cols : rows, scols = d.trans ? rows : cols;
  Eigen::Map<const RowMat<S>, 0, Eigen::OuterStride<>> stored(static_cast<const S*>(data), srows, scols,
                                                              Eigen::OuterStride<>(ld > 0 ? ld : scols));
  RowMat<T> x = d.trans ? RowMat<T>(stored.transpose().template cast<T>())
                        : RowMat<T>(stored.template cast<T>());
  switch (d.structure) {
    case Structure::Dense: return x;
    case Structure::UpperTriangular: return x.template triangularView<Eigen::Upper>();
    case Structure::LowerTriangular: return x.template triangularView<Eigen::Lower>();
    case Structure::Symmetric: {
      // Read the upper triangle of the storage only (the storage is square).
      RowMat<T> s = stored.template cast<T>();
      return s.template selfadjointView<Eigen::Upper>();
    }
  }
  return x;
}

template <typename S, typename T>
RowMat<T> reference_product(const GemmProblem& p) {
  RowMat<T> a = logical_operand<S, T>(p.a_data, p.a, p.m, p.k, p.lda);
  RowMat<T> b = logical_operand<S, T>(p.b_data, p.b, p.k, p.n, p.ldb);
  RowMat<T> c = RowMat<T>::Zero(p.m, p.n);
  if (p.k > 0) c.noalias() = a * b;
  c *= static_cast<T>(p.alpha);
  if (p.mask == Structure::UpperTriangular) {
    c = RowMat<T>(c.template triangularView<Eigen::Upper>());
  } else if (p.mask == Structure::Symmetric) {
    RowMat<T> upper = c;
    c = upper.template selfadjointView<Eigen::Upper>();
  }
  return c;
}

void check_problem(const GemmProblem& p) {
  SG_CHECK(p.m >= 0 && p.n >= 0 && p.k >= 0, "gemm: negative sizes");
  SG_CHECK(is_output_mask(p.mask), "gemm: no kernel writes ", with_article(structure_name(p.mask)), " output");
  if (p.mask != Structure::Dense) SG_CHECK(p.m == p.n, "gemm: a structured output mask needs a square result");
  if (p.a.structure == Structure::Symmetric) SG_CHECK(p.m == p.k, "gemm: symmetric A must be square");
  if (p.b.structure == Structure::Symmetric) SG_CHECK(p.k == p.n, "gemm: symmetric B must be square");
}

}  // namespace

void reference_gemm(const GemmProblem& p, DType dtype) {
  check_problem(p);
  if (dtype == DType::Float32) {
    RowMat<float> c = reference_product<float, float>(p);
    Eigen::Map<RowMat<float>>(static_cast<float*>(p.c_data), p.m, p.n) = c;
  } else {
    RowMat<double> c = reference_product<double, double>(p);
    Eigen::Map<RowMat<double>>(static_cast<double*>(p.c_data), p.m, p.n) = c;
  }
}

void reference_gemm_f64(const GemmProblem& p, DType dtype, double* c_out) {
  check_problem(p);
  RowMat<double> c = dtype == DType::Float32 ? reference_product<float, double>(p)
                                             : reference_product<double, double>(p);
  Eigen::Map<RowMat<double>>(c_out, p.m, p.n) = c;
}

void dense_gemm(const GemmProblem& p, DType dtype) {
  SG_CHECK(p.a.structure == Structure::Dense && p.b.structure == Structure::Dense && p.mask == Structure::Dense,
           "dense_gemm: called with a structured descriptor");
  auto run = [&](auto zero) {
    using T = decltype(zero);
    using Stride = Eigen::OuterStride<>;
    const int64_t ar = p.a.trans ? p.k : p.m, ac = p.a.trans ? p.m : p.k;
    const int64_t br = p.b.trans ? p.n : p.k, bc = p.b.trans ? p.k : p.n;
    Eigen::Map<const RowMat<T>, 0, Stride> a(static_cast<const T*>(p.a_data), ar, ac, Stride(p.lda));
    Eigen::Map<const RowMat<T>, 0, Stride> b(static_cast<const T*>(p.b_data), br, bc, Stride(p.ldb));
    Eigen::Map<RowMat<T>, 0, Stride> c(static_cast<T*>(p.c_data), p.m, p.n, Stride(p.ldc));
    const T alpha = static_cast<T>(p.alpha);
    if (p.k == 0) {
      if (!p.accumulate) c.setZero();
      return;
    }
    if (!p.accumulate) c.setZero();
    if (!p.a.trans && !p.b.trans) c.noalias() += alpha * (a * b);
    else if (p.a.trans && !p.b.trans) c.noalias() += alpha * (a.transpose() * b);
    else if (!p.a.trans && p.b.trans) c.noalias() += alpha * (a * b.transpose());
    else c.noalias() += alpha * (a.transpose() * b.transpose());
  };
  if (dtype == DType::Float32) run(0.0f); else run(0.0);
}

}  // namespace sg::detail::cpu
