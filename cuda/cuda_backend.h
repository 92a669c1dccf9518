// The CUDA backend: one sg::detail::Backend per device (ops/backend.h's cuda_backend), queuing
// every kernel, copy and cuBLAS call on that device's library stream.
#pragma once

#include "ops/backend.h"

namespace sg::detail {

namespace cuda {

/// Own kernels for elementwise maps, reductions, layout and structure ops,
/// cuBLAS for Dense·Dense products (float64 Symmetric operands with stored mirrors count as Dense),
/// the structured GEMM (cuda/structured_gemm.h) otherwise.
/// cuda_backend.cu holds most of it; select_kernels.cu the comparisons, arg reductions, gathers,
/// scatters and random integers.
class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);

  void fill(Tensor& out, double value) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void copy_from_host(const void* host, Tensor& dst) override;
  void copy_to_host(const Tensor& src, void* host) override;

  void unary(UnaryOp op, const Tensor& x, Tensor& out, double alpha) override;
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, const Broadcast& bc,
              double alpha) override;
  void compare(CompareOp op, const Tensor& a, const Tensor& b, Tensor& out, const Broadcast& bc) override;
  void sum(const Tensor& x, Tensor& out, int64_t outer, int64_t reduce, int64_t inner) override;
  void arg_reduce(ArgReduce kind, const Tensor& x, Tensor& values, Tensor& indices, int64_t outer, int64_t reduce,
                  int64_t inner) override;

  void gather(const Tensor& x, Tensor& out, const IndexMap& m) override;
  void scatter(const Tensor& src, Tensor& out, const IndexMap& m, bool accumulate) override;
  int64_t find_bad_index(const Tensor& index, int64_t extent) override;

  void transpose(const Tensor& x, Tensor& out) override;
  void triu(const Tensor& x, Tensor& out, int64_t diagonal) override;
  void tril(const Tensor& x, Tensor& out, int64_t diagonal) override;
  void symmetrize(const Tensor& x, Tensor& out) override;
  void diagonal(const Tensor& x, Tensor& out) override;
  void set_diagonal(const Tensor& x, const Tensor& d, Tensor& out) override;
  int64_t find_structure_violation(const Tensor& x, Structure s) override;

  void random(Tensor& out, RandomKind kind, uint64_t seed, uint64_t offset) override;
  void random_integers(Tensor& out, int64_t low, uint64_t span, uint64_t seed, uint64_t offset) override;
  void random_permutation(Tensor& out, uint64_t seed, uint64_t offset) override;

  bool gemm(const GemmProblem& p, DType dtype) override;
  bool writes_transposed_a(const GemmProblem& p, DType dtype) override;

  // Batches of small matrices run on the fused kernels (cuda/linalg_batched.cu); larger matrices
  // one at a time, blocked over the structured GEMM with small diagonal-block kernels (cuda/linalg_*.cu).
  void solve_triangular(const Tensor& t, Structure kind, bool trans, bool unit_diagonal, bool left, const Tensor& b,
                        Tensor& x) override;
  void cholesky(const Tensor& a, Tensor& out, Tensor& info) override;
  void triangular_inverse(const Tensor& t, Structure kind, bool unit_diagonal, Tensor& out) override;
  bool cholesky_backward(const Tensor& l, const Tensor& dl, Tensor& ds) override;

  void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& h) override;
  // cuda/multi_tensor.cu
  void adam_step_many(const std::vector<AdamSlot>& slots, const AdamParams& h, Tensor& counter) override;
  void sgd_step_many(const std::vector<SgdSlot>& slots, const SgdParams& h) override;
  void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                 const AdamParams& h) override;

 private:
  /// The blocked solve, Cholesky factor and inverse of one matrix (views from matrix_of); the Cholesky
  /// factor's info is one int64 on the device.
  void solve_one(const Tensor& t, Structure kind, bool trans, bool unit_diagonal, bool left, Tensor& x);
  void cholesky_one(const Tensor& a, Tensor& out, unsigned long long* info_word);
  void inverse_one(const Tensor& t, Structure kind, bool unit_diagonal, Tensor& out);
  /// Throws unless `t` is defined and lives on this backend's device; `op` names the caller.
  void expect_on_device(const char* op, const Tensor& t) const;
  /// triu (lower = false) or tril (lower = true) of a matrix; `op` names the caller.
  void triangle(const char* op, const Tensor& x, Tensor& out, int64_t diagonal, bool lower);
  /// Throws unless `index` is an int64 tensor on this device; `op` names the caller.
  void expect_index(const char* op, const Tensor& index) const;
  /// Throws unless a gather's or scatter's tensors are on this device and fit the map: `wide` as
  /// [outer, extent, inner], `compact` as [outer, count, inner], one dtype.
  void expect_index_map(const char* op, const Tensor& wide, const Tensor& compact, const IndexMap& m) const;

  int device_;
};

}  // namespace cuda
}  // namespace sg::detail
