// The CUDA runtime as structgrad users see it: availability, the library stream's
// synchronisation point and the caching allocator's counters. Works without CUDA too
// (is_available() is then false and the rest throws a clear sg::Error).
#pragma once

#include <structgrad/core/storage.h>

namespace sg::cuda {

/// True when structgrad was built with CUDA and a device is present.
/// Example: `auto dev = sg::cuda::is_available() ? sg::kCUDA : sg::kCPU;`
bool is_available();
/// Number of CUDA devices (0 without CUDA or without a driver).
int device_count();
/// True when this build contains the CUDA backend.
bool built_with_cuda();
/// Waits for all work queued on the library's stream of `device`.
void synchronize(int device = 0);
/// Counters of the caching allocator of `device`.
AllocatorStats allocator_stats(int device = 0);
/// Returns every cached (free) block of every device to the driver.
void empty_cache();
/// Human-readable device name, e.g. "NVIDIA H100 80GB HBM3".
std::string device_name(int device = 0);

}  // namespace sg::cuda
