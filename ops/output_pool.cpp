// The matmul op's pool of UpperTriangular outputs (output_pool.h).
#include "ops/output_pool.h"

#include "core/capture.h"

#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

namespace sg::detail {

namespace {

/// A pooled block's shape: device, rows, columns (the row stride) and element size; and the stream
/// it was allocated on, the only one that may take it again at once.
using PoolKey = std::tuple<int, int64_t, int64_t, size_t, uintptr_t>;

struct Pool {
  std::mutex mutex;
  std::map<PoolKey, std::vector<void*>> blocks;
  std::atomic<bool> reuse{true};
  std::atomic<int64_t> reused{0};
};

/// Leaked on purpose, as the caching allocator is: storages freed during static destruction still
/// find it.
Pool& pool() {
  static Pool* instance = new Pool;
  return *instance;
}

}  // namespace

UpperOutput take_upper_output(int64_t rows, int64_t cols, DType dtype, Device device) {
  check_shape("matmul", {rows, cols}, dtype);
  const size_t nbytes = static_cast<size_t>(rows * cols) * element_size(dtype);
  const PoolKey key{device.index, rows, cols, element_size(dtype), current_stream_id(device)};
  Pool& p = pool();
  void* data = nullptr;
  bool held = false;
  // Under CUDA graph capture no block is taken from the pool, and none allocated then goes back to it:
  // whether a pooled block's zeros are still there is known at capture, not at a later replay.
  const bool poolable = p.reuse.load() && !capturing(device);
  if (poolable) {
    std::lock_guard<std::mutex> lock(p.mutex);
    auto found = p.blocks.find(key);
    if (found != p.blocks.end() && !found->second.empty()) {
      data = found->second.back();
      found->second.pop_back();
      held = true;
    }
  }
  if (held) p.reused.fetch_add(1, std::memory_order_relaxed);
  else data = device_allocate(device, nbytes);
  auto written = std::make_shared<std::atomic<bool>>(false);
  auto release = [key, written, poolable](Storage& s) {
    if (s.data == nullptr) return;
    Pool& owner = pool();
    if (poolable && written->load() && s.version.load() == 0 && s.reinterpretations.load() == 0 && !s.used_on_other_streams.load() &&
        owner.reuse.load()) {
      std::lock_guard<std::mutex> lock(owner.mutex);
      owner.blocks[key].push_back(s.data);
      return;
    }
    device_free(s.device, s.data, s.nbytes);
  };
  UpperOutput output;
  output.tensor = make_tensor(std::make_shared<Storage>(data, nbytes, device, std::move(release)), {rows, cols},
                              dtype, Structure::UpperTriangular);
  output.zeros_held = held;
  output.written_ = std::move(written);
  return output;
}

void release_upper_outputs() {
  Pool& p = pool();
  std::map<PoolKey, std::vector<void*>> blocks;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    blocks.swap(p.blocks);
  }
  for (const auto& [key, pointers] : blocks) {
    const Device device(DeviceType::CUDA, std::get<0>(key));
    const size_t nbytes = static_cast<size_t>(std::get<1>(key) * std::get<2>(key)) * std::get<3>(key);
    for (void* data : pointers) device_free(device, data, nbytes);
  }
}

void set_upper_output_reuse(bool on) {
  pool().reuse.store(on);
  if (!on) release_upper_outputs();
}

bool upper_output_reuse() { return pool().reuse.load(); }

int64_t upper_outputs_reused() { return pool().reused.load(); }

}  // namespace sg::detail
