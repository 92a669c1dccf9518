// The library's per-device CUDA state: one non-blocking stream per device on which every
// kernel, copy and cuBLAS call is queued (or the stream of a sg::cuda::StreamGuard), a cuBLAS
// handle per (thread, device) bound to the current stream with a workspace per stream, and a guard
// that makes a device current. Internal to the CUDA backend.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cuda/check.h"

namespace sg::detail::cuda {

/// The stream this thread queues on for `device`: a StreamGuard's, else the library stream
/// (created on first use, never destroyed).
cudaStream_t stream(int device);
/// A cuBLAS handle for this thread and device, bound to stream(device) with that stream's
/// workspace from the caching allocator.
cublasHandle_t cublas_handle(int device);
/// Multiprocessor count of `device` (cached).
int sm_count(int device);
/// Compute capability of `device` as major·10 + minor (90 for Hopper).
int compute_capability(int device);
/// Which way a copy between host memory and a device goes (transfer_stats()).
enum class TransferDirection { HostToDevice, DeviceToHost };
/// Counts one copy of `bytes` between host memory and `device` (sg::cuda::transfer_stats()).
void count_transfer(int device, TransferDirection direction, size_t bytes);
/// True while this thread captures work on `device` into an sg::cuda::Graph (cuda/graph.cpp).
bool capturing(int device);
/// Throws sg::Error unless `device` exists ("cuda:3 is not available: 1 CUDA device(s) found").
void check_device(int device);

/// Makes `device` current for the scope, restoring the previous one after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace sg::detail::cuda
