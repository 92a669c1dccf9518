// train() / eval() through a module tree, Dropout's masks and scaling in training and the identity
// in evaluation, and Sequential's variadic constructor.
#include "test_util.h"

#include <memory>

namespace {

class TrainingModes : public ::testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam()); }
};

TEST_P(TrainingModes, TrainAndEvalReachEverySubmoduleAndDropoutFollows) {
  auto drop = std::make_shared<sg::nn::Dropout>(0.25);
  auto net = std::make_shared<sg::nn::Sequential>(std::make_shared<sg::nn::Linear>(4, 4), drop,
                                                  std::make_shared<sg::nn::ReLU>());
  EXPECT_EQ(net->size(), 3u);
  EXPECT_TRUE(net->is_training() && drop->is_training());
  net->eval();
  EXPECT_FALSE(net->is_training());
  EXPECT_FALSE(drop->is_training());
  const auto f64 = sg::TensorOptions().dtype(sg::kFloat64).device(GetParam());
  const sg::Tensor x = sg::randn({1000, 40}, f64);
  EXPECT_TRUE(sg::equal(drop->forward(x), x));  // the identity in evaluation
  net->train();
  EXPECT_TRUE(drop->is_training());
  sg::manual_seed(4);
  const sg::Tensor ones = sg::ones({1000, 40}, f64).requires_grad_();
  const sg::Tensor y = drop->forward(ones);
  const std::vector<double> v = y.to_vector();
  int64_t kept = 0;
  for (double e : v) {
    EXPECT_TRUE(e == 0.0 || std::abs(e - 1.0 / 0.75) < 1e-15) << e;
    kept += e != 0.0;
  }
  // 40000 draws kept with probability 0.75: within 5 standard errors.
  EXPECT_NEAR(static_cast<double>(kept) / 40000, 0.75, 5 * std::sqrt(0.75 * 0.25 / 40000));
  sg::sum(y).backward();
  EXPECT_TRUE(sg::equal(ones.grad(), y.detach()));  // the gradient is the same mask, scaled
  EXPECT_TRUE(sg::equal(sg::nn::Dropout(1.0).forward(ones), sg::zeros({1000, 40}, f64)));
  EXPECT_EQ(sgtest::message_of([] { sg::nn::Dropout(1.5); }), "Dropout: p must lie in [0, 1], got 1.5");
}

INSTANTIATE_TEST_SUITE_P(Devices, TrainingModes, ::testing::ValuesIn(sgtest::test_devices()), sgtest::device_test_name);

}  // namespace
