// sg::cuda::Graph: a captured training step replays to the parameters the eager step gives, bit
// for bit, in float32 and float64 (a structured Gaussian fit with Adam and with SGD, and a
// Gaussian-process step through Cholesky, solve and logdet); replays allocate nothing; an op that
// cannot be captured fails naming itself and leaves the stream usable; a changed learning rate is
// caught before replay; a failed Cholesky of a replay is reported by check_errors. And the
// multi-tensor optimizer steps against the per-parameter ones.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <structgrad/structgrad.h>
#include "test_util.h"

namespace {

TEST(CudaGraph, WithoutCudaItIsAClearError) {
  if (sg::cuda::built_with_cuda()) GTEST_SKIP() << "this build has CUDA";
  EXPECT_EQ(sgtest::message_of([] { sg::cuda::Graph graph; }), "cuda::Graph: structgrad was built without CUDA");
  EXPECT_FALSE(sg::cuda::is_capturing());
}

#define SKIP_WITHOUT_GPU()                                                             \
  do {                                                                                 \
    if (!sg::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine"; \
  } while (0)

sg::TensorOptions on_gpu(sg::DType dtype) { return sg::TensorOptions().dtype(dtype).device(sg::kCUDA); }

/// The bench's model: precision UᵀU with U upper, mean μ; loss ½·mean‖U(x − μ)‖² − Σ log|Uᵢᵢ|.
struct GaussianFit {
  sg::UpperTriangular u;
  sg::Tensor mu, x, loss;
  std::unique_ptr<sg::optim::Optimizer> opt;

  GaussianFit(int64_t d, sg::DType dtype, bool adam) {
    sg::manual_seed(7);
    const auto o = on_gpu(dtype);
    u = sg::triu(sg::randn({d, d}, o) * 0.1 + sg::eye(d, o));
    u.requires_grad_();
    mu = sg::zeros({d}, o.requires_grad());
    x = sg::randn({256, d}, o);
    if (adam) opt = std::make_unique<sg::optim::Adam>(std::vector<sg::Tensor>{u, mu}, sg::optim::AdamOptions{.lr = 1e-2});
    else opt = std::make_unique<sg::optim::SGD>(std::vector<sg::Tensor>{u, mu}, sg::optim::SGDOptions{.lr = 1e-2, .momentum = 0.9});
  }
  void step() {
    opt->zero_grad();
    const sg::Tensor z = sg::linear(x - mu, u);
    loss = 0.5 * sg::mean(sg::sum(sg::square(z), 1)) - sg::sum(sg::log(sg::abs(sg::diagonal(u))));
    loss.backward();
    opt->step();
  }
};

void expect_bitwise_equal(const sg::Tensor& a, const sg::Tensor& b, const std::string& what) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], y[i]) << what << " differs at " << i;
}

class GraphedStep : public ::testing::TestWithParam<std::tuple<sg::DType, bool>> {};

TEST_P(GraphedStep, HundredStepsGiveTheEagerParametersBitForBit) {
  SKIP_WITHOUT_GPU();
  const auto [dtype, adam] = GetParam();
  GaussianFit eager(48, dtype, adam), graphed(48, dtype, adam);
  for (int i = 0; i < 100; ++i) eager.step();

  sg::cuda::Graph graph;
  graph.capture([&] { graphed.step(); }, /*warmup=*/3);
  ASSERT_TRUE(graph.has_graph());
  for (int i = 0; i < 97; ++i) graph.replay();
  sg::cuda::synchronize();

  expect_bitwise_equal(eager.u, graphed.u, "U");
  expect_bitwise_equal(eager.mu, graphed.mu, "mu");
  expect_bitwise_equal(eager.loss, graphed.loss, "the last loss");
  expect_bitwise_equal(eager.u.grad(), graphed.u.grad(), "U's gradient");
  if (adam) EXPECT_EQ(static_cast<sg::optim::Adam&>(*graphed.opt).steps_taken(), 100);
  // The fit moved: the comparison is not of two untouched parameters.
  EXPECT_GT(sg::max(sg::abs(graphed.mu)).item(), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GraphedStep,
                         ::testing::Combine(::testing::Values(sg::kFloat32, sg::kFloat64), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(sg::dtype_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "Adam" : "SgdMomentum");
                         });

TEST(CudaGraph, ReplaysAllocateNothingOverTenThousandReplays) {
  SKIP_WITHOUT_GPU();
  GaussianFit fit(64, sg::kFloat32, true);
  sg::cuda::Graph graph;
  graph.capture([&] { fit.step(); });
  for (int i = 0; i < 10; ++i) graph.replay();
  sg::cuda::synchronize();
  const sg::AllocatorStats before = sg::cuda::allocator_stats();
  const sg::cuda::TransferStats copies = sg::cuda::transfer_stats();
  for (int i = 0; i < 10000; ++i) graph.replay();
  sg::cuda::synchronize();
  const sg::AllocatorStats after = sg::cuda::allocator_stats();
  EXPECT_EQ(after.num_allocations, before.num_allocations);
  EXPECT_EQ(after.num_device_mallocs, before.num_device_mallocs);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(after.bytes_cached, before.bytes_cached);
  EXPECT_EQ(sg::cuda::transfer_stats().host_to_device, copies.host_to_device);
  EXPECT_EQ(sg::cuda::transfer_stats().device_to_host, copies.device_to_host);
  EXPECT_EQ(static_cast<sg::optim::Adam&>(*fit.opt).steps_taken(), 3 + 10 + 10000);
}

TEST(CudaGraph, AnOpThatCannotBeCapturedFailsNamingItselfAndLeavesTheStreamUsable) {
  SKIP_WITHOUT_GPU();
  GaussianFit fit(16, sg::kFloat32, true);
  sg::cuda::Graph graph;
  const std::string item = sgtest::message_of([&] {
    graph.capture([&] {
      fit.step();
      (void)fit.loss.item();
    });
  });
  EXPECT_NE(item.find("item: cannot run while a CUDA graph captures work on cuda:0"), std::string::npos) << item;
  EXPECT_NE(item.find("reads a value back to the host"), std::string::npos) << item;
  EXPECT_FALSE(graph.has_graph());
  EXPECT_FALSE(sg::cuda::is_capturing());

  const std::string randn = sgtest::message_of([&] { graph.capture([&] { (void)sg::randn({4}, on_gpu(sg::kFloat32)); }, 0); });
  EXPECT_NE(randn.find("randn: cannot run while a CUDA graph captures"), std::string::npos) << randn;
  const std::string sync = sgtest::message_of([&] { graph.capture([] { sg::cuda::synchronize(); }, 0); });
  EXPECT_NE(sync.find("cuda::synchronize: cannot run while a CUDA graph captures"), std::string::npos) << sync;

  // Eager work on the library stream still runs and gives the CPU's answer.
  const sg::Tensor a = sg::randn({32, 32}, sg::kFloat64);
  const sg::Tensor on_device = sg::matmul(a.to(sg::kCUDA), a.to(sg::kCUDA));
  EXPECT_TRUE(sg::allclose(on_device.to(sg::kCPU), sg::matmul(a, a), 1e-12, 1e-12));
  // And the same graph captures a clean step afterwards.
  graph.capture([&] { fit.step(); });
  graph.replay();
  graph.check_errors();
  EXPECT_TRUE(std::isfinite(fit.loss.item()));
}

TEST(CudaGraph, AChangedLearningRateIsCaughtBeforeReplay) {
  SKIP_WITHOUT_GPU();
  GaussianFit fit(16, sg::kFloat32, true);
  sg::cuda::Graph graph;
  graph.capture([&] { fit.step(); });
  graph.replay();
  fit.opt->set_lr(5e-3);
  EXPECT_EQ(sgtest::message_of([&] { graph.replay(); }),
            "Graph::replay: Adam's lr is 0.005 but the step was captured with 0.01; the captured launches hold the "
            "old value, so capture the step again after changing it");
  fit.opt->set_lr(1e-2);
  EXPECT_NO_THROW(graph.replay());
  graph.reset();
  fit.opt->set_lr(5e-3);
  graph.capture([&] { fit.step(); });
  const std::vector<double> before = fit.mu.to_vector();
  EXPECT_NO_THROW(graph.replay());
  EXPECT_NE(fit.mu.to_vector(), before);

  fit.opt.reset();  // the optimizer the step was captured with
  EXPECT_EQ(sgtest::message_of([&] { graph.replay(); }),
            "Graph::replay: the Adam optimizer of the captured step has been destroyed");
}

TEST(CudaGraph, CaptureEndRecordsNoGraphAfterARefusedOp) {
  SKIP_WITHOUT_GPU();
  GaussianFit fit(16, sg::kFloat32, true);
  sg::cuda::Graph graph;
  sg::cuda::synchronize();  // the model's tensors, made on the library stream, before the warm-up
  {
    sg::cuda::StreamGuard warm_up(graph.stream(), 0);
    fit.step();
  }
  graph.capture_begin();
  EXPECT_TRUE(sg::cuda::is_capturing());
  fit.step();
  EXPECT_THROW((void)fit.loss.item(), sg::Error);
  const std::string message = sgtest::message_of([&] { graph.capture_end(); });
  EXPECT_EQ(message.rfind("Graph::capture_end: the capture recorded no graph, because an op refused to run in it: "
                          "item: cannot run while a CUDA graph captures",
                          0),
            0u)
      << message;
  EXPECT_FALSE(graph.has_graph());
  EXPECT_FALSE(sg::cuda::is_capturing());
  graph.capture_begin();
  fit.step();
  graph.capture_end();
  const std::vector<double> before = fit.u.to_vector();
  graph.replay();
  EXPECT_NE(fit.u.to_vector(), before);
}

TEST(CudaGraph, EmptyCacheLeavesALiveGraphsPoolAlone) {
  SKIP_WITHOUT_GPU();
  GaussianFit eager(96, sg::kFloat32, true), graphed(96, sg::kFloat32, true);
  for (int i = 0; i < 40; ++i) eager.step();
  sg::cuda::Graph graph;
  graph.capture([&] { graphed.step(); });
  for (int i = 0; i < 17; ++i) graph.replay();
  sg::cuda::empty_cache();
  (void)sg::randn({1 << 20}, on_gpu(sg::kFloat32));  // memory the driver may hand out again
  for (int i = 0; i < 20; ++i) graph.replay();
  sg::cuda::synchronize();
  expect_bitwise_equal(eager.u, graphed.u, "U");
  expect_bitwise_equal(eager.mu, graphed.mu, "mu");
}

TEST(CudaGraph, ALoadedOptimizerStateIsWhatTheNextReplayReads) {
  SKIP_WITHOUT_GPU();
  GaussianFit fit(32, sg::kFloat64, true);
  sg::cuda::Graph graph;
  graph.capture([&] { fit.step(); });
  for (int i = 0; i < 10; ++i) graph.replay();
  // A checkpoint at step 13: parameters and optimizer state, cloned (state_dict shares its buffers).
  const sg::Tensor u13 = fit.u.detach().clone(), mu13 = fit.mu.detach().clone();
  std::vector<std::pair<std::string, sg::Tensor>> state = fit.opt->state_dict();
  for (auto& [name, t] : state) t = t.clone();
  for (int i = 0; i < 10; ++i) graph.replay();
  const sg::Tensor u23 = fit.u.detach().clone();
  for (int i = 0; i < 5; ++i) graph.replay();
  // Back to step 13, then ten replays again.
  fit.u.detach().copy_(u13);
  fit.mu.detach().copy_(mu13);
  fit.opt->load_state_dict(state);
  EXPECT_EQ(static_cast<sg::optim::Adam&>(*fit.opt).steps_taken(), 13);
  for (int i = 0; i < 10; ++i) graph.replay();
  expect_bitwise_equal(fit.u, u23, "U after resuming");
}

/// A Gaussian-process marginal likelihood step on fixed inputs: Cholesky, a triangular solve and the
/// log-determinant, forward and backward, with Adam on the log-scales.
struct GpStep {
  sg::Tensor d2, eye, y, log_ell, log_sigma, log_noise, loss;
  std::unique_ptr<sg::optim::Adam> opt;
  sg::Tensor info;

  GpStep(int64_t n, sg::DType dtype) {
    sg::manual_seed(3);
    const auto o = on_gpu(dtype);
    const sg::Tensor x = sg::rand({n, 1}, o) * 6.0 - 3.0;
    d2 = sg::square(x - sg::transpose(x));
    eye = sg::eye(n, o);
    y = sg::tanh(3.0 * x) + 0.1 * sg::randn({n, 1}, o);
    log_ell = sg::full({}, 0.0, o.requires_grad());
    log_sigma = sg::full({}, 0.0, o.requires_grad());
    log_noise = sg::full({}, -0.7, o.requires_grad());
    opt = std::make_unique<sg::optim::Adam>(std::vector<sg::Tensor>{log_ell, log_sigma, log_noise},
                                            sg::optim::AdamOptions{.lr = 0.05});
  }
  void step() {
    opt->zero_grad();
    const sg::Symmetric k = sg::sym(sg::exp(2.0 * log_sigma) * sg::exp(d2 * (-0.5 * sg::exp(-2.0 * log_ell))) +
                                    sg::exp(2.0 * log_noise) * eye);
    const sg::LowerTriangular l = sg::cholesky(k);
    const sg::Tensor z = sg::solve_triangular(l, y);
    loss = 0.5 * sg::sum(sg::square(z)) + sg::logdet(l);
    loss.backward();
    opt->step();
  }
};

TEST(CudaGraph, AGaussianProcessStepReplaysWithoutAHostRoundTrip) {
  SKIP_WITHOUT_GPU();
  for (sg::DType dtype : {sg::kFloat32, sg::kFloat64}) {
    SCOPED_TRACE(sg::dtype_name(dtype));
    GpStep eager(200, dtype), graphed(200, dtype);
    for (int i = 0; i < 30; ++i) eager.step();
    sg::cuda::Graph graph;
    graph.capture([&] { graphed.step(); });
    sg::cuda::synchronize();
    const sg::cuda::TransferStats before = sg::cuda::transfer_stats();
    for (int i = 0; i < 27; ++i) graph.replay();
    sg::cuda::synchronize();
    EXPECT_EQ(sg::cuda::transfer_stats().device_to_host, before.device_to_host);
    EXPECT_EQ(sg::cuda::transfer_stats().host_to_device, before.host_to_device);
    graph.check_errors();
    for (const auto& [a, b] : {std::pair{eager.log_ell, graphed.log_ell}, std::pair{eager.log_noise, graphed.log_noise},
                               std::pair{eager.loss, graphed.loss}})
      expect_bitwise_equal(a, b, "GP");
    EXPECT_NE(eager.log_ell.item(), 0.0);
  }
}

TEST(CudaGraph, CheckErrorsReportsACholeskyThatFailedInAReplay) {
  SKIP_WITHOUT_GPU();
  GpStep gp(64, sg::kFloat64);
  sg::cuda::Graph graph;
  graph.capture([&] { gp.step(); });
  graph.replay();
  graph.check_errors();  // positive definite so far
  // An infinite lengthscale, unit signal and no noise make K the matrix of ones: its second pivot is 0.
  gp.log_ell.detach().fill_(INFINITY);
  gp.log_sigma.detach().fill_(0.0);
  gp.log_noise.detach().fill_(-INFINITY);
  graph.replay();
  const std::string message = sgtest::message_of([&] { graph.check_errors(); });
  EXPECT_EQ(message.rfind("cholesky: ", 0), 0u) << message;
  EXPECT_NE(message.find("is not positive definite: pivot 2 of 64 is not positive"), std::string::npos) << message;
}

/// Parameters of several shapes and both structures, more than one launch's list holds.
std::vector<sg::Tensor> many_parameters(sg::DType dtype) {
  sg::manual_seed(11);
  std::vector<sg::Tensor> params;
  for (int i = 0; i < 41; ++i) {
    sg::Tensor p = i % 3 == 0 ? sg::Tensor(sg::triu(sg::randn({9, 9}, on_gpu(dtype)))) : sg::randn({i + 1}, on_gpu(dtype));
    params.push_back(p.requires_grad_());
  }
  return params;
}

/// `steps` steps of make(params) on the loss Σ tanh(k·p), the same for both optimizers compared.
std::vector<sg::Tensor> train(sg::DType dtype, int steps,
                              const std::function<std::unique_ptr<sg::optim::Optimizer>(std::vector<sg::Tensor>)>& make) {
  std::vector<sg::Tensor> params = many_parameters(dtype);
  auto opt = make(params);
  for (int s = 0; s < steps; ++s) {
    opt->zero_grad();
    sg::Tensor loss = sg::full({}, 0.0, on_gpu(dtype));
    for (size_t i = 0; i < params.size(); ++i) loss = loss + sg::sum(sg::tanh(params[i] * double(i % 5 + 1)));
    loss.backward();
    opt->step();
  }
  return params;
}

TEST(FusedOptimizer, SgdMatchesThePerParameterStepBitForBit) {
  SKIP_WITHOUT_GPU();
  for (sg::DType dtype : {sg::kFloat32, sg::kFloat64}) {
    for (bool nesterov : {false, true}) {
      auto make = [&](bool fused) {
        return [=](std::vector<sg::Tensor> p) -> std::unique_ptr<sg::optim::Optimizer> {
          return std::make_unique<sg::optim::SGD>(
              p, sg::optim::SGDOptions{.lr = 0.02, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = nesterov, .fused = fused});
        };
      };
      const auto a = train(dtype, 50, make(true)), b = train(dtype, 50, make(false));
      for (size_t i = 0; i < a.size(); ++i) expect_bitwise_equal(a[i], b[i], "SGD parameter " + std::to_string(i));
    }
  }
}

// The fused step computes Adam's bias corrections 1 − βᵗ on the device, the per-parameter one on the
// host, with pow functions that differ in rounding; over 100 steps of this loss the parameters
// drift apart by rounding only: measured below 2e-6 in float32 and 1e-13 in float64. Bounds:
// 1e-5 and 1e-12, relative to max(1, |p|). (A graphed and an eager fused step agree bit for bit.)
TEST(FusedOptimizer, AdamMatchesThePerParameterStep) {
  SKIP_WITHOUT_GPU();
  for (sg::DType dtype : {sg::kFloat32, sg::kFloat64}) {
    for (bool decoupled : {false, true}) {
      auto make = [&](bool fused) {
        return [=](std::vector<sg::Tensor> p) -> std::unique_ptr<sg::optim::Optimizer> {
          return std::make_unique<sg::optim::Adam>(
              p, sg::optim::AdamOptions{.lr = 0.01, .weight_decay = 1e-2, .decoupled_weight_decay = decoupled, .fused = fused});
        };
      };
      const auto a = train(dtype, 100, make(true)), b = train(dtype, 100, make(false));
      const double bound = dtype == sg::kFloat32 ? 1e-5 : 1e-12;
      for (size_t i = 0; i < a.size(); ++i) {
        const std::vector<double> x = a[i].to_vector(), y = b[i].to_vector(), start = many_parameters(dtype)[i].to_vector();
        bool moved = false;
        for (size_t j = 0; j < x.size(); ++j) {
          ASSERT_LE(std::abs(x[j] - y[j]), bound * std::max(1.0, std::abs(y[j]))) << "parameter " << i << "[" << j << "]";
          moved = moved || std::abs(y[j] - start[j]) > 1e-3;
        }
        EXPECT_TRUE(moved) << "parameter " << i << " did not train";
      }
    }
  }
}

TEST(FusedOptimizer, MixedDtypesMissingGradientsAndEmptyParameters) {
  SKIP_WITHOUT_GPU();
  auto run = [](bool fused, bool adam) {
    sg::manual_seed(5);
    std::vector<sg::Tensor> params = {sg::randn({7}, on_gpu(sg::kFloat32)).requires_grad_(),
                                      sg::randn({3, 3}, on_gpu(sg::kFloat64)).requires_grad_(),
                                      sg::zeros({0}, on_gpu(sg::kFloat32)).requires_grad_(),
                                      sg::randn({4}, on_gpu(sg::kFloat32)).requires_grad_()};  // no gradient
    std::unique_ptr<sg::optim::Optimizer> opt;
    if (adam) opt = std::make_unique<sg::optim::Adam>(params, sg::optim::AdamOptions{.lr = 0.1, .fused = fused});
    else opt = std::make_unique<sg::optim::SGD>(params, sg::optim::SGDOptions{.lr = 0.1, .momentum = 0.5, .fused = fused});
    params.push_back(params[3].detach().clone());  // the start of the parameter without a gradient
    for (int s = 0; s < 20; ++s) {
      opt->zero_grad();
      sg::sum(sg::tanh(params[0])).backward();  // one loss per dtype
      sg::sum(sg::tanh(params[1])).backward();
      sg::sum(params[2]).backward();
      opt->step();
    }
    return params;
  };
  for (bool adam : {false, true}) {
    // SGD matches bit for bit; Adam within AdamMatchesThePerParameterStep's bounds.
    const auto a = run(true, adam), b = run(false, adam);
    const std::vector<double> x32 = a[0].to_vector(), y32 = b[0].to_vector();
    for (size_t j = 0; j < x32.size(); ++j) EXPECT_NEAR(x32[j], y32[j], adam ? 1e-5 : 0.0) << "float32 parameter " << j;
    const std::vector<double> x64 = a[1].to_vector(), y64 = b[1].to_vector();
    for (size_t j = 0; j < x64.size(); ++j) EXPECT_NEAR(x64[j], y64[j], adam ? 1e-12 : 0.0) << "float64 parameter " << j;
    expect_bitwise_equal(a[3], a[4], "the parameter without a gradient");
    expect_bitwise_equal(b[3], b[4], "the parameter without a gradient");
    EXPECT_EQ(a[2].numel(), 0);
  }
}

TEST(FusedOptimizer, AdamStateDictCarriesTheDeviceStepCount) {
  SKIP_WITHOUT_GPU();
  sg::Tensor p = sg::randn({5}, on_gpu(sg::kFloat32)).requires_grad_();
  sg::optim::Adam opt({p}, {.lr = 0.1});
  for (int i = 0; i < 4; ++i) {
    opt.zero_grad();
    sg::sum(sg::square(p)).backward();
    opt.step();
  }
  EXPECT_EQ(opt.steps_taken(), 4);
  sg::Tensor q = p.detach().clone().requires_grad_();
  sg::optim::Adam resumed({q}, {.lr = 0.1});
  resumed.load_state_dict(opt.state_dict());
  EXPECT_EQ(resumed.steps_taken(), 4);
  for (sg::optim::Adam* o : {&opt, &resumed}) {
    o->zero_grad();
    sg::sum(sg::square(o->params()[0])).backward();
    o->step();
  }
  expect_bitwise_equal(p, q, "the resumed parameter");
  // Switching to the per-parameter step carries the count over.
  opt.options.fused = false;
  opt.zero_grad();
  sg::sum(sg::square(p)).backward();
  opt.step();
  EXPECT_EQ(opt.steps_taken(), 6);
}

}  // namespace
