// Indexing, slicing and joining: values against loops on the host, gradients by the structure-aware
// gradcheck in float64, CPU against CUDA, outputs over poisoned memory, empty tensors and indices,
// and bad input with one message on every device.
#include <gtest/gtest.h>

#include <vector>

#include <structgrad/structgrad.h>
#include "test_util.h"

namespace {

using sgtest::all_close;
using sgtest::message_of;

class Index : public testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam()); }
  sg::TensorOptions f64() const { return sg::TensorOptions().dtype(sg::kFloat64).device(GetParam()); }
  sg::Tensor ids(const std::vector<int64_t>& v) const { return sg::from_vector(v, sg::TensorOptions().device(GetParam())); }
  /// Leaves NaN-filled blocks in the device cache, so that outputs allocated next start as NaN.
  void poison(int64_t elements) const {
    for (int k = 0; k < 4; ++k) sg::full({elements}, NAN, f64());
  }
};

sg::Tensor require_grad(sg::Tensor t) { return t.requires_grad_(); }

TEST_P(Index, IndexSelectPicksRowsAndColumnsWithRepeats) {
  sg::manual_seed(1);
  const sg::Tensor x = sg::randn({5, 3}, f64());
  const auto xv = x.to_vector();
  poison(64);
  const sg::Tensor rows = sg::index_select(x, 0, ids({4, 0, 4, 2}));
  ASSERT_EQ(rows.shape(), (sg::Shape{4, 3}));
  std::vector<double> want;
  for (int64_t r : {4, 0, 4, 2})
    for (int64_t c = 0; c < 3; ++c) want.push_back(xv[r * 3 + c]);
  EXPECT_EQ(rows.to_vector(), want);
  const sg::Tensor cols = sg::index_select(x, -1, ids({2, 2}));
  ASSERT_EQ(cols.shape(), (sg::Shape{5, 2}));
  for (int64_t r = 0; r < 5; ++r) {
    EXPECT_EQ(cols.to_vector()[r * 2], xv[r * 3 + 2]);
    EXPECT_EQ(cols.to_vector()[r * 2 + 1], xv[r * 3 + 2]);
  }
}

TEST_P(Index, SliceNarrowAndBlock) {
  const sg::Tensor x = sg::arange(0.0, 30.0, 1.0, f64()).requires_grad_(false);
  const sg::Tensor m = sg::reshape(x, {6, 5});
  poison(64);
  EXPECT_EQ(sg::slice(m, 0, 1, 6, 2).to_vector(),
            (std::vector<double>{5, 6, 7, 8, 9, 15, 16, 17, 18, 19, 25, 26, 27, 28, 29}));
  EXPECT_EQ(sg::slice(m, 1, -2, 100).to_vector(), (std::vector<double>{3, 4, 8, 9, 13, 14, 18, 19, 23, 24, 28, 29}));
  EXPECT_EQ(sg::slice(m, 0, 4, 2).shape(), (sg::Shape{0, 5}));
  EXPECT_EQ(sg::narrow(m, 1, 1, 2).to_vector(), (std::vector<double>{1, 2, 6, 7, 11, 12, 16, 17, 21, 22, 26, 27}));
  EXPECT_EQ(sg::block(m, 2, 1, 2, 3).to_vector(), (std::vector<double>{11, 12, 13, 16, 17, 18}));
}

TEST_P(Index, DiagonalBlocksKeepTheStructureOtherSlicesAreDense) {
  sg::manual_seed(2);
  const sg::UpperTriangular u = sg::UpperTriangular::randn(6, f64());
  const sg::Symmetric s = sg::Symmetric::randn(6, f64());
  const sg::Tensor ub = sg::block(u, 1, 1, 4, 4), sb = sg::block(s, 2, 2, 3, 3);
  EXPECT_EQ(ub.structure(), sg::Structure::UpperTriangular);
  EXPECT_EQ(sb.structure(), sg::Structure::Symmetric);
  EXPECT_TRUE(sgtest::holds_invariant(ub));
  EXPECT_TRUE(sgtest::holds_invariant(sb));
  EXPECT_EQ(sg::block(u, 0, 1, 4, 4).structure(), sg::Structure::Dense);
  EXPECT_EQ(sg::block(s, 1, 1, 2, 3).structure(), sg::Structure::Dense);
  EXPECT_EQ(sg::slice(u, 0, 0, 3).structure(), sg::Structure::Dense);
  EXPECT_EQ(sg::index_select(s, 0, ids({0, 1})).structure(), sg::Structure::Dense);
  EXPECT_EQ(sg::block(u, 0, 0, 6, 6).structure(), sg::Structure::UpperTriangular);
}

TEST_P(Index, GatherScatterAddAndIndexAdd) {
  const sg::Tensor x = sg::tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, f64());
  const sg::Tensor idx = sg::from_vector(std::vector<int64_t>{2, 0, 1, 1}, {2, 2}, sg::TensorOptions().device(GetParam()));
  poison(64);
  EXPECT_EQ(sg::gather(x, 1, idx).to_vector(), (std::vector<double>{3, 1, 5, 5}));
  const sg::Tensor src = sg::tensor({{10.0, 20.0}, {30.0, 40.0}}, f64());
  EXPECT_EQ(sg::scatter_add(x, 1, idx, src).to_vector(), (std::vector<double>{21, 2, 13, 4, 75, 6}));
  const sg::Tensor rows = sg::tensor({{1.0, 1.0, 1.0}, {2.0, 2.0, 2.0}, {4.0, 4.0, 4.0}}, f64());
  EXPECT_EQ(sg::index_add(x, 0, ids({1, 0, 1}), rows).to_vector(), (std::vector<double>{3, 4, 5, 9, 10, 11}));
  // x itself is untouched.
  EXPECT_EQ(x.to_vector(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST_P(Index, CatAndStackAtAnyRank) {
  const sg::Tensor a = sg::tensor({{1.0, 2.0}, {3.0, 4.0}}, f64());
  const sg::Tensor b = sg::tensor({{5.0, 6.0}}, f64());
  poison(64);
  EXPECT_EQ(sg::cat({a, b}, 0).to_vector(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(sg::cat({a, a}, 1).to_vector(), (std::vector<double>{1, 2, 1, 2, 3, 4, 3, 4}));
  const sg::Tensor st = sg::stack({a, a * 10.0}, 1);
  ASSERT_EQ(st.shape(), (sg::Shape{2, 2, 2}));
  EXPECT_EQ(st.to_vector(), (std::vector<double>{1, 2, 10, 20, 3, 4, 30, 40}));
  const sg::Tensor cube = sg::reshape(sg::arange(0.0, 24.0, 1.0, f64()), {2, 3, 4});
  const sg::Tensor joined = sg::cat({cube, sg::narrow(cube, 2, 0, 1)}, 2);
  ASSERT_EQ(joined.shape(), (sg::Shape{2, 3, 5}));
  EXPECT_EQ(joined.to_vector()[4], 0.0);
  EXPECT_EQ(joined.to_vector()[9], 4.0);
  EXPECT_EQ(sg::index_select(cube, 1, ids({2})).to_vector(), (std::vector<double>{8, 9, 10, 11, 20, 21, 22, 23}));
}

TEST_P(Index, IndicesAndDataOfEveryDtypeMove) {
  const sg::Tensor labels = sg::from_vector(std::vector<int64_t>{7, -3, 9000000000LL}, sg::TensorOptions().device(GetParam()));
  EXPECT_EQ(labels.dtype(), sg::kInt64);
  const sg::Tensor picked = sg::index_select(labels, 0, ids({2, 0}));
  EXPECT_EQ(picked.to_vector_as<int64_t>(), (std::vector<int64_t>{9000000000LL, 7}));
  EXPECT_EQ(sg::cat({labels, picked}).to_vector_as<int64_t>(), (std::vector<int64_t>{7, -3, 9000000000LL, 9000000000LL, 7}));
  const sg::Tensor f32 = sg::index_select(sg::tensor({1.5, 2.5}, sg::TensorOptions().device(GetParam())), 0, ids({1}));
  EXPECT_EQ(f32.dtype(), sg::kFloat32);
  EXPECT_EQ(f32.item(), 2.5);
}

TEST_P(Index, EmptyTensorsAndEmptyIndexLists) {
  sg::Tensor x = sg::randn({4, 3}, f64()).requires_grad_();
  const sg::Tensor none = sg::index_select(x, 0, ids({}));
  EXPECT_EQ(none.shape(), (sg::Shape{0, 3}));
  sg::sum(none).backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().to_vector(), std::vector<double>(12, 0.0));
  const sg::Tensor empty = sg::zeros({0, 3}, f64());
  EXPECT_EQ(sg::cat({empty, x.detach(), empty}).shape(), (sg::Shape{4, 3}));
  EXPECT_EQ(sg::index_select(empty, 1, ids({0, 2})).shape(), (sg::Shape{0, 2}));
  EXPECT_EQ(sg::gather(empty, 1, sg::zeros({0, 3}, sg::TensorOptions().dtype(sg::kInt64).device(GetParam()))).shape(),
            (sg::Shape{0, 3}));
  EXPECT_EQ(sg::index_add(x.detach(), 0, ids({}), sg::zeros({0, 3}, f64())).to_vector(), x.detach().to_vector());
  EXPECT_EQ(sg::stack({empty, empty}).shape(), (sg::Shape{2, 0, 3}));
}

TEST_P(Index, GradientsPassGradcheck) {
  sg::manual_seed(3);
  const sg::Device d = GetParam();
  const sg::Tensor idx = ids({3, 1, 3, 0});
  const sg::Tensor gidx = sg::from_vector(std::vector<int64_t>{0, 2, 2, 1, 3, 0, 1, 1}, {4, 2}, sg::TensorOptions().device(d));
  struct Case {
    const char* name;
    std::vector<sg::Tensor> inputs;
    std::function<sg::Tensor(const std::vector<sg::Tensor>&)> f;
  };
  const std::vector<Case> cases = {
      {"index_select", {require_grad(sg::randn({4, 3}, f64()))},
       [&](const auto& in) { return sg::index_select(in[0], 0, idx); }},
      {"index_select_dim1", {require_grad(sg::randn({2, 4}, f64()))},
       [&](const auto& in) { return sg::index_select(in[0], 1, idx); }},
      {"slice", {require_grad(sg::randn({5, 3}, f64()))}, [](const auto& in) { return sg::slice(in[0], 0, 1, 5, 2); }},
      {"narrow", {require_grad(sg::randn({3, 5}, f64()))}, [](const auto& in) { return sg::narrow(in[0], 1, 1, 3); }},
      {"block_upper", {require_grad(sg::UpperTriangular::randn(5, f64()))},
       [](const auto& in) { return sg::block(in[0], 1, 1, 3, 3); }},
      {"block_symmetric", {require_grad(sg::Symmetric::randn(5, f64()))},
       [](const auto& in) { return sg::block(in[0], 0, 2, 3, 2); }},
      {"gather", {require_grad(sg::randn({4, 4}, f64()))}, [&](const auto& in) { return sg::gather(in[0], 1, gidx); }},
      {"scatter_add", {require_grad(sg::randn({4, 4}, f64())), require_grad(sg::randn({4, 2}, f64()))},
       [&](const auto& in) { return sg::scatter_add(in[0], 1, gidx, in[1]); }},
      {"index_add", {require_grad(sg::randn({4, 3}, f64())), require_grad(sg::randn({4, 3}, f64()))},
       [&](const auto& in) { return sg::index_add(in[0], 0, idx, in[1]); }},
      {"cat", {require_grad(sg::randn({2, 3}, f64())), require_grad(sg::randn({1, 3}, f64()))},
       [](const auto& in) { return sg::cat({in[0], in[1], in[0]}, 0); }},
      {"stack", {require_grad(sg::randn({2, 3}, f64())), require_grad(sg::randn({2, 3}, f64()))},
       [](const auto& in) { return sg::stack({in[0], in[1]}, 2); }},
  };
  for (const Case& c : cases) {
    const sg::GradcheckResult r = sg::gradcheck(c.f, c.inputs);
    EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
    EXPECT_GT(r.directions_checked, 0) << c.name;
  }
}

TEST_P(Index, BadInputNamesTheOp) {
  const sg::Tensor x = sg::zeros({3, 2}, f64());
  EXPECT_EQ(message_of([&] { sg::index_select(x, 0, ids({0, 3})); }),
            "index_select: index 3 is out of range for dimension 0 of size 3");
  EXPECT_EQ(message_of([&] { sg::index_select(x, 1, ids({-1})); }),
            "index_select: index -1 is out of range for dimension 1 of size 2");
  EXPECT_EQ(message_of([&] { sg::index_select(x, 0, sg::zeros({2}, f64())); }),
            "index_select: expected an int64 index, got float64");
  EXPECT_EQ(message_of([&] { sg::index_select(x, 2, ids({0})); }), "index_select: dimension 2 out of range for shape [3, 2]");
  EXPECT_EQ(message_of([&] { sg::slice(x, 0, 0, 2, 0); }), "slice: step must be positive, got 0");
  EXPECT_EQ(message_of([&] { sg::narrow(x, 0, 2, 2); }), "narrow: [2, 2 + 2) does not lie inside dimension 0 of shape [3, 2]");
  EXPECT_EQ(message_of([&] { sg::block(x, 0, 0, 3, 3); }), "block: 3×3 at (0, 0) does not lie inside shape [3, 2]");
  EXPECT_EQ(message_of([&] { sg::cat({x, sg::zeros({3, 3}, f64())}, 0); }),
            "cat: tensor 1 of shape [3, 3] does not match tensor 0 of shape [3, 2] outside dimension 0");
  EXPECT_EQ(message_of([&] { sg::cat({x, sg::zeros({3, 2}, sg::TensorOptions().device(GetParam()))}, 0); }),
            "cat: expected both operands of one dtype, got float64 and float32");
  EXPECT_EQ(message_of([] { sg::cat({}); }), "cat: expected at least one tensor");
  EXPECT_EQ(message_of([&] { sg::stack({x, sg::zeros({2, 3}, f64())}); }),
            "stack: tensor 1 of shape [2, 3] does not match tensor 0 of shape [3, 2]");
  const sg::Tensor gi = sg::from_vector(std::vector<int64_t>{0, 5, 1, 0, 0, 0}, {3, 2}, sg::TensorOptions().device(GetParam()));
  EXPECT_EQ(message_of([&] { sg::gather(x, 1, gi); }), "gather: index 5 is out of range for dimension 1 of size 2");
  EXPECT_EQ(message_of([&] { sg::gather(x, 1, ids({0})); }),
            "gather: index of shape [1] does not fit a tensor of shape [3, 2] along dimension 1 (every other size must match)");
  EXPECT_EQ(message_of([&] { sg::scatter_add(x, 1, ids({0, 1}), sg::zeros({3}, f64())); }),
            "scatter_add: index of shape [2] and source of shape [3] differ");
  EXPECT_EQ(message_of([&] { sg::index_add(x, 0, ids({0}), sg::zeros({2, 2}, f64())); }),
            "index_add: source of shape [2, 2] does not fit a tensor of shape [3, 2] with 1 indices along dimension 0");
}

INSTANTIATE_TEST_SUITE_P(Devices, Index, testing::ValuesIn(sgtest::test_devices()), sgtest::device_test_name);

TEST(IndexDevices, CudaMatchesCpu) {
  SG_SKIP_IF_UNAVAILABLE(sg::kCUDA);
  sg::manual_seed(4);
  const sg::Tensor x = sg::randn({300, 70});
  const sg::Tensor idx = sg::randint(0, 300, {1000});
  const sg::Tensor g = sg::randint(0, 70, {300, 40});
  const sg::Tensor src = sg::randn({300, 40});
  auto both = [&](const std::function<sg::Tensor(const sg::Tensor&, const sg::Tensor&, const sg::Tensor&, const sg::Tensor&)>& f) {
    const sg::Tensor cpu = f(x, idx, g, src);
    const sg::Tensor cuda = f(x.to(sg::kCUDA), idx.to(sg::kCUDA), g.to(sg::kCUDA), src.to(sg::kCUDA));
    return all_close(cuda.to_vector(), cpu.to_vector(), 1e-6, 1e-6);
  };
  EXPECT_TRUE(both([](auto& x, auto& i, auto&, auto&) { return sg::index_select(x, 0, i); }));
  EXPECT_TRUE(both([](auto& x, auto&, auto& g, auto&) { return sg::gather(x, 1, g); }));
  EXPECT_TRUE(both([](auto& x, auto&, auto& g, auto& s) { return sg::scatter_add(x, 1, g, s); }));
  EXPECT_TRUE(both([](auto& x, auto& i, auto&, auto&) {
    return sg::index_add(sg::zeros({300, 70}, sg::TensorOptions().device(x.device())), 0, i, sg::index_select(x, 0, i));
  }));
  EXPECT_TRUE(both([](auto& x, auto&, auto&, auto&) { return sg::cat({sg::slice(x, 0, 3, 300, 7), x}, 0); }));
}

}  // namespace
