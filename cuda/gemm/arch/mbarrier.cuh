// Barriers in shared memory: mbarriers (an arrival count plus transaction bytes, waited on by phase
// parity; sm_90) and named barriers over the first threads of a block.
#pragma once

#include <cstdint>

#include "cuda/gemm/arch/sm90.cuh"

namespace sg::detail::cuda {

// ---- TMA (sm_90): tile copies global → shared by the tensor memory accelerator --------------
// A copy completes on an mbarrier: one thread arms the barrier with the byte count
// (arrive.expect_tx, the barrier's only arrival) and issues the copies; every thread then waits
// for the phase. The copies bypass the load/store unit and the registers.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, int count) {
#if SG_HAS_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(count) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if SG_HAS_WGMMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
#endif
}

__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
#if SG_HAS_WGMMA
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(shared_address(bar)), "r"(parity)
        : "memory");
  } while (!done);
#endif
}

/// One arrival on `bar` (no transaction bytes).
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
#if SG_HAS_WGMMA
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(bar)) : "memory");
#endif
}

/// Barrier `id` (1 … 15; 0 is __syncthreads') over the first `threads` threads of the block.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace sg::detail::cuda
