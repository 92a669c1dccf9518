// What the Hopper wrappers share: SG_HAS_WGMMA, true in the device pass of sm_90a code (wgmma, TMA,
// mbarriers, dependent launch), and 32-bit shared-space addresses.
#pragma once

#include <cstdint>

namespace sg::detail::cuda {

// ---- wgmma (sm_90a) ------------------------------------------------------------------------
// The PTX ISA's asynchronous warpgroup MMA. Operands are described by 64-bit shared-memory
// matrix descriptors; the accumulators stay in registers and must not be touched between the
// issue and the wait (wgmma_fence_operands keeps the compiler from moving accesses across).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)

#define SG_HAS_WGMMA 1

#else

#define SG_HAS_WGMMA 0

#endif

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

}  // namespace sg::detail::cuda
