// UpperTriangular and Symmetric as first-class types: the structure rule of every op on
// every structure (tag and invariant), the nine matmul combinations and gram against dense
// float64 products, Symmetric·Symmetric being Dense and non-symmetric, structure-aware
// gradcheck of every product, and the checked entries into a structure. CPU and CUDA.
#include "test_util.h"

#include <functional>

namespace {

using S = sg::Structure;

class StructuredOnDevice : public ::testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam()); }
  sg::TensorOptions opts(sg::DType d = sg::kFloat64) const { return sg::TensorOptions().dtype(d).device(GetParam()); }
};

sg::Tensor make(S s, int64_t n, sg::TensorOptions o) {
  switch (s) {
    case S::UpperTriangular: return sg::UpperTriangular::randn(n, o);
    case S::Symmetric: return sg::Symmetric::randn(n, o);
    default: return sg::randn({n, n}, o);
  }
}

// Checks the tag's invariant on the values (not trusting the tag).
::testing::AssertionResult holds_invariant(const sg::Tensor& t) {
  if (t.structure() == S::Dense) return ::testing::AssertionSuccess();
  const auto v = t.to_vector();
  const int64_t n = t.size(0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j) {
      if (t.structure() == S::UpperTriangular && v[i * n + j] != 0.0)
        return ::testing::AssertionFailure() << "entry (" << i << ", " << j << ") = " << v[i * n + j];
      if (t.structure() == S::Symmetric && v[i * n + j] != v[j * n + i])
        return ::testing::AssertionFailure() << "entries (" << i << ", " << j << ") and (" << j << ", " << i << ")";
    }
  return ::testing::AssertionSuccess();
}

const S kAll[] = {S::Dense, S::UpperTriangular, S::Symmetric};

TEST_P(StructuredOnDevice, EveryOpKeepsTheRuleOfDesign) {
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
      auto y = u.f(make(s, 6, opts()));
      const S expect = s == S::Symmetric ? S::Symmetric : (s == S::UpperTriangular && u.keeps_upper ? s : S::Dense);
      EXPECT_EQ(y.structure(), expect) << u.name << " on " << sg::structure_name(s);
      EXPECT_TRUE(holds_invariant(y)) << u.name << " on " << sg::structure_name(s);
    }
  for (S a : kAll)
    for (S b : kAll) {
      auto x = make(a, 6, opts()), y = make(b, 6, opts());
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
  auto u = make(S::UpperTriangular, 5, opts());
  auto s = make(S::Symmetric, 5, opts());
  EXPECT_EQ(sg::transpose(s).structure(), S::Symmetric);
  EXPECT_TRUE(sg::transpose(s).is_same(s));
  EXPECT_EQ(sg::transpose(u).structure(), S::Dense);  // Uᵀ is lower, never silently Upper
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

// Dense float64 product of the logical matrices, computed on the host.
std::vector<double> dense_product(const sg::Tensor& a, const sg::Tensor& b) {
  const auto av = a.to_vector(), bv = b.to_vector();
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += av[i * k + p] * bv[p * n + j];
  return c;
}

TEST_P(StructuredOnDevice, AllNineProductsMatchDenseProducts) {
  for (sg::DType dt : {sg::kFloat32, sg::kFloat64})
    for (int64_t n : {1, 2, 17, 31, 33, 127, 129})
      for (S a : kAll)
        for (S b : kAll) {
          auto x = make(a, n, opts(dt)), y = make(b, n, opts(dt));
          auto c = sg::matmul(x, y);
          const auto ref = dense_product(x, y);
          const double err = sgtest::rel_error(c.to_vector(), ref);
          EXPECT_LE(err, dt == sg::kFloat32 ? 1e-5 : 1e-12)
              << sg::structure_name(a) << "·" << sg::structure_name(b) << " n=" << n << " " << sg::dtype_name(dt);
        }
}

TEST_P(StructuredOnDevice, RectangularDenseOperands) {
  auto u = make(S::UpperTriangular, 9, opts());
  auto s = make(S::Symmetric, 9, opts());
  auto d = sg::randn({9, 4}, opts());
  auto e = sg::randn({3, 9}, opts());
  for (auto [x, y] : std::vector<std::pair<sg::Tensor, sg::Tensor>>{{u, d}, {s, d}, {e, u}, {e, s}}) {
    auto c = sg::matmul(x, y);
    EXPECT_LE(sgtest::rel_error(c.to_vector(), dense_product(x, y)), 1e-12);
    auto r = sg::gradcheck([](auto& in) { return sg::matmul(in[0], in[1]); },
                           {x.detach().requires_grad_(), y.detach().requires_grad_()});
    EXPECT_TRUE(r.ok) << r.message;
  }
}

TEST_P(StructuredOnDevice, SymmetricTimesSymmetricIsDenseAndNotSymmetric) {
  auto s = sg::Symmetric::randn(64, opts()), t = sg::Symmetric::randn(64, opts());
  auto c = sg::matmul(s, t);
  EXPECT_EQ(c.structure(), S::Dense);
  EXPECT_LE(sgtest::rel_error(c.to_vector(), dense_product(s, t)), 1e-12);
  // S·T − (S·T)ᵀ = S·T − T·S is far from zero for non-commuting inputs.
  auto asym = sg::sum(sg::square(c - sg::transpose(c))).item();
  EXPECT_GT(asym, 1.0);
}

TEST_P(StructuredOnDevice, GramMatchesAndIsExactlySymmetric) {
  for (int64_t n : {1, 2, 17, 129})
    for (S s : kAll) {
      auto a = s == S::Dense ? sg::randn({n, n + 3}, opts()) : make(s, n, opts());
      auto g = sg::gram(a);
      EXPECT_TRUE(holds_invariant(g));
      EXPECT_LE(sgtest::rel_error(g.to_vector(), dense_product(a, sg::transpose(a))), 1e-12);
    }
}

TEST_P(StructuredOnDevice, GradcheckEveryProductInsideTheStructure) {
  for (int64_t n : {1, 2, 3, 7, 16, 33})
    for (S a : kAll)
      for (S b : kAll) {
        sg::GradcheckOptions o;
        auto x = make(a, n, opts()).requires_grad_(), y = make(b, n, opts()).requires_grad_();
        auto r = sg::gradcheck([](auto& in) { return sg::matmul(in[0], in[1]); }, {x, y}, o);
        EXPECT_TRUE(r.ok) << sg::structure_name(a) << "·" << sg::structure_name(b) << " n=" << n << ": " << r.message;
      }
  for (S s : kAll)
    for (int64_t n : {1, 3, 16}) {
      auto a = make(s, n, opts()).requires_grad_();
      auto r1 = sg::gradcheck([](auto& in) { return sg::gram(in[0]); }, {a});
      EXPECT_TRUE(r1.ok) << "gram " << sg::structure_name(s) << ": " << r1.message;
      auto x = sg::randn({5, n}, opts()).requires_grad_();
      auto bias = sg::randn({n}, opts()).requires_grad_();
      auto r2 = sg::gradcheck([](auto& in) { return sg::linear(in[0], in[1], in[2]); }, {x, a, bias});
      EXPECT_TRUE(r2.ok) << "linear " << sg::structure_name(s) << ": " << r2.message;
    }
}

TEST_P(StructuredOnDevice, RandomDirectionGradcheckAt64) {
  sg::GradcheckOptions o;
  o.per_entry = false;
  o.random_directions = 4;
  for (S a : kAll)
    for (S b : kAll) {
      auto x = make(a, 64, opts()).requires_grad_(), y = make(b, 64, opts()).requires_grad_();
      auto r = sg::gradcheck([](auto& in) { return sg::matmul(in[0], in[1]); }, {x, y}, o);
      EXPECT_TRUE(r.ok) << sg::structure_name(a) << "·" << sg::structure_name(b) << ": " << r.message;
    }
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
        auto x = make(s, n, opts()).requires_grad_();
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

TEST_P(StructuredOnDevice, UpperProductBackwardReadsOnlyTheGradientsUpperTriangle) {
  // matmul's record takes the upstream gradient unprojected and reads it through C's Upper
  // structure (no triu copy): a NaN lower triangle must act as the projection's zeros, giving
  // the gradients of the projected upstream bit for bit. Past one GPU tile; both precisions; on
  // a GPU also TF32 at 300, whose kernels use the stored zeros of the UpperTriangular operands
  // but must still write the gradient's.
  struct Case {
    int64_t n;
    sg::DType dtype;
    sg::Precision precision;
  };
  std::vector<Case> cases{{150, sg::kFloat64, sg::Precision::Float32}, {150, sg::kFloat32, sg::Precision::Float32}};
  if (GetParam().is_cuda()) cases.push_back({300, sg::kFloat32, sg::Precision::TF32});
  for (const auto& [n, dtype, precision] : cases) {
    sg::set_matmul_precision(precision);
    const sg::UpperTriangular a = sg::UpperTriangular::randn(n, opts(dtype));
    const sg::UpperTriangular b = sg::UpperTriangular::randn(n, opts(dtype));
    const sg::Tensor g = sg::randn({n, n}, opts(dtype));
    std::vector<double> poisoned = g.to_vector();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < i; ++j) poisoned[i * n + j] = std::nan("");
    auto gradients = [&](const sg::Tensor& upstream) {
      sg::Tensor x = a.detach().requires_grad_(), y = b.detach().requires_grad_();
      sg::matmul(x, y).backward(upstream);
      return std::make_pair(x.grad().to_vector(), y.grad().to_vector());
    };
    const auto [da, db] = gradients(sg::from_vector(poisoned, {n, n}, opts(dtype)));
    const auto [da_ref, db_ref] = gradients(sg::triu(g));
    sg::set_matmul_precision(sg::Precision::Float32);
    EXPECT_EQ(da, da_ref) << sg::dtype_name(dtype) << " n = " << n;
    EXPECT_EQ(db, db_ref) << sg::dtype_name(dtype) << " n = " << n;
    for (double v : da) ASSERT_TRUE(std::isfinite(v)) << sg::dtype_name(dtype) << " n = " << n;
    for (double v : db) ASSERT_TRUE(std::isfinite(v)) << sg::dtype_name(dtype) << " n = " << n;
  }
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
      EXPECT_NE(std::string(e.what()).find(": expected a square matrix, got shape [2, 3]"), std::string::npos)
          << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, StructuredOnDevice, ::testing::ValuesIn(sgtest::test_devices()),
                         sgtest::device_test_name);

}  // namespace
