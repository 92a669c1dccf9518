// Broadcasting and reductions at any rank, the structure rules of broadcast operands (a table over
// operand shape × structure × op × order), the int64 dtype's basics, dtype inference and printing.
#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include <structgrad/structgrad.h>
#include "test_util.h"

namespace {

using S = sg::Structure;
using sgtest::message_of;

class Broadcast : public testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam()); }
  sg::TensorOptions f64() const { return sg::TensorOptions().dtype(sg::kFloat64).device(GetParam()); }
};

TEST_P(Broadcast, RankThreeAgainstRankTwo) {
  sg::manual_seed(7);
  const sg::Tensor a = sg::randn({2, 1, 3}, f64()), b = sg::randn({4, 1}, f64());
  const sg::Tensor c = a * b + a;
  ASSERT_EQ(c.shape(), (sg::Shape{2, 4, 3}));
  const auto av = a.to_vector(), bv = b.to_vector(), cv = c.to_vector();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) EXPECT_NEAR(cv[(i * 4 + j) * 3 + k], av[i * 3 + k] * bv[j] + av[i * 3 + k], 1e-12);
  // Alternating broadcasts that cannot merge, up to the limit of 8 dimensions.
  const sg::Tensor p = sg::ones({2, 1, 2, 1, 2, 1, 2, 1}, f64()), q = sg::ones({1, 2, 1, 2, 1, 2, 1, 2}, f64());
  EXPECT_EQ(sg::sum(p + q).item(), 512.0);
  const sg::Tensor p9 = sg::ones({1, 2, 1, 2, 1, 2, 1, 2, 1}, f64()), q9 = sg::ones({2, 1, 2, 1, 2, 1, 2, 1, 2}, f64());
  EXPECT_EQ(message_of([&] { p9 + q9; }),
            "add: broadcasting shapes [1, 2, 1, 2, 1, 2, 1, 2, 1] and [2, 1, 2, 1, 2, 1, 2, 1, 2] needs more than 8 dimensions");
  EXPECT_EQ(message_of([&] { sg::ones({2, 3, 4}, f64()) + sg::ones({2, 4}, f64()); }),
            "add: shapes [2, 3, 4] and [2, 4] cannot be broadcast");
}

TEST_P(Broadcast, ReductionsAlongAnyDimension) {
  const sg::Tensor x = sg::reshape(sg::arange(0.0, 24.0, 1.0, f64()), {2, 3, 4});
  EXPECT_EQ(sg::sum(x, 1).to_vector(), (std::vector<double>{12, 15, 18, 21, 48, 51, 54, 57}));
  EXPECT_EQ(sg::sum(x, 0, true).shape(), (sg::Shape{1, 3, 4}));
  EXPECT_EQ(sg::sum(x, -1).to_vector(), (std::vector<double>{6, 22, 38, 54, 70, 86}));
  EXPECT_EQ(sg::mean(x, 2).to_vector(), (std::vector<double>{1.5, 5.5, 9.5, 13.5, 17.5, 21.5}));
  EXPECT_EQ(sg::sum(x).item(), 276.0);
}

TEST_P(Broadcast, GradientsAtRankThree) {
  sg::manual_seed(8);
  const std::vector<sg::Tensor> in = {sg::randn({2, 1, 3}, f64()).requires_grad_(), sg::randn({4, 1}, f64()).requires_grad_(),
                                      sg::randn({3}, f64()).requires_grad_()};
  auto f = [](const std::vector<sg::Tensor>& t) { return sg::sum(sg::tanh(t[0] * t[1] - t[2] / (t[1] * t[1] + 1.0)), 1); };
  const sg::GradcheckResult r = sg::gradcheck(f, in);
  EXPECT_TRUE(r.ok) << r.message;
  const sg::GradcheckResult m = sg::gradcheck([](const auto& t) { return sg::mean(t[0], 0, true); },
                                              {sg::randn({3, 2, 2}, f64()).requires_grad_()});
  EXPECT_TRUE(m.ok) << m.message;
}

// ---- structure rules of broadcast operands -------------------------------------------------

enum class Kind { Scalar0d, Scalar1, Scalar11, Row, Row1n, Column, DenseMatrix, SameStructure, Batch };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Scalar0d: return "0-d";
    case Kind::Scalar1: return "[1]";
    case Kind::Scalar11: return "[1, 1]";
    case Kind::Row: return "[n]";
    case Kind::Row1n: return "[1, n]";
    case Kind::Column: return "[n, 1]";
    case Kind::DenseMatrix: return "[n, n] Dense";
    case Kind::SameStructure: return "[n, n] same structure";
    case Kind::Batch: return "[2, n, n]";
  }
  return "?";
}
enum class Op { Mul, Add, Sub, Div };
const char* op_name(Op op) { return op == Op::Mul ? "mul" : op == Op::Add ? "add" : op == Op::Sub ? "sub" : "div"; }

/// The rule, written out as a table: what (structured s) op (other of kind k) gives, with the
/// structured operand first (`first`) or second.
S expected(Op op, S s, Kind k, bool first) {
  const bool scalar = k == Kind::Scalar0d || k == Kind::Scalar1 || k == Kind::Scalar11;
  const bool vector = k == Kind::Row || k == Kind::Row1n || k == Kind::Column;
  if (k == Kind::Batch) k = Kind::DenseMatrix;  // the structured matrix broadcast over a batch: each matrix as one
  if (k == Kind::SameStructure && op != Op::Div) return s;
  if (s == S::UpperTriangular || s == S::LowerTriangular) {
    if (op == Op::Mul) return s;
    if (op == Op::Div && first && (scalar || vector)) return s;
    return S::Dense;
  }
  // Symmetric: a scalar keeps it (except a scalar added to...: also kept), a row or column breaks it.
  if (k == Kind::SameStructure) return S::Symmetric;  // S / S
  if (scalar) return S::Symmetric;
  return S::Dense;
}

sg::Tensor structured(S s, const sg::Tensor& x) {
  if (s == S::UpperTriangular) return sg::triu(x);
  if (s == S::LowerTriangular) return sg::tril(x);
  return sg::sym(x);
}

sg::Tensor operand(Kind k, S s, int64_t n, const sg::TensorOptions& o) {
  auto positive = [&](const sg::Shape& shape) { return sg::rand(shape, o) + 0.5; };
  switch (k) {
    case Kind::Scalar0d: return positive({});
    case Kind::Scalar1: return positive({1});
    case Kind::Scalar11: return positive({1, 1});
    case Kind::Row: return positive({n});
    case Kind::Row1n: return positive({1, n});
    case Kind::Column: return positive({n, 1});
    case Kind::DenseMatrix: return positive({n, n});
    case Kind::SameStructure: return structured(s, positive({n, n}));
    case Kind::Batch: return positive({2, n, n});
  }
  return {};
}

sg::Tensor apply(Op op, const sg::Tensor& a, const sg::Tensor& b) {
  switch (op) {
    case Op::Mul: return a * b;
    case Op::Add: return a + b;
    case Op::Sub: return a - b;
    case Op::Div: return a / b;
  }
  return {};
}

TEST_P(Broadcast, StructureRulesForEveryOperandShapeAndOrder) {
  const int64_t n = 4;
  sg::manual_seed(9);
  int checked = 0;
  for (S s : {S::UpperTriangular, S::LowerTriangular, S::Symmetric})
    for (Op op : {Op::Mul, Op::Add, Op::Sub, Op::Div})
      for (Kind k : {Kind::Scalar0d, Kind::Scalar1, Kind::Scalar11, Kind::Row, Kind::Row1n, Kind::Column,
                     Kind::DenseMatrix, Kind::SameStructure, Kind::Batch})
        for (bool first : {true, false}) {
          const sg::Tensor m = structured(s, sg::rand({n, n}, f64()) + 0.5);
          const sg::Tensor other = operand(k, s, n, f64());
          const sg::Tensor a = first ? m : other, b = first ? other : m;
          const sg::Tensor got = apply(op, a, b);
          const std::string what = std::string(op_name(op)) + " " + sg::structure_name(s) + (first ? " op " : " op⁻¹ ") + kind_name(k);
          EXPECT_EQ(got.structure(), expected(op, s, k, first)) << what;
          EXPECT_TRUE(sgtest::holds_invariant(got)) << what;
          // The values are the Dense computation's, except entries an Upper result keeps at exact zero.
          const auto want = apply(op, a.dense(), b.dense()).to_vector(), v = got.to_vector();
          ASSERT_EQ(v.size(), want.size()) << what;
          for (size_t i = 0; i < v.size(); ++i) {
            const int64_t r = static_cast<int64_t>(i) / n % n, c = static_cast<int64_t>(i) % n;
            if ((got.structure() == S::UpperTriangular && r > c) || (got.structure() == S::LowerTriangular && r < c))
              EXPECT_EQ(v[i], 0.0) << what;
            else EXPECT_TRUE(sgtest::same_ieee(v[i], want[i])) << what << " at " << i;
          }
          ++checked;
        }
  EXPECT_EQ(checked, 3 * 4 * 9 * 2);
}

TEST_P(Broadcast, TypedOverloadsHoldWhatTheyPromise) {
  const sg::UpperTriangular u = sg::UpperTriangular::randn(3, f64());
  const sg::Tensor log_scale = sg::zeros({}, f64());
  const sg::UpperTriangular scaled = sg::exp(log_scale) * u;  // the pattern that used to throw
  EXPECT_EQ(scaled.to_vector(), u.to_vector());
  const sg::UpperTriangular by_row = u * sg::ones({3}, f64());
  const sg::UpperTriangular by_column = sg::ones({3, 1}, f64()) * u;
  EXPECT_EQ(by_row.to_vector(), u.to_vector());
  EXPECT_EQ(by_column.to_vector(), u.to_vector());
  EXPECT_EQ(message_of([&] { sg::UpperTriangular bad = u * sg::ones({2, 3, 3}, f64()); }),
            "mul: UpperTriangular [3, 3] ⊙ a tensor of shape [2, 3, 3] broadcasts beyond the matrix and is not "
            "UpperTriangular; multiply its .dense() for a Dense result");
  EXPECT_EQ(message_of([&] { sg::UpperTriangular bad = u * sg::ones({2}, f64()); }),
            "mul: shapes [3, 3] and [2] cannot be broadcast");
}

// ---- int64, dtype inference, printing ---------------------------------------------------------

TEST_P(Broadcast, Int64Basics) {
  const sg::TensorOptions i64 = sg::TensorOptions().dtype(sg::kInt64).device(GetParam());
  const sg::Tensor r = sg::arange(5, i64);
  EXPECT_EQ(r.dtype(), sg::kInt64);
  EXPECT_EQ(r.to_vector_as<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(r.to(sg::kFloat64).to_vector(), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(sg::tensor({2.7, -1.5}, f64()).to(sg::kInt64).to_vector_as<int64_t>(), (std::vector<int64_t>{2, -1}));
  EXPECT_EQ(sg::full({2}, 7.0, i64).to_vector_as<int64_t>(), (std::vector<int64_t>{7, 7}));
  EXPECT_EQ(sg::zeros({3}, i64).clone().to_vector_as<int64_t>(), (std::vector<int64_t>(3, 0)));
  EXPECT_EQ(r.to(sg::kCPU).data<int64_t>()[4], 4);
  EXPECT_EQ(message_of([&] { r + r; }), "add: expected a floating-point tensor, got int64");
  EXPECT_EQ(message_of([&] { sg::exp(r); }), "exp: expected a floating-point tensor, got int64");
  EXPECT_EQ(message_of([&] { sg::sum(r); }), "sum: expected a floating-point tensor, got int64");
  EXPECT_EQ(message_of([&] { sg::matmul(sg::reshape(r, {5, 1}), sg::reshape(r, {1, 5})); }),
            "matmul: expected a floating-point tensor, got int64");
  EXPECT_EQ(message_of([&] { sg::zeros({2}, i64).requires_grad_(); }),
            "requires_grad_: only floating-point tensors can require gradients, got int64");
  EXPECT_EQ(message_of([&] { sg::randn({2}, i64); }), "randn: expected a floating-point dtype, got int64");
}

TEST(DtypeInference, FromVectorFollowsTheElementType) {
  EXPECT_EQ(sg::from_vector(std::vector<double>{1, 2}, {2}).dtype(), sg::kFloat64);
  EXPECT_EQ(sg::from_vector(std::vector<double>{1, 2}, {2}, sg::kFloat32).dtype(), sg::kFloat32);
  EXPECT_EQ(sg::from_vector(std::vector<double>{1, 2}, {2}, sg::TensorOptions().device(sg::kCPU)).dtype(), sg::kFloat64);
  EXPECT_EQ(sg::from_vector(std::vector<float>{1, 2}, {2}).dtype(), sg::kFloat32);
  EXPECT_EQ(sg::from_vector(std::vector<int64_t>{1, 2}).dtype(), sg::kInt64);
  EXPECT_EQ(sg::from_vector(std::vector<int64_t>{1, 2}, sg::kFloat64).to_vector(), (std::vector<double>{1, 2}));
  EXPECT_EQ(sg::from_eigen(Eigen::MatrixXd::Ones(2, 2)).dtype(), sg::kFloat64);
  EXPECT_EQ(sg::tensor({1.0, 2.0}).dtype(), sg::kFloat32);  // literals take the default dtype, as in libtorch
  EXPECT_EQ(sg::arange(3).dtype(), sg::kFloat32);
}

TEST(Printing, OneBracketPairPerDimension) {
  auto values_of = [](const sg::Tensor& t) {
    std::ostringstream out;
    out << t;
    const std::string s = out.str();
    return s.substr(s.find('\n') + 1);
  };
  auto count = [](const std::string& s, char c) { return std::count(s.begin(), s.end(), c); };
  const std::string v1 = values_of(sg::tensor({1.0, 2.0, 3.0}));
  EXPECT_EQ(count(v1, '['), 1) << v1;
  EXPECT_EQ(count(v1, ']'), 1) << v1;
  const std::string v2 = values_of(sg::zeros({2, 3}));
  EXPECT_EQ(count(v2, '['), 3) << v2;
  const std::string v0 = values_of(sg::full({}, 2.5));
  EXPECT_EQ(v0, "2.5");
  const std::string vi = values_of(sg::from_vector(std::vector<int64_t>{9000000000LL, -4}));
  EXPECT_NE(vi.find("9000000000"), std::string::npos) << vi;
  EXPECT_EQ(count(vi, '['), 1) << vi;
}

INSTANTIATE_TEST_SUITE_P(Devices, Broadcast, testing::ValuesIn(sgtest::test_devices()), sgtest::device_test_name);

}  // namespace
