// Storage allocation: 64-byte aligned host memory, or a block of the CUDA caching allocator.
#include <structgrad/core/storage.h>

#include <cstdlib>
#include <utility>

#include <structgrad/core/error.h>

namespace sg {

namespace {
std::atomic<size_t> host_bytes_in_use{0};
std::atomic<size_t> host_peak{0};
std::atomic<uint64_t> host_allocations{0};
}  // namespace

AllocatorStats host_memory_stats() {
  AllocatorStats s;
  s.bytes_in_use = host_bytes_in_use.load();
  s.peak_bytes_in_use = host_peak.load();
  s.num_allocations = host_allocations.load();
  return s;
}

Storage::Storage(size_t bytes, Device dev) : nbytes(bytes), device(dev) {
  // An empty CUDA storage still asks the allocator, which checks that the device exists.
  if (bytes == 0 && dev.is_cpu()) return;
  if (dev.is_cpu()) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    data = std::aligned_alloc(64, rounded);
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
    std::free(data);
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
