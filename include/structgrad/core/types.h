// The small value types every tensor carries: DType, Device, Structure and Shape,
// with their printing. Nothing here allocates device memory or depends on CUDA.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <structgrad/core/error.h>

namespace sg {

/// Element type. Example: `sg::zeros({2, 2}, sg::kFloat64)`. Int64 holds indices (like
/// torch.long): index tensors, argmax results, randperm; it is never differentiable.
enum class DType : uint8_t { Float32, Float64, Int64 };
/// @{
/// Shorthands for the dtypes, as in libtorch. Example: `sg::randn({3}, sg::kFloat64)`.
constexpr DType kFloat32 = DType::Float32;
constexpr DType kFloat64 = DType::Float64;
constexpr DType kInt64 = DType::Int64;
/// @}

/// Bytes per element of `dtype`. Example: `sg::element_size(sg::kFloat64) == 8`.
size_t element_size(DType dtype);
/// "float32", "float64" or "int64".
const char* dtype_name(DType dtype);
/// True for float32 and float64. Example: `sg::is_floating_point(sg::kInt64) == false`.
bool is_floating_point(DType dtype);

/// The kind of a Device. Example: `sg::Device(sg::DeviceType::CUDA, 1)` is cuda:1.
enum class DeviceType : uint8_t { CPU, CUDA };

/// Where a tensor lives: `cpu` or `cuda:N`. Example: `sg::Device("cuda:0")`.
struct Device {
  DeviceType type = DeviceType::CPU;  ///< cpu or cuda
  int index = 0;                     ///< the N of cuda:N (0 for cpu)

  Device() = default;
  /// Example: `sg::Device(sg::DeviceType::CUDA, 0)`.
  Device(DeviceType t, int i = 0) : type(t), index(i) {}
  /// Parses "cpu", "cuda" (= cuda:0) or "cuda:N"; throws sg::Error otherwise.
  Device(const std::string& spec);
  /// Same as Device(std::string(spec)), so a literal converts: `t.to("cuda:0")`.
  Device(const char* spec) : Device(std::string(spec)) {}

  /// @{
  /// The device's kind. Example: `if (t.device().is_cuda()) sg::cuda::synchronize();`
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  /// @}
  /// "cpu" or "cuda:N". Example: `std::printf("%s\n", t.device().str().c_str());`
  std::string str() const;
  /// @{
  /// Equal when the kinds match and, for CUDA, the indices. Example: `a.device() == sg::kCPU`.
  bool operator==(const Device& o) const { return type == o.type && (type == DeviceType::CPU || index == o.index); }
  bool operator!=(const Device& o) const { return !(*this == o); }
  /// @}
};
/// @{
/// The CPU and the first CUDA device. Example: `auto x = sg::randn({3, 3}, sg::kCUDA);`
const Device kCPU{DeviceType::CPU, 0};
const Device kCUDA{DeviceType::CUDA, 0};
/// @}

/// The structure tag of a matrix, or of each matrix of a batch [..., n, n] (docs/semantics.md).
/// Structured tensors are square in their last two dimensions and keep their invariant through every
/// op: Upper has exact zeros below the diagonal, Lower above it, Symmetric is mirrored bit for bit.
/// Storage is always the full n×n row-major matrix.
enum class Structure : uint8_t { Dense, UpperTriangular, Symmetric, LowerTriangular };
/// "Dense", "UpperTriangular", "Symmetric" or "LowerTriangular". Example: `sg::structure_name(u.structure())`.
const char* structure_name(Structure s);

/// Tensor shape, outermost dimension first. Printed as [2, 5].
using Shape = std::vector<int64_t>;
/// The number of elements of a shape (1 for []). Example: `sg::shape_numel({2, 3}) == 6`.
int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);

/// @{
/// Prints the name: float32, cuda:0, UpperTriangular. Example: `std::cout << t.dtype();`
std::ostream& operator<<(std::ostream& out, DType d);
std::ostream& operator<<(std::ostream& out, const Device& d);
std::ostream& operator<<(std::ostream& out, Structure s);
/// @}

}  // namespace sg
