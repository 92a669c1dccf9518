// The caching device allocator behind every CUDA Storage: size-bucketed free lists per
// device and stream, so a training loop stops calling cudaMalloc after its first step, plus the
// counters of sg::cuda::allocator_stats() and the out-of-memory retry.
//
// Stream-ordered reuse, as PyTorch's caching allocator does it. A block belongs to the stream that
// was current when it was allocated (the library stream, or a sg::cuda::StreamGuard's). Freed, it
// goes to that stream's free list and is handed out again only to an allocation on the same stream,
// at once: whatever the new owner queues runs after the work that used the block before. A block
// that other streams read or write too is named with sg::cuda::record_stream; when it is freed, an
// event is recorded on each of those streams, and the block waits in a pending list until they have
// all completed. Giving memory back to the driver (empty_cache, the out-of-memory retry) waits for
// the whole device first.
//
// External allocator. sg::cuda::use_external_allocator hands every allocation to another library's
// allocator (PyTorch's caching allocator in the binding), which follows its own stream rules.
#include "cuda/allocator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <structgrad/core/cuda_runtime_api.h>
#include <structgrad/core/error.h>
#include <structgrad/core/tensor.h>
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

/// A live block: its rounded size, the stream it was allocated on, and the other streams that
/// use it (sg::cuda::record_stream).
struct BlockInfo {
  size_t size = 0;
  cudaStream_t stream = nullptr;
  std::vector<cudaStream_t> uses;
};

/// A freed block that other streams used: free once every event has completed.
struct PendingBlock {
  void* ptr = nullptr;
  size_t size = 0;
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events;
};

using FreeKey = std::pair<cudaStream_t, size_t>;  // owning stream, rounded size

struct FreeKeyHash {
  size_t operator()(const FreeKey& k) const {
    return std::hash<const void*>()(k.first) ^ (std::hash<size_t>()(k.second) * 0x9E3779B97F4A7C15ull);
  }
};

struct DeviceCache {
  std::mutex mutex;
  std::unordered_map<FreeKey, std::vector<void*>, FreeKeyHash> free_blocks;
  std::unordered_map<void*, BlockInfo> live;
  std::vector<PendingBlock> pending;
  /// Blocks used on other streams and freed while this thread captured a graph (no event can be
  /// recorded then): freed as usual by the next allocation outside capture.
  std::vector<std::pair<void*, BlockInfo>> freed_in_capture;
  std::vector<cudaEvent_t> idle_events;
  /// Streams of live CUDA graphs: their free blocks are memory the graphs' replays use.
  std::unordered_set<cudaStream_t> graph_streams;
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

/// Moves the pending blocks whose events have all completed to their free lists. Caller holds
/// cache.mutex.
void collect_pending_locked(DeviceCache& cache) {
  auto completed = [](const PendingBlock& block) {
    for (cudaEvent_t e : block.events) {
      const cudaError_t status = cudaEventQuery(e);
      if (status == cudaErrorNotReady) {
        (void)cudaGetLastError();  // not an error: the stream has not reached the event yet
        return false;
      }
      SG_CUDA_CHECK(status);
    }
    return true;
  };
  // One block at a time, each moved whole (free list, events back, out of the list), so that a
  // failed query leaves every block in exactly one place.
  for (size_t i = 0; i < cache.pending.size();) {
    if (!completed(cache.pending[i])) {
      ++i;
      continue;
    }
    PendingBlock block = std::move(cache.pending[i]);
    cache.pending[i] = std::move(cache.pending.back());
    cache.pending.pop_back();
    cache.idle_events.insert(cache.idle_events.end(), block.events.begin(), block.events.end());
    cache.free_blocks[{block.stream, block.size}].push_back(block.ptr);
  }
}

/// Gives every cached block of `device` back to the driver. Caller holds cache.mutex.
void release_cached_blocks_locked(int device, DeviceCache& cache) {
  if (cache.stats.bytes_cached == 0) return;
  SG_CHECK(!capturing(device), "cuda allocator: cannot give cached memory back to the driver on cuda:", device,
           " while this thread captures a CUDA graph (it waits for the device)");
  DeviceGuard guard(device);
  // Work queued on any stream before the blocks were freed may still use them.
  SG_CUDA_CHECK(cudaDeviceSynchronize());
  collect_pending_locked(cache);
  for (auto it = cache.free_blocks.begin(); it != cache.free_blocks.end();) {
    auto& [key, blocks] = *it;
    if (cache.graph_streams.count(key.first)) {  // a live graph's pool: its replays use these blocks
      ++it;
      continue;
    }
    while (!blocks.empty()) {
      SG_CUDA_CHECK(cudaFree(blocks.back()));
      blocks.pop_back();
      cache.stats.bytes_cached -= key.second;
      cache.stats.num_device_frees += 1;
    }
    it = cache.free_blocks.erase(it);
  }
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
/// While this thread captures a CUDA graph the call runs in relaxed capture mode: the block joins the
/// graph's pool (its stream's free lists) and lives as long as the cache, so replays may use it.
void* try_device_malloc(int device, size_t block_size, cudaError_t* error) {
  DeviceGuard guard(device);
  void* ptr = nullptr;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  const bool relax = capturing(device);
  if (relax) SG_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  *error = cudaMalloc(&ptr, block_size);
  if (relax) SG_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  if (*error != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return ptr;
}

/// Puts a block that is no longer used by tensors back into the cache: on its stream's free list at
/// once, or, when other streams used it too, in `pending` behind an event on each. Runs in Storage's
/// destructor, so it never throws: where an event cannot be recorded (a stream destroyed since), the
/// device is synchronised instead and the block is free at once. Caller holds cache.mutex.
void free_block_locked(int device, DeviceCache& cache, void* ptr, BlockInfo block) {
  cache.stats.bytes_in_use -= block.size;
  cache.stats.bytes_cached += block.size;
  if (block.uses.empty()) {
    // No wait here: see "Stream-ordered reuse" at the top of this file.
    cache.free_blocks[{block.stream, block.size}].push_back(ptr);
    return;
  }
  DeviceGuard guard(device);
  PendingBlock pending{ptr, block.size, block.stream, {}};
  bool recorded = true;
  for (cudaStream_t use : block.uses) {
    cudaEvent_t e = nullptr;
    if (!cache.idle_events.empty()) {
      e = cache.idle_events.back();
      cache.idle_events.pop_back();
    } else if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
      recorded = false;
      break;
    }
    pending.events.push_back(e);
    if (cudaEventRecord(e, use) != cudaSuccess) {
      recorded = false;
      break;
    }
  }
  if (recorded) {
    cache.pending.push_back(std::move(pending));
    return;
  }
  (void)cudaGetLastError();
  (void)cudaDeviceSynchronize();
  cache.idle_events.insert(cache.idle_events.end(), pending.events.begin(), pending.events.end());
  cache.free_blocks[{block.stream, block.size}].push_back(ptr);
}

}  // namespace

AllocatorStats allocator_stats_of(int device) {
  check_device(device);
  DeviceCache& cache = cache_of(device);
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.stats;
}

bool uses_external_allocator() { return external_set.load(std::memory_order_acquire); }

void set_graph_stream(int device, cudaStream_t stream, bool live) {
  check_device(device);
  DeviceCache& cache = cache_of(device);
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (live) cache.graph_streams.insert(stream);
  else cache.graph_streams.erase(stream);
}

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
  const cudaStream_t s = stream(device.index);
  // The lock is held before the allocator choice is read, so use_external_allocator (which takes
  // every device's lock) cannot switch allocators in the middle of an allocation of our own. Once
  // set, the choice never changes: the other library is called without the lock.
  std::unique_lock<std::mutex> lock(cache.mutex);
  if (external_set.load(std::memory_order_acquire)) {
    lock.unlock();
    void* ptr = nullptr;
    {
      DeviceGuard guard(device.index);
      ptr = external.allocate(nbytes, device.index, s);
    }
    SG_CHECK(ptr != nullptr, "cuda allocator: the external allocator returned null for ", nbytes, " bytes on ",
             device);
    lock.lock();
    cache.stats.num_allocations += 1;
    cache.stats.bytes_in_use += nbytes;
    cache.stats.peak_bytes_in_use = std::max(cache.stats.peak_bytes_in_use, cache.stats.bytes_in_use);
    return ptr;
  }
  if (nbytes > kLargestRequest) fail_out_of_memory(device.index, nbytes, cache.stats, cudaSuccess);
  const size_t block_size = round_block_size(nbytes);

  // Events cannot be recorded or queried while this thread captures: such work waits for a later
  // allocation.
  if (!capturing(device.index)) {
    if (!cache.freed_in_capture.empty()) {
      auto freed = std::move(cache.freed_in_capture);
      cache.freed_in_capture.clear();
      for (auto& [block_ptr, block] : freed) free_block_locked(device.index, cache, block_ptr, std::move(block));
    }
    if (!cache.pending.empty()) collect_pending_locked(cache);
  }
  void* ptr = nullptr;
  auto bucket = cache.free_blocks.find({s, block_size});
  if (bucket != cache.free_blocks.end() && !bucket->second.empty()) {
    ptr = bucket->second.back();
    bucket->second.pop_back();
    cache.stats.bytes_cached -= block_size;
    cache.stats.num_cache_hits += 1;
  } else {
    cudaError_t error = cudaSuccess;
    ptr = try_device_malloc(device.index, block_size, &error);
    if (!ptr) {
      // Cached blocks of other sizes or streams may be what stands in the way: give them back, retry
      // once (not while capturing, which cannot wait for the device).
      if (capturing(device.index)) fail_out_of_memory(device.index, nbytes, cache.stats, error);
      release_cached_blocks_locked(device.index, cache);
      ptr = try_device_malloc(device.index, block_size, &error);
      if (!ptr) fail_out_of_memory(device.index, nbytes, cache.stats, error);
    }
    cache.stats.num_device_mallocs += 1;
  }
  cache.live[ptr] = BlockInfo{block_size, s, {}};
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
  if (external_set.load(std::memory_order_acquire)) {  // set before any block of ours could exist
    external.deallocate(ptr, device.index);
    std::lock_guard<std::mutex> lock(cache.mutex);
    cache.stats.bytes_in_use -= nbytes;
    return;
  }
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto found = cache.live.find(ptr);
  if (found == cache.live.end()) {  // not ours (an internal error): left alone rather than reused
    std::fprintf(stderr, "structgrad: cuda allocator: cuda:%d did not allocate the block %p it is asked to free\n",
                 device.index, ptr);
    return;
  }
  BlockInfo block = std::move(found->second);
  cache.live.erase(found);
  if (!block.uses.empty() && capturing(device.index)) {
    cache.freed_in_capture.emplace_back(ptr, std::move(block));
    return;
  }
  free_block_locked(device.index, cache, ptr, std::move(block));
}

void record_stream_use(Device device, void* ptr, CUstream_st* use) {
  using namespace sg::detail::cuda;
  if (ptr == nullptr || !device.is_cuda()) return;
  check_device(device.index);
  DeviceCache& cache = cache_of(device.index);
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto found = cache.live.find(ptr);
  if (found == cache.live.end()) return;  // the external allocator's or another owner's memory
  BlockInfo& block = found->second;
  if (use == block.stream || std::find(block.uses.begin(), block.uses.end(), use) != block.uses.end()) return;
  block.uses.push_back(use);
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
  // Every device's lock at once: an allocation on another thread either finished before the check
  // (and the switch is refused) or reads the new choice after it.
  std::vector<std::unique_lock<std::mutex>> device_locks;
  for (int device = 0; device < kMaxDevices; ++device) {
    DeviceCache& cache = cache_of(device);
    device_locks.emplace_back(cache.mutex);
    SG_CHECK(cache.stats.num_allocations == 0, "cuda::use_external_allocator: cuda:", device,
             " already holds memory of structgrad's own allocator; call it before the first device allocation");
  }
  external = allocator;
  external_set.store(true, std::memory_order_release);
}

void record_stream(const Tensor& tensor, CUstream_st* stream) {
  SG_CHECK(tensor.defined(), "cuda::record_stream: the tensor is undefined");
  SG_CHECK(tensor.device().is_cuda(), "cuda::record_stream: expected a cuda tensor, got one on ", tensor.device());
  SG_CHECK(!detail::cuda::uses_external_allocator(), "cuda::record_stream: device memory comes from the external "
           "allocator, whose own stream rules apply (in PyTorch, Tensor.record_stream)");
  Storage& storage = *tensor.impl().storage;
  storage.used_on_other_streams.store(true);
  detail::record_stream_use(storage.device, storage.data, stream);
}

}  // namespace sg::cuda
