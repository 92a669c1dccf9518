// sg::matmul, sg::linear and sg::gram on CPU and CUDA: every structure pair against the dense
// float64 product and the result's structure, gradcheck inside the structures, the projected
// backward (also in TF32), NaN/Inf propagation. GEMM kernels: tests/ops/cpu, tests/cuda.
#include "test_util.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using S = sg::Structure;
using sgtest::holds_invariant;
using sgtest::random_structured;
using sgtest::same_ieee;
using sgtest::structured_values;
using sgtest::tagged;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const S kAll[] = {S::Dense, S::UpperTriangular, S::Symmetric};

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

class MatmulOnDevice : public ::testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam()); }
  sg::TensorOptions opts(sg::DType d = sg::kFloat64) const { return sg::TensorOptions().dtype(d).device(GetParam()); }
};

// ---- values and structure ----------------------------------------------------------------

TEST_P(MatmulOnDevice, AllNineProductsMatchDenseProducts) {
  for (sg::DType dt : {sg::kFloat32, sg::kFloat64})
    for (int64_t n : {1, 2, 17, 31, 33, 127, 129})
      for (S a : kAll)
        for (S b : kAll) {
          auto x = random_structured(a, n, opts(dt)), y = random_structured(b, n, opts(dt));
          auto c = sg::matmul(x, y);
          const auto ref = dense_product(x, y);
          const double err = sgtest::rel_error(c.to_vector(), ref);
          EXPECT_LE(err, dt == sg::kFloat32 ? 1e-5 : 1e-12)
              << sg::structure_name(a) << "·" << sg::structure_name(b) << " n=" << n << " " << sg::dtype_name(dt);
        }
}

TEST_P(MatmulOnDevice, RectangularDenseOperands) {
  auto u = random_structured(S::UpperTriangular, 9, opts());
  auto s = random_structured(S::Symmetric, 9, opts());
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

TEST_P(MatmulOnDevice, SymmetricTimesSymmetricIsDenseAndNotSymmetric) {
  auto s = sg::Symmetric::randn(64, opts()), t = sg::Symmetric::randn(64, opts());
  auto c = sg::matmul(s, t);
  EXPECT_EQ(c.structure(), S::Dense);
  EXPECT_LE(sgtest::rel_error(c.to_vector(), dense_product(s, t)), 1e-12);
  // S·T − (S·T)ᵀ = S·T − T·S is far from zero for non-commuting inputs.
  auto asym = sg::sum(sg::square(c - sg::transpose(c))).item();
  EXPECT_GT(asym, 1.0);
}

TEST_P(MatmulOnDevice, GramMatchesAndIsExactlySymmetric) {
  for (int64_t n : {1, 2, 17, 129})
    for (S s : kAll) {
      auto a = s == S::Dense ? sg::randn({n, n + 3}, opts()) : random_structured(s, n, opts());
      auto g = sg::gram(a);
      EXPECT_TRUE(holds_invariant(g));
      EXPECT_LE(sgtest::rel_error(g.to_vector(), dense_product(a, sg::transpose(a))), 1e-12);
    }
}

// 1000 random (structure, structure, size) products, float64, sizes 1…300 (mostly small).
TEST(MatmulProperties, RandomStructuredProductsMatchDenseReference) {
  std::mt19937_64 rng(20261122);
  std::uniform_real_distribution<double> u(0, 1);
  const S all[] = {S::Dense, S::UpperTriangular, S::Symmetric};
  for (int c = 0; c < 1000; ++c) {
    const int64_t n = 1 + static_cast<int64_t>(std::pow(u(rng), 3) * 299);
    const S sa = all[rng() % 3], sb = all[rng() % 3];
    sg::manual_seed(rng());
    auto a = random_structured(sa, n, sg::kFloat64), b = random_structured(sb, n, sg::kFloat64);
    auto prod = sg::matmul(a, b);
    ASSERT_LE(sgtest::rel_error(prod.to_vector(), dense_product(a, b)), 1e-12)
        << "case " << c << ": " << sg::structure_name(sa) << "·" << sg::structure_name(sb) << " n=" << n;
    ASSERT_TRUE(holds_invariant(prod)) << "case " << c;
  }
}

// ---- gradients -------------------------------------------------------------------------

TEST_P(MatmulOnDevice, GradcheckEveryProductInsideTheStructure) {
  for (int64_t n : {1, 2, 3, 7, 16, 33})
    for (S a : kAll)
      for (S b : kAll) {
        sg::GradcheckOptions o;
        auto x = random_structured(a, n, opts()).requires_grad_(), y = random_structured(b, n, opts()).requires_grad_();
        auto r = sg::gradcheck([](auto& in) { return sg::matmul(in[0], in[1]); }, {x, y}, o);
        EXPECT_TRUE(r.ok) << sg::structure_name(a) << "·" << sg::structure_name(b) << " n=" << n << ": " << r.message;
      }
  for (S s : kAll)
    for (int64_t n : {1, 3, 16}) {
      auto a = random_structured(s, n, opts()).requires_grad_();
      auto r1 = sg::gradcheck([](auto& in) { return sg::gram(in[0]); }, {a});
      EXPECT_TRUE(r1.ok) << "gram " << sg::structure_name(s) << ": " << r1.message;
      auto x = sg::randn({5, n}, opts()).requires_grad_();
      auto bias = sg::randn({n}, opts()).requires_grad_();
      auto r2 = sg::gradcheck([](auto& in) { return sg::linear(in[0], in[1], in[2]); }, {x, a, bias});
      EXPECT_TRUE(r2.ok) << "linear " << sg::structure_name(s) << ": " << r2.message;
    }
}

TEST_P(MatmulOnDevice, RandomDirectionGradcheckAt64) {
  sg::GradcheckOptions o;
  o.per_entry = false;
  o.random_directions = 4;
  for (S a : kAll)
    for (S b : kAll) {
      auto x = random_structured(a, 64, opts()).requires_grad_(), y = random_structured(b, 64, opts()).requires_grad_();
      auto r = sg::gradcheck([](auto& in) { return sg::matmul(in[0], in[1]); }, {x, y}, o);
      EXPECT_TRUE(r.ok) << sg::structure_name(a) << "·" << sg::structure_name(b) << ": " << r.message;
    }
}

TEST_P(MatmulOnDevice, UpperProductBackwardReadsOnlyTheGradientsUpperTriangle) {
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

TEST(MatmulAutograd, OnlyNeededGradientsAndLeafProjection) {
  auto a = sg::UpperTriangular::randn(5, sg::kFloat64).requires_grad_();
  auto d = sg::randn({5, 5}, sg::kFloat64);  // needs no gradient
  auto loss = sg::sum(sg::matmul(a, d));
  loss.backward();
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(a.grad().structure(), sg::Structure::UpperTriangular);
  EXPECT_FALSE(d.grad().defined());
  auto g = a.grad().to_vector();
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < i; ++j) EXPECT_EQ(g[i * 5 + j], 0.0);
}

INSTANTIATE_TEST_SUITE_P(Devices, MatmulOnDevice, ::testing::ValuesIn(sgtest::test_devices()),
                         sgtest::device_test_name);

// ---- NaN and Inf -------------------------------------------------------------------------

class MatmulNonFinite : public ::testing::TestWithParam<sgtest::DeviceDtype> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam().device); }
  sg::TensorOptions opts() const { return sg::TensorOptions().dtype(GetParam().dtype).device(GetParam().device); }
  double rtol() const { return GetParam().dtype == sg::kFloat32 ? 1e-5 : 1e-12; }
};

/// True where op(X)[i][k] is an entry the structure defines (not a structural zero).
bool defined_entry(S s, int64_t i, int64_t k) { return s != S::UpperTriangular || k >= i; }

// Every structured product with a NaN or an infinity inside each operand's structure:
//  - an output entry whose terms include the special value through entries both structures
//    define is NaN or ±inf exactly as the IEEE sum of those terms is (must propagate);
//  - an entry that is finite even when structural zeros are multiplied in (0·inf = NaN)
//    is finite and matches the float64 reference;
//  - entries only reachable through a structural zero may be either (the kernels skip the
//    zero triangle, as BLAS TRMM/SYMM do);
//  - the result keeps its structure's invariant exactly.
TEST_P(MatmulNonFinite, EveryStructuredProductPropagatesAndKeepsItsInvariant) {
  const S all[] = {S::Dense, S::UpperTriangular, S::Symmetric};
  for (double special : {kNaN, kInf, -kInf})
    for (int64_t n : {5, 67})
      for (S sa : all)
        for (S sb : all) {
          // A special value in row 1 of A and in row n-2 of B (column n-2 of B for Upper·Upper).
          const auto av = structured_values(sa, n, 1, 2, special, 3 + n);
          const auto bv = structured_values(sb, n, n - 3, n - 2, special, 4 + n);
          const auto a = tagged(av, sa, n, opts()), b = tagged(bv, sb, n, opts());
          const auto c = sg::matmul(a, b);
          const auto cv = c.to_vector();
          // The operands as the device stores them (rounded to the dtype).
          const auto ar = a.to_vector(), br = b.to_vector();
          const std::string what = std::string(sg::structure_name(sa)) + "·" + sg::structure_name(sb) + " n=" +
                                   std::to_string(n) + " special=" + std::to_string(special);
          int64_t must_propagate = 0;
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) {
              const double got = cv[i * n + j];
              if (c.structure() == S::UpperTriangular && i > j) {
                ASSERT_EQ(got, 0.0) << what << ": (" << i << ", " << j << ") below the diagonal of an Upper result";
                continue;
              }
              double structural = 0, dense = 0, scale = 0;
              for (int64_t k = 0; k < n; ++k) {
                const double term = ar[i * n + k] * br[k * n + j];
                dense += term;
                if (defined_entry(sa, i, k) && defined_entry(sb, k, j)) {
                  structural += term;
                  scale += std::abs(term);
                }
              }
              if (!std::isfinite(structural) && !std::isnan(dense) == !std::isnan(structural) &&
                  (std::isnan(structural) || structural == dense)) {
                ++must_propagate;
                ASSERT_TRUE(same_ieee(got, structural)) << what << " at (" << i << ", " << j << ")";
              } else if (std::isfinite(dense)) {
                ASSERT_NEAR(got, dense, rtol() * (1 + scale)) << what << " at (" << i << ", " << j << ")";
              } else {
                ASSERT_TRUE(same_ieee(got, structural) || same_ieee(got, dense))
                    << what << " at (" << i << ", " << j << "): " << got << " is neither " << structural << " nor " << dense;
              }
            }
          EXPECT_GT(must_propagate, 0) << what;
        }
}

TEST_P(MatmulNonFinite, GramAndLinearPropagate) {
  const int64_t n = 6;
  const auto av = structured_values(S::Dense, n, 2, 4, kNaN, 5);
  const auto g = sg::gram(sg::from_vector(av, {n, n}, opts()));  // a·aᵀ: row 2 and column 2 are NaN
  const auto gv = g.to_vector();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(std::isnan(gv[i * n + j]), i == 2 || j == 2) << "(" << i << ", " << j << ")";
  EXPECT_EQ(g.structure(), S::Symmetric);
  // linear(x, U) = x·Uᵀ with +inf in U[1][3]: column 1 of the result gets x[:, 3]·inf.
  const auto uv = structured_values(S::UpperTriangular, n, 1, 3, kInf, 6);
  const auto x = sg::from_vector(std::vector<double>(4 * n, 1.0), {4, n}, opts());
  const auto y = sg::linear(x, tagged(uv, S::UpperTriangular, n, opts())).to_vector();
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < n; ++c) ASSERT_EQ(std::isinf(y[r * n + c]), c == 1) << "(" << r << ", " << c << ")";
}

TEST_P(MatmulNonFinite, BackwardPropagatesIntoStructuredGradients) {
  const int64_t n = 5;
  auto u = sg::UpperTriangular::randn(n, opts()).requires_grad_();
  auto x = sg::from_vector(structured_values(S::Dense, n, 2, 0, kNaN, 10), {n, n}, opts());
  sg::sum(sg::matmul(u, x)).backward();  // dU = triu(1·xᵀ): column 2 (x's row 2) is NaN
  const auto g = u.grad();
  ASSERT_EQ(g.structure(), S::UpperTriangular);
  const auto gv = g.to_vector();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      if (i > j) EXPECT_EQ(gv[i * n + j], 0.0) << "(" << i << ", " << j << ")";
      else EXPECT_EQ(std::isnan(gv[i * n + j]), j == 2) << "(" << i << ", " << j << ")";
    }
  // An optimizer step with that gradient: NaN exactly where the gradient is NaN.
  sg::optim::SGD opt({u}, {.lr = 0.1});
  opt.step();
  const auto uv = u.to_vector();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) EXPECT_EQ(std::isnan(uv[i * n + j]), i <= j && j == 2) << "(" << i << ", " << j << ")";
}

INSTANTIATE_TEST_SUITE_P(Devices, MatmulNonFinite, ::testing::ValuesIn(sgtest::test_devices_and_dtypes()),
                         sgtest::device_dtype_test_name);

}  // namespace
