// Eigen interop (header-only): copy a tensor to an Eigen matrix and back.
// Example: `Eigen::MatrixXd m = sg::to_eigen<double>(t);  auto t2 = sg::from_eigen(m);`
#pragma once

#include <Eigen/Dense>

#include <structgrad/ops/factories.h>
#include <structgrad/core/tensor.h>

namespace sg {

/// A tensor [rows, cols] holding a copy of `m` (dtype from the scalar type).
template <typename Derived>
Tensor from_eigen(const Eigen::MatrixBase<Derived>& m, Device device = Device()) {
  using Scalar = typename Derived::Scalar;
  static_assert(std::is_same<Scalar, float>::value || std::is_same<Scalar, double>::value,
                "from_eigen: float or double matrices only");
  std::vector<double> values(static_cast<size_t>(m.rows() * m.cols()));
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) values[i * m.cols() + j] = static_cast<double>(m(i, j));
  const DType dtype = std::is_same<Scalar, float>::value ? DType::Float32 : DType::Float64;
  return from_vector(values, {m.rows(), m.cols()}, TensorOptions().dtype(dtype).device(device));
}

/// A copy of a 1-D or 2-D tensor as an Eigen matrix of T (a 1-D tensor becomes a column).
template <typename T>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> to_eigen(const Tensor& t) {
  SG_CHECK(t.defined(), "to_eigen: the tensor is undefined");
  SG_CHECK(t.dim() == 1 || t.dim() == 2, "to_eigen: expected a 1-D or 2-D tensor, got shape ", t.shape());
  const int64_t rows = t.dim() == 2 ? t.size(0) : t.size(0), cols = t.dim() == 2 ? t.size(1) : 1;
  const std::vector<T> v = t.to_vector_as<T>();
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> m(rows, cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m(i, j) = v[static_cast<size_t>(i * cols + j)];
  return m;
}

}  // namespace sg
