// The CUDA runtime as structgrad users see it: availability, the library stream's
// synchronisation point and the caching allocator's counters. Works without CUDA too
// (is_available() is then false and the rest throws a clear sg::Error).
#pragma once

#include <structgrad/core/storage.h>

namespace sg {
class Tensor;
}

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
/// Copies between host memory and one device, as counted by transfer_stats().
struct TransferStats {
  uint64_t host_to_device = 0;        ///< copies from host memory to the device
  uint64_t device_to_host = 0;        ///< copies from the device to host memory
  uint64_t bytes_host_to_device = 0;  ///< their bytes
  uint64_t bytes_device_to_host = 0;  ///< their bytes
};
/// Every copy structgrad made between host memory and `device`: tensor uploads and downloads, and
/// the values read back by checks (a structure or index check, item()). Example: a training loop
/// whose data stays on the device leaves `sg::cuda::transfer_stats().host_to_device` unchanged.
TransferStats transfer_stats(int device = 0);
/// Returns every cached (free) block of every device to the driver.
void empty_cache();
/// Human-readable device name, e.g. "NVIDIA H100 80GB HBM3".
std::string device_name(int device = 0);

/// Queues this thread's work on `device` on `stream` (null: the legacy default stream) instead of
/// the library stream, for the guard's scope, as a binding runs on PyTorch's current stream. Work
/// under guards on different streams may overlap; memory, plans and cuBLAS workspaces follow the
/// stream (docs/reliability.md). Synchronise a stream before destroying it: its cached state is
/// keyed by its handle. Example: `sg::cuda::StreamGuard guard(side_stream, 0);`
class StreamGuard {
 public:
  StreamGuard(CUstream_st* stream, int device);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  CUstream_st* previous_ = nullptr;
  bool previous_set_ = false;
  int device_ = 0;
};

/// Device memory functions of another library, such as PyTorch's caching allocator. `allocate`
/// returns `nbytes` on `device` for work queued on `stream` (null only with an exception);
/// `deallocate` takes back what it returned.
struct ExternalAllocator {
  void* (*allocate)(size_t nbytes, int device, CUstream_st* stream) = nullptr;
  void (*deallocate)(void* ptr, int device) = nullptr;
};

/// Declares that work queued on `stream` uses `tensor`'s memory, as torch's Tensor.record_stream:
/// when the memory is freed, it is not handed out again before that work completes. Needed only
/// where a tensor allocated under one stream is used by work queued on another and freed before
/// that stream is synchronised; refused under use_external_allocator, whose own rules apply.
/// Example: `sg::cuda::record_stream(batch, copy_stream);`
void record_stream(const Tensor& tensor, CUstream_st* stream);

/// Takes every later device allocation of structgrad from `allocator` instead of its own cache, so
/// that memory follows the other library's stream rules. Call it once, before the first device
/// allocation; an sg::Error otherwise. Example: `sg::cuda::use_external_allocator({alloc, free});`
void use_external_allocator(const ExternalAllocator& allocator);

}  // namespace sg::cuda
