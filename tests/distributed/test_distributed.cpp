// sg::distributed: what runs everywhere (options from the environment, the errors before init()
// and of a build without NCCL, a bad launch failing before any CUDA call) and, with a GPU and
// NCCL, a one-rank job: all_reduce, broadcast and DataParallel leave one rank's values unchanged.
// Two-process runs are CTest entries of tests/distributed.cmake (through scripts/launch.sh).
#include "test_util.h"

#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace dist = sg::distributed;

const sg::Device kCuda0{sg::DeviceType::CUDA, 0};

/// For one scope: unsets every variable sg::distributed reads, sets the given ones, and
/// restores the previous environment afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::vector<std::pair<const char*, const char*>> values) {
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "SG_DIST_ID_FILE", "SG_DIST_TIMEOUT"}) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      ::unsetenv(name);
    }
    for (const auto& [name, value] : values) ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

/// The error options_from_env() throws in this environment ("" when it does not throw).
std::string env_error(std::vector<std::pair<const char*, const char*>> values) {
  ScopedEnv env(std::move(values));
  try {
    (void)dist::options_from_env();
  } catch (const sg::Error& e) {
    return e.what();
  }
  return "";
}

// ---- options from the environment: every build, no GPU -------------------------------------

TEST(DistributedEnv, ReadsTheLaunchersVariables) {
  ScopedEnv env({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "3"}, {"SG_DIST_ID_FILE", "/shared/id"},
                 {"SG_DIST_TIMEOUT", "7.5"}});
  const dist::Options o = dist::options_from_env();
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.world_size, 4);
  EXPECT_EQ(o.local_rank, 3);
  EXPECT_EQ(o.id_file, "/shared/id");
  EXPECT_DOUBLE_EQ(o.timeout_seconds, 7.5);
}

TEST(DistributedEnv, LocalRankDefaultsToRankAndOneRankNeedsNoIdFile) {
  {
    ScopedEnv env({{"RANK", "2"}, {"WORLD_SIZE", "3"}, {"SG_DIST_ID_FILE", "/tmp/id"}});
    const dist::Options o = dist::options_from_env();
    EXPECT_EQ(o.local_rank, 2);
    EXPECT_DOUBLE_EQ(o.timeout_seconds, 300.0);
  }
  ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  const dist::Options o = dist::options_from_env();
  EXPECT_EQ(o.rank, 0);
  EXPECT_EQ(o.world_size, 1);
  EXPECT_EQ(o.local_rank, 0);
  EXPECT_TRUE(o.id_file.empty());
}

TEST(DistributedEnv, MissingVariablesNameThemAndTheLauncher) {
  const std::string no_rank = env_error({{"WORLD_SIZE", "2"}, {"SG_DIST_ID_FILE", "/tmp/id"}});
  EXPECT_TRUE(sgtest::contains(no_rank, "environment variable RANK is not set")) << no_rank;
  EXPECT_TRUE(sgtest::contains(no_rank, "scripts/launch.sh")) << no_rank;
  const std::string no_world = env_error({{"RANK", "0"}});
  EXPECT_TRUE(sgtest::contains(no_world, "environment variable WORLD_SIZE is not set")) << no_world;
  const std::string empty_rank = env_error({{"RANK", ""}, {"WORLD_SIZE", "1"}});
  EXPECT_TRUE(sgtest::contains(empty_rank, "RANK is not set")) << empty_rank;
  const std::string no_file = env_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_TRUE(sgtest::contains(no_file, "SG_DIST_ID_FILE")) << no_file;
  EXPECT_TRUE(sgtest::contains(no_file, "WORLD_SIZE is 2")) << no_file;
}

TEST(DistributedEnv, OutOfRangeValuesAreClearErrors) {
  const std::string zero_world = env_error({{"RANK", "0"}, {"WORLD_SIZE", "0"}});
  EXPECT_TRUE(sgtest::contains(zero_world, "WORLD_SIZE must be at least 1, got 0")) << zero_world;
  const std::string negative_world = env_error({{"RANK", "0"}, {"WORLD_SIZE", "-2"}});
  EXPECT_TRUE(sgtest::contains(negative_world, "WORLD_SIZE must be at least 1, got -2")) << negative_world;
  const std::string rank_too_big = env_error({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"SG_DIST_ID_FILE", "/tmp/id"}});
  EXPECT_TRUE(sgtest::contains(rank_too_big, "RANK must be in [0, WORLD_SIZE) = [0, 2), got 2")) << rank_too_big;
  const std::string negative_rank = env_error({{"RANK", "-1"}, {"WORLD_SIZE", "2"}, {"SG_DIST_ID_FILE", "/tmp/id"}});
  EXPECT_TRUE(sgtest::contains(negative_rank, "got -1")) << negative_rank;
  const std::string negative_local = env_error({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "-1"}});
  EXPECT_TRUE(sgtest::contains(negative_local, "LOCAL_RANK must be at least 0, got -1")) << negative_local;
  const std::string bad_timeout = env_error({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"SG_DIST_TIMEOUT", "0"}});
  EXPECT_TRUE(sgtest::contains(bad_timeout, "timeout must be a positive number of seconds")) << bad_timeout;
}

TEST(DistributedEnv, NonIntegersAreRejectedNotTruncated) {
  const std::string word = env_error({{"RANK", "zero"}, {"WORLD_SIZE", "1"}});
  EXPECT_TRUE(sgtest::contains(word, "RANK='zero' is not an integer")) << word;
  const std::string trailing = env_error({{"RANK", "0"}, {"WORLD_SIZE", "2x"}});
  EXPECT_TRUE(sgtest::contains(trailing, "WORLD_SIZE='2x' is not an integer")) << trailing;
  const std::string huge = env_error({{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}});
  EXPECT_TRUE(sgtest::contains(huge, "is not an integer")) << huge;
  const std::string timeout = env_error({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"SG_DIST_TIMEOUT", "soon"}});
  EXPECT_TRUE(sgtest::contains(timeout, "SG_DIST_TIMEOUT='soon'")) << timeout;
}

// ---- before init(), and builds without NCCL: every build, no GPU -----------------------------

TEST(DistributedApi, BuildFlagMatchesTheCompileDefinition) {
#ifdef SG_WITH_NCCL
  EXPECT_TRUE(dist::built_with_nccl());
#else
  EXPECT_FALSE(dist::built_with_nccl());
#endif
}

TEST(DistributedApi, CallsBeforeInitThrowClearErrors) {
  ASSERT_FALSE(dist::is_initialized());
  const std::string expected = dist::built_with_nccl() ? "not initialized; call sg::distributed::init() first"
                                                       : "structgrad was built without NCCL";
  sg::Tensor t = sg::zeros({4});
  std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"rank", [] { (void)dist::rank(); }},
      {"world_size", [] { (void)dist::world_size(); }},
      {"local_rank", [] { (void)dist::local_rank(); }},
      {"device", [] { (void)dist::device(); }},
      {"all_reduce", [&] { dist::all_reduce(t, dist::ReduceOp::Mean); }},
      {"broadcast", [&] { dist::broadcast(t, 0); }},
      {"barrier", [] { dist::barrier(); }},
      {"DataParallel", [&] { dist::DataParallel dp({t}); }},
  };
  for (const auto& [name, call] : calls) {
    const std::string message = sgtest::message_of(call);
    EXPECT_TRUE(sgtest::contains(message, expected)) << name << ": " << message;
    EXPECT_TRUE(sgtest::contains(message, "distributed")) << name << ": " << message;
  }
  EXPECT_NO_THROW(dist::finalize());  // a no-op when nothing was initialised
  EXPECT_FALSE(dist::is_initialized());
}

TEST(DistributedApi, InitWithABadEnvironmentFailsBeforeAnyCudaCall) {
  // Runs on machines without a GPU: the environment is validated first.
  ScopedEnv env({{"WORLD_SIZE", "2"}, {"SG_DIST_ID_FILE", "/tmp/id"}});
  const std::string message = sgtest::message_of([] { dist::init(); });
  if (dist::built_with_nccl()) {
    EXPECT_TRUE(sgtest::contains(message, "environment variable RANK is not set")) << message;
  } else {
    EXPECT_TRUE(sgtest::contains(message, "structgrad was built without NCCL")) << message;
  }
  EXPECT_FALSE(dist::is_initialized());
  const std::string bad_options = sgtest::message_of([] { dist::init(dist::Options{3, 2, 0, "/tmp/id", 10}); });
  EXPECT_TRUE(sgtest::contains(bad_options, dist::built_with_nccl() ? "RANK must be in [0, WORLD_SIZE) = [0, 2), got 3"
                                                            : "structgrad was built without NCCL"))
      << bad_options;
  EXPECT_FALSE(dist::is_initialized());
}

TEST(DistributedApi, InitOnAMissingDeviceNamesIt) {
  if (!dist::built_with_nccl()) GTEST_SKIP() << "structgrad was built without NCCL";
  // LOCAL_RANK 64 exists on no machine: on CPU-only machines and GPU machines alike the error
  // names the device before NCCL is touched.
  ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "64"}});
  const std::string message = sgtest::message_of([] { dist::init(); });
  EXPECT_TRUE(sgtest::contains(message, "cuda:64 is not available")) << message;
  EXPECT_FALSE(dist::is_initialized());
}

// ---- a one-rank job through NCCL: needs a GPU and NCCL ---------------------------------------

/// Initialises a WORLD_SIZE=1 job on cuda:0 for each test, finalises it after.
class DistributedOneRank : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!dist::built_with_nccl()) GTEST_SKIP() << "structgrad was built without NCCL";
    if (!sg::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
    dist::init(dist::Options{0, 1, 0, "", 60});
  }
  void TearDown() override { dist::finalize(); }
};

TEST_F(DistributedOneRank, KnowsItsPlace) {
  EXPECT_TRUE(dist::is_initialized());
  EXPECT_EQ(dist::rank(), 0);
  EXPECT_EQ(dist::world_size(), 1);
  EXPECT_EQ(dist::local_rank(), 0);
  EXPECT_EQ(dist::device(), kCuda0);
  const std::string again = sgtest::message_of([] { dist::init(dist::Options{0, 1, 0, "", 60}); });
  EXPECT_TRUE(sgtest::contains(again, "already initialized")) << again;
  EXPECT_NO_THROW(dist::barrier());
}

TEST_F(DistributedOneRank, AllReduceAndBroadcastAreTheIdentity) {
  for (sg::DType dtype : {sg::kFloat32, sg::kFloat64}) {
    sg::Tensor x = sg::randn({17, 33}, sg::TensorOptions().dtype(dtype).device(kCuda0));
    const std::vector<double> before = x.to_vector();
    dist::all_reduce(x, dist::ReduceOp::Sum);
    EXPECT_EQ(x.to_vector(), before) << "sum over one rank, " << dtype;
    dist::all_reduce(x, dist::ReduceOp::Mean);
    EXPECT_EQ(x.to_vector(), before) << "mean over one rank, " << dtype;
    dist::broadcast(x, 0);
    EXPECT_EQ(x.to_vector(), before) << "broadcast from rank 0, " << dtype;
    EXPECT_EQ(x.shape(), (sg::Shape{17, 33}));
  }
  sg::UpperTriangular u = sg::UpperTriangular::randn(9, kCuda0);
  sg::Symmetric s = sg::Symmetric::randn(9, sg::TensorOptions().dtype(sg::kFloat64).device(kCuda0));
  const std::vector<double> u_before = u.to_vector(), s_before = s.to_vector();
  dist::all_reduce(u, dist::ReduceOp::Mean);
  dist::all_reduce(s, dist::ReduceOp::Mean);
  EXPECT_EQ(u.structure(), sg::Structure::UpperTriangular);
  EXPECT_EQ(s.structure(), sg::Structure::Symmetric);
  EXPECT_EQ(u.to_vector(), u_before);
  EXPECT_EQ(s.to_vector(), s_before);
  sg::Tensor empty = sg::zeros({0, 3}, kCuda0);
  EXPECT_NO_THROW(dist::all_reduce(empty));
}

TEST_F(DistributedOneRank, BadTensorsAreClearErrors) {
  sg::Tensor on_cpu = sg::zeros({3});
  const std::string cpu = sgtest::message_of([&] { dist::all_reduce(on_cpu); });
  EXPECT_TRUE(sgtest::contains(cpu, "all_reduce: expected a tensor on cuda:0 (this process's device), got one on cpu")) << cpu;
  sg::Tensor undefined;
  const std::string none = sgtest::message_of([&] { dist::broadcast(undefined, 0); });
  EXPECT_TRUE(sgtest::contains(none, "broadcast: the tensor is undefined")) << none;
  sg::Tensor x = sg::zeros({3}, kCuda0);
  const std::string root = sgtest::message_of([&] { dist::broadcast(x, 1); });
  EXPECT_TRUE(sgtest::contains(root, "root 1 is not a rank of this job (1 ranks)")) << root;
  sg::Tensor param = sg::zeros({3}, sg::TensorOptions().device(kCuda0).requires_grad());
  const std::string leaf = sgtest::message_of([&] { dist::all_reduce(param); });
  EXPECT_TRUE(sgtest::contains(leaf, "use sg::NoGradGuard")) << leaf;
  sg::NoGradGuard no_grad;
  EXPECT_NO_THROW(dist::all_reduce(param));
  if (sg::cuda::device_count() > 1) {
    sg::Tensor elsewhere = sg::zeros({3}, sg::Device(sg::DeviceType::CUDA, 1));
    const std::string other = sgtest::message_of([&] { dist::all_reduce(elsewhere); });
    EXPECT_TRUE(sgtest::contains(other, "got one on cuda:1")) << other;
  }
}

TEST_F(DistributedOneRank, DataParallelLeavesOneRanksGradientsUnchanged) {
  auto layer = std::make_shared<sg::nn::UpperLinear>(8, true, sg::TensorOptions().device(kCuda0));
  sg::nn::Module model;
  model.register_module("layer", layer);
  auto s = sg::Symmetric::randn(6, kCuda0).requires_grad_();
  auto w64 = sg::randn({5, 3}, sg::TensorOptions().dtype(sg::kFloat64).device(kCuda0).requires_grad());
  auto unused = sg::randn({4}, sg::TensorOptions().device(kCuda0).requires_grad());
  std::vector<sg::Tensor> params = model.parameters();
  params.insert(params.end(), {s, w64, unused});
  std::vector<std::vector<double>> values_before;
  for (const sg::Tensor& p : params) values_before.push_back(p.to_vector());

  // 64-byte buckets: the float32 parameters (U: 256 bytes, b, S) and the float64 one go to
  // separate buckets, U alone in one larger than the cap.
  dist::DataParallel dp(params, {.bucket_bytes = 64});
  EXPECT_GE(dp.num_buckets(), 4u);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(params[i].to_vector(), values_before[i]) << "parameter " << i;

  auto x = sg::randn({16, 8}, kCuda0);
  auto y = layer->forward(x);
  auto loss = sg::sum(sg::square(y)) + sg::sum(sg::matmul(s, s)) + sg::sum(sg::square(w64)).to(sg::kFloat32);
  loss.backward();
  std::vector<std::vector<double>> grads_before;
  for (const sg::Tensor& p : params) grads_before.push_back(p.grad().defined() ? p.grad().to_vector() : std::vector<double>());
  ASSERT_FALSE(unused.grad().defined());

  dp.synchronize_gradients();
  for (size_t i = 0; i + 1 < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined()) << "parameter " << i;
    EXPECT_EQ(params[i].grad().to_vector(), grads_before[i]) << "parameter " << i;
    EXPECT_EQ(params[i].grad().structure(), params[i].structure()) << "parameter " << i;
  }
  EXPECT_EQ(layer->weight.grad().structure(), sg::Structure::UpperTriangular);
  EXPECT_EQ(s.grad().structure(), sg::Structure::Symmetric);
  ASSERT_TRUE(unused.grad().defined()) << "a parameter without a gradient gets the (zero) mean";
  EXPECT_EQ(unused.grad().to_vector(), std::vector<double>(4, 0.0));

  // The Module constructor takes the same parameters.
  dist::DataParallel from_module(model);
  EXPECT_EQ(from_module.parameters().size(), model.parameters().size());
  EXPECT_EQ(from_module.num_buckets(), 1u);  // 25 MB default cap, one dtype
  sg::Tensor on_cpu = sg::zeros({2}, sg::TensorOptions().requires_grad());
  const std::string cpu = sgtest::message_of([&] { dist::DataParallel bad({on_cpu}); });
  EXPECT_TRUE(sgtest::contains(cpu, "parameter 0 is on cpu, expected cuda:0")) << cpu;
}

TEST_F(DistributedOneRank, FinalizeThenInitAgainThroughARendezvousFile) {
  dist::finalize();
  EXPECT_FALSE(dist::is_initialized());
  EXPECT_TRUE(sgtest::contains(sgtest::message_of([] { (void)dist::rank(); }), "not initialized"));
  // One rank through the file protocol: rank 0 writes the id, then removes it once joined.
  const std::string id_file = ::testing::TempDir() + "sg_dist_id_" + std::to_string(::getpid());
  (void)std::remove(id_file.c_str());
  dist::init(dist::Options{0, 1, 0, id_file, 60});
  EXPECT_TRUE(dist::is_initialized());
  EXPECT_NE(::access(id_file.c_str(), F_OK), 0) << "rank 0 removes the rendezvous file after joining";
  dist::finalize();
  // A file left behind by another run is refused, not read.
  FILE* stale = std::fopen(id_file.c_str(), "w");
  ASSERT_NE(stale, nullptr);
  std::fclose(stale);
  const std::string message = sgtest::message_of([&] { dist::init(dist::Options{0, 1, 0, id_file, 60}); });
  EXPECT_TRUE(sgtest::contains(message, "already exists")) << message;
  EXPECT_FALSE(dist::is_initialized());
  (void)std::remove(id_file.c_str());
  dist::init(dist::Options{0, 1, 0, "", 60});  // TearDown finalizes
  EXPECT_TRUE(dist::is_initialized());
}

}  // namespace
