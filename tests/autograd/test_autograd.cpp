// The tape: gradients summed over uses and accumulated across calls, retain_graph, the
// consumed-tape error, NoGradGuard, detach, in-place modification of saved tensors, deep
// graphs released without recursion, and the tape staying flat across training steps.
#include "test_util.h"

namespace {

TEST(Autograd, SumsOverUsesAndAccumulatesAcrossCalls) {
  auto x = sg::tensor({1.0, 2.0, 3.0}, sg::kFloat64).requires_grad_();
  auto y = sg::sum(x * x + x * 3.0);  // dy/dx = 2x + 3
  y.backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{5, 7, 9}));
  sg::sum(x * 2.0).backward();  // accumulates: + 2
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{7, 9, 11}));
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, BackwardTwiceNeedsRetainGraph) {
  auto x = sg::tensor({1.0, 2.0}, sg::kFloat64).requires_grad_();
  auto y = sg::sum(sg::exp(x));
  y.backward(/*retain_graph=*/true);
  y.backward();
  EXPECT_TRUE(sgtest::all_close(x.grad().to_vector(), {2 * std::exp(1.0), 2 * std::exp(2.0)}, 1e-15, 0));
  try {
    y.backward();
    FAIL() << "a third backward over a consumed tape did not throw";
  } catch (const sg::Error& e) {
    EXPECT_NE(std::string(e.what()).find("consumed by an earlier backward()"), std::string::npos) << e.what();
  }
}

TEST(Autograd, NonScalarBackwardNeedsGradient) {
  auto x = sg::ones({2, 2}).requires_grad_();
  auto y = x * 2.0;
  try {
    y.backward();
    FAIL();
  } catch (const sg::Error& e) {
    EXPECT_STREQ(e.what(),
                 "backward: expected a scalar loss, got shape [2, 2]; pass an explicit gradient of that shape for a "
                 "non-scalar tensor");
  }
  y.backward(sg::ones({2, 2}));
  EXPECT_EQ(x.grad().to_vector(), std::vector<double>(4, 2.0));
  EXPECT_THROW(y.backward(sg::ones({3})), sg::Error);
}

TEST(Autograd, NoGradGuardDetachAndLeaves) {
  auto x = sg::ones({3}).requires_grad_();
  {
    sg::NoGradGuard guard;
    auto y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
  }
  auto y = x * 2.0;
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_FALSE(y.detach().requires_grad());
  EXPECT_THROW(y.requires_grad_(), sg::Error);
  auto z = sg::ones({3});
  EXPECT_THROW(sg::sum(z).backward(), sg::Error);  // nothing requires grad
}

TEST(Autograd, SavedTensorModifiedInPlaceIsDetected) {
  auto x = sg::tensor({1.0, 2.0}).requires_grad_();
  auto w = sg::tensor({3.0, 4.0});
  auto y = sg::sum(x * w);  // saves w
  w.fill_(0.0);
  EXPECT_THROW(y.backward(), sg::Error);
}

TEST(Autograd, DeepChainIsWalkedAndReleasedWithoutRecursion) {
  auto x = sg::tensor({1.0}, sg::kFloat64).requires_grad_();
  const int64_t before = sg::autograd::tape_size();
  {
    sg::Tensor y = x;
    for (int i = 0; i < 200000; ++i) y = y * 1.0;
    EXPECT_EQ(sg::autograd::tape_size(), before + 200000);
    y.backward();
    EXPECT_EQ(x.grad().item(), 1.0);
  }
  EXPECT_EQ(sg::autograd::tape_size(), before);
}

TEST(Autograd, TapeDoesNotGrowAcrossTrainingSteps) {
  auto w = sg::randn({4, 4}).requires_grad_();
  auto x = sg::randn({8, 4});
  auto step = [&] {
    auto loss = sg::mean(sg::square(sg::matmul(x, w)));
    loss.backward();
    sg::NoGradGuard g;
    w.copy_(w - w.grad() * 0.1);
    w.zero_grad();
  };
  step();
  const int64_t size = sg::autograd::tape_size();
  for (int i = 0; i < 1000; ++i) step();
  EXPECT_EQ(sg::autograd::tape_size(), size);
}

TEST(Autograd, GradientShapeValidationNamesTheOp) {
  auto x = sg::ones({2, 3}).requires_grad_();
  auto y = x * 1.0;
  auto z = sg::detail::make_tensor({2, 3}, sg::kFloat32, sg::kCPU);
  z.fill_(1.0);
  sg::autograd::record("broken_op", {y}, {z}, {}, [](sg::autograd::BackwardContext&) {
    return std::vector<sg::Tensor>{sg::ones({3, 2})};
  });
  try {
    z.backward(sg::ones({2, 3}));
    FAIL();
  } catch (const sg::Error& e) {
    EXPECT_STREQ(e.what(), "backward of 'broken_op': gradient for input 0 has shape [3, 2], expected [2, 3]");
  }
}

}  // namespace

namespace {

// A deliberately wrong backward (off by a factor on one entry) must fail gradcheck, and
// the message must name the input and the entry.
TEST(Gradcheck, CatchesAWrongGradientAndNamesTheEntry) {
  auto x = sg::UpperTriangular::randn(3, sg::kFloat64).requires_grad_();
  auto wrong_square = [](const std::vector<sg::Tensor>& in) {
    sg::Tensor out = sg::detail::make_tensor(in[0].shape(), sg::kFloat64, sg::kCPU, sg::Structure::UpperTriangular);
    {
      sg::NoGradGuard g;
      out.copy_(in[0] * in[0]);
    }
    sg::autograd::record("wrong_square", {in[0]}, {out}, {in[0]}, [](sg::autograd::BackwardContext& ctx) {
      auto mask = sg::tensor({{2.0, 2.0, 2.0}, {0.0, 2.0, 2.5}, {0.0, 0.0, 2.0}}, sg::kFloat64);
      return std::vector<sg::Tensor>{ctx.grad_outputs[0] * ctx.saved[0] * mask};
    });
    return out;
  };
  auto r = sg::gradcheck(wrong_square, {x});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("input 0 (UpperTriangular [3, 3]) entry (1, 2)"), std::string::npos) << r.message;
}

// Symmetric inputs are perturbed along e_ij + e_ji: the projection (G + Gᵀ)/2 passes,
// the unprojected dense gradient would not.
TEST(Gradcheck, SymmetricDirectionsUseTheProjection) {
  auto s = sg::Symmetric::randn(4, sg::kFloat64).requires_grad_();
  auto w = sg::randn({4, 4}, sg::kFloat64);
  auto r = sg::gradcheck([&](const std::vector<sg::Tensor>& in) { return sg::sum(in[0] * w); }, {s});
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.directions_checked, 10);  // n(n+1)/2 basis directions
}

}  // namespace
