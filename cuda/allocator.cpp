// The caching device allocator behind every CUDA Storage: size-bucketed free lists per
// device, so a training loop stops calling cudaMalloc after its first step, plus the
// counters of sg::cuda::allocator_stats() and the out-of-memory retry.
//
// Stream-ordered reuse. Every kernel, copy and cuBLAS call of a device is queued on the one
// library stream of that device (cuda/runtime.h). A block freed on the host while queued work
// may still read or write it can therefore be handed out again at once: whatever the new
// owner queues runs on the same stream, after that work. This is why free() neither waits nor
// records events. It relies on no other stream touching library memory; the only places that
// give memory back to the driver (release of the cache) synchronise the stream first.
//
// External allocator. Work on another stream (sg::cuda::StreamGuard) would break that rule, so
// it needs sg::cuda::use_external_allocator first: every allocation then goes to the other
// library's allocator (PyTorch's caching allocator in the binding), which follows its streams.
#include "cuda/allocator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <structgrad/core/cuda_runtime_api.h>
#include <structgrad/core/error.h>
#include "cuda/check.h"
#include "cuda/runtime.h"

namespace sg::detail::cuda {

namespace {

constexpr size_t kSmallBlockLimit = size_t{1} << 20;  // below: multiples of kSmallGranule
constexpr size_t kSmallGranule = 512;
constexpr size_t kLargestRequest = size_t{1} << 62;  // rounding above this would overflow

/// The block size a request of `nbytes` occupies: a multiple of 512 B below 1 MiB; above,
/// one of four size classes per power of two (2^e, 1.25·2^e, 1.5·2^e, 1.75·2^e), so a block
/// wastes at most 25% of its size. Free lists match this rounded size exactly.
size_t round_block_size(size_t nbytes) {
  if (nbytes < kSmallBlockLimit) return (nbytes + kSmallGranule - 1) / kSmallGranule * kSmallGranule;
  size_t power = kSmallBlockLimit;
  while (power <= nbytes / 2) power *= 2;  // largest power of two <= nbytes
  const size_t step = power / 4;
  return (nbytes + step - 1) / step * step;
}

struct DeviceCache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;  // rounded size -> blocks
  AllocatorStats stats;
};

/// The other library's functions where sg::cuda::use_external_allocator set them (read without a
/// lock: they are set once, before any allocation).
std::atomic<bool> external_set{false};
sg::cuda::ExternalAllocator external;

/// Leaked on purpose: blocks freed during static destruction (tensors held by globals)
/// must still find their cache, and nothing may call cudaFree after the runtime is gone.
DeviceCache& cache_of(int device) {
  static auto* caches = new std::array<DeviceCache, kMaxDevices>();
  return (*caches)[static_cast<size_t>(device)];
}

/// Gives every cached block of `device` back to the driver. Caller holds cache.mutex.
void release_cached_blocks_locked(int device, DeviceCache& cache) {
  if (cache.stats.bytes_cached == 0) return;
  // Work queued before the blocks were freed may still use them.
  SG_CUDA_CHECK(cudaStreamSynchronize(stream(device)));
  DeviceGuard guard(device);
  for (auto& [size, blocks] : cache.free_blocks) {
    while (!blocks.empty()) {
      SG_CUDA_CHECK(cudaFree(blocks.back()));
      blocks.pop_back();
      cache.stats.bytes_cached -= size;
      cache.stats.num_device_frees += 1;
    }
  }
  cache.free_blocks.clear();
}

std::string gib_string(size_t bytes) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / double(size_t{1} << 30));
  return text;
}

/// Throws the out-of-memory error; `error` is the failed cudaMalloc's code (cudaSuccess when
/// the request was refused before asking the driver), named when it is not a plain OOM.
[[noreturn]] void fail_out_of_memory(int device, size_t nbytes, const AllocatorStats& stats, cudaError_t error) {
  const bool plain = error == cudaErrorMemoryAllocation || error == cudaSuccess;
  SG_FAIL("cuda allocator: out of memory allocating ", nbytes, " bytes (", gib_string(nbytes), ") on cuda:", device,
          " (in use ", stats.bytes_in_use, " bytes, cached ", stats.bytes_cached, " bytes)",
          plain ? "" : "; cudaMalloc returned ", plain ? "" : cudaGetErrorName(error));
}

/// One real cudaMalloc of `block_size` bytes on `device`; nullptr (error cleared) on failure.
void* try_device_malloc(int device, size_t block_size, cudaError_t* error) {
  DeviceGuard guard(device);
  void* ptr = nullptr;
  *error = cudaMalloc(&ptr, block_size);
  if (*error != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return ptr;
}

}  // namespace

AllocatorStats allocator_stats_of(int device) {
  check_device(device);
  DeviceCache& cache = cache_of(device);
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.stats;
}

bool uses_external_allocator() { return external_set.load(std::memory_order_acquire); }

void release_all_cached_blocks() {
  const int count = std::min(sg::cuda::device_count(), kMaxDevices);
  for (int device = 0; device < count; ++device) {
    DeviceCache& cache = cache_of(device);
    std::lock_guard<std::mutex> lock(cache.mutex);
    release_cached_blocks_locked(device, cache);
  }
}

}  // namespace sg::detail::cuda

namespace sg::detail {

void* device_allocate(Device device, size_t nbytes) {
  using namespace sg::detail::cuda;
  SG_CHECK(device.is_cuda(), "cuda allocator: expected a cuda device, got ", device);
  check_device(device.index);
  if (nbytes == 0) return nullptr;

  DeviceCache& cache = cache_of(device.index);
  if (external_set.load(std::memory_order_acquire)) {
    DeviceGuard guard(device.index);
    void* ptr = external.allocate(nbytes, device.index, stream(device.index));
    SG_CHECK(ptr != nullptr, "cuda allocator: the external allocator returned null for ", nbytes, " bytes on ",
             device);
    std::lock_guard<std::mutex> lock(cache.mutex);
    cache.stats.num_allocations += 1;
    cache.stats.bytes_in_use += nbytes;
    cache.stats.peak_bytes_in_use = std::max(cache.stats.peak_bytes_in_use, cache.stats.bytes_in_use);
    return ptr;
  }
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (nbytes > kLargestRequest) fail_out_of_memory(device.index, nbytes, cache.stats, cudaSuccess);
  const size_t block_size = round_block_size(nbytes);

  void* ptr = nullptr;
  auto bucket = cache.free_blocks.find(block_size);
  if (bucket != cache.free_blocks.end() && !bucket->second.empty()) {
    ptr = bucket->second.back();
    bucket->second.pop_back();
    cache.stats.bytes_cached -= block_size;
    cache.stats.num_cache_hits += 1;
  } else {
    cudaError_t error = cudaSuccess;
    ptr = try_device_malloc(device.index, block_size, &error);
    if (!ptr) {
      // Cached blocks of other sizes may be what stands in the way: give them back, retry once.
      release_cached_blocks_locked(device.index, cache);
      ptr = try_device_malloc(device.index, block_size, &error);
      if (!ptr) fail_out_of_memory(device.index, nbytes, cache.stats, error);
    }
    cache.stats.num_device_mallocs += 1;
  }
  cache.stats.num_allocations += 1;
  cache.stats.bytes_in_use += block_size;
  cache.stats.peak_bytes_in_use = std::max(cache.stats.peak_bytes_in_use, cache.stats.bytes_in_use);
  return ptr;
}

void device_free(Device device, void* ptr, size_t nbytes) {
  using namespace sg::detail::cuda;
  if (ptr == nullptr) return;
  SG_CHECK(device.is_cuda() && device.index >= 0 && device.index < kMaxDevices,
           "cuda allocator: cannot free a block of device ", device);
  DeviceCache& cache = cache_of(device.index);
  if (external_set.load(std::memory_order_acquire)) {
    external.deallocate(ptr, device.index);
    std::lock_guard<std::mutex> lock(cache.mutex);
    cache.stats.bytes_in_use -= nbytes;
    return;
  }
  const size_t block_size = round_block_size(nbytes);
  std::lock_guard<std::mutex> lock(cache.mutex);
  // No wait here: see "Stream-ordered reuse" at the top of this file.
  cache.free_blocks[block_size].push_back(ptr);
  cache.stats.bytes_in_use -= block_size;
  cache.stats.bytes_cached += block_size;
}

}  // namespace sg::detail

namespace sg::cuda {

void use_external_allocator(const ExternalAllocator& allocator) {
  using namespace sg::detail::cuda;
  SG_CHECK(allocator.allocate != nullptr && allocator.deallocate != nullptr,
           "cuda::use_external_allocator: both functions are needed");
  static std::mutex once;
  std::lock_guard<std::mutex> lock(once);
  SG_CHECK(!external_set.load(), "cuda::use_external_allocator: an external allocator is already in use");
  for (int device = 0; device < kMaxDevices; ++device) {
    DeviceCache& cache = cache_of(device);
    std::lock_guard<std::mutex> device_lock(cache.mutex);
    SG_CHECK(cache.stats.num_allocations == 0, "cuda::use_external_allocator: cuda:", device,
             " already holds memory of structgrad's own allocator; call it before the first device allocation");
  }
  external = allocator;
  external_set.store(true, std::memory_order_release);
}

}  // namespace sg::cuda
