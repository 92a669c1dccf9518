// The matmul op's pool of UpperTriangular outputs on CUDA devices: the blocks that such outputs
// leave behind with their zeros below the diagonal untouched, handed to the next product of the same
// shape, which then need not write those zeros again (GemmProblem::c_zeros_stored). A training
// loop's products get back the blocks of its previous step. Internal to ops/matmul.cpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <structgrad/core/tensor.h>

namespace sg::detail {

/// A product's UpperTriangular output from the pool, and whether its memory holds exact zeros below
/// the diagonal already.
class UpperOutput {
 public:
  Tensor tensor;
  bool zeros_held = false;
  /// Says that the product has written the output (its zeros included): when its tensors let go of
  /// the block untouched, it goes back to the pool. Without it, the block goes to the allocator.
  void written() const { *written_ = true; }

 private:
  friend UpperOutput take_upper_output(int64_t rows, int64_t cols, DType dtype, Device device);
  std::shared_ptr<std::atomic<bool>> written_;
};

/// A rows × cols UpperTriangular tensor of `dtype` on CUDA `device` for a product to write: a pooled
/// block of that shape, left by the current stream, where there is one (zeros_held), else a fresh
/// block. When the last tensor on it lets go, the block returns to the pool if the product wrote it
/// (UpperOutput::written) and nothing wrote it in place, viewed it as another shape or structure, or
/// used it on another stream since (Storage::version, Storage::reinterpretations,
/// Storage::used_on_other_streams); else to the caching allocator.
UpperOutput take_upper_output(int64_t rows, int64_t cols, DType dtype, Device device);
/// Gives every pooled block back to the caching allocator (sg::cuda::empty_cache does).
void release_upper_outputs();
/// Whether products take pooled blocks (on by default; off for the benchmark's comparison and tests).
void set_upper_output_reuse(bool on);
bool upper_output_reuse();
/// Outputs handed a block that held their zeros, since the process started (for the tests).
int64_t upper_outputs_reused();

}  // namespace sg::detail
