// Storage: one contiguous allocation on one device, shared by the tensors that view it.
// Host memory comes from an aligned malloc through a bounded cache of freed blocks; device memory
// from the CUDA caching allocator.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include <structgrad/core/types.h>

struct CUstream_st;  // what cudaStream_t points at, so that this header needs no CUDA header

namespace sg {

/// One contiguous allocation on one device, shared by the tensors that view it (internal to
/// Tensor; users see it only through data_ptr()). Example: `t.impl().storage->nbytes`.
struct Storage {
  /// Allocates `nbytes` on `device` (aligned host memory, or the CUDA caching allocator).
  Storage(size_t nbytes, Device device);
  /// Memory allocated elsewhere: the storage uses it as it is and, when the last tensor lets it go,
  /// hands it to `release` instead of freeing it (memory owned by a pool or by another library).
  Storage(void* data, size_t nbytes, Device device, std::function<void(Storage&)> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data = nullptr;  ///< first byte (host or device memory)
  size_t nbytes = 0;     ///< size of the allocation
  Device device;         ///< where it lives
  /// Bumped by every in-place write (optimizer steps, copy_, fill_): autograd uses it to
  /// detect a saved tensor that was modified before backward.
  std::atomic<uint64_t> version{0};
  /// Bumped by every view of this memory as another shape or structure than the tensor it was made
  /// for (a Dense view of an UpperTriangular tensor, say), which may write what that tensor's
  /// invariant excludes without a version bump. With `version`, it tells the owner of memory handed
  /// in by the second constructor whether the memory is as the first tensor left it.
  std::atomic<uint64_t> reinterpretations{0};
  /// Set by sg::cuda::record_stream: work on streams other than the allocating one uses this
  /// memory, so its owner must not hand it to the allocating stream again before that work is done.
  std::atomic<bool> used_on_other_streams{false};

 private:
  std::function<void(Storage&)> release_;
};

/// Counters of a device's caching allocator (`sg::cuda::allocator_stats()`).
struct AllocatorStats {
  size_t bytes_in_use = 0;        ///< bytes held by live tensors (rounded block sizes)
  size_t bytes_cached = 0;        ///< bytes in free lists, ready for reuse
  size_t peak_bytes_in_use = 0;     ///< the largest bytes_in_use seen
  uint64_t num_device_mallocs = 0;  ///< real cudaMalloc calls
  uint64_t num_device_frees = 0;    ///< real cudaFree calls
  uint64_t num_allocations = 0;     ///< requests served (from cache or cudaMalloc)
  uint64_t num_cache_hits = 0;      ///< requests served from a free list
};

/// Counters of host (CPU) tensor memory: bytes held by live storages, allocations made, and the
/// freed blocks kept for reuse (bytes_cached, num_cache_hits; at most 256 MiB, blocks up to 32 MiB).
/// Example: `auto before = sg::host_memory_stats().bytes_in_use;`
AllocatorStats host_memory_stats();

namespace detail {
/// The device allocator Storage uses (cuda/allocator.cpp; a clear error in a build without CUDA).
void* device_allocate(Device device, size_t nbytes);
/// Gives a block of device_allocate back to the cache.
void device_free(Device device, void* ptr, size_t nbytes);
/// Marks a block of device_allocate as used by work queued on `stream` too: once freed, it is
/// reused only after that work (sg::cuda::record_stream). Memory the allocator did not hand out is
/// left alone.
void record_stream_use(Device device, void* ptr, CUstream_st* stream);
/// An opaque id of the stream this thread queues work on for `device` (the library stream, or a
/// sg::cuda::StreamGuard's), for state that work on two streams must not share.
uintptr_t current_stream_id(Device device);
}  // namespace detail

}  // namespace sg
