// The learning-rate schedules against their closed forms (PyTorch's formulas), set on SGD and Adam.
#include "test_util.h"

#include <cmath>

namespace {

namespace sched = sg::optim::lr_scheduler;

TEST(LrScheduler, StepCosineAndLinearFollowTheirClosedForms) {
  const sg::Tensor w = sg::zeros({2}).requires_grad_();
  sg::optim::SGD sgd({w}, {.lr = 0.1});
  sched::StepLR step(sgd, 3, 0.5);
  std::vector<double> rates{sgd.lr()};
  for (int e = 0; e < 7; ++e) {
    step.step();
    rates.push_back(sgd.lr());
  }
  EXPECT_EQ(rates, (std::vector<double>{0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025}));
  EXPECT_EQ(step.last_epoch(), 7);

  sg::optim::Adam adam({w}, {.lr = 1.0});
  sched::CosineAnnealingLR cosine(adam, 4, 0.2);
  EXPECT_DOUBLE_EQ(adam.lr(), 1.0);
  for (int e = 1; e <= 8; ++e) {
    cosine.step();
    EXPECT_NEAR(adam.lr(), 0.2 + 0.8 * (1 + std::cos(M_PI * e / 4)) / 2, 1e-15) << e;
  }
  EXPECT_NEAR(adam.lr(), 1.0, 1e-15);  // periodic: back at the top after 2·t_max

  sg::optim::SGD warm({w}, {.lr = 0.4});
  sched::LinearLR warmup(warm, 0.25, 1.0, 3);
  EXPECT_DOUBLE_EQ(warm.lr(), 0.1);  // the start factor applies at once
  warmup.step();
  EXPECT_DOUBLE_EQ(warm.lr(), 0.2);
  warmup.step();
  warmup.step();
  EXPECT_DOUBLE_EQ(warm.lr(), 0.4);
  warmup.step();
  EXPECT_DOUBLE_EQ(warm.lr(), 0.4);  // stays at the end factor
  EXPECT_DOUBLE_EQ(warmup.base_lr(), 0.4);
  EXPECT_DOUBLE_EQ(warmup.last_lr(), 0.4);
}

TEST(LrScheduler, AStateDictResumesTheSchedule) {
  const sg::Tensor w = sg::zeros({2}).requires_grad_();
  sg::optim::Adam first({w}, {.lr = 0.5});
  sched::CosineAnnealingLR a(first, 10, 0.01);
  for (int e = 0; e < 4; ++e) a.step();
  const auto saved = a.state_dict();
  // A new optimizer restored at the decayed rate and a new schedule built on it: the state puts
  // the schedule back at epoch 4 with the original base rate.
  sg::optim::Adam second({w}, {.lr = first.lr()});
  sched::CosineAnnealingLR b(second, 10, 0.01);
  b.load_state_dict(saved);
  EXPECT_EQ(b.last_epoch(), 4);
  EXPECT_DOUBLE_EQ(b.base_lr(), 0.5);
  EXPECT_DOUBLE_EQ(second.lr(), first.lr());
  for (int e = 0; e < 3; ++e) {
    a.step();
    b.step();
    EXPECT_DOUBLE_EQ(second.lr(), first.lr());
  }
  EXPECT_EQ(sgtest::message_of([&] { b.load_state_dict({{"lr_scheduler.epoch", sg::full({}, 1.5)}}); }),
            "LRScheduler.load_state_dict: expected one value each for lr_scheduler.epoch and lr_scheduler.base_lr");
}

TEST(LrScheduler, BadArgumentsNameTheSchedule) {
  const sg::Tensor w = sg::zeros({2}).requires_grad_();
  sg::optim::SGD sgd({w}, {.lr = 0.1});
  EXPECT_EQ(sgtest::message_of([&] { sched::StepLR s(sgd, 0); }), "StepLR: step_size must be positive, got 0");
  EXPECT_EQ(sgtest::message_of([&] { sched::CosineAnnealingLR s(sgd, -1); }),
            "CosineAnnealingLR: t_max must be positive, got -1");
  EXPECT_EQ(sgtest::message_of([&] { sched::LinearLR s(sgd, 0.0); }),
            "LinearLR: expected 0 < start_factor ≤ 1 and 0 ≤ end_factor ≤ 1, got 0 and 1");
}

}  // namespace
