// Whole-tensor max and min, amax and amin, the 2-norm, allclose and equal: values against host
// loops, NaN and tie rules, gradients (by gradcheck in float64, and at a zero norm), and the errors.
#include "test_util.h"

#include <cmath>
#include <vector>

namespace {

using sg::Tensor;
using sgtest::message_of;

class FullReductions : public ::testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam()); }
  sg::TensorOptions f64() const { return sg::TensorOptions().dtype(sg::kFloat64).device(GetParam()); }
};

TEST_P(FullReductions, MaxMinAmaxAmin) {
  const std::vector<double> v = {3.0, -1.0, 7.0, 7.0, 0.5, -4.0};
  const Tensor x = sg::from_vector(v, {2, 3}, f64()).requires_grad_();
  EXPECT_EQ(sg::max(x).dim(), 0);
  EXPECT_EQ(sg::max(x).item(), 7.0);
  EXPECT_EQ(sg::min(x).item(), -4.0);
  EXPECT_EQ(sg::amax(x, 1).to_vector(), (std::vector<double>{7.0, 7.0}));
  EXPECT_EQ(sg::amin(x, 0, true).to_vector(), (std::vector<double>{3.0, -1.0, -4.0}));
  EXPECT_EQ(sg::amin(x, 0, true).shape(), (sg::Shape{1, 3}));
  sg::max(x).backward();  // the tie at 7: the first of them
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{0, 0, 1, 0, 0, 0}));
  const Tensor with_nan = sg::from_vector(std::vector<double>{1.0, NAN, 2.0}, {3}, f64());
  EXPECT_TRUE(std::isnan(sg::max(with_nan).item()));
  EXPECT_TRUE(std::isnan(sg::min(with_nan).item()));
  EXPECT_EQ(message_of([&] { sg::max(sg::zeros({0, 3}, f64())); }), "max: got an empty tensor of shape [0, 3]");
  EXPECT_EQ(message_of([&] { sg::amax(x, 2); }), "amax: dimension 2 out of range for shape [2, 3]");
}

TEST_P(FullReductions, NormAndItsGradient) {
  const std::vector<double> v = {3.0, -4.0, 12.0, 0.0};
  const Tensor x = sg::from_vector(v, {2, 2}, f64()).requires_grad_();
  EXPECT_NEAR(sg::norm(x).item(), 13.0, 1e-12);
  EXPECT_TRUE(sgtest::all_close(sg::norm(x, 1).to_vector(), {5.0, 12.0}, 1e-12, 1e-12));
  EXPECT_EQ(sg::norm(x, 0, true).shape(), (sg::Shape{1, 2}));
  sg::norm(x).backward();
  EXPECT_TRUE(sgtest::all_close(x.grad().to_vector(), {3.0 / 13, -4.0 / 13, 12.0 / 13, 0.0}, 1e-12, 1e-12));
  // At zero the gradient is 0, not NaN.
  const Tensor z = sg::zeros({3}, f64()).requires_grad_();
  sg::norm(z).backward();
  EXPECT_EQ(z.grad().to_vector(), (std::vector<double>{0, 0, 0}));
  const Tensor rows = sg::from_vector(std::vector<double>{0, 0, 1, 2}, {2, 2}, f64()).requires_grad_();
  sg::sum(sg::norm(rows, 1)).backward();
  EXPECT_TRUE(sgtest::all_close(rows.grad().to_vector(), {0, 0, 1 / std::sqrt(5.0), 2 / std::sqrt(5.0)}, 1e-12, 1e-12));
  sg::manual_seed(2);
  const Tensor r = sg::randn({3, 4}, f64()).requires_grad_();
  for (auto f : std::vector<std::function<Tensor(const std::vector<Tensor>&)>>{
           [](const auto& in) { return sg::norm(in[0]); }, [](const auto& in) { return sg::norm(in[0], -1); },
           [](const auto& in) { return sg::amax(in[0], 0); }, [](const auto& in) { return sg::min(in[0]); }}) {
    const sg::GradcheckResult res = sg::gradcheck(f, {r});
    EXPECT_TRUE(res.ok) << res.message;
  }
}

TEST_P(FullReductions, AllcloseAndEqual) {
  const Tensor a = sg::from_vector(std::vector<double>{1.0, 2.0, INFINITY}, {3}, f64());
  EXPECT_TRUE(sg::allclose(a, a + 1e-9));
  EXPECT_FALSE(sg::allclose(a, a + sg::from_vector(std::vector<double>{0, 1e-3, 0}, {3}, f64())));
  EXPECT_TRUE(sg::allclose(a, a + sg::from_vector(std::vector<double>{0, 1e-3, 0}, {3}, f64()), 1e-3, 0.0));
  EXPECT_FALSE(sg::allclose(a, sg::from_vector(std::vector<double>{1.0, 2.0, -INFINITY}, {3}, f64())));
  const Tensor with_nan = sg::from_vector(std::vector<double>{1.0, NAN}, {2}, f64());
  EXPECT_FALSE(sg::allclose(with_nan, with_nan));
  EXPECT_FALSE(sg::equal(with_nan, with_nan));
  EXPECT_TRUE(sg::allclose(sg::ones({2, 3}, f64()), sg::ones({3}, f64())));  // broadcasting
  EXPECT_TRUE(sg::equal(a, a.clone()));
  EXPECT_FALSE(sg::equal(sg::ones({3}, f64()), sg::ones({1, 3}, f64())));
  EXPECT_FALSE(sg::equal(sg::ones({3}, f64()), sg::ones({3}, f64().dtype(sg::kFloat32))));
  const auto i64 = sg::TensorOptions().device(GetParam());
  EXPECT_TRUE(sg::equal(sg::from_vector(std::vector<int64_t>{1, 2}, {2}, i64), sg::from_vector(std::vector<int64_t>{1, 2}, {2}, i64)));
  EXPECT_EQ(message_of([&] { sg::allclose(sg::ones({2}, f64()), sg::ones({3}, f64())); }),
            "allclose: shapes [2] and [3] cannot be broadcast");
  EXPECT_EQ(message_of([&] { sg::allclose(a, a, -1.0); }), "allclose: tolerances must not be negative, got rtol = -1, atol = 1e-08");
}

TEST_P(FullReductions, MethodFormsCallTheOps) {
  sg::manual_seed(9);
  const Tensor x = sg::randn({2, 3, 4}, f64()).requires_grad_();
  EXPECT_TRUE(sg::equal(x.sum(), sg::sum(x)));
  EXPECT_TRUE(sg::equal(x.sum(1, true), sg::sum(x, 1, true)));
  EXPECT_TRUE(sg::equal(x.mean(), sg::mean(x)));
  EXPECT_TRUE(sg::equal(x.mean(-1), sg::mean(x, -1)));
  EXPECT_TRUE(sg::equal(x.max(), sg::max(x)));
  EXPECT_TRUE(sg::equal(x.min(), sg::min(x)));
  EXPECT_TRUE(sg::equal(x.norm(), sg::norm(x)));
  EXPECT_TRUE(sg::equal(x.abs().exp().log().sqrt().square(), sg::square(sg::sqrt(sg::log(sg::exp(sg::abs(x)))))));
  EXPECT_TRUE(sg::equal(x.reshape({6, 4}), sg::reshape(x, {6, 4})));
  EXPECT_TRUE(sg::equal(x.mT(), sg::transpose(x)));
  EXPECT_EQ(x.mT().shape(), (sg::Shape{2, 4, 3}));
  EXPECT_TRUE(sg::equal(x.reshape({6, 4}).t(), sg::transpose(x.reshape({6, 4}))));
  EXPECT_EQ(message_of([&] { x.t(); }), "t: expected a tensor of at most 2 dimensions, got shape [2, 3, 4] (mT() transposes each matrix of a batch)");
  EXPECT_EQ(message_of([&] { sg::zeros({3}, f64()).mT(); }), "mT: expected a matrix or a batch of them, got shape [3]");
  (x.square().sum() + x.mT().sum()).backward();  // the methods record like the ops
  EXPECT_TRUE(sg::allclose(x.grad(), 2.0 * x.detach() + 1.0));
  const sg::LowerTriangular l = sg::LowerTriangular::eye(3, f64());
  EXPECT_EQ(l.mT().structure(), sg::Structure::UpperTriangular);
}

INSTANTIATE_TEST_SUITE_P(Devices, FullReductions, ::testing::ValuesIn(sgtest::test_devices()), sgtest::device_test_name);

}  // namespace
