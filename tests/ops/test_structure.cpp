// UpperTriangular and Symmetric as first-class types: the structure rule of every op on every
// structure (tag and invariant), the typed handles, structure-aware gradcheck of the elementwise
// ops, leaf gradients as projections, and the checked entries into a structure. CPU and CUDA.
// The products' values and gradients: test_matmul.cpp.
#include "test_util.h"

#include <functional>

namespace {

using S = sg::Structure;
using sgtest::holds_invariant;
using sgtest::random_structured;

class StructuredOnDevice : public ::testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam()); }
  sg::TensorOptions opts(sg::DType d = sg::kFloat64) const { return sg::TensorOptions().dtype(d).device(GetParam()); }
};

const S kAll[] = {S::Dense, S::UpperTriangular, S::Symmetric};

TEST_P(StructuredOnDevice, EveryOpKeepsItsStructureRule) {
  struct U {
    const char* name;
    std::function<sg::Tensor(const sg::Tensor&)> f;
    bool keeps_upper;
  };
  const std::vector<U> unary = {
      {"neg", [](auto& x) { return sg::neg(x); }, true},       {"scale", [](auto& x) { return x * 2.5; }, true},
      {"div_scalar", [](auto& x) { return x / 2.0; }, true},   {"relu", [](auto& x) { return sg::relu(x); }, true},
      {"leaky_relu", [](auto& x) { return sg::leaky_relu(x); }, true},
      {"tanh", [](auto& x) { return sg::tanh(x); }, true},     {"square", [](auto& x) { return sg::square(x); }, true},
      {"abs", [](auto& x) { return sg::abs(x); }, true},       {"exp", [](auto& x) { return sg::exp(x); }, false},
      {"sigmoid", [](auto& x) { return sg::sigmoid(x); }, false},
      {"softplus", [](auto& x) { return sg::softplus(x); }, false},
      {"add_scalar", [](auto& x) { return x + 1.0; }, false},
  };
  for (S s : kAll)
    for (const auto& u : unary) {
      auto y = u.f(random_structured(s, 6, opts()));
      const S expect = s == S::Symmetric ? S::Symmetric : (s == S::UpperTriangular && u.keeps_upper ? s : S::Dense);
      EXPECT_EQ(y.structure(), expect) << u.name << " on " << sg::structure_name(s);
      EXPECT_TRUE(holds_invariant(y)) << u.name << " on " << sg::structure_name(s);
    }
  for (S a : kAll)
    for (S b : kAll) {
      auto x = random_structured(a, 6, opts()), y = random_structured(b, 6, opts());
      const S same = a == b ? a : S::Dense;
      const S prod = (a == S::UpperTriangular || b == S::UpperTriangular) ? S::UpperTriangular : same;
      EXPECT_EQ((x + y).structure(), same) << sg::structure_name(a) << "+" << sg::structure_name(b);
      EXPECT_EQ((x - y).structure(), same);
      EXPECT_EQ((x * y).structure(), prod) << sg::structure_name(a) << "*" << sg::structure_name(b);
      EXPECT_TRUE(holds_invariant(x + y));
      EXPECT_TRUE(holds_invariant(x - y));
      EXPECT_TRUE(holds_invariant(x * y));
      EXPECT_EQ(sg::matmul(x, y).structure(), a == S::UpperTriangular && b == S::UpperTriangular ? a : S::Dense);
      EXPECT_TRUE(holds_invariant(sg::matmul(x, y)));
    }
  auto u = random_structured(S::UpperTriangular, 5, opts());
  auto s = random_structured(S::Symmetric, 5, opts());
  EXPECT_EQ(sg::transpose(s).structure(), S::Symmetric);
  EXPECT_TRUE(sg::transpose(s).is_same(s));
  EXPECT_EQ(sg::transpose(u).structure(), S::LowerTriangular);  // Uᵀ is lower, never silently Upper
  EXPECT_EQ(sg::with_diagonal(u, sg::ones({5}, opts())).structure(), S::UpperTriangular);
  EXPECT_EQ(sg::with_diagonal(s, sg::ones({5}, opts())).structure(), S::Symmetric);
  EXPECT_EQ(sg::gram(u).structure(), S::Symmetric);
  EXPECT_TRUE(holds_invariant(sg::gram(sg::randn({7, 3}, opts()))));
  EXPECT_EQ(u.dense().structure(), S::Dense);
  EXPECT_EQ(sg::reshape(u, {25}).structure(), S::Dense);
}

TEST_P(StructuredOnDevice, StaticTypesFollowTheRules) {
  auto u = sg::UpperTriangular::randn(4, opts());
  auto v = sg::UpperTriangular::randn(4, opts());
  sg::UpperTriangular p = sg::matmul(u, v);
  sg::UpperTriangular q = u + v * 2.0 - (-u);
  sg::UpperTriangular h = u * sg::randn({4, 4}, opts());
  auto s = sg::Symmetric::randn(4, opts());
  sg::Symmetric t = s + s * 0.5 - s;
  EXPECT_EQ(p.structure(), S::UpperTriangular);
  EXPECT_EQ(q.structure(), S::UpperTriangular);
  EXPECT_EQ(h.structure(), S::UpperTriangular);
  EXPECT_EQ(t.structure(), S::Symmetric);
  EXPECT_THROW(sg::UpperTriangular(sg::randn({4, 4})), sg::Error);
}

TEST_P(StructuredOnDevice, ElementwiseOpsGradcheckInBothStructures) {
  const std::vector<std::pair<const char*, std::function<sg::Tensor(const sg::Tensor&)>>> ops = {
      {"tanh", [](auto& x) { return sg::tanh(x); }},       {"square", [](auto& x) { return sg::square(x); }},
      {"exp", [](auto& x) { return sg::exp(x); }},         {"scale", [](auto& x) { return x * 3.0; }},
      {"leaky_relu", [](auto& x) { return sg::leaky_relu(x + 0.05, 0.1); }},
      {"sum", [](auto& x) { return sg::sum(x); }},         {"diagonal", [](auto& x) { return sg::diagonal(x); }},
      {"transpose", [](auto& x) { return sg::transpose(x); }}, {"dense", [](auto& x) { return x.dense(); }},
      {"triu", [](auto& x) { return sg::triu(x); }},       {"sym", [](auto& x) { return sg::sym(x); }},
      {"self_mul", [](auto& x) { return x * x; }},
  };
  for (S s : {S::UpperTriangular, S::Symmetric})
    for (int64_t n : {1, 2, 3, 7})
      for (const auto& [name, f] : ops) {
        auto x = random_structured(s, n, opts()).requires_grad_();
        auto r = sg::gradcheck([&f](auto& in) { return f(in[0]); }, {x});
        EXPECT_TRUE(r.ok) << name << " on " << sg::structure_name(s) << " n=" << n << ": " << r.message;
      }
}

TEST_P(StructuredOnDevice, GradientsOfStructuredLeavesAreProjections) {
  auto w = sg::randn({4, 4}, opts());
  auto u = sg::UpperTriangular::randn(4, opts()).requires_grad_();
  auto s = sg::Symmetric::randn(4, opts()).requires_grad_();
  sg::sum(u * w).backward();
  sg::sum(s * w).backward();
  const auto wv = w.to_vector(), gu = u.grad().to_vector(), gs = s.grad().to_vector();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(gu[i * 4 + j], i <= j ? wv[i * 4 + j] : 0.0);
      EXPECT_DOUBLE_EQ(gs[i * 4 + j], (wv[i * 4 + j] + wv[j * 4 + i]) / 2);
    }
  EXPECT_EQ(u.grad().structure(), S::UpperTriangular);
  EXPECT_EQ(s.grad().structure(), S::Symmetric);
}

TEST_P(StructuredOnDevice, CheckedEntriesNameTheFirstOffendingEntry) {
  auto x = sg::tensor({{1.0, 2.0, 3.0}, {0.0, 4.0, 5.0}, {0.0, 0.5, 6.0}}, opts());
  auto before = x.to_vector();
  try {
    sg::as_upper(x);
    FAIL();
  } catch (const sg::Error& e) {
    EXPECT_STREQ(e.what(), "as_upper: entry (2, 1) = 0.5 is below the diagonal and not zero; use sg::triu to project");
  }
  try {
    sg::as_symmetric(x);
    FAIL();
  } catch (const sg::Error& e) {
    EXPECT_STREQ(e.what(), "as_symmetric: entry (0, 1) = 2 differs from entry (1, 0) = 0; use sg::sym to project");
  }
  EXPECT_EQ(x.to_vector(), before);
  auto ok = sg::as_upper(sg::triu(x));
  EXPECT_EQ(ok.structure(), S::UpperTriangular);
  EXPECT_EQ(sg::as_symmetric(sg::sym(x)).structure(), S::Symmetric);
  auto rect = sg::randn({2, 3}, opts());
  for (auto f : std::vector<std::function<void()>>{[&] { sg::as_upper(rect); }, [&] { sg::as_symmetric(rect); },
                                                   [&] { sg::triu(rect); }, [&] { sg::sym(rect); }}) {
    try {
      f();
      FAIL();
    } catch (const sg::Error& e) {
      EXPECT_NE(std::string(e.what()).find(": expected a square matrix or a batch of them, got shape [2, 3]"), std::string::npos)
          << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, StructuredOnDevice, ::testing::ValuesIn(sgtest::test_devices()),
                         sgtest::device_test_name);

}  // namespace

namespace {

TEST(TypedStructureOps, WithDiagonalAndTransposeKeepTheStaticType) {
  const auto f64 = sg::TensorOptions().dtype(sg::kFloat64);
  const sg::Tensor w = sg::randn({2, 3, 3}, f64);
  const sg::Tensor d = sg::rand({2, 3}, f64) + 1.0;
  const sg::LowerTriangular l = sg::with_diagonal(sg::tril(w), d);  // compiles: the typed overload
  const sg::UpperTriangular u = sg::transpose(l);
  const sg::Symmetric s = sg::with_diagonal(sg::sym(w), d);
  const sg::Symmetric st = sg::transpose(s);
  EXPECT_EQ(l.structure(), sg::Structure::LowerTriangular);
  EXPECT_EQ(u.structure(), sg::Structure::UpperTriangular);
  EXPECT_EQ(sg::diagonal(l).to_vector(), d.to_vector());
  EXPECT_EQ(sg::diagonal(s).to_vector(), d.to_vector());
  EXPECT_EQ(st.to_vector(), s.to_vector());
  const sg::UpperTriangular u2 = sg::with_diagonal(u, 2.0 * d);
  EXPECT_EQ(sg::transpose(u2).structure(), sg::Structure::LowerTriangular);
}

}  // namespace
