// The CUDA structured GEMM: C = alpha·op(A)·op(B) for every operand and output structure of
// ops/gemm_desc.h, on one kernel family built from parts in cuda/gemm/ (architecture wrappers,
// operand staging, mainloops, one epilogue, the tile scheduler, the kernel selection).
// Design: docs/structured_gemm.md.
#pragma once

#include <structgrad/core/types.h>
#include "ops/gemm_desc.h"

namespace sg::detail::cuda {

/// Queues C = alpha·op(A)·op(B) for the descriptors of `p` on the library stream of `device`
/// (asynchronous; in steady state no allocation besides the caching allocator's). Returns whether it
/// also wrote op(A)ᵀ into p.at (only where writes_transposed_a said it would).
bool launch_structured_gemm(const GemmProblem& p, DType dtype, int device);

/// Whether launch_structured_gemm of `p` (p.at aside) would also write op(A)ᵀ if given a buffer:
/// TF32 products on the tall kernel, whose tiles of A are read anyway.
bool writes_transposed_a(const GemmProblem& p, DType dtype, int device);

}  // namespace sg::detail::cuda
