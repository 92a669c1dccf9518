// Reliability: random op chains on structured inputs (every intermediate keeps its tag's
// invariant, the gradient passes gradcheck), a long training loop with flat memory and tape,
// and threads training independent models at once. Random products: test_matmul.cpp.
#include "test_util.h"

#include <future>
#include <random>
#include <thread>

namespace {

using S = sg::Structure;
using sgtest::holds_invariant;
using sgtest::random_structured;

// 300 random chains of ops on structured inputs: every intermediate keeps its tag's
// invariant, and the chain's gradient passes a random-direction gradcheck.
TEST(Properties, RandomOpChainsKeepInvariantsAndGradients) {
  std::mt19937_64 rng(7);
  const S all[] = {S::Dense, S::UpperTriangular, S::Symmetric};
  using Op = std::function<sg::Tensor(const sg::Tensor&, const sg::Tensor&)>;
  const std::vector<Op> ops = {
      [](auto& x, auto& y) { return x + y; },           [](auto& x, auto& y) { return x - y; },
      [](auto& x, auto& y) { return x * y; },           [](auto& x, auto& y) { return sg::matmul(x, y); },
      [](auto& x, auto&) { return sg::tanh(x); },       [](auto& x, auto&) { return x * 0.5; },
      [](auto& x, auto&) { return sg::square(x); },     [](auto& x, auto&) { return sg::triu(x); },
      [](auto& x, auto&) { return sg::sym(x); },        [](auto& x, auto&) { return sg::transpose(x); },
      [](auto& x, auto&) { return sg::gram(x); },       [](auto& x, auto&) { return sg::leaky_relu(x, 0.3); },
  };
  sg::GradcheckOptions o;
  o.per_entry = false;
  o.random_directions = 2;
  o.check_repeatability = false;
  for (int c = 0; c < 300; ++c) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 12);
    const S sx = all[rng() % 3], sy = all[rng() % 3];
    std::vector<size_t> chain;
    for (int k = 0; k < 4; ++k) chain.push_back(rng() % ops.size());
    sg::manual_seed(rng());
    auto x = random_structured(sx, n, sg::kFloat64).requires_grad_();
    auto y = random_structured(sy, n, sg::kFloat64).requires_grad_();
    auto f = [&](const std::vector<sg::Tensor>& in) {
      sg::Tensor t = in[0];
      for (size_t k : chain) {
        t = ops[k](t, in[1]);
        EXPECT_TRUE(holds_invariant(t)) << "case " << c << " op " << k;
      }
      return t;
    };
    auto r = sg::gradcheck(f, {x, y}, o);
    ASSERT_TRUE(r.ok) << "case " << c << ": " << r.message;
  }
}

TEST(LongRun, HundredThousandStepsWithFlatMemoryAndTape) {
  sg::manual_seed(1);
  auto w = sg::UpperTriangular::randn(4).requires_grad_();
  auto x = sg::randn({8, 4}), t = sg::randn({8, 4});
  sg::optim::SGD opt({w}, {.lr = 1e-3});
  auto step = [&] {
    opt.zero_grad();
    auto loss = sg::mse_loss(sg::linear(x, w), t);
    loss.backward();
    opt.step();
  };
  for (int i = 0; i < 10; ++i) step();
  const auto mem = sg::host_memory_stats().bytes_in_use;
  const auto tape = sg::autograd::tape_size();
  for (int i = 0; i < 100000; ++i) {
    step();
    if (i % 10000 == 0) {
      ASSERT_EQ(sg::host_memory_stats().bytes_in_use, mem) << "step " << i;
      ASSERT_EQ(sg::autograd::tape_size(), tape) << "step " << i;
    }
  }
  EXPECT_EQ(sg::host_memory_stats().bytes_in_use, mem);
  EXPECT_EQ(sg::autograd::tape_size(), tape);
  EXPECT_EQ(w.structure(), S::UpperTriangular);
  EXPECT_TRUE(holds_invariant(w));
}

// Trains a small model from a seed and returns its final parameters.
std::vector<double> train_alone(uint64_t seed, int64_t* tape_during) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> xv(64 * 6), tv(64 * 6), wv(36);
  for (double& v : xv) v = normal(rng);
  for (double& v : tv) v = normal(rng);
  for (double& v : wv) v = normal(rng);
  auto x = sg::from_vector(xv, {64, 6}, sg::kFloat64), t = sg::from_vector(tv, {64, 6}, sg::kFloat64);
  auto w = sg::triu(sg::from_vector(wv, {6, 6}, sg::kFloat64)).detach();
  w.requires_grad_();
  sg::optim::Adam opt({w}, {.lr = 1e-2});
  for (int i = 0; i < 300; ++i) {
    opt.zero_grad();
    auto loss = sg::mse_loss(sg::tanh(sg::linear(x, w)), t);
    if (tape_during && i == 150) *tape_during = sg::autograd::tape_size();
    loss.backward();
    opt.step();
  }
  return w.to_vector();
}

TEST(Threads, IndependentModelsGetTheSameResultsAsAlone) {
  const auto alone_a = train_alone(1, nullptr), alone_b = train_alone(2, nullptr);
  std::vector<double> together_a, together_b;
  int64_t tape_a = 0, tape_b = 0;
  std::thread ta([&] { together_a = train_alone(1, &tape_a); });
  std::thread tb([&] { together_b = train_alone(2, &tape_b); });
  ta.join();
  tb.join();
  EXPECT_EQ(together_a, alone_a);  // bit for bit
  EXPECT_EQ(together_b, alone_b);
  // Each thread's tape holds only its own records.
  EXPECT_GT(tape_a, 0);
  EXPECT_EQ(tape_a, tape_b);
}

// A tensor may be read by several threads at once (docs/reliability.md): two threads training
// their own weights on one shared input — data and a shared parameter-free projection — get
// bit for bit what they get alone, and the shared tensors are unchanged.
std::vector<double> train_on_shared(const sg::Tensor& x, const sg::Tensor& t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> wv(36);
  for (double& v : wv) v = normal(rng);
  auto w = sg::triu(sg::from_vector(wv, {6, 6}, sg::kFloat64)).detach();
  w.requires_grad_();
  sg::optim::SGD opt({w}, {.lr = 1e-2, .momentum = 0.9});
  for (int i = 0; i < 200; ++i) {
    opt.zero_grad();
    sg::mse_loss(sg::linear(sg::tanh(x), w), t).backward();
    opt.step();
  }
  return w.to_vector();
}

TEST(Threads, SharedReadOnlyInputsGiveTheSameResultsAsAlone) {
  sg::manual_seed(3);
  const auto x = sg::randn({64, 6}, sg::kFloat64), t = sg::randn({64, 6}, sg::kFloat64);
  const auto x_before = x.to_vector(), t_before = t.to_vector();
  const uint64_t x_version = x.impl().storage->version.load();
  const auto alone_a = train_on_shared(x, t, 5), alone_b = train_on_shared(x, t, 6);
  std::vector<double> together_a, together_b;
  std::thread ta([&] { together_a = train_on_shared(x, t, 5); });
  std::thread tb([&] { together_b = train_on_shared(x, t, 6); });
  ta.join();
  tb.join();
  EXPECT_EQ(together_a, alone_a);
  EXPECT_EQ(together_b, alone_b);
  EXPECT_NE(alone_a, alone_b);
  EXPECT_EQ(x.to_vector(), x_before);
  EXPECT_EQ(t.to_vector(), t_before);
  EXPECT_EQ(x.impl().storage->version.load(), x_version);
}

// Grad mode is per thread: a NoGradGuard held in one thread does not stop another from recording.
TEST(Threads, GradModeIsPerThread) {
  auto w = sg::ones({3}, sg::kFloat64).requires_grad_();
  std::promise<void> guard_held, other_done;
  std::thread quiet([&] {
    sg::NoGradGuard guard;
    guard_held.set_value();
    other_done.get_future().wait();  // keep the guard while the main thread records
    EXPECT_FALSE((w * 2.0).requires_grad());
    EXPECT_FALSE(sg::autograd::grad_mode_enabled());
  });
  guard_held.get_future().wait();
  EXPECT_TRUE(sg::autograd::grad_mode_enabled());
  auto y = sg::sum(w * 2.0);
  EXPECT_TRUE(y.requires_grad());
  other_done.set_value();
  quiet.join();
  y.backward();
  EXPECT_EQ(w.grad().to_vector(), (std::vector<double>{2, 2, 2}));
}

}  // namespace
