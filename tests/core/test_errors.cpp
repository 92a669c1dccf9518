// Bad input: each is a clear sg::Error naming the op and the operands, with the same
// message on CPU and CUDA, and the inputs are left unchanged.
#include "test_util.h"

#include <functional>

namespace {

class ErrorsOnDevice : public ::testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam()); }
};

TEST_P(ErrorsOnDevice, MessagesNameOpAndOperands) {
  const sg::Device dev = GetParam();
  auto a = sg::randn({2, 5}, dev), b = sg::randn({3, 7}, dev);
  const auto a_before = a.to_vector(), b_before = b.to_vector();
  EXPECT_EQ(sgtest::message_of([&] { sg::matmul(a, b); }), "matmul: shapes [2, 5] and [3, 7] cannot be multiplied");
  EXPECT_EQ(sgtest::message_of([&] { sg::add(a, b); }), "add: shapes [2, 5] and [3, 7] cannot be broadcast");
  EXPECT_EQ(sgtest::message_of([&] { sg::matmul(a, sg::randn({5, 2}, sg::TensorOptions().dtype(sg::kFloat64).device(dev))); }),
            "matmul: expected both operands of one dtype, got float32 and float64");
  EXPECT_EQ(sgtest::message_of([&] { (a * 2.0).backward(); }),
            "backward: the tensor does not require grad (no input of the ops that produced it requires grad)");
  EXPECT_EQ(sgtest::message_of([&] { a.item(); }), "item: expected a tensor with one element, got shape [2, 5]");
  EXPECT_EQ(sgtest::message_of([&] { sg::triu(a); }), "triu: expected a square matrix or a batch of them, got shape [2, 5]");
  EXPECT_EQ(sgtest::message_of([&] { sg::reshape(a, {3, 3}); }), "reshape: shape [3, 3] is invalid for input of shape [2, 5]");
  EXPECT_EQ(sgtest::message_of([&] { sg::mse_loss(a, b); }),
            "mse_loss: prediction of shape [2, 5] and target of shape [3, 7] differ");
  auto x = sg::randn({2, 2}, dev).requires_grad_();
  auto y = sg::sum(x * x);
  y.backward();
  EXPECT_NE(sgtest::message_of([&] { y.backward(); }).find("backward: the record of 'sum' was consumed"), std::string::npos);
  EXPECT_EQ(a.to_vector(), a_before);
  EXPECT_EQ(b.to_vector(), b_before);
}

TEST(Errors, MixedDevicesNameBoth) {
  SG_SKIP_IF_UNAVAILABLE(sg::kCUDA);
  auto a = sg::randn({2, 2}), b = sg::randn({2, 2}, sg::kCUDA);
  EXPECT_EQ(sgtest::message_of([&] { sg::matmul(a, b); }), "matmul: expected both operands on one device, got cpu and cuda:0");
  EXPECT_EQ(sgtest::message_of([&] { sg::add(a, b); }), "add: expected both operands on one device, got cpu and cuda:0");
}

TEST(Errors, CudaWithoutDeviceIsClear) {
  if (sg::cuda::is_available()) GTEST_SKIP() << "a CUDA device exists here";
  const std::string m = sgtest::message_of([] { sg::zeros({2}, sg::kCUDA); });
  EXPECT_TRUE(m.find("cuda") != std::string::npos || m.find("CUDA") != std::string::npos) << m;
}

INSTANTIATE_TEST_SUITE_P(Devices, ErrorsOnDevice, ::testing::ValuesIn(sgtest::test_devices()),
                         sgtest::device_test_name);

}  // namespace
