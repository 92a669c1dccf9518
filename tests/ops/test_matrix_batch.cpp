// The seam for batches of matrices: the matrix-batch view every matrix op computes (shapes, strides,
// broadcast batch dimensions, empty batches, the errors), GemmProblem's batch (CUTLASS's L mode, a
// shared operand at stride 0), and the backends' matrix methods on [..., n, n], each matrix of a
// batch against the same method on that matrix alone.
#include "test_util.h"

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ops/backend.h"
#include "ops/gemm_desc.h"
#include "ops/matrix_batch.h"

namespace {

using sg::Structure;
using sg::detail::GemmProblem;
using sg::detail::MatrixBatch;

MatrixBatch view_of(const sg::Shape& shape) { return sg::detail::matrix_batch("op", "x", sg::zeros(shape)); }

TEST(MatrixBatchView, OneMatrixHasNoBatchDimensions) {
  const MatrixBatch v = view_of({3, 5});
  EXPECT_TRUE(v.single());
  EXPECT_EQ(v.count(), 1);
  EXPECT_EQ(v.rows, 3);
  EXPECT_EQ(v.cols, 5);
  EXPECT_EQ(v.row_stride, 5);
  EXPECT_FALSE(v.square());
  EXPECT_EQ(v.shape_with(5, 3), (sg::Shape{5, 3}));
}

TEST(MatrixBatchView, LeadingDimensionsAreTheBatchWithPackedStrides) {
  const MatrixBatch v = view_of({2, 3, 4, 4});
  EXPECT_FALSE(v.single());
  EXPECT_EQ(v.batch_shape, (sg::Shape{2, 3}));
  EXPECT_EQ(v.batch_strides, (std::vector<int64_t>{48, 16}));
  EXPECT_EQ(v.count(), 6);
  EXPECT_TRUE(v.square());
  EXPECT_EQ(v.matrix_stride(), 16);
  EXPECT_EQ(v.shape_with(4, 1), (sg::Shape{2, 3, 4, 1}));
}

TEST(MatrixBatchView, EmptyBatchesAndEmptyMatrices) {
  const MatrixBatch none = view_of({0, 3, 3});
  EXPECT_EQ(none.count(), 0);
  EXPECT_EQ(none.batch_shape, (sg::Shape{0}));
  const MatrixBatch empty = view_of({4, 0, 0});
  EXPECT_EQ(empty.count(), 4);
  EXPECT_EQ(empty.rows, 0);
  EXPECT_EQ(empty.matrix_stride(), 0);
}

TEST(MatrixBatchView, BroadcastBatchesStretchOnesAndMissingDimensionsAtStrideZero) {
  MatrixBatch a = view_of({2, 1, 3, 4}), b = view_of({5, 4, 2});
  sg::detail::broadcast_batches("matmul", a, b);
  EXPECT_EQ(a.batch_shape, (sg::Shape{2, 5}));
  EXPECT_EQ(b.batch_shape, (sg::Shape{2, 5}));
  EXPECT_EQ(a.batch_strides, (std::vector<int64_t>{12, 0}));  // a's matrices repeat along the second
  EXPECT_EQ(b.batch_strides, (std::vector<int64_t>{0, 8}));   // b's along the first (a missing dimension)
  EXPECT_EQ(a.matrix_stride(), -1);                          // no single step walks either batch
  EXPECT_EQ(b.matrix_stride(), -1);
  // One matrix against a batch: the matrix is shared at stride 0, the batch keeps its packed stride.
  MatrixBatch one = view_of({3, 3}), many = view_of({4, 3, 3});
  sg::detail::broadcast_batches("matmul", one, many);
  EXPECT_EQ(one.batch_shape, (sg::Shape{4}));
  EXPECT_EQ(one.matrix_stride(), 0);
  EXPECT_EQ(many.matrix_stride(), 9);
}

TEST(MatrixBatchView, ErrorsNameTheOpTheOperandAndTheShapes) {
  EXPECT_EQ(sgtest::message_of([] { sg::detail::matrix_batch("solve_triangular", "B", sg::zeros({3})); }),
            "solve_triangular: expected B to be a matrix or a batch of matrices, got shape [3]");
  EXPECT_EQ(sgtest::message_of([] { sg::detail::square_batch("cholesky", nullptr, sg::zeros({2, 2, 3})); }),
            "cholesky: expected a square matrix or a batch of them, got shape [2, 2, 3]");
  EXPECT_EQ(sgtest::message_of([] {
              MatrixBatch a = view_of({2, 3, 3}), b = view_of({3, 3, 3});
              sg::detail::broadcast_batches("matmul", a, b);
            }),
            "matmul: the batch shapes [2] and [3] cannot be broadcast");
  EXPECT_EQ(sgtest::message_of([] {
              sg::detail::broadcast_batch_shape("solve_triangular", sg::zeros({4, 3, 3}), sg::zeros({5, 3, 2}));
            }),
            "solve_triangular: the batch shapes [4] and [5] of shapes [4, 3, 3] and [5, 3, 2] cannot be broadcast");
}

TEST(MatrixBatchView, MessagesNameAMatrixByItsPlaceInTheBatch) {
  EXPECT_EQ(sg::detail::matrix_name(view_of({3, 3}), 0), "the matrix");
  EXPECT_EQ(sg::detail::matrix_position(view_of({3, 3}), 0), "");
  EXPECT_EQ(sg::detail::matrix_name(view_of({4, 3, 3}), 2), "matrix 2 of the batch");
  EXPECT_EQ(sg::detail::matrix_position(view_of({2, 3, 3, 3}), 5), " of matrix [1, 2] of the batch");
  EXPECT_EQ(sg::detail::broadcast_batch_shape("matmul", sg::zeros({2, 1, 3, 4}), sg::zeros({5, 4, 2})),
            (sg::Shape{2, 5}));
}

// ---- GemmProblem's batch and the backends' matrix methods ---------------------------------

class BatchOnDevice : public ::testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam()); }
  sg::Device device() const { return GetParam(); }
};

/// C_i = op(A_i)·op(B_i) for a batch of `batch` products described by `p` (sizes, descriptors), with
/// A shared across the batch (stride 0) where `shared_a`; each C_i against the same product run alone.
void expect_batch_matches_products(sg::Device device, GemmProblem p, int64_t batch, bool shared_a) {
  const sg::Tensor a = sg::randn({shared_a ? 1 : batch, p.m, p.k}, sg::TensorOptions().dtype(sg::kFloat64).device(device));
  const sg::Tensor b = sg::randn({batch, p.k, p.n}, sg::TensorOptions().dtype(sg::kFloat64).device(device));
  sg::Tensor c = sg::full({batch, p.m, p.n}, std::nan(""), sg::TensorOptions().dtype(sg::kFloat64).device(device));
  p.a_data = a.data_ptr();
  p.b_data = b.data_ptr();
  p.c_data = c.data_ptr();
  p.lda = p.k;
  p.ldb = p.ldc = p.n;
  p.batch = batch;
  p.batch_stride_a = shared_a ? 0 : p.m * p.k;
  p.batch_stride_b = p.k * p.n;
  p.batch_stride_c = p.m * p.n;
  sg::detail::backend_for(device).gemm(p, sg::kFloat64);
  const std::vector<double> batched = c.to_vector();
  for (int64_t i = 0; i < batch; ++i) {
    sg::Tensor one = sg::full({p.m, p.n}, std::nan(""), sg::TensorOptions().dtype(sg::kFloat64).device(device));
    GemmProblem q = sg::detail::batch_item(p, i, sizeof(double));
    EXPECT_EQ(q.batch, 1);
    EXPECT_EQ(q.a_data, static_cast<const char*>(p.a_data) + (shared_a ? 0 : i * p.m * p.k * 8));
    q.c_data = one.data_ptr();
    sg::detail::backend_for(device).gemm(q, sg::kFloat64);
    const std::vector<double> alone = one.to_vector();
    for (size_t e = 0; e < alone.size(); ++e)
      ASSERT_EQ(batched[static_cast<size_t>(i * p.m * p.n) + e], alone[e]) << "product " << i << ", element " << e;
  }
}

TEST_P(BatchOnDevice, GemmRunsEachProductOfItsBatch) {
  for (bool shared_a : {false, true}) {
    SCOPED_TRACE(shared_a ? "A shared by the batch" : "A per product");
    GemmProblem dense;
    dense.m = 7;
    dense.n = 5;
    dense.k = 6;
    expect_batch_matches_products(device(), dense, 3, shared_a);
    GemmProblem upper = dense;  // Upper·Dense into an Upper C: the structured kernels
    upper.m = upper.n = upper.k = 9;
    upper.a = {Structure::UpperTriangular, false};
    upper.mask = Structure::UpperTriangular;
    expect_batch_matches_products(device(), upper, 4, shared_a);
  }
}

/// Each matrix of method(batch) against method(that matrix alone), bit for bit.
void expect_each_matrix(sg::Device device, const sg::Tensor& batch, const sg::Shape& out_matrix,
                        const std::function<void(const sg::Tensor&, sg::Tensor&)>& method) {
  const int64_t count = batch.size(0), n = batch.size(-1);
  sg::Shape out_shape{count};
  out_shape.insert(out_shape.end(), out_matrix.begin(), out_matrix.end());
  sg::Tensor out = sg::full(out_shape, -7.0, sg::TensorOptions().dtype(batch.dtype()).device(device));
  method(batch, out);
  const std::vector<double> got = out.to_vector();
  const int64_t per = sg::shape_numel(out_matrix);
  const std::vector<double> values = batch.to_vector();
  for (int64_t i = 0; i < count; ++i) {
    const std::vector<double> one_values(values.begin() + i * n * n, values.begin() + (i + 1) * n * n);
    const sg::Tensor one = sg::from_vector(one_values, {n, n}, sg::TensorOptions().dtype(batch.dtype()).device(device));
    sg::Tensor one_out = sg::full(out_matrix, -7.0, sg::TensorOptions().dtype(batch.dtype()).device(device));
    method(one, one_out);
    const std::vector<double> want = one_out.to_vector();
    for (int64_t e = 0; e < per; ++e)
      ASSERT_EQ(got[static_cast<size_t>(i * per + e)], want[static_cast<size_t>(e)]) << "matrix " << i << ", element " << e;
  }
}

TEST_P(BatchOnDevice, MatrixMethodsWorkMatrixByMatrix) {
  sg::detail::Backend& backend = sg::detail::backend_for(device());
  for (int64_t n : {1, 5, 33}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const sg::Tensor x = sg::randn({3, n, n}, sg::TensorOptions().dtype(sg::kFloat64).device(device()));
    expect_each_matrix(device(), x, {n, n}, [&](const sg::Tensor& in, sg::Tensor& out) { backend.transpose(in, out); });
    expect_each_matrix(device(), x, {n, n}, [&](const sg::Tensor& in, sg::Tensor& out) { backend.triu(in, out, 1); });
    expect_each_matrix(device(), x, {n, n}, [&](const sg::Tensor& in, sg::Tensor& out) { backend.tril(in, out, 0); });
    expect_each_matrix(device(), x, {n, n},
                       [&](const sg::Tensor& in, sg::Tensor& out) { backend.symmetrize(in, out); });
    expect_each_matrix(device(), x, {n}, [&](const sg::Tensor& in, sg::Tensor& out) { backend.diagonal(in, out); });
    expect_each_matrix(device(), x, {n, n}, [&](const sg::Tensor& in, sg::Tensor& out) {
      // The same diagonal 10, 11, … for every matrix, so a matrix alone gets what it gets in the batch.
      sg::Shape shape(in.shape().begin(), in.shape().end() - 1);
      std::vector<double> d(static_cast<size_t>(sg::shape_numel(shape)));
      for (size_t e = 0; e < d.size(); ++e) d[e] = 10.0 + static_cast<double>(e % static_cast<size_t>(n));
      backend.set_diagonal(in, sg::from_vector(d, shape, sg::TensorOptions().dtype(sg::kFloat64).device(device())), out);
    });
  }
  // A rectangular batch: transpose and the triangles take any r × c.
  const sg::Tensor r = sg::randn({2, 3, 5}, sg::TensorOptions().dtype(sg::kFloat32).device(device()));
  sg::Tensor rt = sg::zeros({2, 5, 3}, sg::TensorOptions().dtype(sg::kFloat32).device(device()));
  backend.transpose(r, rt);
  const std::vector<double> rv = r.to_vector(), rtv = rt.to_vector();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j) ASSERT_EQ(rtv[static_cast<size_t>((b * 5 + j) * 3 + i)], rv[static_cast<size_t>((b * 3 + i) * 5 + j)]);
}

TEST_P(BatchOnDevice, StructureViolationsAreFoundInAnyMatrixOfABatch) {
  sg::detail::Backend& backend = sg::detail::backend_for(device());
  const int64_t n = 4;
  std::vector<double> v(static_cast<size_t>(3 * n * n), 0.0);
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i; j < n; ++j) v[static_cast<size_t>((b * n + i) * n + j)] = v[static_cast<size_t>((b * n + j) * n + i)] = 1.0 + i + j;
  const auto on_device = [&](const std::vector<double>& values) {
    return sg::from_vector(values, {3, n, n}, sg::TensorOptions().dtype(sg::kFloat64).device(device()));
  };
  EXPECT_EQ(backend.find_structure_violation(on_device(v), Structure::Symmetric), -1);
  std::vector<double> broken = v;
  broken[static_cast<size_t>((2 * n + 1) * n + 3)] = 0.5;  // matrix 2, entry (1, 3): its mirror differs
  EXPECT_EQ(backend.find_structure_violation(on_device(broken), Structure::Symmetric), (2 * n + 1) * n + 3);
  // Every matrix has non-zeros below its diagonal: the first is matrix 0's entry (1, 0).
  EXPECT_EQ(backend.find_structure_violation(on_device(v), Structure::UpperTriangular), n);
  std::vector<double> upper(v.size(), 0.0);
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i; j < n; ++j) upper[static_cast<size_t>((b * n + i) * n + j)] = 1.0;
  EXPECT_EQ(backend.find_structure_violation(on_device(upper), Structure::UpperTriangular), -1);
  upper[static_cast<size_t>((1 * n + 3) * n + 2)] = -1.0;  // matrix 1, entry (3, 2)
  EXPECT_EQ(backend.find_structure_violation(on_device(upper), Structure::UpperTriangular), (1 * n + 3) * n + 2);
  EXPECT_EQ(backend.find_structure_violation(on_device(upper), Structure::LowerTriangular), 1);
}

INSTANTIATE_TEST_SUITE_P(Devices, BatchOnDevice, ::testing::ValuesIn(sgtest::test_devices()),
                         sgtest::device_test_name);

}  // namespace
