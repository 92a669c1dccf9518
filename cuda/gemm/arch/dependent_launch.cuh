// Programmatic dependent launch (sm_90): the wait of a kernel that may begin before the kernel
// ahead of it in the stream has completed.
#pragma once

#include "cuda/gemm/arch/sm90.cuh"

namespace sg::detail::cuda {

// ---- Programmatic dependent launch (sm_90) -------------------------------------------------
// The tall and wide kernels are launched with programmatic stream serialization
// (launch_after_previous): such a launch may begin once the blocks of the kernel before it in the
// stream have exited, before that grid has completed (its memory flushed), so the gap between the
// two kernels shrinks (measured: 2.7–3.2 µs to 1.4–1.5; docs/structured_gemm.md, "Launches that
// begin before the kernel before them ends"). Each block waits for that grid to complete before
// it reads or writes global memory. The kernels do not signal their dependents earlier
// (griddepcontrol.launch_dependents): the next kernel's blocks then wait on SMs as this one's
// leave, and ran 2–5 % slower.
/// Waits until the grids this one depends on have completed and their writes are visible (at once
/// where the launch was an ordinary one).
__device__ __forceinline__ void wait_for_previous_grid() {
#if SG_HAS_WGMMA
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace sg::detail::cuda
