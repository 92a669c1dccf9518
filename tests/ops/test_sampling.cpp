// Random integers and permutations (the same numbers on every device for a seed), the DataLoader's
// batches, and a mini-batch training loop on CUDA that moves no data through the host.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include <structgrad/structgrad.h>
#include "test_util.h"

namespace {

using sgtest::message_of;

class Sampling : public testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam()); }
  sg::TensorOptions on() const { return sg::TensorOptions().device(GetParam()); }
};

TEST_P(Sampling, RandpermIsAPermutationAndRandintStaysInRange) {
  sg::manual_seed(11);
  const sg::Tensor p = sg::randperm(1000, on());
  EXPECT_EQ(p.dtype(), sg::kInt64);
  std::vector<int64_t> v = p.to_vector_as<int64_t>();
  EXPECT_NE(v, [] { std::vector<int64_t> id(1000); std::iota(id.begin(), id.end(), 0); return id; }());
  std::sort(v.begin(), v.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(v[i], i);
  const sg::Tensor r = sg::randint(-3, 5, {20000}, on());
  const auto rv = r.to_vector_as<int64_t>();
  std::vector<int64_t> counts(8, 0);
  for (int64_t x : rv) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 5);
    ++counts[x + 3];
  }
  for (int64_t c : counts) EXPECT_NEAR(static_cast<double>(c), 2500.0, 250.0);  // every value drawn, about evenly
  EXPECT_EQ(sg::randperm(0, on()).numel(), 0);
  EXPECT_EQ(sg::randperm(5, sg::TensorOptions().dtype(sg::kFloat64).device(GetParam())).dtype(), sg::kFloat64);
  EXPECT_EQ(message_of([&] { sg::randint(3, 3, {2}, on()); }), "randint: expected low < high, got [3, 3)");
  EXPECT_EQ(message_of([&] { sg::randperm(-1, on()); }), "randperm: negative size -1");
}

TEST_P(Sampling, DataLoaderCoversEveryExampleOncePerEpoch) {
  sg::manual_seed(12);
  const int64_t n = 103;
  const sg::Tensor x = sg::reshape(sg::arange(0.0, 2.0 * n, 1.0, sg::TensorOptions().dtype(sg::kFloat64).device(GetParam())), {n, 2});
  const sg::Tensor labels = sg::arange(n, sg::TensorOptions().dtype(sg::kInt64).device(GetParam()));
  sg::data::DataLoader loader({x, labels}, sg::data::DataLoaderOptions().batch_size(10).shuffle());
  EXPECT_EQ(loader.size(), 11);
  std::vector<int64_t> seen, first_epoch;
  for (int epoch = 0; epoch < 2; ++epoch) {
    seen.clear();
    int64_t batches = 0;
    for (const auto& batch : loader) {
      ASSERT_EQ(batch.size(), 2u);
      EXPECT_EQ(batch[0].device(), GetParam());
      EXPECT_EQ(batch[1].dtype(), sg::kInt64);
      const auto rows = batch[0].to_vector();
      const auto ids = batch[1].to_vector_as<int64_t>();
      EXPECT_EQ(static_cast<int64_t>(ids.size()), batches < 10 ? 10 : 3);
      for (size_t k = 0; k < ids.size(); ++k) {
        EXPECT_EQ(rows[2 * k], 2.0 * ids[k]);  // features and labels stay paired
        seen.push_back(ids[k]);
      }
      ++batches;
    }
    EXPECT_EQ(batches, 11);
    if (epoch == 0) first_epoch = seen;
    std::vector<int64_t> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i);
  }
  EXPECT_NE(seen, first_epoch);  // a new order each epoch

  sg::data::DataLoader in_order({x}, sg::data::DataLoaderOptions().batch_size(25).drop_last());
  EXPECT_EQ(in_order.size(), 4);
  int64_t k = 0;
  for (const auto& batch : in_order) EXPECT_EQ(batch[0].to_vector()[0], 50.0 * k++);
  EXPECT_EQ(message_of([&] { sg::data::DataLoader bad({x, sg::zeros({3}, on())}); }),
            "DataLoader: tensor 1 has 3 examples, tensor 0 has 103");
  EXPECT_EQ(message_of([&] { sg::data::DataLoader bad({x}, sg::data::DataLoaderOptions().batch_size(0)); }),
            "DataLoader: batch_size must be at least 1, got 0");
}

INSTANTIATE_TEST_SUITE_P(Devices, Sampling, testing::ValuesIn(sgtest::test_devices()), sgtest::device_test_name);

TEST(SamplingDevices, SameSeedSameNumbersOnEveryDevice) {
  SG_SKIP_IF_UNAVAILABLE(sg::kCUDA);
  sg::manual_seed(13);
  const sg::Tensor p_cpu = sg::randperm(5000), r_cpu = sg::randint(0, 1000000007, {3000});
  sg::manual_seed(13);
  const sg::Tensor p_cuda = sg::randperm(5000, sg::kCUDA), r_cuda = sg::randint(0, 1000000007, {3000}, sg::kCUDA);
  EXPECT_EQ(p_cuda.to_vector_as<int64_t>(), p_cpu.to_vector_as<int64_t>());
  EXPECT_EQ(r_cuda.to_vector_as<int64_t>(), r_cpu.to_vector_as<int64_t>());
}

TEST(SamplingDevices, MiniBatchTrainingMovesNoDataThroughTheHost) {
  SG_SKIP_IF_UNAVAILABLE(sg::kCUDA);
  sg::manual_seed(14);
  const auto opts = sg::TensorOptions().device(sg::kCUDA);
  const sg::Tensor x = sg::randn({2048, 8}, opts);
  const sg::Tensor y = sg::sum(sg::tanh(x), 1, true);
  sg::nn::Sequential net({std::make_shared<sg::nn::Linear>(8, 32, true, opts), std::make_shared<sg::nn::Tanh>(),
                          std::make_shared<sg::nn::Linear>(32, 1, true, opts)});
  sg::optim::Adam opt(net.parameters(), {.lr = 1e-2});
  sg::data::DataLoader loader({x, y}, sg::data::DataLoaderOptions().batch_size(64).shuffle());
  sg::Tensor total;
  auto epoch = [&] {
    total = sg::zeros({}, opts);
    for (const auto& batch : loader) {
      opt.zero_grad();
      const sg::Tensor loss = sg::mse_loss(net.forward(batch[0]), batch[1]);
      loss.backward();
      opt.step();
      total = total + loss.detach();
    }
  };
  epoch();  // the first epoch may set up per-shape state
  const double first = total.item();
  const sg::cuda::TransferStats before = sg::cuda::transfer_stats();
  for (int e = 0; e < 3; ++e) epoch();
  const sg::cuda::TransferStats after = sg::cuda::transfer_stats();
  EXPECT_EQ(after.host_to_device, before.host_to_device);
  EXPECT_EQ(after.device_to_host, before.device_to_host);
  EXPECT_LT(total.item(), 0.5 * first);  // and it learned
  EXPECT_EQ(sg::cuda::transfer_stats().device_to_host, after.device_to_host + 1);  // the counter counts item()
}

}  // namespace
