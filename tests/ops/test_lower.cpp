// LowerTriangular: entering and leaving the structure, transposes, the elementwise rules, and the
// products of all 16 pairs of {Dense, Upper, Lower, Symmetric} forward and backward — values
// against float64 Dense references, result structures, and gradients by the structure-aware
// gradcheck — on CPU and CUDA.
#include <gtest/gtest.h>

#include <vector>

#include <structgrad/structgrad.h>
#include "test_util.h"

namespace {

using S = sg::Structure;
using sgtest::all_close;
using sgtest::holds_invariant;
using sgtest::message_of;

class Lower : public testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam()); }
  sg::TensorOptions f64() const { return sg::TensorOptions().dtype(sg::kFloat64).device(GetParam()); }
};

sg::Tensor of_structure(S s, int64_t n, const sg::TensorOptions& o) {
  switch (s) {
    case S::UpperTriangular: return sg::UpperTriangular::randn(n, o);
    case S::LowerTriangular: return sg::LowerTriangular::randn(n, o);
    case S::Symmetric: return sg::Symmetric::randn(n, o);
    default: return sg::randn({n, n}, o);
  }
}

S expected_product(S a, S b) {
  if (a == S::UpperTriangular && b == S::UpperTriangular) return S::UpperTriangular;
  if (a == S::LowerTriangular && b == S::LowerTriangular) return S::LowerTriangular;
  return S::Dense;
}

constexpr S kAll[] = {S::Dense, S::UpperTriangular, S::LowerTriangular, S::Symmetric};

TEST_P(Lower, EnteringCheckingAndTransposing) {
  const sg::Tensor x = sg::tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}, {7.0, 8.0, 9.0}}, f64());
  const sg::LowerTriangular l = sg::tril(x);
  EXPECT_EQ(l.to_vector(), (std::vector<double>{1, 0, 0, 4, 5, 0, 7, 8, 9}));
  EXPECT_EQ(sg::tril(x, -1).to_vector(), (std::vector<double>{0, 0, 0, 4, 0, 0, 7, 8, 0}));
  EXPECT_EQ(sg::as_lower(l.dense()).structure(), S::LowerTriangular);
  EXPECT_EQ(message_of([&] { sg::as_lower(x); }),
            "as_lower: entry (0, 1) = 2 is above the diagonal and not zero; use sg::tril to project");
  EXPECT_EQ(message_of([&] { sg::tril(x, 1); }), "tril: diagonal must be <= 0 for a LowerTriangular result, got 1");
  EXPECT_EQ(message_of([&] { sg::LowerTriangular bad(x); }),
            "LowerTriangular: the tensor is not tagged LowerTriangular (got Dense); use sg::tril or sg::as_lower");
  const sg::Tensor lt = sg::transpose(l);
  EXPECT_EQ(lt.structure(), S::UpperTriangular);
  EXPECT_EQ(lt.to_vector(), (std::vector<double>{1, 4, 7, 0, 5, 8, 0, 0, 9}));
  EXPECT_EQ(sg::transpose(sg::triu(x)).structure(), S::LowerTriangular);
  EXPECT_EQ(sg::LowerTriangular::eye(3, f64()).to_vector(), sg::eye(3, f64()).to_vector());
  EXPECT_EQ(sg::LowerTriangular::zeros(2, f64()).structure(), S::LowerTriangular);
  EXPECT_TRUE(holds_invariant(sg::LowerTriangular::randn(7, f64())));
}

TEST_P(Lower, ElementwiseRulesMirrorUpper) {
  const sg::LowerTriangular l = sg::LowerTriangular::randn(4, f64());
  EXPECT_EQ((l + l).structure(), S::LowerTriangular);
  EXPECT_EQ((2.0 * l).structure(), S::LowerTriangular);
  EXPECT_EQ(sg::tanh(l).structure(), S::LowerTriangular);
  EXPECT_EQ(sg::exp(l).structure(), S::Dense);
  EXPECT_EQ((l * sg::randn({4, 4}, f64())).structure(), S::LowerTriangular);
  EXPECT_EQ((sg::full({}, 3.0, f64()) * l).structure(), S::LowerTriangular);
  EXPECT_EQ((l / sg::rand({4}, f64())).structure(), S::LowerTriangular);
  EXPECT_EQ((l + sg::UpperTriangular::randn(4, f64())).structure(), S::Dense);
  EXPECT_EQ((l * sg::UpperTriangular::randn(4, f64())).structure(), S::UpperTriangular);  // diagonal: both
  const sg::LowerTriangular scaled = sg::exp(sg::zeros({}, f64())) * l;  // the typed overload
  EXPECT_EQ(scaled.to_vector(), l.to_vector());
  // A NaN meeting the zero triangle leaves it zero.
  const sg::Tensor with_nan = l * sg::full({4, 4}, NAN, f64());
  EXPECT_TRUE(holds_invariant(with_nan));
  EXPECT_EQ(with_nan.to_vector()[1], 0.0);
}

TEST_P(Lower, LeafGradientsAreTril) {
  sg::LowerTriangular l = sg::LowerTriangular::randn(5, f64()).requires_grad_();
  sg::sum(sg::square(l.dense()) * sg::randn({5, 5}, f64())).backward();
  ASSERT_TRUE(l.grad().defined());
  EXPECT_EQ(l.grad().structure(), S::LowerTriangular);
  EXPECT_TRUE(holds_invariant(l.grad()));
  const sg::GradcheckResult r = sg::gradcheck(
      [](const std::vector<sg::Tensor>& in) { return sg::tanh(in[0]) * 2.0 + sg::diagonal(in[0]); },
      {sg::LowerTriangular::randn(4, f64()).requires_grad_()});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST_P(Lower, AllSixteenProductsForwardAgainstFloat64) {
  sg::manual_seed(21);
  for (int64_t n : {1, 2, 3, 31, 64, 65, 130}) {
    for (S sa : kAll)
      for (S sb : kAll) {
        const sg::Tensor a = of_structure(sa, n, f64()), b = of_structure(sb, n, f64());
        const sg::Tensor c = sg::matmul(a, b);
        const std::string what = std::string(sg::structure_name(sa)) + "·" + sg::structure_name(sb) + " n=" + std::to_string(n);
        EXPECT_EQ(c.structure(), expected_product(sa, sb)) << what;
        EXPECT_TRUE(holds_invariant(c)) << what;
        const sg::Tensor ref = sg::matmul(a.dense(), b.dense());
        EXPECT_TRUE(all_close(c.to_vector(), ref.to_vector(), 1e-12, 1e-12)) << what;
      }
  }
}

TEST_P(Lower, AllSixteenProductsBackwardAgainstFloat64) {
  sg::manual_seed(22);
  const int64_t n = 37;
  for (S sa : kAll)
    for (S sb : kAll) {
      const std::string what = std::string(sg::structure_name(sa)) + "·" + sg::structure_name(sb);
      sg::Tensor a = of_structure(sa, n, f64()).requires_grad_(), b = of_structure(sb, n, f64()).requires_grad_();
      const sg::Tensor w = sg::randn({n, n}, f64());
      sg::sum(sg::matmul(a, b) * w).backward();
      // The reference: Dense products of the Dense views, projected onto each input's structure by
      // the engine (the leaves keep their tags), with G projected onto C's structure first.
      sg::Tensor ad = a.detach().dense().requires_grad_(), bd = b.detach().dense().requires_grad_();
      const S sc = expected_product(sa, sb);
      const sg::Tensor g = sc == S::UpperTriangular ? sg::Tensor(sg::triu(w)) : sc == S::LowerTriangular ? sg::Tensor(sg::tril(w)) : w;
      sg::sum(sg::matmul(ad, bd) * g.dense()).backward();
      auto project = [](const sg::Tensor& x, S s) {
        if (s == S::UpperTriangular) return sg::Tensor(sg::triu(x));
        if (s == S::LowerTriangular) return sg::Tensor(sg::tril(x));
        if (s == S::Symmetric) return sg::Tensor(sg::sym(x));
        return x;
      };
      EXPECT_EQ(a.grad().structure(), sa) << what;
      EXPECT_EQ(b.grad().structure(), sb) << what;
      EXPECT_TRUE(all_close(a.grad().to_vector(), project(ad.grad(), sa).to_vector(), 1e-11, 1e-11)) << what;
      EXPECT_TRUE(all_close(b.grad().to_vector(), project(bd.grad(), sb).to_vector(), 1e-11, 1e-11)) << what;
    }
}

TEST_P(Lower, ProductsGradcheck) {
  sg::manual_seed(23);
  for (S sa : kAll)
    for (S sb : kAll) {
      if (sa != S::LowerTriangular && sb != S::LowerTriangular) continue;  // the pairs Lower is new in
      const sg::GradcheckResult r = sg::gradcheck([](const std::vector<sg::Tensor>& in) { return sg::matmul(in[0], in[1]); },
                                                  {of_structure(sa, 5, f64()).requires_grad_(), of_structure(sb, 5, f64()).requires_grad_()});
      EXPECT_TRUE(r.ok) << sg::structure_name(sa) << "·" << sg::structure_name(sb) << ": " << r.message;
    }
  const sg::GradcheckResult g = sg::gradcheck([](const std::vector<sg::Tensor>& in) { return sg::gram(in[0]); },
                                              {sg::LowerTriangular::randn(5, f64()).requires_grad_()});
  EXPECT_TRUE(g.ok) << "gram(Lower): " << g.message;
  const sg::GradcheckResult lin = sg::gradcheck(
      [](const std::vector<sg::Tensor>& in) { return sg::linear(in[0], in[1]); },
      {sg::randn({3, 5}, f64()).requires_grad_(), sg::LowerTriangular::randn(5, f64()).requires_grad_()});
  EXPECT_TRUE(lin.ok) << "linear(x, Lower): " << lin.message;
}

TEST_P(Lower, OutStyleProductsReadThroughLower) {
  sg::manual_seed(24);
  const sg::Tensor a = sg::randn({6, 6}, f64()), b = sg::randn({6, 6}, f64());
  sg::Tensor out = sg::zeros({6, 6}, f64());
  sg::matmul_out(out, a, S::LowerTriangular, b, S::LowerTriangular);
  EXPECT_TRUE(all_close(out.to_vector(), sg::matmul(sg::tril(a), sg::tril(b)).to_vector(), 1e-12, 1e-12));
  const sg::Tensor grad = sg::randn({6, 6}, f64());
  sg::Tensor ga = sg::zeros({6, 6}, f64()), gb = sg::zeros({6, 6}, f64());
  sg::matmul_backward_out(grad, a, S::LowerTriangular, b, S::Dense, ga, gb);
  // G read through Lower·Dense = Dense; dA = tril(G·bᵀ), dB = tril(a)ᵀ·G.
  EXPECT_TRUE(all_close(ga.to_vector(), sg::tril(sg::matmul(grad, sg::transpose(b))).to_vector(), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(gb.to_vector(), sg::matmul(sg::transpose(sg::tril(a)), grad).to_vector(), 1e-12, 1e-12));
}

INSTANTIATE_TEST_SUITE_P(Devices, Lower, testing::ValuesIn(sgtest::test_devices()), sgtest::device_test_name);

TEST(LowerDevices, Float32OnCudaAgainstFloat64) {
  SG_SKIP_IF_UNAVAILABLE(sg::kCUDA);
  sg::manual_seed(25);
  for (int64_t n : {65, 256, 1000}) {
    const sg::LowerTriangular l = sg::LowerTriangular::randn(n, sg::kFloat64), m = sg::LowerTriangular::randn(n, sg::kFloat64);
    const sg::Tensor ref = sg::matmul(l, m);
    const sg::Tensor c = sg::matmul(sg::LowerTriangular(l.to(sg::kFloat32).to(sg::kCUDA)),
                                    sg::LowerTriangular(m.to(sg::kFloat32).to(sg::kCUDA)));
    EXPECT_EQ(c.structure(), S::LowerTriangular);
    EXPECT_TRUE(holds_invariant(c));
    EXPECT_LT(sgtest::rel_error(c.to_vector(), ref.to_vector()), 1e-5) << "n=" << n;
  }
}

}  // namespace
