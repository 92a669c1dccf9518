// The tensor memory accelerator (sm_90): tile copies global → shared that complete on an mbarrier,
// tile stores and reductions shared → global in bulk async-groups, and the proxy fences around them.
#pragma once

#include <cuda.h>
#include <cstdint>

#include "cuda/gemm/arch/sm90.cuh"

namespace sg::detail::cuda {

/// Makes this thread's ordinary shared-memory stores visible to the tensor cores' (async
/// proxy) reads that follow the next barrier.
__device__ __forceinline__ void fence_shared_for_async_proxy() {
#if SG_HAS_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/// Copies the box of `map` that starts at column `inner` (the contiguous dimension) of row
/// `row` into shared memory at `dst`, completing on `bar`.
__device__ __forceinline__ void tma_load_tile(void* dst, const CUtensorMap* map, int inner, int row, uint64_t* bar) {
#if SG_HAS_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          shared_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(row), "r"(shared_address(bar))
      : "memory");
#endif
}

/// Copies the 3-D box of `map` at (`x`, `y`, `z`) into shared memory at `dst`, completing on `bar`.
__device__ __forceinline__ void tma_load_box_3d(void* dst, const CUtensorMap* map, int x, int y, int z, uint64_t* bar) {
#if SG_HAS_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
          shared_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(shared_address(bar))
      : "memory");
#endif
}

/// Copies the box of `map` that starts at column `inner` of row `row` from shared memory at `src`
/// to global memory (a TMA store, in the thread's bulk async-group); with `add`, adds it to what
/// global memory holds instead (a TMA reduction, float32 add).
__device__ __forceinline__ void tma_store_tile(const CUtensorMap* map, int inner, int row, const void* src,
                                               bool add = false) {
#if SG_HAS_WGMMA
  const uint64_t tensor_map = reinterpret_cast<uint64_t>(map);
  if (add)
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                     tensor_map),
                 "r"(inner), "r"(row), "r"(shared_address(src))
                 : "memory");
  else
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(tensor_map),
                 "r"(inner), "r"(row), "r"(shared_address(src))
                 : "memory");
#endif
}

/// Closes the thread's bulk async-group (its stores so far).
__device__ __forceinline__ void tma_store_commit() {
#if SG_HAS_WGMMA
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}

/// Waits until every bulk async-group of the thread but the latest has read its shared memory
/// (commits nothing: the caller's groups are its rounds).
__device__ __forceinline__ void tma_store_wait_read_all_but_latest() {
#if SG_HAS_WGMMA
  asm volatile("cp.async.bulk.wait_group.read 1;\n" ::: "memory");
#endif
}

/// Closes the thread's bulk async-group and waits until its stores have read their shared memory
/// (the block may then leave; the writes complete on their own).
__device__ __forceinline__ void tma_store_wait_read() {
  tma_store_commit();
#if SG_HAS_WGMMA
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}

/// Orders the thread's global accesses across the generic and async proxies: its earlier generic
/// ones (an acquire of a flag) before its later TMA operations, and its completed TMA writes before
/// its later generic ones (a release of a flag).
__device__ __forceinline__ void fence_global_for_async_proxy() {
#if SG_HAS_WGMMA
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
#endif
}

/// Closes the thread's bulk async-group and waits until its stores have completed: their writes
/// are performed, and (after the fence) ordered before the thread's later global accesses of the
/// generic proxy, such as a release of a flag.
__device__ __forceinline__ void tma_store_wait_complete() {
  tma_store_commit();
#if SG_HAS_WGMMA
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
  fence_global_for_async_proxy();
}

}  // namespace sg::detail::cuda
