// Storage allocation: 64-byte aligned host memory, kept for reuse in a small cache of freed blocks,
// or a block of the CUDA caching allocator.
#include <structgrad/core/storage.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include <structgrad/core/error.h>

namespace sg {

namespace {
std::atomic<size_t> host_bytes_in_use{0};
std::atomic<size_t> host_peak{0};
std::atomic<uint64_t> host_allocations{0};

/// Freed host blocks kept for the next request of the same rounded size. A training step allocates
/// the same sizes every step; without the cache each 64 KiB–1 MiB block went back to malloc, which
/// trimmed the heap and faulted the pages in again on the next step (a fifth of a d = 16 step of
/// bench_train_step under perf). Bounded: blocks above kMaxCachedBlock are not kept, nor any block
/// that would take the cache past kMaxCachedBytes. Off under AddressSanitizer, so that a read of a
/// freed tensor's memory is still caught.
class HostBlockCache {
 public:
  static constexpr size_t kMaxCachedBlock = size_t{32} << 20;
  static constexpr size_t kMaxCachedBytes = size_t{256} << 20;

  /// A cached block of `bytes` (a multiple of 64), or nullptr.
  void* take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(bytes);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* block = it->second.back();
    it->second.pop_back();
    cached_bytes_ -= bytes;
    ++hits_;
    return block;
  }

  /// Keeps `block` of `bytes` for reuse; false when the cache is full (the caller frees it).
  bool give(void* block, size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
    (void)block, (void)bytes;
    return false;
#else
    if (bytes > kMaxCachedBlock) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_bytes_ + bytes > kMaxCachedBytes) return false;
    free_[bytes].push_back(block);
    cached_bytes_ += bytes;
    return true;
#endif
  }

  size_t cached_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_bytes_;
  }
  uint64_t hits() {
    std::lock_guard<std::mutex> lock(mutex_);
    return hits_;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_bytes_ = 0;
  uint64_t hits_ = 0;
};

/// Never destroyed: storages freed during static destruction still find it.
HostBlockCache& host_cache() {
  static HostBlockCache* cache = new HostBlockCache;
  return *cache;
}

size_t host_block_size(size_t bytes) { return (bytes + 63) / 64 * 64; }
}  // namespace

AllocatorStats host_memory_stats() {
  AllocatorStats s;
  s.bytes_in_use = host_bytes_in_use.load();
  s.peak_bytes_in_use = host_peak.load();
  s.num_allocations = host_allocations.load();
  s.bytes_cached = host_cache().cached_bytes();
  s.num_cache_hits = host_cache().hits();
  return s;
}

Storage::Storage(size_t bytes, Device dev) : nbytes(bytes), device(dev) {
  // An empty CUDA storage still asks the allocator, which checks that the device exists.
  if (bytes == 0 && dev.is_cpu()) return;
  if (dev.is_cpu()) {
    const size_t rounded = host_block_size(bytes);
    data = host_cache().take(rounded);
    if (data == nullptr) data = std::aligned_alloc(64, rounded);
    SG_CHECK(data != nullptr, "cpu allocator: out of memory allocating ", bytes, " bytes");
    const size_t now = host_bytes_in_use += bytes;
    host_allocations++;
    size_t peak = host_peak.load();
    while (now > peak && !host_peak.compare_exchange_weak(peak, now)) {
    }
  } else {
    data = detail::device_allocate(dev, bytes);
  }
}

Storage::Storage(void* memory, size_t bytes, Device dev, std::function<void(Storage&)> release)
    : data(memory), nbytes(bytes), device(dev), release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) {
    try {
      release_(*this);
    } catch (...) {
      // A destructor must not throw; the memory's owner loses it at worst.
    }
    return;
  }
  if (!data) return;
  if (device.is_cpu()) {
    if (!host_cache().give(data, host_block_size(nbytes))) std::free(data);
    host_bytes_in_use -= nbytes;
  } else {
    try {
      detail::device_free(device, data, nbytes);
    } catch (...) {
      // A destructor must not throw; the block is lost to the cache at worst.
    }
  }
}

}  // namespace sg
