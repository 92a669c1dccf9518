// Storage: one contiguous allocation on one device, shared by the tensors that view it.
// Host memory comes from an aligned malloc; device memory from the CUDA caching allocator.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "types.h"

namespace sg {

/// Zeros below the diagonal: the memory at an allocation's first byte holds a rows × cols matrix
/// of `element`-byte entries in rows of `ld` entries whose every entry below the diagonal (column
/// < row) is exactly zero (all bytes 0), as an UpperTriangular tensor's storage does (DESIGN §1).
/// element == 0: nothing known. A CUDA block keeps it from the storage that freed it to the one
/// that asks for it next (Storage's second constructor), so that an UpperTriangular product
/// whose output lands in such a block need not write those zeros again (GemmProblem::c_zeros_stored;
/// docs/structured_gemm.md, "Outputs whose zeros are already there").
struct ZerosBelow {
  int64_t rows = 0, cols = 0, ld = 0;
  int32_t element = 0;
  bool known() const { return element != 0; }
  bool operator==(const ZerosBelow& o) const {
    return rows == o.rows && cols == o.cols && ld == o.ld && element == o.element;
  }
};

/// One contiguous allocation on one device, shared by the tensors that view it (internal to
/// Tensor; users see it only through data_ptr()). Example: `t.impl().storage->nbytes`.
struct Storage {
  /// Allocates `nbytes` on `device` (aligned host memory, or the CUDA caching allocator).
  Storage(size_t nbytes, Device device);
  /// As above; on a CUDA device, the allocator hands over a cached block that holds `wanted`
  /// (freed by a storage that held it) where it has one; zeros_below() then says so.
  Storage(size_t nbytes, Device device, const ZerosBelow& wanted);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// True when the memory holds `z` now: it held it when it was marked (or handed over) and no
  /// write counted by `version` came since, nor a view of it as anything but what it was.
  bool holds_zeros_below(const ZerosBelow& z) const {
    return z.known() && zeros_below_ == z && !zeros_forgotten_.load() && version.load() == zeros_version_;
  }
  /// Records that the memory holds `z` as of now (after an UpperTriangular product has written it).
  /// Call before the storage is shared: only the code that made it may mark it.
  void mark_zeros_below(const ZerosBelow& z) {
    zeros_below_ = z;
    zeros_version_ = version.load();
    zeros_forgotten_.store(false);
  }
  /// Forgets what mark_zeros_below recorded, for good (a view of it as another structure or shape,
  /// whose writes the invariant of an UpperTriangular tensor no longer covers).
  void forget_zeros_below() { zeros_forgotten_.store(true); }

  void* data = nullptr;  ///< first byte (host or device memory)
  size_t nbytes = 0;     ///< size of the allocation
  Device device;         ///< where it lives
  /// Bumped by every in-place write (optimizer steps, copy_, fill_): autograd uses it to
  /// detect a saved tensor that was modified before backward.
  std::atomic<uint64_t> version{0};

 private:
  ZerosBelow zeros_below_;
  uint64_t zeros_version_ = 0;
  std::atomic<bool> zeros_forgotten_{false};
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

/// Counters of host (CPU) tensor memory: bytes held by live storages and allocations made.
/// Example: `auto before = sg::host_memory_stats().bytes_in_use;`
AllocatorStats host_memory_stats();

namespace detail {
/// Raw allocation entry points used by Storage; CUDA ones live in cuda/allocator.cpp.
/// `wanted` known: a cached block that holds it is handed over first, and *held says whether the
/// block holds it (else *held is false). `held` may be null where nothing is wanted.
void* device_allocate(Device device, size_t nbytes, const ZerosBelow& wanted = {}, bool* held = nullptr);
/// Gives a block back to the cache; `holds` is what it holds (ZerosBelow{}: nothing known).
void device_free(Device device, void* ptr, size_t nbytes, const ZerosBelow& holds = {});
/// Whether UpperTriangular products on CUDA ask for blocks that hold their zeros (default on; off:
/// every such product writes its zeros, the benchmark's `--no-zeros-reuse`). Thread-safe.
void set_output_zeros_reuse(bool on);
bool output_zeros_reuse();
}  // namespace detail

}  // namespace sg
