// sg::nn::Sequential and the activation layers: forward and backward equal the same ops chained
// by hand, parameters and state_dict reach through the container under "0.weight", ..., a small
// regression trains, and the misuses (empty forward, bad index, wrong type, duplicate name) throw.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace {

using sg::nn::Sequential;

/// Every parameter of `module` set to fresh random values of its own shape and structure.
void randomize(sg::nn::Module& module, uint64_t seed) {
  sg::manual_seed(seed);
  std::vector<std::pair<std::string, sg::Tensor>> state;
  for (const auto& [name, p] : module.named_parameters()) {
    const sg::TensorOptions o = sg::TensorOptions().dtype(p.dtype());
    sg::Tensor value = p.structure() == sg::Structure::Dense ? sg::randn(p.shape(), o)
                                                             : sgtest::random_structured(p.structure(), p.size(0), o);
    state.emplace_back(name, value * 0.5);
  }
  module.load_state_dict(state);
}

/// A chain with every kind of layer: Linear, UpperLinear, SymmetricBilinear and each activation.
Sequential every_layer_net(sg::TensorOptions o) {
  return Sequential({std::make_shared<sg::nn::Linear>(4, 6, true, o), std::make_shared<sg::nn::Tanh>(),
                     std::make_shared<sg::nn::UpperLinear>(6, true, o), std::make_shared<sg::nn::ReLU>(),
                     std::make_shared<sg::nn::Linear>(6, 5, true, o), std::make_shared<sg::nn::LeakyReLU>(0.2),
                     std::make_shared<sg::nn::Linear>(5, 5, false, o), std::make_shared<sg::nn::Sigmoid>(),
                     std::make_shared<sg::nn::Softplus>(),
                     std::make_shared<sg::nn::Functional>([](const sg::Tensor& x) { return x * x - 1.0; }),
                     std::make_shared<sg::nn::SymmetricBilinear>(5, o)});
}

/// every_layer_net's forward written out with the ops and the same parameter tensors.
sg::Tensor every_layer_by_hand(const Sequential& net, const sg::Tensor& x) {
  const auto& fc0 = net.at<sg::nn::Linear>(0);
  const auto& upper = net.at<sg::nn::UpperLinear>(2);
  const auto& fc4 = net.at<sg::nn::Linear>(4);
  const auto& fc6 = net.at<sg::nn::Linear>(6);
  const auto& form = net.at<sg::nn::SymmetricBilinear>(10);
  sg::Tensor h = sg::tanh(sg::linear(x, fc0.weight, fc0.bias));
  h = sg::relu(sg::linear(h, upper.weight, upper.bias));
  h = sg::leaky_relu(sg::linear(h, fc4.weight, fc4.bias), 0.2);
  h = sg::softplus(sg::sigmoid(sg::linear(h, fc6.weight)));
  h = h * h - 1.0;
  return sg::sum(sg::matmul(h, form.weight) * h, 1);
}

TEST(Sequential, ForwardEqualsTheOpsChainedByHand) {
  Sequential net = every_layer_net(sg::kFloat64);
  randomize(net, 1);
  sg::manual_seed(2);
  const sg::Tensor x = sg::randn({7, 4}, sg::kFloat64);
  const sg::Tensor y = net.forward(x);
  ASSERT_EQ(y.shape(), (sg::Shape{7}));
  EXPECT_EQ(y.to_vector(), every_layer_by_hand(net, x).to_vector());  // the same ops: bit for bit
  // and the layers' own forwards, applied in turn through the Layer interface
  sg::Tensor h = x;
  for (size_t i = 0; i < net.size(); ++i) h = net[i]->forward(h);
  EXPECT_EQ(y.to_vector(), h.to_vector());
}

TEST(Sequential, ActivationsCallTheirOps) {
  sg::manual_seed(3);
  const sg::Tensor x = sg::randn({5, 3}, sg::kFloat64);
  EXPECT_EQ(sg::nn::ReLU().forward(x).to_vector(), sg::relu(x).to_vector());
  EXPECT_EQ(sg::nn::Tanh().forward(x).to_vector(), sg::tanh(x).to_vector());
  EXPECT_EQ(sg::nn::Sigmoid().forward(x).to_vector(), sg::sigmoid(x).to_vector());
  EXPECT_EQ(sg::nn::Softplus().forward(x).to_vector(), sg::softplus(x).to_vector());
  EXPECT_EQ(sg::nn::LeakyReLU().forward(x).to_vector(), sg::leaky_relu(x, 0.01).to_vector());
  EXPECT_EQ(sg::nn::LeakyReLU(0.3).forward(x).to_vector(), sg::leaky_relu(x, 0.3).to_vector());
  // spot values, so the test does not only compare an op with itself
  const sg::Tensor v = sg::tensor({-2.0, 0.0, 3.0}, sg::kFloat64);
  EXPECT_EQ(sg::nn::ReLU().forward(v).to_vector(), (std::vector<double>{0.0, 0.0, 3.0}));
  EXPECT_EQ(sg::nn::LeakyReLU(0.5).forward(v).to_vector(), (std::vector<double>{-1.0, 0.0, 3.0}));
  EXPECT_DOUBLE_EQ(sg::nn::Sigmoid().forward(v).to_vector()[1], 0.5);
  EXPECT_DOUBLE_EQ(sg::nn::Softplus().forward(v).to_vector()[1], std::log(2.0));
  EXPECT_DOUBLE_EQ(sg::nn::Tanh().forward(v).to_vector()[2], std::tanh(3.0));
  for (const auto& act : std::vector<std::shared_ptr<sg::nn::Layer>>{
           std::make_shared<sg::nn::ReLU>(), std::make_shared<sg::nn::LeakyReLU>(), std::make_shared<sg::nn::Tanh>(),
           std::make_shared<sg::nn::Sigmoid>(), std::make_shared<sg::nn::Softplus>()})
    EXPECT_TRUE(act->parameters().empty());
}

TEST(Sequential, ParametersAreNamedByIndexAndShared) {
  auto fc1 = std::make_shared<sg::nn::Linear>(4, 16);
  auto fc2 = std::make_shared<sg::nn::Linear>(16, 1);
  Sequential net({fc1, std::make_shared<sg::nn::Tanh>(), fc2});
  EXPECT_EQ(net.size(), 3u);
  EXPECT_FALSE(net.is_empty());
  std::vector<std::string> names;
  for (const auto& [name, p] : net.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  const std::vector<sg::Tensor> params = net.parameters();
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(params[0].data_ptr(), fc1->weight.data_ptr());  // the layers' own tensors, not copies
  EXPECT_EQ(params[3].data_ptr(), fc2->bias.data_ptr());
  EXPECT_EQ(&net.at<sg::nn::Linear>(2), fc2.get());
  EXPECT_EQ(net[1].get(), &net.at<sg::nn::Tanh>(1));
}

TEST(Sequential, PushBackNamesLayersAndNests) {
  Sequential body;
  body.push_back(std::make_shared<sg::nn::UpperLinear>(3));
  body.push_back(std::make_shared<sg::nn::ReLU>());
  Sequential net;
  auto stem = net.push_back("stem", std::make_shared<sg::nn::Linear>(2, 3));
  net.push_back("body", std::make_shared<Sequential>(body));
  net.push_back(std::make_shared<sg::nn::Linear>(3, 1, false));  // third layer: named "2"
  std::vector<std::string> names;
  for (const auto& [name, p] : net.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"stem.weight", "stem.bias", "body.0.weight", "body.0.bias", "2.weight"}));
  EXPECT_EQ(net.named_layers()[1].first, "body");
  EXPECT_EQ(&net.at<sg::nn::Linear>(0), stem.get());
  EXPECT_EQ(net.at<Sequential>(1).size(), 2u);
  const sg::Tensor x = sg::randn({4, 2});
  EXPECT_EQ(net.forward(x).shape(), (sg::Shape{4, 1}));

  Sequential named({{"in", std::make_shared<sg::nn::Linear>(2, 2)}, {"act", std::make_shared<sg::nn::Sigmoid>()}});
  EXPECT_EQ(named.named_parameters()[0].first, "in.weight");
  EXPECT_EQ(named.named_layers()[1].first, "act");
}

TEST(Sequential, BackwardGivesTheGradientsOfTheChainByHand) {
  Sequential net = every_layer_net(sg::kFloat64);
  randomize(net, 4);
  sg::manual_seed(5);
  sg::Tensor x = sg::randn({6, 4}, sg::TensorOptions().dtype(sg::kFloat64).requires_grad());

  sg::sum(net.forward(x)).backward();
  std::vector<std::vector<double>> through_net;
  for (const auto& p : net.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    through_net.push_back(p.grad().to_vector());
  }
  const std::vector<double> dx_net = x.grad().to_vector();

  net.zero_grad();
  x.zero_grad();
  sg::sum(every_layer_by_hand(net, x)).backward();
  const std::vector<sg::Tensor> params = net.parameters();
  ASSERT_EQ(params.size(), through_net.size());
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(params[i].grad().to_vector(), through_net[i]) << net.named_parameters()[i].first;
  EXPECT_EQ(x.grad().to_vector(), dx_net);
  // the structured parameters keep their structure in the gradient
  EXPECT_TRUE(sgtest::holds_invariant(net.at<sg::nn::UpperLinear>(2).weight.grad()));
  EXPECT_TRUE(sgtest::holds_invariant(net.at<sg::nn::SymmetricBilinear>(10).weight.grad()));
}

TEST(Sequential, GradcheckThroughTheChain) {
  Sequential net = every_layer_net(sg::kFloat64);
  randomize(net, 6);
  sg::manual_seed(7);
  const sg::Tensor x = sg::randn({3, 4}, sg::TensorOptions().dtype(sg::kFloat64).requires_grad());
  const auto result = sg::gradcheck([&](const std::vector<sg::Tensor>& in) { return net.forward(in[0]); }, {x});
  EXPECT_TRUE(result.ok) << result.message;
  EXPECT_GT(result.directions_checked, 0);
}

TEST(Sequential, StateDictRoundTrip) {
  auto make = [] {
    return Sequential({std::make_shared<sg::nn::Linear>(3, 8, true, sg::kFloat64), std::make_shared<sg::nn::Softplus>(),
                       std::make_shared<sg::nn::UpperLinear>(8, true, sg::kFloat64), std::make_shared<sg::nn::Tanh>(),
                       std::make_shared<sg::nn::Linear>(8, 2, true, sg::kFloat64)});
  };
  Sequential a = make(), b = make();
  randomize(a, 8);
  randomize(b, 9);
  sg::manual_seed(10);
  const sg::Tensor x = sg::randn({5, 3}, sg::kFloat64);
  ASSERT_NE(a.forward(x).to_vector(), b.forward(x).to_vector());

  const auto state = a.state_dict();
  std::vector<std::string> names;
  for (const auto& [name, t] : state) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}));
  EXPECT_EQ(state[2].second.structure(), sg::Structure::UpperTriangular);

  const void* b_storage = b.at<sg::nn::Linear>(0).weight.data_ptr();
  b.load_state_dict(state);
  EXPECT_EQ(b.forward(x).to_vector(), a.forward(x).to_vector());
  EXPECT_EQ(b.at<sg::nn::Linear>(0).weight.data_ptr(), b_storage);  // loaded in place
  EXPECT_EQ(b.at<sg::nn::UpperLinear>(2).weight.structure(), sg::Structure::UpperTriangular);

  // and through a file
  Sequential c = make();
  const std::string path = (std::filesystem::temp_directory_path() / "sg_test_sequential.npz").string();
  sg::nn::save(a, path);
  sg::nn::load(c, path);
  std::filesystem::remove(path);
  EXPECT_EQ(c.forward(x).to_vector(), a.forward(x).to_vector());
}

TEST(Sequential, TrainsATinyRegression) {
  // y = sin(2x) on [-1, 1] with a 1-16-1 tanh network, Adam, full batch, float64 on cpu.
  sg::manual_seed(11);
  const sg::TensorOptions o = sg::kFloat64;
  Sequential net({std::make_shared<sg::nn::Linear>(1, 16, true, o), std::make_shared<sg::nn::Tanh>(),
                  std::make_shared<sg::nn::Linear>(16, 1, true, o)});
  std::vector<double> xs, ys;
  for (int i = 0; i < 64; ++i) {
    xs.push_back(-1.0 + 2.0 * i / 63.0);
    ys.push_back(std::sin(2.0 * xs.back()));
  }
  const sg::Tensor x = sg::from_vector(xs, {64, 1}, o), y = sg::from_vector(ys, {64, 1}, o);
  sg::optim::Adam opt(net.parameters(), {.lr = 0.02});
  const double initial = sg::mse_loss(net.forward(x), y).item();
  double final_loss = initial;
  for (int step = 0; step < 400; ++step) {
    opt.zero_grad();
    sg::Tensor loss = sg::mse_loss(net.forward(x), y);
    loss.backward();
    opt.step();
    final_loss = loss.item();
  }
  EXPECT_LT(final_loss, initial / 50.0) << "initial loss " << initial << ", final " << final_loss;
}

TEST(Sequential, EmptyForwardThrowsLikeLibtorch) {
  Sequential net;
  EXPECT_TRUE(net.is_empty());
  EXPECT_EQ(net.size(), 0u);
  EXPECT_TRUE(net.parameters().empty());
  EXPECT_PRED2(sgtest::contains, sgtest::message_of([&] { net.forward(sg::ones({2, 2})); }),
               "Sequential: forward on an empty Sequential");
}

TEST(Sequential, MisuseGivesClearErrors) {
  Sequential net({std::make_shared<sg::nn::Linear>(2, 2), std::make_shared<sg::nn::ReLU>()});
  EXPECT_PRED2(sgtest::contains, sgtest::message_of([&] { (void)net[2]; }), "Sequential: index 2 is out of range for 2 layers");
  EXPECT_PRED2(sgtest::contains, sgtest::message_of([&] { net.at<sg::nn::Tanh>(1); }),
               "Sequential: layer 1 ('1') is not of the requested type");
  EXPECT_PRED2(sgtest::contains, sgtest::message_of([&] { net.push_back("0", std::make_shared<sg::nn::Tanh>()); }),
               "Sequential: a layer named '0' is already registered");
  EXPECT_PRED2(sgtest::contains, sgtest::message_of([&] { net.push_back("a.b", std::make_shared<sg::nn::Tanh>()); }),
               "without '.'");
  EXPECT_PRED2(sgtest::contains,
               sgtest::message_of([&] { net.push_back(std::shared_ptr<sg::nn::Tanh>()); }), "Sequential: layer '2' is null");
  EXPECT_EQ(net.size(), 2u);  // nothing was added by the failed calls
  EXPECT_PRED2(sgtest::contains, sgtest::message_of([] { sg::nn::Functional f(nullptr); }),
               "Functional: the function is empty");
  // a layer's own check still names the layer
  EXPECT_PRED2(sgtest::contains, sgtest::message_of([&] { net.forward(sg::ones({2, 3})); }), "linear");
}

TEST(Sequential, FunctionalWrapsAnyFunction) {
  sg::manual_seed(12);
  const sg::Tensor x = sg::randn({4, 3}, sg::TensorOptions().dtype(sg::kFloat64).requires_grad());
  sg::nn::Functional square(sg::square);
  EXPECT_EQ(square.forward(x).to_vector(), sg::square(x).to_vector());
  EXPECT_TRUE(square.parameters().empty());

  const double slope = 0.5;
  Sequential net({std::make_shared<sg::nn::Functional>([slope](const sg::Tensor& t) { return sg::leaky_relu(t, slope); }),
                  std::make_shared<sg::nn::Functional>([](const sg::Tensor& t) { return 3.0 * t; })});
  const sg::Tensor y = net.forward(x);
  const std::vector<double> xv = x.to_vector(), yv = y.to_vector();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_DOUBLE_EQ(yv[i], 3.0 * (xv[i] > 0 ? xv[i] : slope * xv[i]));
  sg::sum(y).backward();
  const std::vector<double> dx = x.grad().to_vector();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_DOUBLE_EQ(dx[i], xv[i] > 0 ? 3.0 : 3.0 * slope);
}

TEST(Sequential, ExistingLayersKeepTheirForwardAndServeAsLayers) {
  sg::nn::Linear fc(3, 2, true, sg::kFloat64);
  sg::manual_seed(13);
  const sg::Tensor x = sg::randn({4, 3}, sg::kFloat64);
  const sg::nn::Layer& as_layer = fc;
  EXPECT_EQ(fc.forward(x).to_vector(), as_layer.forward(x).to_vector());
  EXPECT_EQ(fc.forward(x).to_vector(), sg::linear(x, fc.weight, fc.bias).to_vector());
}

TEST(Sequential, ToConvertsEveryLayer) {
  Sequential net({std::make_shared<sg::nn::Linear>(2, 3), std::make_shared<sg::nn::Tanh>(),
                  std::make_shared<sg::nn::UpperLinear>(3)});
  const sg::Tensor handle = net.at<sg::nn::UpperLinear>(2).weight;
  net.to(sg::kFloat64);
  for (const auto& p : net.parameters()) EXPECT_EQ(p.dtype(), sg::kFloat64);
  EXPECT_EQ(handle.dtype(), sg::kFloat64);  // in place: existing handles follow
  EXPECT_EQ(net.forward(sg::ones({1, 2}, sg::kFloat64)).dtype(), sg::kFloat64);
}

TEST(Sequential, OnTheGpuMatchesCpu) {
  SG_SKIP_IF_UNAVAILABLE(sg::kCUDA);
  Sequential cpu_net = every_layer_net(sg::kFloat64), gpu_net = every_layer_net(sg::kFloat64);
  randomize(cpu_net, 14);
  gpu_net.load_state_dict(cpu_net.state_dict());
  gpu_net.to(sg::kCUDA);
  for (const auto& p : gpu_net.parameters()) EXPECT_EQ(p.device(), sg::kCUDA);
  sg::manual_seed(15);
  const sg::Tensor x = sg::randn({9, 4}, sg::kFloat64);
  const sg::Tensor x_gpu = x.to(sg::kCUDA).requires_grad_();
  const sg::Tensor y_gpu = gpu_net.forward(x_gpu);
  EXPECT_EQ(y_gpu.device(), sg::kCUDA);
  EXPECT_TRUE(sgtest::all_close(y_gpu.to(sg::kCPU).to_vector(), cpu_net.forward(x).to_vector(), 1e-10, 1e-12));
  sg::sum(y_gpu).backward();
  sg::sum(cpu_net.forward(x)).backward();
  const auto cpu_params = cpu_net.parameters(), gpu_params = gpu_net.parameters();
  for (size_t i = 0; i < cpu_params.size(); ++i)
    EXPECT_TRUE(sgtest::all_close(gpu_params[i].grad().to(sg::kCPU).to_vector(), cpu_params[i].grad().to_vector(),
                                  1e-10, 1e-12))
        << cpu_net.named_parameters()[i].first;
}

}  // namespace
