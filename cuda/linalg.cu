// CUDA linear algebra: triangular solves, Cholesky and triangular inverses (in progress).
#include "cuda/cuda_backend.h"

namespace sg::detail::cuda {

void CudaBackend::solve_triangular(const Tensor&, OperandKind, bool, bool, bool, Tensor&) {
  SG_CHECK(false, "solve_triangular: not available on CUDA devices yet");
}
void CudaBackend::cholesky(const Tensor&, Tensor&, Tensor&) {
  SG_CHECK(false, "cholesky: not available on CUDA devices yet");
}
void CudaBackend::triangular_inverse(const Tensor&, OperandKind, bool, Tensor&) {
  SG_CHECK(false, "inverse: not available on CUDA devices yet");
}

}  // namespace sg::detail::cuda
