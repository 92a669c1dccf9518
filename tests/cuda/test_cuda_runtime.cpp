// The CUDA runtime and caching allocator through the public API (sg::Storage, sg::cuda::*),
// and the CUDA kernels whose edge cases the op tests do not reach (awkward tile sizes,
// in-place and bit-exact symmetrisation, deterministic sums, cuBLAS transposes, fused
// optimizer steps) against the CPU backend. Device tests skip with a reason without a GPU.
#include "test_util.h"

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

const sg::Device kCuda0{sg::DeviceType::CUDA, 0};

// ---- runtime: works on every machine -----------------------------------------------------

TEST(CudaRuntime, DeviceSpecsParseWithoutAGpu) {
  const sg::Device d("cuda:1");
  EXPECT_TRUE(d.is_cuda());
  EXPECT_EQ(d.index, 1);
  EXPECT_EQ(d.str(), "cuda:1");
  EXPECT_EQ(sg::Device("cuda"), kCuda0);
  EXPECT_THROW(sg::Device("gpu"), sg::Error);
  EXPECT_THROW(sg::Device("cuda:"), sg::Error);
  EXPECT_THROW(sg::Device("cuda:x"), sg::Error);
}

TEST(CudaRuntime, AvailabilityMatchesDeviceCount) {
  EXPECT_EQ(sg::cuda::is_available(), sg::cuda::device_count() > 0);
  EXPECT_GE(sg::cuda::device_count(), 0);
  if (!sg::cuda::built_with_cuda()) EXPECT_EQ(sg::cuda::device_count(), 0);
  // Asking twice gives the same answer (a failed driver query must not linger).
  EXPECT_EQ(sg::cuda::device_count(), sg::cuda::device_count());
}

TEST(CudaRuntime, MissingDeviceIsNamed) {
  const int missing = sg::cuda::device_count();  // one past the last device
  const sg::Device device(sg::DeviceType::CUDA, missing);
  const std::string message = sgtest::message_of([&] { sg::Storage storage(64, device); });
  if (!sg::cuda::built_with_cuda()) {
    EXPECT_TRUE(sgtest::contains(message, "structgrad was built without CUDA")) << message;
    return;
  }
  const std::string expected_name = "cuda:" + std::to_string(missing) + " is not available: ";
  EXPECT_TRUE(sgtest::contains(message, expected_name)) << message;
  if (missing == 0) {
    EXPECT_TRUE(sgtest::contains(message, "no CUDA device found")) << message;
  } else {
    EXPECT_TRUE(sgtest::contains(message, std::to_string(missing) + " CUDA device(s) found")) << message;
  }
  EXPECT_THROW(sg::cuda::allocator_stats(missing), sg::Error);
  EXPECT_THROW(sg::zeros({2, 2}, device), sg::Error);
}

TEST(CudaRuntime, WithoutCudaEveryDeviceCallSaysSo) {
  if (sg::cuda::built_with_cuda()) GTEST_SKIP() << "this build has CUDA";
  EXPECT_FALSE(sg::cuda::is_available());
  for (auto f : std::vector<std::function<void()>>{[] { sg::cuda::synchronize(); },
                                                   [] { sg::cuda::allocator_stats(); },
                                                   [] { sg::cuda::device_name(); },
                                                   [] { sg::zeros({2}, kCuda0); }}) {
    EXPECT_TRUE(sgtest::contains(sgtest::message_of(f), "structgrad was built without CUDA"));
  }
  EXPECT_NO_THROW(sg::cuda::empty_cache());
}

// ---- runtime and allocator on a device ------------------------------------------------------

TEST(CudaRuntime, SynchronizeAndDeviceName) {
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  EXPECT_NO_THROW(sg::cuda::synchronize(0));
  EXPECT_FALSE(sg::cuda::device_name(0).empty());
}

TEST(CudaAllocator, FreedBlockIsReusedWithoutCudaMalloc) {
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  { sg::Storage warm(1000, kCuda0); }  // leaves a 1024-byte block in the cache
  const auto before = sg::cuda::allocator_stats();
  {
    sg::Storage again(1000, kCuda0);
    EXPECT_NE(again.data, nullptr);
  }
  {
    sg::Storage same_bucket(1024, kCuda0);  // 1000 and 1024 round to one 1024-byte block
  }
  const auto after = sg::cuda::allocator_stats();
  EXPECT_EQ(after.num_device_mallocs, before.num_device_mallocs);
  EXPECT_EQ(after.num_cache_hits, before.num_cache_hits + 2);
  EXPECT_EQ(after.num_allocations, before.num_allocations + 2);
}

TEST(CudaAllocator, StorageOverMemoryAllocatedElsewhereHandsItToItsRelease) {
  // A storage over memory someone else allocated (the matmul op's pool, another library) neither
  // allocates nor frees: its release gets the storage, with what it holds, when the last tensor
  // lets go; the caching allocator's counters do not move.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  void* block = sg::detail::device_allocate(kCuda0, 4096);
  const auto before = sg::cuda::allocator_stats();
  int released = 0;
  uint64_t version_seen = 99, reinterpretations_seen = 99;
  {
    auto storage = std::make_shared<sg::Storage>(block, 4096, kCuda0, [&](sg::Storage& s) {
      EXPECT_EQ(s.data, block);
      version_seen = s.version.load();
      reinterpretations_seen = s.reinterpretations.load();
      ++released;
    });
    sg::Tensor t = sg::detail::make_tensor(storage, {32, 32}, sg::kFloat32, sg::Structure::UpperTriangular);
    storage.reset();
    EXPECT_EQ(t.data_ptr(), block);
    t.fill_(0.0);                     // a write its version counts
    const sg::Tensor view = t.dense();  // a view as another structure
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 1);
  EXPECT_EQ(version_seen, 1u);
  EXPECT_EQ(reinterpretations_seen, 1u);
  const auto after = sg::cuda::allocator_stats();
  EXPECT_EQ(after.num_allocations, before.num_allocations);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  sg::detail::device_free(kCuda0, block, 4096);
}

TEST(CudaAllocator, BytesInUseCountRoundedBlocksAndReturnToBaseline) {
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const auto baseline = sg::cuda::allocator_stats();
  {
    sg::Storage tiny(1, kCuda0);  // one 512-byte block
    EXPECT_EQ(sg::cuda::allocator_stats().bytes_in_use, baseline.bytes_in_use + 512);
    sg::Storage large((size_t{1} << 20) + 1, kCuda0);  // size class 1.25 MiB
    EXPECT_EQ(sg::cuda::allocator_stats().bytes_in_use, baseline.bytes_in_use + 512 + 1310720);
    sg::Storage larger(size_t{3} << 20, kCuda0);  // exactly a size class: 3 MiB
    const auto during = sg::cuda::allocator_stats();
    EXPECT_EQ(during.bytes_in_use, baseline.bytes_in_use + 512 + 1310720 + (size_t{3} << 20));
    EXPECT_GE(during.peak_bytes_in_use, during.bytes_in_use);
  }
  const auto after = sg::cuda::allocator_stats();
  EXPECT_EQ(after.bytes_in_use, baseline.bytes_in_use);
  EXPECT_GE(after.bytes_cached, size_t{512} + 1310720 + (size_t{3} << 20));
  // Zero-byte requests take nothing and count nothing.
  sg::Storage empty(0, kCuda0);
  EXPECT_EQ(empty.data, nullptr);
  EXPECT_EQ(sg::cuda::allocator_stats().num_allocations, after.num_allocations);
}

TEST(CudaAllocator, EmptyCacheReturnsCachedBlocks) {
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  { sg::Storage block(size_t{4} << 20, kCuda0); }
  const auto cached = sg::cuda::allocator_stats();
  EXPECT_GE(cached.bytes_cached, size_t{4} << 20);
  sg::cuda::empty_cache();
  const auto emptied = sg::cuda::allocator_stats();
  EXPECT_EQ(emptied.bytes_cached, 0u);
  EXPECT_GT(emptied.num_device_frees, cached.num_device_frees);
  EXPECT_EQ(emptied.bytes_in_use, cached.bytes_in_use);
}

TEST(CudaAllocator, OutOfMemoryThrowsClearErrorAndAllocatorRecovers) {
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const size_t one_tib = size_t{1} << 40;
  const std::string message = sgtest::message_of([&] { sg::Storage huge(one_tib, kCuda0); });
  EXPECT_TRUE(sgtest::contains(message, "out of memory")) << message;
  EXPECT_TRUE(sgtest::contains(message, "1099511627776 bytes (1024.00 GiB)")) << message;
  EXPECT_TRUE(sgtest::contains(message, "on cuda:0")) << message;
  // Still usable: a fresh allocation and a real computation succeed.
  sg::Storage small(size_t{1} << 20, kCuda0);
  EXPECT_NE(small.data, nullptr);
  EXPECT_DOUBLE_EQ(sg::sum(sg::ones({64, 64}, kCuda0)).item(), 4096.0);
}

// ---- kernels against the CPU backend ---------------------------------------------------------

class CudaKernels : public ::testing::TestWithParam<sg::DType> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(kCuda0); }
  sg::TensorOptions cpu() const { return sg::TensorOptions().dtype(GetParam()); }
  double rtol() const { return GetParam() == sg::kFloat32 ? 1e-5 : 1e-12; }
};

const std::vector<int64_t> kAwkwardSizes = {1, 2, 17, 31, 33, 127, 129};

TEST_P(CudaKernels, TransposeAtSizesThatAreNotTileMultiples) {
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {33, 70}, {129, 31}, {1000, 3}, {2, 1000}}) {
    auto x = sg::randn({rows, cols}, cpu());
    EXPECT_EQ(sg::transpose(x.to(kCuda0)).to_vector(), sg::transpose(x).to_vector()) << rows << "x" << cols;
  }
}

TEST_P(CudaKernels, SymAndTriuMatchCpuBitForBit) {
  for (int64_t n : kAwkwardSizes) {
    auto x = sg::randn({n, n}, cpu());
    auto s = sg::sym(x.to(kCuda0));
    EXPECT_EQ(s.to_vector(), sg::sym(x).to_vector()) << "n = " << n;
    EXPECT_NO_THROW(sg::as_symmetric(s.dense())) << "n = " << n;  // the device check agrees
    for (int64_t diagonal : {0, 1, 5}) {
      EXPECT_EQ(sg::triu(x.to(kCuda0), diagonal).to_vector(), sg::triu(x, diagonal).to_vector())
          << "n = " << n << ", diagonal = " << diagonal;
    }
  }
}

TEST_P(CudaKernels, StructureCheckNamesTheFirstOffendingEntry) {
  const int64_t n = 70;
  std::vector<double> values(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j < n; ++j) values[i * n + j] = 1.0 + static_cast<double>(i + j);
  values[60 * n + 2] = 7.0;  // later in row-major order
  values[40 * n + 39] = 5.0;  // the first violation
  auto x = sg::from_vector(values, {n, n}, cpu()).to(kCuda0);
  const std::string upper = sgtest::message_of([&] { sg::as_upper(x); });
  EXPECT_TRUE(sgtest::contains(upper, "entry (40, 39) = 5")) << upper;
  const std::string symmetric = sgtest::message_of([&] { sg::as_symmetric(x); });
  EXPECT_TRUE(sgtest::contains(symmetric, "entry (0, 1) = 2 differs from entry (1, 0) = 0")) << symmetric;
  // -0.0 below the diagonal is zero; a symmetric matrix passes.
  values.assign(n * n, 0.0);
  values[5 * n + 1] = -0.0;
  EXPECT_NO_THROW(sg::as_upper(sg::from_vector(values, {n, n}, cpu()).to(kCuda0)));
  EXPECT_NO_THROW(sg::as_symmetric(sg::sym(sg::randn({n, n}, cpu())).to(kCuda0).dense()));
}

TEST_P(CudaKernels, SumsMatchCpuAndAreRepeatable) {
  for (auto [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1},     {1000, 3},    {3, 1000},    {129, 33},
                                                {2, 16384}, {600, 9000},  {7, 100000},  {100000, 7}}) {
    auto x = sg::randn({rows, cols}, cpu());
    auto xd = x.to(kCuda0);
    for (int64_t dim : {0, 1}) {
      auto first = sg::sum(xd, dim).to_vector();
      EXPECT_EQ(first, sg::sum(xd, dim).to_vector()) << "not repeatable: " << rows << "x" << cols << ", dim " << dim;
      const double reduced = static_cast<double>(dim == 0 ? rows : cols);
      EXPECT_TRUE(sgtest::all_close(first, sg::sum(x, dim).to_vector(), rtol(), rtol() * reduced))
          << rows << "x" << cols << ", dim " << dim;
    }
    auto total = sg::sum(xd).item();
    EXPECT_EQ(total, sg::sum(xd).item());
    const double reference = sg::sum(x).item();
    EXPECT_NEAR(total, reference, rtol() * (static_cast<double>(rows * cols) + std::abs(reference)));
  }
}

TEST_P(CudaKernels, DenseMatmulAndItsTransposedBackwardMatchCpu) {
  auto a = sg::randn({33, 17}, cpu());
  auto b = sg::randn({17, 50}, cpu());
  auto w = sg::randn({33, 50}, cpu());
  auto run = [&](sg::Device device) {
    auto ad = a.to(device).detach().requires_grad_();
    auto bd = b.to(device).detach().requires_grad_();
    auto c = sg::matmul(ad, bd);
    sg::sum(c * w.to(device)).backward();  // dA = W·Bᵀ, dB = Aᵀ·W: both transpose flags
    return std::vector<std::vector<double>>{c.to_vector(), ad.grad().to_vector(), bd.grad().to_vector()};
  };
  const auto on_cuda = run(kCuda0), on_cpu = run(sg::kCPU);
  for (size_t i = 0; i < on_cpu.size(); ++i)
    EXPECT_TRUE(sgtest::all_close(on_cuda[i], on_cpu[i], rtol() * 10, rtol() * 10)) << "output " << i;
  // An empty inner dimension gives exact zeros.
  auto empty = sg::matmul(sg::zeros({3, 0}, cpu().device(kCuda0)), sg::zeros({0, 4}, cpu().device(kCuda0)));
  EXPECT_EQ(empty.to_vector(), std::vector<double>(12, 0.0));
}

TEST_P(CudaKernels, ConvertingCopiesMatchCpu) {
  auto x = sg::randn({17, 33}, cpu());
  const sg::DType other = GetParam() == sg::kFloat32 ? sg::kFloat64 : sg::kFloat32;
  EXPECT_EQ(x.to(kCuda0).to(other).to_vector(), x.to(other).to_vector());
}

TEST_P(CudaKernels, FusedOptimizerStepsMatchCpu) {
  auto run = [&](sg::Device device, const std::function<std::unique_ptr<sg::optim::Optimizer>(sg::Tensor)>& make) {
    sg::manual_seed(11);
    auto p = sg::randn({33, 17}, cpu()).to(device).detach().requires_grad_();
    auto opt = make(p);
    for (int step = 0; step < 3; ++step) {
      sg::manual_seed(100 + step);
      p.set_grad(sg::randn({33, 17}, cpu()).to(device));
      opt->step();
    }
    return p.to_vector();
  };
  const std::vector<std::pair<const char*, std::function<std::unique_ptr<sg::optim::Optimizer>(sg::Tensor)>>> cases = {
      {"sgd", [](sg::Tensor p) { return std::make_unique<sg::optim::SGD>(std::vector<sg::Tensor>{p}, sg::optim::SGDOptions{0.1, 0.0, 0.0, 0.0, false}); }},
      {"sgd+momentum+wd", [](sg::Tensor p) { return std::make_unique<sg::optim::SGD>(std::vector<sg::Tensor>{p}, sg::optim::SGDOptions{0.1, 0.9, 0.1, 0.01, false}); }},
      {"nesterov", [](sg::Tensor p) { return std::make_unique<sg::optim::SGD>(std::vector<sg::Tensor>{p}, sg::optim::SGDOptions{0.1, 0.9, 0.0, 0.0, true}); }},
      {"adam", [](sg::Tensor p) { return std::make_unique<sg::optim::Adam>(std::vector<sg::Tensor>{p}, sg::optim::AdamOptions{0.01, 0.9, 0.999, 1e-8, 0.01, false}); }},
      {"adamw", [](sg::Tensor p) { return std::make_unique<sg::optim::Adam>(std::vector<sg::Tensor>{p}, sg::optim::AdamOptions{0.01, 0.9, 0.999, 1e-8, 0.01, true}); }},
  };
  for (const auto& [name, make] : cases)
    EXPECT_TRUE(sgtest::all_close(run(kCuda0, make), run(sg::kCPU, make), rtol(), rtol())) << name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaKernels, ::testing::Values(sg::kFloat32, sg::kFloat64),
                         [](const testing::TestParamInfo<sg::DType>& info) { return std::string(sg::dtype_name(info.param)); });

}  // namespace
