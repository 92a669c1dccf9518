// Internal interface of the CUDA caching allocator (cuda/allocator.cpp) for the runtime:
// its counters and cache release. device_allocate / device_free themselves are declared in
// core/storage.h, because Storage calls them.
#pragma once

#include <structgrad/core/storage.h>

namespace sg::detail::cuda {

/// The per-device tables of the runtime and the allocator hold this many devices.
constexpr int kMaxDevices = 64;

/// Counters of the caching allocator of `device` (zeros before its first allocation).
AllocatorStats allocator_stats_of(int device);
/// Returns every cached (free) block of every device to the driver, after waiting for the device,
/// except the pools of live CUDA graphs.
void release_all_cached_blocks();
/// Marks `stream` as a live CUDA graph's (its free blocks are the graph's pool, kept from
/// empty_cache) or, with `live` false, as an ordinary stream again.
void set_graph_stream(int device, CUstream_st* stream, bool live);
/// True once sg::cuda::use_external_allocator has taken over device allocations.
bool uses_external_allocator();

}  // namespace sg::detail::cuda
