// Tensor basics: factories, dtype/device moves, item/to_vector, printing, seeded random
// numbers (the same on CPU and CUDA), and the caching allocators (CUDA's, the host's block cache).
#include "test_util.h"

#include <sstream>


namespace {

class TensorOnDevice : public ::testing::TestWithParam<sg::Device> {};

TEST_P(TensorOnDevice, FactoriesFillExpectedValues) {
  const sg::Device dev = GetParam();
  SG_SKIP_IF_UNAVAILABLE(dev);
  auto z = sg::zeros({2, 3}, sg::TensorOptions().device(dev));
  EXPECT_EQ(z.shape(), (sg::Shape{2, 3}));
  EXPECT_EQ(z.dtype(), sg::kFloat32);
  EXPECT_EQ(z.device(), dev);
  EXPECT_EQ(z.structure(), sg::Structure::Dense);
  EXPECT_EQ(z.to_vector(), std::vector<double>(6, 0.0));
  EXPECT_EQ(sg::ones({4}, dev).to_vector(), std::vector<double>(4, 1.0));
  EXPECT_EQ(sg::full({2}, 2.5, sg::TensorOptions().dtype(sg::kFloat64).device(dev)).to_vector(),
            (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(sg::eye(3, dev).to_vector(), (std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(sg::arange(4, dev).to_vector(), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(sg::arange(0.0, 1.0, 0.25, dev).to_vector(), (std::vector<double>{0, 0.25, 0.5, 0.75}));
  auto m = sg::tensor({{1.0, 2.0}, {3.0, 4.0}}, dev);
  EXPECT_EQ(m.shape(), (sg::Shape{2, 2}));
  EXPECT_EQ(m.to_vector(), (std::vector<double>{1, 2, 3, 4}));
}

TEST_P(TensorOnDevice, DtypeAndDeviceRoundTrips) {
  const sg::Device dev = GetParam();
  SG_SKIP_IF_UNAVAILABLE(dev);
  auto x = sg::tensor({1.5, -2.25, 3.0}, sg::kFloat64);
  auto moved = x.to(dev).to(sg::kFloat32).to(sg::kCPU).to(sg::kFloat64);
  EXPECT_EQ(moved.to_vector(), x.to_vector());
  EXPECT_EQ(x.to(dev).device(), dev);
  EXPECT_DOUBLE_EQ(sg::full({1}, 7.0, dev).item(), 7.0);
  auto c = x.to(dev).clone();
  EXPECT_EQ(c.to_vector(), x.to_vector());
}

TEST_P(TensorOnDevice, ItemOnNonScalarThrowsClearError) {
  const sg::Device dev = GetParam();
  SG_SKIP_IF_UNAVAILABLE(dev);
  auto x = sg::zeros({2, 3}, dev);
  try {
    x.item();
    FAIL() << "item() on a [2, 3] tensor did not throw";
  } catch (const sg::Error& e) {
    EXPECT_STREQ(e.what(), "item: expected a tensor with one element, got shape [2, 3]");
  }
}

TEST_P(TensorOnDevice, RandomNumbersAreSeededAndPlausible) {
  const sg::Device dev = GetParam();
  SG_SKIP_IF_UNAVAILABLE(dev);
  sg::manual_seed(7);
  auto a = sg::randn({1000}, sg::TensorOptions().dtype(sg::kFloat64).device(dev)).to_vector();
  sg::manual_seed(7);
  auto b = sg::randn({1000}, sg::TensorOptions().dtype(sg::kFloat64).device(dev)).to_vector();
  EXPECT_EQ(a, b);
  double mean = 0, var = 0;
  for (double v : a) mean += v / a.size();
  for (double v : a) var += (v - mean) * (v - mean) / a.size();
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(var, 1.0, 0.15);
  auto u = sg::rand({1000}, dev).to_vector();
  for (double v : u) {
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 1.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, TensorOnDevice, ::testing::ValuesIn(sgtest::test_devices()),
                         sgtest::device_test_name);

TEST(Tensor, SameSeedGivesSameNumbersOnCpuAndCuda) {
  SG_SKIP_IF_UNAVAILABLE(sg::kCUDA);
  sg::manual_seed(11);
  auto cpu = sg::randn({4096}, sg::kFloat64).to_vector();
  sg::manual_seed(11);
  auto gpu = sg::randn({4096}, sg::TensorOptions().dtype(sg::kFloat64).device(sg::kCUDA)).to_vector();
  // Same counters and formula; device libm may differ in the last bits of log/cos.
  EXPECT_TRUE(sgtest::all_close(gpu, cpu, 1e-14, 1e-14));
}

TEST(Tensor, PrintingShowsShapeDtypeDeviceStructure) {
  std::ostringstream s;
  s << sg::tensor({{1.0, 2.0}, {3.0, 4.0}});
  EXPECT_NE(s.str().find("Tensor(shape=[2, 2], dtype=float32, device=cpu, structure=Dense)"), std::string::npos)
      << s.str();
  EXPECT_NE(s.str().find("4"), std::string::npos);
}

TEST(Tensor, DeviceParsing) {
  EXPECT_EQ(sg::Device("cpu"), sg::kCPU);
  EXPECT_EQ(sg::Device("cuda:1").index, 1);
  EXPECT_TRUE(sg::Device("cuda").is_cuda());
  EXPECT_THROW(sg::Device("gpu"), sg::Error);
  EXPECT_THROW(sg::Device("cuda:x"), sg::Error);
}

TEST(Tensor, HandleHasValueSemanticsAndSharesStorage) {
  auto a = sg::zeros({3});
  sg::Tensor b = a;  // same impl, like torch::Tensor
  EXPECT_TRUE(a.is_same(b));
  b.fill_(2.0);
  EXPECT_EQ(a.to_vector(), (std::vector<double>{2, 2, 2}));
  auto r = sg::reshape(a, {3, 1});
  EXPECT_EQ(r.data_ptr(), a.data_ptr());
}

TEST(Tensor, EigenRoundTrip) {
  Eigen::MatrixXd m(2, 3);
  m << 1, 2, 3, 4, 5, 6;
  auto t = sg::from_eigen(m);
  EXPECT_EQ(t.shape(), (sg::Shape{2, 3}));
  EXPECT_EQ(t.dtype(), sg::kFloat64);
  EXPECT_EQ(t.to_vector(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  Eigen::MatrixXd back = sg::to_eigen<double>(t);
  EXPECT_EQ(back, m);
}

TEST(CudaAllocator, TrainingLoopDoesNoCudaMallocAfterFirstStep) {
  SG_SKIP_IF_UNAVAILABLE(sg::kCUDA);
  sg::manual_seed(3);
  auto opts = sg::TensorOptions().device(sg::kCUDA);
  auto U = sg::UpperTriangular::randn(32, opts).requires_grad_();
  auto b = sg::zeros({32}, opts.requires_grad());
  auto x = sg::randn({256, 32}, opts);
  auto target = sg::randn({256, 32}, opts);
  auto step = [&] {
    auto loss = sg::mse_loss(sg::linear(x, U, b), target);
    loss.backward();
    sg::NoGradGuard guard;
    U.copy_(U - U.grad() * 0.01);
    b.copy_(b - b.grad() * 0.01);
    U.zero_grad();
    b.zero_grad();
  };
  step();
  sg::cuda::synchronize();
  const auto after_first = sg::cuda::allocator_stats();
  const int64_t tape_after_first = sg::autograd::tape_size();
  for (int i = 0; i < 1000; ++i) step();
  sg::cuda::synchronize();
  const auto after_many = sg::cuda::allocator_stats();
  EXPECT_EQ(after_many.num_device_mallocs, after_first.num_device_mallocs);
  EXPECT_EQ(after_many.bytes_in_use, after_first.bytes_in_use);
  EXPECT_EQ(sg::autograd::tape_size(), tape_after_first);
  EXPECT_GT(after_many.num_allocations, after_first.num_allocations);
}

TEST(Tensor, HostBlockCacheReusesFreedBlocksAndCountsLiveBytesOnly) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the host cache is off under AddressSanitizer";
#endif
  const auto before = sg::host_memory_stats();
  void* first = nullptr;
  {
    sg::Tensor t = sg::zeros({1000, 37});  // an odd size, unlikely to sit in the cache already
    first = t.data_ptr();
    const auto live = sg::host_memory_stats();
    EXPECT_EQ(live.bytes_in_use, before.bytes_in_use + 1000 * 37 * 4);
  }
  const auto freed = sg::host_memory_stats();
  EXPECT_EQ(freed.bytes_in_use, before.bytes_in_use);
  EXPECT_GE(freed.bytes_cached, size_t{1000 * 37 * 4});
  sg::Tensor again = sg::ones({1000, 37});  // the same size: the freed block, written afresh
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_EQ(sg::host_memory_stats().num_cache_hits, freed.num_cache_hits + 1);
  EXPECT_EQ(again.to_vector(), std::vector<double>(1000 * 37, 1.0));
  // A block above the cache's largest is freed, not kept.
  const size_t cached = sg::host_memory_stats().bytes_cached;
  { sg::Tensor big = sg::zeros({int64_t{33} << 18}, sg::TensorOptions().dtype(sg::kFloat64)); }
  EXPECT_EQ(sg::host_memory_stats().bytes_cached, cached);
}

}  // namespace
