// Launch helpers shared by the CUDA backend's kernel files: grid-stride launches on the library
// stream and dispatch on the dtype. Internal to cuda/.
#pragma once

#include <algorithm>
#include <cstdint>

#include <structgrad/core/tensor.h>
#include "cuda/check.h"
#include "cuda/runtime.h"

namespace sg::detail::cuda {

constexpr int kThreads = 256;  // threads per block of the 1-D kernels

/// Blocks for a grid-stride loop over n items: enough to fill the device, no more.
inline unsigned int grid_for(int device, int64_t n) {
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  const int64_t cap = int64_t{sm_count(device)} * 32;
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min(wanted, cap)));
}

/// Runs f(i) for every i in [0, n), grid-stride.
template <typename IndexFunction>
__global__ void for_each_index_kernel(int64_t n, IndexFunction f) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

/// Queues f(i) for every i in [0, n) on the library stream of `device`.
template <typename IndexFunction>
void launch_for_each(const char* kernel_name, int device, int64_t n, const IndexFunction& f) {
  if (n <= 0) return;
  for_each_index_kernel<<<grid_for(device, n), kThreads, 0, stream(device)>>>(n, f);
  SG_CUDA_CHECK_LAUNCH(kernel_name);
}

/// Calls fn(T{}) with T = float or double; the floating-point kernels take no int64.
template <typename Fn>
void dispatch_dtype(DType dtype, Fn&& fn) {
  SG_CHECK(is_floating_point(dtype), "cuda kernel: expected a floating-point tensor, got ", dtype);
  if (dtype == DType::Float32) {
    fn(float{});
  } else {
    fn(double{});
  }
}

/// Calls fn(T{}) with T = float, double or int64_t: the kernels that move or compare values.
template <typename Fn>
void dispatch_any(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: fn(float{}); break;
    case DType::Float64: fn(double{}); break;
    case DType::Int64: fn(int64_t{}); break;
  }
}

template <typename T>
T* data_of(Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}
template <typename T>
const T* data_of(const Tensor& t) {
  return static_cast<const T*>(t.data_ptr());
}

}  // namespace sg::detail::cuda
