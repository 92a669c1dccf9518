// The whole copy of a Symmetric matrix, both triangles, from its stored upper triangle.
#include "cuda/gemm/kernels.h"
#include "cuda/gemm/symmetric_copy.cuh"

namespace sg::detail::cuda {

KernelInstance<SymmetricCopyKernel> symmetric_copy() {
  return {symmetric_copy_kernel, "symmetric_copy_kernel", kSymCopyThreads, 0};
}

}  // namespace sg::detail::cuda
