// Per-device CUDA state (library streams, cuBLAS handles, SM counts, device checks) and the
// public sg::cuda:: functions of core/cuda_runtime_api.h. Everything created here lives
// until the process ends: streams and handles are never destroyed (see the notes below).
#include "cuda/runtime.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/capture.h"
#include <structgrad/core/cuda_runtime_api.h>
#include <structgrad/core/error.h>
#include <structgrad/core/storage.h>
#include "cuda/allocator.h"
#include "ops/output_pool.h"

namespace sg::detail::cuda {

namespace {

/// Number of CUDA devices, asked once: a failing cudaGetDeviceCount (no driver, no device)
/// means 0, and its error is cleared so that it does not surface in a later check.
int cached_device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 0;
    }
    return n;
  }();
  return count;
}

// ---- streams ----------------------------------------------------------------------------
// One non-blocking stream per device, created on first use. The table is leaked on purpose:
// destroying streams during static destruction races with the CUDA runtime's own teardown.

struct StreamSlot {
  std::once_flag created;
  cudaStream_t stream = nullptr;
};

StreamSlot& stream_slot(int device) {
  static auto* slots = new std::array<StreamSlot, kMaxDevices>();
  return (*slots)[static_cast<size_t>(device)];
}

/// This thread's stream per device where a sg::cuda::StreamGuard is active. A null stream is a
/// real choice (the legacy default stream, PyTorch's default), so a flag says whether one is set.
struct StreamOverride {
  bool set = false;
  cudaStream_t stream = nullptr;
};
thread_local std::array<StreamOverride, kMaxDevices> stream_override{};

// ---- cuBLAS handles -----------------------------------------------------------------------
// cuBLAS handles are not safe to share between threads, so each thread gets its own handle
// per device. When a thread ends, its handles (with their workspaces) go back to a pool for
// the next thread instead of being destroyed, so a program that starts many threads does not
// create a handle per thread, and nothing calls cublasDestroy at process exit. A handle has a
// workspace per stream it has queued on: work on two streams never shares one.

struct CublasEntry {
  cublasHandle_t handle = nullptr;
  /// Workspaces from the caching allocator, one per stream, living as long as the handle.
  std::vector<std::pair<cudaStream_t, std::shared_ptr<Storage>>> workspaces;
  cudaStream_t bound = nullptr;  // the stream the handle queues on
  bool is_bound = false;
};

/// cuBLAS's own default workspace size: 32 MiB on Hopper and newer, 4 MiB before.
size_t cublas_workspace_bytes(int device) {
  return compute_capability(device) >= 90 ? (size_t{32} << 20) : (size_t{4} << 20);
}

/// Binds `entry`'s handle to `s` with the workspace of `s` (made on first use, on `s`).
/// cublasSetStream resets the workspace to cuBLAS's default pool, so the workspace is set after it.
void bind_cublas(CublasEntry& entry, int device, cudaStream_t s) {
  auto found = std::find_if(entry.workspaces.begin(), entry.workspaces.end(),
                            [s](const auto& w) { return w.first == s; });
  if (found == entry.workspaces.end()) {
    entry.workspaces.emplace_back(
        s, std::make_shared<Storage>(cublas_workspace_bytes(device), Device(DeviceType::CUDA, device)));
    found = entry.workspaces.end() - 1;
  }
  SG_CUBLAS_CHECK(cublasSetStream(entry.handle, s));
  SG_CUBLAS_CHECK(cublasSetWorkspace(entry.handle, found->second->data, found->second->nbytes));
  entry.bound = s;
  entry.is_bound = true;
}

struct CublasPool {
  std::mutex mutex;
  std::array<std::vector<CublasEntry>, kMaxDevices> idle;
};

CublasPool& cublas_pool() {
  static auto* pool = new CublasPool();
  return *pool;
}

struct ThreadCublasHandles {
  std::unordered_map<int, CublasEntry> by_device;

  ~ThreadCublasHandles() {
    CublasPool& pool = cublas_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    for (auto& [device, entry] : by_device) pool.idle[static_cast<size_t>(device)].push_back(std::move(entry));
  }
};

CublasEntry create_cublas_entry(int device) {
  DeviceGuard guard(device);
  CublasEntry entry;
  SG_CUBLAS_CHECK(cublasCreate(&entry.handle));
  bind_cublas(entry, device, stream(device));
  // Exact fp32 (no TF32) until the opt-in TF32 mode exists.
  SG_CUBLAS_CHECK(cublasSetMathMode(entry.handle, CUBLAS_DEFAULT_MATH));
  return entry;
}

}  // namespace

void check_device(int device) {
  const int count = cached_device_count();
  if (device >= 0 && device < count && device < kMaxDevices) return;
  if (count == 0) SG_FAIL("cuda:", device, " is not available: no CUDA device found");
  SG_FAIL("cuda:", device, " is not available: ", count, " CUDA device(s) found");
}

cudaStream_t stream(int device) {
  check_device(device);
  const StreamOverride& guarded = stream_override[static_cast<size_t>(device)];
  if (guarded.set) return guarded.stream;
  StreamSlot& slot = stream_slot(device);
  // If creation throws, the flag stays unset and the next call tries again.
  std::call_once(slot.created, [&] {
    DeviceGuard guard(device);
    SG_CUDA_CHECK(cudaStreamCreateWithFlags(&slot.stream, cudaStreamNonBlocking));
  });
  return slot.stream;
}

cublasHandle_t cublas_handle(int device) {
  check_device(device);
  thread_local ThreadCublasHandles handles;
  auto found = handles.by_device.find(device);
  if (found != handles.by_device.end()) {
    // Follows the stream a StreamGuard set, and back.
    if (found->second.bound != stream(device)) bind_cublas(found->second, device, stream(device));
    return found->second.handle;
  }

  CublasEntry entry;
  {
    CublasPool& pool = cublas_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    auto& idle = pool.idle[static_cast<size_t>(device)];
    if (!idle.empty()) {
      entry = std::move(idle.back());
      idle.pop_back();
    }
  }
  if (!entry.handle) entry = create_cublas_entry(device);
  if (!entry.is_bound || entry.bound != stream(device)) bind_cublas(entry, device, stream(device));
  const cublasHandle_t handle = entry.handle;
  handles.by_device.emplace(device, std::move(entry));
  return handle;
}

namespace {
struct TransferCounters {
  std::atomic<uint64_t> host_to_device{0}, device_to_host{0}, bytes_host_to_device{0}, bytes_device_to_host{0};
};
TransferCounters& transfer_counters(int device) {
  static auto* counters = new std::array<TransferCounters, kMaxDevices>();
  return (*counters)[static_cast<size_t>(device)];
}
}  // namespace

void count_transfer(int device, TransferDirection direction, size_t bytes) {
  TransferCounters& c = transfer_counters(device);
  if (direction == TransferDirection::HostToDevice) {
    c.host_to_device.fetch_add(1, std::memory_order_relaxed);
    c.bytes_host_to_device.fetch_add(bytes, std::memory_order_relaxed);
  } else {
    c.device_to_host.fetch_add(1, std::memory_order_relaxed);
    c.bytes_device_to_host.fetch_add(bytes, std::memory_order_relaxed);
  }
}

int sm_count(int device) {
  check_device(device);
  static auto* counts = new std::array<std::atomic<int>, kMaxDevices>();  // 0 = not asked yet
  std::atomic<int>& cached = (*counts)[static_cast<size_t>(device)];
  int count = cached.load(std::memory_order_relaxed);
  if (count == 0) {
    SG_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    cached.store(count, std::memory_order_relaxed);
  }
  return count;
}

int compute_capability(int device) {
  check_device(device);
  int major = 0, minor = 0;
  SG_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SG_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return 10 * major + minor;
}

DeviceGuard::DeviceGuard(int device) {
  SG_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) {
    SG_CUDA_CHECK(cudaSetDevice(device));
  } else {
    previous_ = -1;  // nothing to restore
  }
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);  // a destructor must not throw
}

}  // namespace sg::detail::cuda

namespace sg::detail {

uintptr_t current_stream_id(Device device) {
  SG_CHECK(device.is_cuda(), "current_stream_id: expected a cuda device, got ", device);
  return reinterpret_cast<uintptr_t>(cuda::stream(device.index));
}

}  // namespace sg::detail

namespace sg::detail::cuda {

const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

}  // namespace sg::detail::cuda

namespace sg::cuda {

bool is_available() { return device_count() > 0; }

int device_count() { return detail::cuda::cached_device_count(); }

bool built_with_cuda() { return true; }

void synchronize(int device) {
  detail::refuse_under_capture("cuda::synchronize", Device(DeviceType::CUDA, device), "waits for the device");
  const cudaStream_t s = detail::cuda::stream(device);
  SG_CUDA_CHECK(cudaStreamSynchronize(s));
}

AllocatorStats allocator_stats(int device) {
  detail::cuda::check_device(device);
  return detail::cuda::allocator_stats_of(device);
}

TransferStats transfer_stats(int device) {
  detail::cuda::check_device(device);
  auto& c = detail::cuda::transfer_counters(device);
  TransferStats stats;
  stats.host_to_device = c.host_to_device.load(std::memory_order_relaxed);
  stats.device_to_host = c.device_to_host.load(std::memory_order_relaxed);
  stats.bytes_host_to_device = c.bytes_host_to_device.load(std::memory_order_relaxed);
  stats.bytes_device_to_host = c.bytes_device_to_host.load(std::memory_order_relaxed);
  return stats;
}

void empty_cache() {
  detail::release_upper_outputs();  // the matmul op's pooled outputs first, into the cache
  detail::cuda::release_all_cached_blocks();
}

StreamGuard::StreamGuard(CUstream_st* stream, int device) : device_(device) {
  detail::cuda::check_device(device);
  auto& slot = detail::cuda::stream_override[static_cast<size_t>(device)];
  previous_set_ = slot.set;
  previous_ = slot.stream;
  slot = {true, stream};
}

StreamGuard::~StreamGuard() { detail::cuda::stream_override[static_cast<size_t>(device_)] = {previous_set_, previous_}; }

std::string device_name(int device) {
  detail::cuda::check_device(device);
  cudaDeviceProp properties{};
  SG_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  return properties.name;
}

}  // namespace sg::cuda
