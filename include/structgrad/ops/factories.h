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
/// 0, 1, …, n−1. Example: `sg::arange(5)`.
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
/// A tensor of `shape` from row-major values. Example: `sg::from_vector(v, {2, 3})`.
Tensor from_vector(const std::vector<double>& values, const Shape& shape, TensorOptions options = {});
/// The same from floats. Example: `sg::from_vector(std::vector<float>{1, 2}, {2})`.
Tensor from_vector(const std::vector<float>& values, const Shape& shape, TensorOptions options = {});

/// Seeds the global generator and restarts its counter. Example: `sg::manual_seed(42);`
void manual_seed(uint64_t seed);

namespace detail {
/// Reserves `count` counters of the global generator; returns (seed, first counter).
std::pair<uint64_t, uint64_t> reserve_random(uint64_t count);
}  // namespace detail

}  // namespace sg
