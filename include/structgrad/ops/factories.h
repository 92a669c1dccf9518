// Tensor factories (like torch::zeros / torch::randn) and the seeded random generator.
// Random numbers are counter-based: the same seed gives the same numbers on CPU and CUDA.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include <structgrad/core/tensor.h>

namespace sg {

/// Example: `auto z = sg::zeros({2, 3}, sg::TensorOptions().dtype(sg::kFloat64));`
Tensor zeros(const Shape& shape, TensorOptions options = {});
/// Example: `auto o = sg::ones({4}, sg::kCUDA);`
Tensor ones(const Shape& shape, TensorOptions options = {});
/// Example: `auto h = sg::full({2, 2}, 0.5);`
Tensor full(const Shape& shape, double value, TensorOptions options = {});
/// The n×n identity (Dense; see UpperTriangular::eye / Symmetric::eye for typed ones).
/// Example: `auto i = sg::eye(3);`
Tensor eye(int64_t n, TensorOptions options = {});
/// 0, 1, …, n−1 (float32 unless the options name a dtype; sg::kInt64 for indices). Example: `sg::arange(5)`.
Tensor arange(int64_t n, TensorOptions options = {});
/// start, start+step, … below end. Example: `sg::arange(0.0, 1.0, 0.25)`.
Tensor arange(double start, double end, double step, TensorOptions options = {});
/// Uniform in [0, 1). Example: `auto u = sg::rand({3, 3});`
Tensor rand(const Shape& shape, TensorOptions options = {});
/// Standard normal. Example: `auto x = sg::randn({1024, 16}, sg::kCUDA);`
Tensor randn(const Shape& shape, TensorOptions options = {});
/// Zeros of t's shape, dtype and device (Dense). Example: `auto z = sg::zeros_like(x);`
Tensor zeros_like(const Tensor& t);
/// Ones of t's shape, dtype and device (Dense). Example: `y.backward(sg::ones_like(y));`
Tensor ones_like(const Tensor& t);

/// A 1-D tensor from values. Example: `auto v = sg::tensor({1.0, 2.0, 3.0});`
Tensor tensor(std::initializer_list<double> values, TensorOptions options = {});
/// A 2-D tensor from rows. Example: `auto m = sg::tensor({{1.0, 2.0}, {3.0, 4.0}});`
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, TensorOptions options = {});
/// A tensor of `shape` from row-major values, float64 unless the options name a dtype (like
/// from_eigen of a MatrixXd). Example: `sg::from_vector(v, {2, 3})`.
Tensor from_vector(const std::vector<double>& values, const Shape& shape, TensorOptions options = {});
/// The same from floats: float32 unless the options name a dtype. Example: `sg::from_vector(std::vector<float>{1, 2}, {2})`.
Tensor from_vector(const std::vector<float>& values, const Shape& shape, TensorOptions options = {});
/// The same from integers: int64 (an index tensor) unless the options name a dtype.
/// Example: `auto idx = sg::from_vector(std::vector<int64_t>{3, 0, 2}, {3});`
Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape, TensorOptions options = {});
/// @{
/// A 1-D tensor of the values, with the dtype rules above. Example: `sg::from_vector(std::vector<int64_t>{1, 4})`.
Tensor from_vector(const std::vector<double>& values, TensorOptions options = {});
Tensor from_vector(const std::vector<float>& values, TensorOptions options = {});
Tensor from_vector(const std::vector<int64_t>& values, TensorOptions options = {});
/// @}

/// Integers uniform in [low, high), int64 unless the options name a dtype; counter-based like
/// randn, so a seed gives the same numbers on every device. Example: `sg::randint(0, 10, {4})`.
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options = {});
/// A random permutation of 0 … n−1, int64 unless the options name a dtype; the same for a seed
/// on every device. Example: `auto order = sg::randperm(n, sg::kCUDA);`
Tensor randperm(int64_t n, TensorOptions options = {});

/// Seeds the global generator and restarts its counter. Example: `sg::manual_seed(42);`
void manual_seed(uint64_t seed);

namespace detail {
/// Reserves `count` counters of the global generator; returns (seed, first counter).
std::pair<uint64_t, uint64_t> reserve_random(uint64_t count);
}  // namespace detail

}  // namespace sg
