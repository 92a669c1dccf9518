// Batches of structured matrices [..., n, n] through every matrix op, forward and backward: each
// matrix of a batched result (and of its gradients) against the same op on that matrix alone in
// float64 on the CPU, broadcasting of batch dimensions, batches of one and of none, the errors, and
// a structure-aware gradcheck of the batched ops. The orders cover the fused small-matrix kernels
// (n ≤ 128 on CUDA) and the large kernels run matrix by matrix.
#include "test_util.h"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace {

using sg::Structure;
using sg::Tensor;
using sgtest::DeviceDtype;

/// Matrix i (row-major over the batch) of t [..., r, c], as an [r, c] tensor of t's structure.
Tensor matrix_at(const Tensor& t, int64_t i) {
  const int64_t r = t.size(-2), c = t.size(-1);
  const Tensor index = sg::from_vector(std::vector<int64_t>{i}, {1}, sg::TensorOptions().device(t.device()));
  return sg::reshape(sg::index_select(sg::reshape(t, {-1, r, c}), 0, index), {r, c});
}

/// Entry i of the batch of a tensor of shape batch + tail (tail: the trailing `tail_dims` dimensions).
Tensor entry_at(const Tensor& t, int64_t i, int tail_dims) {
  if (tail_dims == 2) return matrix_at(t, i);
  sg::Shape tail(t.shape().end() - tail_dims, t.shape().end()), flat{-1};
  flat.insert(flat.end(), tail.begin(), tail.end());
  const Tensor index = sg::from_vector(std::vector<int64_t>{i}, {1}, sg::TensorOptions().device(t.device()));
  return sg::reshape(sg::index_select(sg::reshape(t, flat), 0, index), tail);
}

/// A batch of well-conditioned symmetric positive definite matrices: X·Xᵀ/n + I.
Tensor spd(const sg::Shape& batch, int64_t n, sg::TensorOptions o) {
  sg::Shape shape = batch;
  shape.push_back(n);
  shape.push_back(n);
  const Tensor x = sg::randn(shape, o);
  return sg::sym(sg::matmul(x, sg::transpose(x)) / static_cast<double>(n) + sg::eye(n, o));
}

/// A batch of well-conditioned triangular matrices of structure s: random off the diagonal (scaled
/// by 1/n, so that each row is diagonally dominant), 1.5 to 2.5 on it.
Tensor triangular(Structure s, const sg::Shape& batch, int64_t n, sg::TensorOptions o) {
  sg::Shape shape = batch;
  shape.push_back(n);
  shape.push_back(n);
  const Tensor w = sg::randn(shape, o) / static_cast<double>(n);
  sg::Shape d_shape = batch;
  d_shape.push_back(n);
  const Tensor d = sg::rand(d_shape, o) + 1.5;
  const Tensor t = s == Structure::UpperTriangular ? Tensor(sg::triu(w)) : Tensor(sg::tril(w));
  return sg::with_diagonal(t, d);
}

/// A tensor of structure s of the given batch (Dense: random; Symmetric: sym of random).
Tensor structured(Structure s, const sg::Shape& batch, int64_t rows, int64_t cols, sg::TensorOptions o) {
  if (s == Structure::UpperTriangular || s == Structure::LowerTriangular) return triangular(s, batch, rows, o);
  sg::Shape shape = batch;
  shape.push_back(rows);
  shape.push_back(cols);
  const Tensor x = sg::randn(shape, o);
  return s == Structure::Symmetric ? Tensor(sg::sym(x)) : x;
}

double tolerance(sg::DType dtype) { return dtype == sg::kFloat32 ? 2e-4 : 1e-10; }

/// Checks got ≈ want (float64 reference values) entry by entry, and that got keeps want's structure.
void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  EXPECT_EQ(got.structure(), want.structure()) << what;
  EXPECT_TRUE(sgtest::all_close(got.to_vector(), want.to_vector(), tol, tol)) << what;
  EXPECT_TRUE(sgtest::holds_invariant(got)) << what;
}

class BatchedOps : public ::testing::TestWithParam<DeviceDtype> {
 protected:
  void SetUp() override {
    SG_SKIP_IF_UNAVAILABLE(GetParam().device);
    sg::manual_seed(7);
  }
  sg::TensorOptions opts() const { return sg::TensorOptions().dtype(GetParam().dtype).device(GetParam().device); }
  double tol() const { return tolerance(GetParam().dtype); }

  /// Runs `op` on the batched inputs (on the test's device and dtype), and matrix by matrix on each
  /// input's matrix i (inputs of one matrix shared) in float64 on the CPU; checks the results and
  /// the gradients of ⟨W, op⟩ for a random W against each other. `tail_dims`: the result's
  /// dimensions after the batch (2 for a matrix, 1 for diagonals, 0 for log-determinants).
  void expect_matches_loop(const std::string& what, const std::vector<Tensor>& inputs,
                           const std::function<Tensor(const std::vector<Tensor>&)>& op, int tail_dims = 2) {
    std::vector<Tensor> leaves;
    for (const Tensor& x : inputs) leaves.push_back(x.detach().requires_grad_());
    {
      // NaN in the cached blocks that outputs of the inputs' sizes will reuse: an entry a kernel
      // leaves unwritten shows.
      std::vector<Tensor> poison;
      for (const Tensor& x : inputs)
        for (int copy = 0; copy < 4; ++copy) poison.push_back(sg::full(x.shape(), NAN, opts()));
    }
    const Tensor out = op(leaves);
    const int64_t count = sg::shape_numel(sg::Shape(out.shape().begin(), out.shape().end() - tail_dims));
    const Tensor w = sg::randn(out.shape(), opts());
    sg::sum(out * w).backward();
    for (int64_t i = 0; i < count; ++i) {
      std::vector<Tensor> one;
      for (const Tensor& x : inputs) {
        // The matrix of x at output matrix i: x's batch broadcast against the output's.
        const int64_t x_count = sg::shape_numel(sg::Shape(x.shape().begin(), x.shape().end() - 2));
        const Tensor m = x_count == 1 ? sg::reshape(x, {x.size(-2), x.size(-1)}) : matrix_at(x, i % x_count);
        one.push_back(m.to(sg::kCPU).to(sg::kFloat64).detach().requires_grad_());
      }
      const Tensor ref = op(one);
      const Tensor w_i = entry_at(w, i, tail_dims).to(sg::kCPU).to(sg::kFloat64);
      expect_close(entry_at(out, i, tail_dims).to(sg::kCPU).to(sg::kFloat64), ref.detach(), tol(),
                   what + ", matrix " + std::to_string(i));
      sg::sum(ref * w_i).backward();
      for (size_t k = 0; k < inputs.size(); ++k) {
        const int64_t x_count = sg::shape_numel(sg::Shape(inputs[k].shape().begin(), inputs[k].shape().end() - 2));
        if (x_count != count) continue;  // a shared input's gradient sums over the batch: checked below
        expect_close(matrix_at(leaves[k].grad(), i).to(sg::kCPU).to(sg::kFloat64), one[k].grad(), 10 * tol(),
                     what + ", gradient of input " + std::to_string(k) + ", matrix " + std::to_string(i));
      }
    }
  }
};

TEST_P(BatchedOps, EveryStructurePairMultipliesMatrixByMatrixWithBroadcastBatches) {
  const Structure all[] = {Structure::Dense, Structure::UpperTriangular, Structure::LowerTriangular,
                           Structure::Symmetric};
  for (int64_t n : {6, 45})  // one tile of a fused product's rows and columns, and several
    for (Structure sa : all)
      for (Structure sb : all) {
        const std::string what = std::string("matmul ") + sg::structure_name(sa) + " · " + sg::structure_name(sb) +
                                 " n = " + std::to_string(n);
        expect_matches_loop(what, {structured(sa, {3}, n, n, opts()), structured(sb, {3}, n, n, opts())},
                            [](const std::vector<Tensor>& in) { return sg::matmul(in[0], in[1]); });
      }
  // A batch against one shared matrix, and a batch broadcast along two dimensions.
  const Tensor batch = structured(Structure::UpperTriangular, {2, 3}, 5, 5, opts());
  const Tensor one = structured(Structure::UpperTriangular, {}, 5, 5, opts());
  const Tensor out = sg::matmul(batch, one);
  EXPECT_EQ(out.shape(), (sg::Shape{2, 3, 5, 5}));
  EXPECT_EQ(out.structure(), Structure::UpperTriangular);
  expect_matches_loop("matmul, shared b", {batch, one}, [](const std::vector<Tensor>& in) { return sg::matmul(in[0], in[1]); });
  const Tensor a = sg::randn({4, 1, 3, 5}, opts()), b = sg::randn({2, 5, 2}, opts());
  EXPECT_EQ(sg::matmul(a, b).shape(), (sg::Shape{4, 2, 3, 2}));
}

TEST_P(BatchedOps, ASharedOperandGetsItsGradientSummedOverTheBatch) {
  const Tensor batch = structured(Structure::Dense, {4}, 5, 3, opts()).requires_grad_();
  const Tensor u = structured(Structure::UpperTriangular, {}, 3, 3, opts()).requires_grad_();
  sg::sum(sg::matmul(batch, u)).backward();
  Tensor want = sg::zeros({3, 3}, sg::TensorOptions().dtype(sg::kFloat64));
  for (int64_t i = 0; i < 4; ++i) {
    const Tensor u_i = u.detach().to(sg::kCPU).to(sg::kFloat64).requires_grad_();
    sg::sum(sg::matmul(matrix_at(batch, i).detach().to(sg::kCPU).to(sg::kFloat64), u_i)).backward();
    want = want + u_i.grad();
  }
  ASSERT_TRUE(u.grad().defined());
  EXPECT_EQ(u.grad().shape(), (sg::Shape{3, 3}));
  EXPECT_EQ(u.grad().structure(), Structure::UpperTriangular);
  EXPECT_TRUE(sgtest::all_close(u.grad().to_vector(), sg::triu(want).to_vector(), 10 * tol(), 10 * tol()));
}

TEST_P(BatchedOps, StructureOpsWorkMatrixByMatrix) {
  const Tensor x = sg::randn({2, 3, 4, 4}, opts());
  expect_matches_loop("triu", {x}, [](const std::vector<Tensor>& in) { return Tensor(sg::triu(in[0])); });
  expect_matches_loop("tril", {x}, [](const std::vector<Tensor>& in) { return Tensor(sg::tril(in[0], -1)); });
  expect_matches_loop("sym", {x}, [](const std::vector<Tensor>& in) { return Tensor(sg::sym(in[0])); });
  expect_matches_loop("transpose", {sg::randn({3, 4, 2}, opts())},
                      [](const std::vector<Tensor>& in) { return sg::transpose(in[0]); });
  expect_matches_loop("transpose upper", {triangular(Structure::UpperTriangular, {3}, 4, opts())},
                      [](const std::vector<Tensor>& in) { return sg::transpose(in[0]); });
  expect_matches_loop("diagonal", {x}, [](const std::vector<Tensor>& in) { return sg::diagonal(in[0]); }, 1);
  expect_matches_loop("with_diagonal", {triangular(Structure::LowerTriangular, {5}, 4, opts())},
                      [](const std::vector<Tensor>& in) { return sg::with_diagonal(in[0], sg::exp(sg::diagonal(in[0]))); });
  const Tensor d = sg::randn({2, 3, 4}, opts());
  const Tensor e = sg::diag_embed(d);
  EXPECT_EQ(e.shape(), (sg::Shape{2, 3, 4, 4}));
  EXPECT_TRUE(sgtest::all_close(sg::diagonal(e).to_vector(), d.to_vector(), 0, 0));
  EXPECT_TRUE(sgtest::all_close(sg::sum(e).to_vector(), sg::sum(d).to_vector(), tol(), tol()));
  // The checked entries take a batch, and an error names the matrix.
  const Tensor upper = triangular(Structure::UpperTriangular, {3}, 4, opts());
  EXPECT_EQ(sg::as_upper(upper.dense()).structure(), Structure::UpperTriangular);
  EXPECT_EQ(sg::as_symmetric(spd({2}, 3, opts()).dense()).structure(), Structure::Symmetric);
  std::vector<double> values(2 * 3 * 3, 0.0);
  values[9 + 1 * 3 + 0] = 0.5;  // matrix 1, entry (1, 0)
  EXPECT_EQ(sgtest::message_of([&] { sg::as_upper(sg::from_vector(values, {2, 3, 3}, opts())); }),
            "as_upper: entry (1, 0) of matrix 1 of the batch = 0.5 is below the diagonal and not zero; use sg::triu "
            "to project");
}

TEST_P(BatchedOps, TagsSurviveBatchIndexingJoiningAndReductions) {
  const Tensor l = triangular(Structure::LowerTriangular, {4}, 3, opts());
  const Tensor index = sg::from_vector(std::vector<int64_t>{2, 0}, {2}, sg::TensorOptions().device(GetParam().device));
  EXPECT_EQ(sg::index_select(l, 0, index).structure(), Structure::LowerTriangular);
  EXPECT_EQ(sg::index_select(l, 1, index).structure(), Structure::Dense);  // rows picked: no longer square
  EXPECT_EQ(sg::cat({l, l}, 0).structure(), Structure::LowerTriangular);
  EXPECT_EQ(sg::cat({l, l}, 1).structure(), Structure::Dense);
  const Tensor stacked = sg::stack({l, l}, 0);
  EXPECT_EQ(stacked.shape(), (sg::Shape{2, 4, 3, 3}));
  EXPECT_EQ(stacked.structure(), Structure::LowerTriangular);
  EXPECT_EQ(sg::sum(l, 0).structure(), Structure::LowerTriangular);
  EXPECT_EQ(sg::sum(l, -1).structure(), Structure::Dense);
  EXPECT_EQ((l * 2.0).structure(), Structure::LowerTriangular);
  EXPECT_EQ((l + triangular(Structure::LowerTriangular, {}, 3, opts())).structure(), Structure::LowerTriangular);
  EXPECT_EQ(sg::reshape(l, {2, 2, 3, 3}).structure(), Structure::LowerTriangular);
  const sg::LowerTriangular typed(l);
  EXPECT_EQ(typed.n(), 3);
  EXPECT_EQ(sg::broadcast_to(typed, {2, 4, 3, 3}).structure(), Structure::LowerTriangular);
}

TEST_P(BatchedOps, TriangularSolvesEveryWayWithBroadcastAndSharedFactors) {
  // Orders padded to 8, 16, 32 and 64 by the thread-per-right-hand-side solves, 64 itself, one for
  // the block-per-matrix solve, and one past the fused kernels.
  for (int64_t n : {4, 13, 20, 33, 64, 100, 130}) {
    for (Structure s : {Structure::UpperTriangular, Structure::LowerTriangular})
      for (bool left : {true, false})
        for (bool unit : {false, true}) {
          const std::string what = "solve_triangular n = " + std::to_string(n) + " " + sg::structure_name(s) +
                                   (left ? " left" : " right") + (unit ? " unit" : "");
          const Tensor t = triangular(s, {3}, n, opts());
          const Tensor b = left ? sg::randn({3, n, 5}, opts()) : sg::randn({3, 5, n}, opts());
          expect_matches_loop(what, {t, b}, [left, unit](const std::vector<Tensor>& in) {
            return sg::solve_triangular(in[0], in[1], left, unit);
          });
        }
  }
  // More right-hand sides than one block of threads takes.
  expect_matches_loop("solve, 200 right-hand sides", {triangular(Structure::UpperTriangular, {2}, 9, opts()),
                                                     sg::randn({2, 9, 200}, opts())},
                      [](const std::vector<Tensor>& in) { return sg::solve_triangular(in[0], in[1]); });
  // One factor the batch shares, and batch dimensions that broadcast.
  const Tensor l = triangular(Structure::LowerTriangular, {}, 6, opts());
  expect_matches_loop("solve, shared T", {l, sg::randn({4, 6, 2}, opts())},
                      [](const std::vector<Tensor>& in) { return sg::solve_triangular(in[0], in[1]); });
  const Tensor t = triangular(Structure::UpperTriangular, {2, 1}, 3, opts());
  EXPECT_EQ(sg::solve_triangular(t, sg::randn({3, 3, 2}, opts())).shape(), (sg::Shape{2, 3, 3, 2}));
  EXPECT_EQ(sgtest::message_of([&] { sg::solve_triangular(triangular(Structure::LowerTriangular, {4}, 3, opts()),
                                                          sg::randn({5, 3, 2}, opts())); }),
            "solve_triangular: the batch shapes [4] and [5] of shapes [4, 3, 3] and [5, 3, 2] cannot be broadcast");
}

TEST_P(BatchedOps, CholeskyLogdetCholeskySolveAndInverse) {
  for (int64_t n : {1, 5, 16, 17, 32, 100, 130}) {
    const std::string at = " n = " + std::to_string(n);
    const Tensor s = spd({2, 2}, n, opts());
    expect_matches_loop("cholesky" + at, {s}, [](const std::vector<Tensor>& in) { return Tensor(sg::cholesky(in[0])); });
    expect_matches_loop("logdet" + at, {s}, [](const std::vector<Tensor>& in) { return sg::logdet(in[0]); }, 0);
    expect_matches_loop("cholesky_solve" + at, {triangular(Structure::LowerTriangular, {3}, n, opts()),
                                                sg::randn({3, n, 2}, opts())},
                        [](const std::vector<Tensor>& in) { return sg::cholesky_solve(in[0], in[1]); });
    for (Structure st : {Structure::UpperTriangular, Structure::LowerTriangular})
      expect_matches_loop("inverse" + at, {triangular(st, {3}, n, opts())},
                          [](const std::vector<Tensor>& in) { return sg::inverse(in[0]); });
  }
  // Batches that end part-way through a block of the fused kernels (16 and 4 matrices to a block).
  for (int64_t n : {7, 20})
    expect_matches_loop("cholesky, 37 matrices, n = " + std::to_string(n), {spd({37}, n, opts())},
                        [](const std::vector<Tensor>& in) { return Tensor(sg::cholesky(in[0])); });
  expect_matches_loop("gram", {sg::randn({3, 4, 6}, opts())},
                      [](const std::vector<Tensor>& in) { return Tensor(sg::gram(in[0])); });
}

TEST_P(BatchedOps, CholeskyExReportsEachMatrixAndLeavesTheOthersRight) {
  for (int64_t n : {4, 20, 40, 130}) {
    const Tensor good = spd({4}, n, opts());
    std::vector<double> v = good.to_vector();
    v[static_cast<size_t>(1 * n * n + 2 * n + 2)] = -50.0;  // matrix 1: pivot 3 is not positive
    v[static_cast<size_t>(3 * n * n + 1 * n + 0)] = NAN;    // matrix 3: a NaN at (1, 0) and (0, 1)
    const Tensor s = sg::sym(sg::from_vector(v, {4, n, n}, opts()));  // the NaN mirrored
    const sg::CholeskyResult r = sg::cholesky_ex(s);
    EXPECT_EQ(r.info.shape(), (sg::Shape{4}));
    const std::vector<double> info = r.info.to_vector();
    EXPECT_EQ(info[0], 0.0);
    EXPECT_EQ(info[1], 3.0);
    EXPECT_EQ(info[2], 0.0);
    EXPECT_EQ(info[3], 2.0);  // the NaN meets the second pivot
    for (int64_t i : {0, 2}) {
      const Tensor want = sg::cholesky(matrix_at(good, i).to(sg::kCPU).to(sg::kFloat64));
      expect_close(matrix_at(r.L, i).to(sg::kCPU).to(sg::kFloat64), want, tol(), "cholesky_ex, matrix " + std::to_string(i));
    }
    EXPECT_EQ(sgtest::message_of([&] { sg::cholesky(sg::index_select(s, 0, sg::from_vector(std::vector<int64_t>{0, 1},
                                                                     {2}, sg::TensorOptions().device(GetParam().device)))); }),
              "cholesky: matrix 1 of the batch is not positive definite: pivot 3 of " + std::to_string(n) +
                  " is not positive");
    EXPECT_EQ(sgtest::message_of([&] { sg::cholesky(s); }),
              "cholesky: matrix 1 of the batch is not positive definite: pivot 3 of " + std::to_string(n) +
                  " is not positive");
    EXPECT_EQ(sgtest::message_of([&] { sg::logdet(sg::index_select(s, 0, sg::from_vector(std::vector<int64_t>{3},
                                                                   {1}, sg::TensorOptions().device(GetParam().device)))); }),
              "logdet: matrix 0 of the batch holds a NaN at (1, 0)");
  }
}

TEST_P(BatchedOps, BatchesOfOneAndOfNoneAndEmptyMatrices) {
  const Tensor one = spd({1}, 4, opts());
  EXPECT_EQ(sg::cholesky(one).shape(), (sg::Shape{1, 4, 4}));
  EXPECT_EQ(sg::logdet(one).shape(), (sg::Shape{1}));
  const Tensor none = sg::as_symmetric(sg::zeros({0, 4, 4}, opts()));
  const sg::CholeskyResult r = sg::cholesky_ex(none);
  EXPECT_EQ(r.L.shape(), (sg::Shape{0, 4, 4}));
  EXPECT_EQ(r.info.shape(), (sg::Shape{0}));
  EXPECT_EQ(sg::logdet(none).shape(), (sg::Shape{0}));
  const Tensor l0 = sg::as_lower(sg::zeros({0, 3, 3}, opts()));
  EXPECT_EQ(sg::solve_triangular(l0, sg::zeros({0, 3, 2}, opts())).shape(), (sg::Shape{0, 3, 2}));
  EXPECT_EQ(sg::inverse(l0).shape(), (sg::Shape{0, 3, 3}));
  const Tensor a0 = sg::randn({0, 3, 3}, opts()).requires_grad_();
  const Tensor b = sg::randn({3, 3}, opts()).requires_grad_();
  sg::sum(sg::matmul(a0, b)).backward();
  EXPECT_EQ(b.grad().shape(), (sg::Shape{3, 3}));
  EXPECT_TRUE(sgtest::all_close(b.grad().to_vector(), std::vector<double>(9, 0.0), 0, 0));  // an empty sum
  const Tensor empty_matrices = sg::as_symmetric(sg::zeros({3, 0, 0}, opts()));
  EXPECT_EQ(sg::cholesky(empty_matrices).shape(), (sg::Shape{3, 0, 0}));
  EXPECT_TRUE(sgtest::all_close(sg::logdet(empty_matrices).to_vector(), {0.0, 0.0, 0.0}, 0, 0));
}

INSTANTIATE_TEST_SUITE_P(DevicesDtypes, BatchedOps, ::testing::ValuesIn(sgtest::test_devices_and_dtypes()),
                         sgtest::device_dtype_test_name);

// ---- gradcheck of the batched ops, inside each input's structure, in float64 -----------------

class BatchedGradcheck : public ::testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override {
    SG_SKIP_IF_UNAVAILABLE(GetParam());
    sg::manual_seed(11);
  }
  sg::TensorOptions opts() const { return sg::TensorOptions().dtype(sg::kFloat64).device(GetParam()); }
  void check(const std::string& what, const std::function<Tensor(const std::vector<Tensor>&)>& f,
             const std::vector<Tensor>& inputs) {
    std::vector<Tensor> leaves;
    for (const Tensor& x : inputs) leaves.push_back(x.detach().requires_grad_());
    const sg::GradcheckResult r = sg::gradcheck(f, leaves);
    EXPECT_TRUE(r.ok) << what << ": " << r.message;
  }
};

TEST_P(BatchedGradcheck, ProductsSolvesAndFactorizations) {
  const auto lower = triangular(Structure::LowerTriangular, {2}, 3, opts());
  const auto upper = triangular(Structure::UpperTriangular, {2}, 3, opts());
  check("matmul upper · symmetric", [](const auto& in) { return sg::matmul(in[0], in[1]); },
        {upper, sg::sym(sg::randn({2, 3, 3}, opts()))});
  check("matmul lower · shared dense", [](const auto& in) { return sg::matmul(in[0], in[1]); },
        {lower, sg::randn({3, 2}, opts())});
  check("solve_triangular", [](const auto& in) { return sg::solve_triangular(in[0], in[1]); },
        {lower, sg::randn({2, 3, 2}, opts())});
  check("solve_triangular right, shared T", [](const auto& in) { return sg::solve_triangular(in[0], in[1], false); },
        {triangular(Structure::UpperTriangular, {}, 3, opts()), sg::randn({2, 2, 3}, opts())});
  check("cholesky", [](const auto& in) { return Tensor(sg::cholesky(in[0])); }, {spd({2}, 3, opts())});
  check("logdet", [](const auto& in) { return sg::logdet(in[0]); }, {spd({2}, 3, opts())});
  check("cholesky_solve", [](const auto& in) { return sg::cholesky_solve(in[0], in[1]); },
        {lower, sg::randn({2, 3, 1}, opts())});
  check("inverse", [](const auto& in) { return sg::inverse(in[0]); }, {upper});
  check("gram", [](const auto& in) { return Tensor(sg::gram(in[0])); }, {sg::randn({2, 3, 2}, opts())});
  check("diagonal and with_diagonal", [](const auto& in) { return sg::with_diagonal(in[0], sg::exp(sg::diagonal(in[0]))); },
        {lower});
}

INSTANTIATE_TEST_SUITE_P(Devices, BatchedGradcheck, ::testing::ValuesIn(sgtest::test_devices()),
                         sgtest::device_test_name);

}  // namespace
