// Checkpoints: module and optimizer state dicts, what loading checks before it writes, and a training
// run resumed bit for bit.
#include "io/io_test_util.h"

namespace {

using namespace sgtest::io;

// ---- module state dicts --------------------------------------------------------------------

struct TinyNet : sg::nn::Module {
  explicit TinyNet(sg::TensorOptions o = {}) {
    flow = register_module("flow", std::make_shared<sg::nn::UpperLinear>(4, true, o));
    head = register_module("head", std::make_shared<sg::nn::Linear>(4, 2, true, o));
    form = register_module("form", std::make_shared<sg::nn::SymmetricBilinear>(4, o));
  }
  sg::Tensor loss(const sg::Tensor& x, const sg::Tensor& y, const sg::Tensor& q) const {
    const sg::Tensor h = sg::tanh(flow->forward(x));
    return sg::mean(sg::square(head->forward(h) - y)) + sg::mean(sg::square(form->forward(h) - q));
  }
  std::shared_ptr<sg::nn::UpperLinear> flow;
  std::shared_ptr<sg::nn::Linear> head;
  std::shared_ptr<sg::nn::SymmetricBilinear> form;
};

/// Gives every parameter distinct values inside its structure.
void scramble(TinyNet& net, uint64_t seed) {
  sg::manual_seed(seed);
  sg::NoGradGuard guard;
  for (auto& p : net.parameters()) {
    sg::Tensor r = sg::randn(p.shape(), p.dtype());
    if (p.structure() == sg::Structure::UpperTriangular) r = sg::triu(r);
    if (p.structure() == sg::Structure::Symmetric) r = sg::sym(r);
    p.copy_(r);
  }
}

std::vector<std::string> all_parameter_bytes(const sg::nn::Module& m) {
  std::vector<std::string> out;
  for (auto& p : m.parameters()) out.push_back(raw_bytes(p));
  return out;
}

TEST_F(IoTest, StateDictNamesAndSharesParameters) {
  TinyNet net;
  const auto state = net.state_dict();
  std::vector<std::string> names;
  for (const auto& [name, t] : state) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"flow.weight", "flow.bias", "head.weight", "head.bias", "form.weight"}));
  EXPECT_EQ(state[0].second.structure(), sg::Structure::UpperTriangular);
  EXPECT_FALSE(state[0].second.requires_grad());
  EXPECT_EQ(state[0].second.data_ptr(), net.flow->weight.data_ptr());
}

TEST_F(IoTest, ModuleSaveLoadRestoresInPlaceKeepingStructure) {
  TinyNet a, b;
  scramble(a, 1);
  scramble(b, 2);
  ASSERT_NE(all_parameter_bytes(a), all_parameter_bytes(b));
  const void* b_weight_storage = b.flow->weight.data_ptr();
  const sg::Tensor b_weight_handle = b.flow->weight;
  sg::nn::save(a, path("a.npz"));
  sg::nn::load(b, path("a.npz"));
  EXPECT_EQ(all_parameter_bytes(b), all_parameter_bytes(a));
  EXPECT_EQ(b.flow->weight.data_ptr(), b_weight_storage);  // copied in place
  EXPECT_EQ(raw_bytes(b_weight_handle), raw_bytes(a.flow->weight));
  EXPECT_EQ(b.flow->weight.structure(), sg::Structure::UpperTriangular);
  EXPECT_EQ(b.form->weight.structure(), sg::Structure::Symmetric);
  EXPECT_TRUE(b.flow->weight.requires_grad());
  // numpy-style key access: the archive holds the dotted names.
  const sg::NamedTensors raw = sg::load_npz(path("a.npz"));
  EXPECT_EQ(raw.at(0).first, "flow.weight");
}

TEST_F(IoTest, LoadStateDictChecksEverythingBeforeWriting) {
  TinyNet net;
  scramble(net, 4);
  const auto before = all_parameter_bytes(net);
  auto good = net.state_dict();
  for (auto& [name, t] : good) t = t.clone();
  auto with = [&](const std::string& key, const sg::Tensor& value) {
    auto s = good;
    for (auto& [name, t] : s)
      if (name == key) t = value;
    return s;
  };
  auto load_error = [&](const std::vector<std::pair<std::string, sg::Tensor>>& s) {
    return sgtest::message_of([&] { net.load_state_dict(s); });
  };

  auto missing = good;
  missing.pop_back();
  EXPECT_EQ(load_error(missing), "load_state_dict: the names do not match the module's parameters; missing: 'form.weight'");
  auto extra = good;
  extra.emplace_back("head.scale", sg::ones({1}));
  EXPECT_EQ(load_error(extra), "load_state_dict: the names do not match the module's parameters; unexpected: 'head.scale'");
  EXPECT_EQ(load_error(with("head.bias", sg::zeros({3}))),
            "load_state_dict: parameter 'head.bias' has shape [2] but the state dict holds [3]");
  EXPECT_TRUE(contains_all(load_error(with("head.bias", sg::zeros({2}, sg::kFloat64))),
                           {"load_state_dict: parameter 'head.bias' is float32 but the state dict holds float64"}));
  sg::Tensor not_upper = sg::ones({4, 4});
  EXPECT_EQ(load_error(with("flow.weight", not_upper)),
            "load_state_dict: parameter 'flow.weight' is UpperTriangular but the incoming values are not (as_upper: "
            "entry (1, 0) = 1 is below the diagonal and not zero; use sg::triu to project)");
  const sg::Tensor not_symmetric = sg::tensor({{1, 2, 0, 0}, {3, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}});
  EXPECT_TRUE(contains_all(load_error(with("form.weight", not_symmetric)),
                           {"load_state_dict: parameter 'form.weight' is Symmetric but the incoming values are not"}));
  // Every failure above left the parameters untouched.
  EXPECT_EQ(all_parameter_bytes(net), before);

  // Dense values that satisfy the invariant load and keep the tag.
  auto upper_values = sg::triu(sg::ones({4, 4})).dense();
  net.load_state_dict(with("flow.weight", upper_values));
  EXPECT_EQ(net.flow->weight.structure(), sg::Structure::UpperTriangular);
  EXPECT_EQ(net.flow->weight.to_vector(), upper_values.to_vector());
}

// ---- optimizer state and bit-identical resume ----------------------------------------------

enum class OptKind { Adam, AdamW, SGDMomentum, SGDNesterov };

std::unique_ptr<sg::optim::Optimizer> make_optimizer(OptKind kind, const TinyNet& net, double lr) {
  if (kind == OptKind::Adam) return std::make_unique<sg::optim::Adam>(net.parameters(), sg::optim::AdamOptions{.lr = lr});
  if (kind == OptKind::AdamW)
    return std::make_unique<sg::optim::Adam>(
        net.parameters(), sg::optim::AdamOptions{.lr = lr, .weight_decay = 0.1, .decoupled_weight_decay = true});
  if (kind == OptKind::SGDMomentum)
    return std::make_unique<sg::optim::SGD>(net.parameters(),
                                            sg::optim::SGDOptions{.lr = lr, .momentum = 0.9, .dampening = 0.1});
  return std::make_unique<sg::optim::SGD>(
      net.parameters(), sg::optim::SGDOptions{.lr = lr, .momentum = 0.8, .weight_decay = 0.01, .nesterov = true});
}

struct Batch {
  sg::Tensor x, y, q;
};

std::vector<Batch> make_batches(int count, sg::DType dtype) {
  sg::manual_seed(100);
  std::vector<Batch> out;
  for (int i = 0; i < count; ++i)
    out.push_back({sg::randn({8, 4}, dtype), sg::randn({8, 2}, dtype), sg::randn({8}, dtype)});
  return out;
}

void train(TinyNet& net, sg::optim::Optimizer& opt, const std::vector<Batch>& batches, int begin, int end) {
  for (int i = begin; i < end; ++i) {
    opt.zero_grad();
    net.loss(batches[i].x, batches[i].y, batches[i].q).backward();
    opt.step();
  }
}

class Resume : public IoTest, public ::testing::WithParamInterface<std::tuple<OptKind, sg::DType>> {};

TEST_P(Resume, CheckpointResumesBitIdentically) {
  const auto [kind, dtype] = GetParam();
  const int n = 6, m = 5;
  const auto batches = make_batches(n + m, dtype);

  TinyNet a(dtype);
  scramble(a, 1);
  auto opt_a = make_optimizer(kind, a, 0.05);
  train(a, *opt_a, batches, 0, n);
  sg::save_checkpoint(path("ckpt.npz"), a, *opt_a);
  train(a, *opt_a, batches, n, n + m);

  // A fresh model and optimizer built with other values and another learning rate.
  TinyNet b(dtype);
  scramble(b, 2);
  auto opt_b = make_optimizer(kind, b, 0.5);
  sg::load_checkpoint(path("ckpt.npz"), b, *opt_b);
  train(b, *opt_b, batches, n, n + m);
  EXPECT_EQ(all_parameter_bytes(b), all_parameter_bytes(a));
  EXPECT_EQ(b.flow->weight.structure(), sg::Structure::UpperTriangular);
  EXPECT_EQ(b.form->weight.structure(), sg::Structure::Symmetric);

  // The optimizer state matters: loading only the parameters does not reproduce the run.
  TinyNet c(dtype);
  auto opt_c = make_optimizer(kind, c, 0.05);
  sg::NamedTensors model_only;
  for (auto& [name, t] : sg::load_npz(path("ckpt.npz")))
    if (name.rfind("model.", 0) == 0) model_only.emplace_back(name.substr(6), t);
  c.load_state_dict(model_only);
  train(c, *opt_c, batches, n, n + m);
  EXPECT_NE(all_parameter_bytes(c), all_parameter_bytes(a));
}

std::string resume_name(const ::testing::TestParamInfo<std::tuple<OptKind, sg::DType>>& info) {
  const char* kinds[] = {"Adam", "AdamW", "SGDMomentum", "SGDNesterov"};
  return std::string(kinds[static_cast<int>(std::get<0>(info.param))]) +
         (std::get<1>(info.param) == sg::kFloat32 ? "_f32" : "_f64");
}

INSTANTIATE_TEST_SUITE_P(Io, Resume,
                         ::testing::Combine(::testing::Values(OptKind::Adam, OptKind::AdamW, OptKind::SGDMomentum,
                                                              OptKind::SGDNesterov),
                                            ::testing::Values(sg::kFloat32, sg::kFloat64)),
                         resume_name);

TEST_F(IoTest, OptimizerStateDictContents) {
  TinyNet net;
  sg::optim::Adam adam(net.parameters(), {.lr = 0.01, .beta1 = 0.8});
  const auto batches = make_batches(3, sg::kFloat32);
  train(net, adam, batches, 0, 3);
  std::map<std::string, sg::Tensor> s;
  for (auto& [name, t] : adam.state_dict()) s[name] = t;
  EXPECT_EQ(s.at("adam.step").item(), 3.0);
  EXPECT_EQ(s.at("adam.step").dim(), 0);
  EXPECT_EQ(s.at("adam.beta1").item(), 0.8);
  EXPECT_EQ(s.at("adam.num_params").item(), 5.0);
  EXPECT_EQ(raw_bytes(s.at("adam.exp_avg_sq.4")), raw_bytes(adam.exp_avg_sq(4)));
  EXPECT_EQ(s.size(), 8u + 2 * 5);

  // SGD without a step has no momentum buffers yet, and a fresh SGD accepts that state.
  sg::optim::SGD sgd(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  const auto empty_state = sgd.state_dict();
  EXPECT_EQ(empty_state.size(), 6u);
  train(net, sgd, batches, 0, 1);
  EXPECT_EQ(sgd.state_dict().size(), 6u + 5);
  sgd.load_state_dict(empty_state);  // back to "no step taken"
  EXPECT_EQ(sgd.state_dict().size(), 6u);
}

TEST_F(IoTest, OptimizerLoadRejectsMismatchedState) {
  TinyNet net, other;
  sg::optim::Adam adam(net.parameters(), {});
  sg::optim::SGD sgd(net.parameters(), {.momentum = 0.9});
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sgd.load_state_dict(adam.state_dict()); }),
                           {"SGD::load_state_dict: the state dict has no 'sgd.lr'", "is it from another optimizer?"}));
  sg::optim::Adam small({net.flow->weight}, {});
  EXPECT_EQ(sgtest::message_of([&] { small.load_state_dict(adam.state_dict()); }),
            "Adam::load_state_dict: the state dict is for 5 parameters, this optimizer has 1");
  auto state = adam.state_dict();
  for (auto& [name, t] : state)
    if (name == "adam.exp_avg.2") t = sg::zeros({3, 3});
  EXPECT_EQ(sgtest::message_of([&] { adam.load_state_dict(state); }),
            "Adam::load_state_dict: 'adam.exp_avg.2' is [3, 3] float32 but parameter 2 is [2, 4] float32");
  state = adam.state_dict();
  state.emplace_back("adam.extra", sg::ones({1}));
  EXPECT_EQ(sgtest::message_of([&] { adam.load_state_dict(state); }),
            "Adam::load_state_dict: unexpected entries in the state dict: 'adam.extra'");
  state = adam.state_dict();
  for (auto& [name, t] : state)
    if (name == "adam.step") t = sg::full({}, 2.5, sg::kFloat64);
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { adam.load_state_dict(state); }), {"'adam.step' should be a non-negative integer"}));

  // A checkpoint whose optimizer part does not fit leaves the model unchanged as well.
  scramble(net, 8);
  scramble(other, 9);
  sg::save_checkpoint(path("adam.npz"), net, adam);
  const auto before = all_parameter_bytes(other);
  sg::optim::SGD other_sgd(other.parameters(), {.momentum = 0.9});
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::load_checkpoint(path("adam.npz"), other, other_sgd); }),
                           {"load_checkpoint: " + path("adam.npz"), "SGD::load_state_dict"}));
  EXPECT_EQ(all_parameter_bytes(other), before);
}

}  // namespace
