// Comparisons and selection: masks, where, clamp, maximum / minimum, max / min / argmax / argmin
// and logsumexp — values against host loops, NaN and tie rules, gradients by gradcheck in float64,
// CPU against CUDA, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <structgrad/structgrad.h>
#include "test_util.h"

namespace {

using sgtest::all_close;
using sgtest::message_of;

class Compare : public testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam()); }
  sg::TensorOptions f64() const { return sg::TensorOptions().dtype(sg::kFloat64).device(GetParam()); }
  sg::TensorOptions f32() const { return sg::TensorOptions().device(GetParam()); }
};

TEST_P(Compare, MasksBroadcastAndTakeTheInputsDtype) {
  const sg::Tensor a = sg::tensor({{1.0, 2.0, 3.0}, {4.0, NAN, 6.0}}, f64());
  const sg::Tensor row = sg::tensor({2.0, 2.0, 6.0}, f64());
  EXPECT_EQ(sg::gt(a, row).to_vector(), (std::vector<double>{0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(sg::ge(a, row).to_vector(), (std::vector<double>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(sg::eq(a, 2.0).to_vector(), (std::vector<double>{0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(sg::ne(a, 2.0).to_vector(), (std::vector<double>{1, 0, 1, 1, 1, 1}));  // NaN != 2
  EXPECT_EQ(sg::lt(a, 3.0).to_vector(), (std::vector<double>{1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(sg::le(a, 3.0).dtype(), sg::kFloat64);
  EXPECT_EQ(sg::le(sg::tensor({1.0}, f32()), 3.0).dtype(), sg::kFloat32);
  const sg::Tensor labels = sg::from_vector(std::vector<int64_t>{1, 2, 3}, f32());
  const sg::Tensor predicted = sg::from_vector(std::vector<int64_t>{1, 0, 3}, f32());
  const sg::Tensor hits = sg::eq(labels, predicted);
  EXPECT_EQ(hits.dtype(), sg::kFloat32);
  EXPECT_EQ(hits.to_vector(), (std::vector<double>{1, 0, 1}));
  EXPECT_NEAR(sg::mean(hits).item(), 2.0 / 3.0, 1e-7);
}

TEST_P(Compare, WhereChoosesAndNeverLeaksTheOtherBranch) {
  const sg::Tensor c = sg::tensor({1.0, 0.0, 1.0}, f64());
  const sg::Tensor a = sg::tensor({1.0, INFINITY, NAN}, f64()).requires_grad_();
  const sg::Tensor b = sg::tensor({{NAN, 5.0, -1.0}, {INFINITY, 7.0, 2.0}}, f64()).requires_grad_();
  const sg::Tensor y = sg::where(c, a, b);
  ASSERT_EQ(y.shape(), (sg::Shape{2, 3}));
  const auto v = y.to_vector();
  EXPECT_EQ(v[0], 1.0);
  EXPECT_EQ(v[1], 5.0);
  EXPECT_TRUE(std::isnan(v[2]));  // a's own NaN where a is chosen
  EXPECT_EQ(v[3], 1.0);
  EXPECT_EQ(v[4], 7.0);
  sg::sum(y).backward();
  EXPECT_EQ(a.grad().to_vector(), (std::vector<double>{2, 0, 2}));
  EXPECT_EQ(b.grad().to_vector(), (std::vector<double>{0, 1, 0, 0, 1, 0}));
}

TEST_P(Compare, ClampMaximumMinimum) {
  const sg::Tensor x = sg::tensor({-2.0, 0.5, 3.0, NAN}, f64());
  const auto c = sg::clamp(x, -1.0, 1.0).to_vector();
  EXPECT_EQ(c[0], -1.0);
  EXPECT_EQ(c[1], 0.5);
  EXPECT_EQ(c[2], 1.0);
  EXPECT_TRUE(std::isnan(c[3]));
  EXPECT_EQ(sg::clamp_min(x, 0.0).to_vector()[0], 0.0);
  EXPECT_EQ(sg::clamp_max(x, 0.0).to_vector()[2], 0.0);
  const sg::Tensor y = sg::tensor({1.0, 0.5, 4.0, 0.0}, f64());
  const auto mx = sg::maximum(x, y).to_vector(), mn = sg::minimum(x, y).to_vector();
  EXPECT_EQ(mx[0], 1.0);
  EXPECT_EQ(mx[2], 4.0);
  EXPECT_TRUE(std::isnan(mx[3]));
  EXPECT_EQ(mn[0], -2.0);
  EXPECT_TRUE(std::isnan(mn[3]));
  // A tie splits the gradient in half.
  const sg::Tensor p = sg::tensor({1.0, 2.0}, f64()).requires_grad_(), q = sg::tensor({1.0, 0.0}, f64()).requires_grad_();
  sg::sum(sg::maximum(p, q)).backward();
  EXPECT_EQ(p.grad().to_vector(), (std::vector<double>{0.5, 1.0}));
  EXPECT_EQ(q.grad().to_vector(), (std::vector<double>{0.5, 0.0}));
  // Clamp keeps a Symmetric matrix and an Upper one where 0 stays 0.
  const sg::Symmetric s = sg::Symmetric::randn(4, f64());
  EXPECT_EQ(sg::clamp(s, -0.5, 0.5).structure(), sg::Structure::Symmetric);
  EXPECT_EQ(sg::clamp(sg::UpperTriangular::randn(4, f64()), -0.5, 0.5).structure(), sg::Structure::UpperTriangular);
  EXPECT_EQ(sg::clamp_min(sg::UpperTriangular::randn(4, f64()), 0.5).structure(), sg::Structure::Dense);
}

TEST_P(Compare, MaxMinArgmaxAlongAnyDimension) {
  const sg::Tensor x = sg::tensor({{3.0, 7.0, 7.0}, {-1.0, NAN, 2.0}}, f64());
  auto [values, where] = sg::max(x, 1);
  EXPECT_EQ(where.dtype(), sg::kInt64);
  EXPECT_EQ(where.to_vector_as<int64_t>(), (std::vector<int64_t>{1, 1}));  // first of a tie; NaN wins
  EXPECT_EQ(values.to_vector()[0], 7.0);
  EXPECT_TRUE(std::isnan(values.to_vector()[1]));
  auto [low, low_at] = sg::min(x, 0, true);
  EXPECT_EQ(low.shape(), (sg::Shape{1, 3}));
  EXPECT_EQ(low_at.to_vector_as<int64_t>(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(sg::argmin(x, 1).to_vector_as<int64_t>(), (std::vector<int64_t>{0, 1}));
  const sg::Tensor cube = sg::reshape(sg::arange(0.0, 24.0, 1.0, f64()), {2, 3, 4});
  EXPECT_EQ(sg::argmax(cube, 1).to_vector_as<int64_t>(), std::vector<int64_t>(8, 2));
  EXPECT_EQ(std::get<0>(sg::max(cube, 0)).to_vector()[5], 17.0);
}

TEST_P(Compare, LogsumexpIsStable) {
  const sg::Tensor x = sg::tensor({{1000.0, 1000.0}, {-INFINITY, 0.0}, {-INFINITY, -INFINITY}}, f64());
  const auto v = sg::logsumexp(x, 1).to_vector();
  EXPECT_NEAR(v[0], 1000.0 + std::log(2.0), 1e-12);
  EXPECT_NEAR(v[1], 0.0, 1e-15);
  EXPECT_EQ(v[2], -INFINITY);
  EXPECT_EQ(sg::logsumexp(x, 0, true).shape(), (sg::Shape{1, 2}));
}

TEST_P(Compare, GradientsPassGradcheck) {
  sg::manual_seed(5);
  const sg::Tensor mask = sg::gt(sg::randn({3, 4}, f64()), 0.0);
  struct Case {
    const char* name;
    std::vector<sg::Tensor> inputs;
    std::function<sg::Tensor(const std::vector<sg::Tensor>&)> f;
  };
  const std::vector<Case> cases = {
      {"where", {sg::randn({3, 4}, f64()).requires_grad_(), sg::randn({4}, f64()).requires_grad_()},
       [&](const auto& in) { return sg::where(mask, in[0], in[1]); }},
      {"clamp", {sg::randn({3, 4}, f64()).requires_grad_()}, [](const auto& in) { return sg::clamp(in[0], -0.5, 0.7); }},
      {"maximum", {sg::randn({3, 4}, f64()).requires_grad_(), sg::randn({3, 1}, f64()).requires_grad_()},
       [](const auto& in) { return sg::maximum(in[0], in[1]); }},
      {"minimum", {sg::randn({3, 4}, f64()).requires_grad_(), sg::randn({4}, f64()).requires_grad_()},
       [](const auto& in) { return sg::minimum(in[0], in[1]); }},
      {"max", {sg::randn({3, 4}, f64()).requires_grad_()}, [](const auto& in) { return std::get<0>(sg::max(in[0], 1)); }},
      {"min_keepdim", {sg::randn({2, 3, 4}, f64()).requires_grad_()},
       [](const auto& in) { return std::get<0>(sg::min(in[0], 1, true)); }},
      {"logsumexp", {sg::randn({3, 4}, f64()).requires_grad_()}, [](const auto& in) { return sg::logsumexp(in[0], 1); }},
      {"logsumexp_3d", {sg::randn({2, 3, 4}, f64()).requires_grad_()},
       [](const auto& in) { return sg::logsumexp(in[0], 0, true); }},
  };
  for (const Case& c : cases) {
    const sg::GradcheckResult r = sg::gradcheck(c.f, c.inputs);
    EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
  }
}

TEST_P(Compare, BadInputNamesTheOp) {
  const sg::Tensor x = sg::zeros({2, 3}, f64());
  EXPECT_EQ(message_of([&] { sg::gt(x, sg::zeros({2, 2}, f64())); }), "gt: shapes [2, 3] and [2, 2] cannot be broadcast");
  EXPECT_EQ(message_of([&] { sg::eq(x, sg::zeros({3}, f32())); }),
            "eq: expected both operands of one dtype, got float64 and float32");
  EXPECT_EQ(message_of([&] { sg::clamp(x, 1.0, 0.0); }), "clamp: min 1 is larger than max 0");
  EXPECT_EQ(message_of([&] { sg::max(sg::zeros({2, 0}, f64()), 1); }), "max: dimension 1 of shape [2, 0] is empty");
  EXPECT_EQ(message_of([&] { sg::argmax(x, 2); }), "argmax: dimension 2 out of range for shape [2, 3]");
  EXPECT_EQ(message_of([&] { sg::maximum(sg::arange(3, sg::TensorOptions().dtype(sg::kInt64).device(GetParam())),
                                         sg::arange(3, sg::TensorOptions().dtype(sg::kInt64).device(GetParam()))); }),
            "maximum: expected a floating-point tensor, got int64");
  EXPECT_EQ(message_of([&] { sg::where(x, x, sg::zeros({2, 3}, f32())); }),
            "where: expected both operands of one dtype, got float64 and float32");
}

INSTANTIATE_TEST_SUITE_P(Devices, Compare, testing::ValuesIn(sgtest::test_devices()), sgtest::device_test_name);

TEST(CompareDevices, CudaMatchesCpu) {
  SG_SKIP_IF_UNAVAILABLE(sg::kCUDA);
  sg::manual_seed(6);
  const sg::Tensor x = sg::randn({257, 129}), y = sg::randn({129});
  auto close = [](const sg::Tensor& cuda, const sg::Tensor& cpu) {
    return all_close(cuda.to_vector(), cpu.to_vector(), 1e-6, 1e-6);
  };
  const sg::Tensor xc = x.to(sg::kCUDA), yc = y.to(sg::kCUDA);
  EXPECT_TRUE(close(sg::gt(xc, yc), sg::gt(x, y)));
  EXPECT_TRUE(close(sg::maximum(xc, yc), sg::maximum(x, y)));
  EXPECT_TRUE(close(sg::where(sg::gt(xc, 0.0), xc, yc), sg::where(sg::gt(x, 0.0), x, y)));
  EXPECT_TRUE(close(sg::argmax(xc, 1), sg::argmax(x, 1)));
  EXPECT_TRUE(close(sg::argmin(xc, 0), sg::argmin(x, 0)));
  EXPECT_TRUE(close(sg::logsumexp(xc, 1), sg::logsumexp(x, 1)));
}

}  // namespace
