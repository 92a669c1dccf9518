// Every core op on every device: values against a float64 host reference, gradcheck in
// float64 (per entry), and CPU/CUDA agreement. Tolerances: float32 rel. 1e-6 per element
// (plus atol 1e-6), float64 1e-12.
#include "test_util.h"

#include <cmath>
#include <functional>

namespace {

using Fn = std::function<sg::Tensor(const std::vector<sg::Tensor>&)>;
using Ref = std::function<double(double)>;

struct Case {
  sg::Device device;
  sg::DType dtype;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return std::string(info.param.device.is_cpu() ? "cpu" : "cuda") + "_" + sg::dtype_name(info.param.dtype);
}

class OpsOnDevice : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam().device); }
  sg::TensorOptions opts() const { return sg::TensorOptions().dtype(GetParam().dtype).device(GetParam().device); }
  sg::TensorOptions opts64() const { return sg::TensorOptions().dtype(sg::kFloat64).device(GetParam().device); }
  double rtol() const { return GetParam().dtype == sg::kFloat32 ? 2e-6 : 1e-12; }
};

struct UnaryCase {
  const char* name;
  std::function<sg::Tensor(const sg::Tensor&)> op;
  Ref ref;
  bool positive_domain;
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](const sg::Tensor& x) { return sg::neg(x); }, [](double v) { return -v; }, false},
      {"exp", [](const sg::Tensor& x) { return sg::exp(x); }, [](double v) { return std::exp(v); }, false},
      {"log", [](const sg::Tensor& x) { return sg::log(x); }, [](double v) { return std::log(v); }, true},
      {"sqrt", [](const sg::Tensor& x) { return sg::sqrt(x); }, [](double v) { return std::sqrt(v); }, true},
      {"square", [](const sg::Tensor& x) { return sg::square(x); }, [](double v) { return v * v; }, false},
      {"abs", [](const sg::Tensor& x) { return sg::abs(x); }, [](double v) { return std::abs(v); }, false},
      {"tanh", [](const sg::Tensor& x) { return sg::tanh(x); }, [](double v) { return std::tanh(v); }, false},
      {"sigmoid", [](const sg::Tensor& x) { return sg::sigmoid(x); }, [](double v) { return 1 / (1 + std::exp(-v)); }, false},
      {"relu", [](const sg::Tensor& x) { return sg::relu(x); }, [](double v) { return v > 0 ? v : 0; }, false},
      {"leaky_relu", [](const sg::Tensor& x) { return sg::leaky_relu(x, 0.2); }, [](double v) { return v > 0 ? v : 0.2 * v; }, false},
      {"softplus", [](const sg::Tensor& x) { return sg::softplus(x); }, [](double v) { return std::log1p(std::exp(v)); }, false},
      {"pow", [](const sg::Tensor& x) { return sg::pow(x, 2.5); }, [](double v) { return std::pow(v, 2.5); }, true},
      {"pow_scalar_base", [](const sg::Tensor& x) { return sg::pow(1.7, x); }, [](double v) { return std::pow(1.7, v); }, false},
      {"add_scalar", [](const sg::Tensor& x) { return x + 1.5; }, [](double v) { return v + 1.5; }, false},
      {"rsub_scalar", [](const sg::Tensor& x) { return 1.5 - x; }, [](double v) { return 1.5 - v; }, false},
      {"mul_scalar", [](const sg::Tensor& x) { return x * -3.0; }, [](double v) { return v * -3.0; }, false},
      {"div_scalar", [](const sg::Tensor& x) { return x / 4.0; }, [](double v) { return v / 4.0; }, false},
      {"rdiv_scalar", [](const sg::Tensor& x) { return 2.0 / x; }, [](double v) { return 2.0 / v; }, true},
  };
}

sg::Tensor input_for(const UnaryCase& c, const sg::Shape& shape, sg::TensorOptions o) {
  auto x = sg::randn(shape, o);
  // Keep away from kinks (relu/abs at 0) and from the edge of the domain.
  if (c.positive_domain) return sg::abs(x) + 0.5;
  return x + 0.05;
}

TEST_P(OpsOnDevice, UnaryOpsMatchReference) {
  for (const auto& c : unary_cases()) {
    auto x = input_for(c, {7, 9}, opts());
    auto y = c.op(x);
    auto xv = x.to_vector();
    std::vector<double> ref;
    for (double v : xv) ref.push_back(c.ref(v));
    EXPECT_TRUE(sgtest::all_close(y.to_vector(), ref, rtol(), GetParam().dtype == sg::kFloat32 ? 1e-6 : 1e-14))
        << c.name;
    EXPECT_EQ(y.shape(), x.shape()) << c.name;
  }
}

TEST_P(OpsOnDevice, UnaryOpsPassGradcheck) {
  for (const auto& c : unary_cases()) {
    auto x = input_for(c, {3, 4}, opts64()).detach().requires_grad_();
    auto r = sg::gradcheck([&](const std::vector<sg::Tensor>& in) { return c.op(in[0]); }, {x});
    EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
  }
}

TEST_P(OpsOnDevice, SignAndPowersOfMinusOne) {
  const sg::Tensor x = sg::from_vector(std::vector<double>{-2.5, 0.0, 3.0, -0.0, 1e-30}, {5}, opts());
  EXPECT_EQ(sg::sign(x).to_vector(), (std::vector<double>{-1, 0, 1, 0, 1}));
  const sg::Tensor counts = sg::from_vector(std::vector<double>{0, 1, 2, 7, 40}, {5}, opts());
  EXPECT_EQ(sg::pow(-1.0, counts).to_vector(), (std::vector<double>{1, -1, 1, -1, 1}));
  EXPECT_TRUE(std::isnan(sg::pow(-1.0, sg::full({1}, 0.5, opts())).item()));
  // sign keeps an Upper tag (sign 0 = 0) and has a zero gradient.
  const sg::Tensor u = sg::triu(sg::randn({3, 3}, opts64())).detach().requires_grad_();
  const sg::Tensor su = sg::sign(u);
  EXPECT_EQ(su.structure(), sg::Structure::UpperTriangular);
  sg::sum(su).backward();
  EXPECT_EQ(sg::sum(sg::abs(u.grad())).item(), 0.0);
}

TEST_P(OpsOnDevice, BinaryOpsBroadcastAndMatchReference) {
  struct B {
    const char* name;
    std::function<sg::Tensor(const sg::Tensor&, const sg::Tensor&)> op;
    std::function<double(double, double)> ref;
  };
  std::vector<B> ops = {
      {"add", [](auto& a, auto& b) { return a + b; }, [](double a, double b) { return a + b; }},
      {"sub", [](auto& a, auto& b) { return a - b; }, [](double a, double b) { return a - b; }},
      {"mul", [](auto& a, auto& b) { return a * b; }, [](double a, double b) { return a * b; }},
      {"div", [](auto& a, auto& b) { return a / b; }, [](double a, double b) { return a / b; }},
  };
  const std::vector<std::pair<sg::Shape, sg::Shape>> shapes = {
      {{5, 4}, {5, 4}}, {{5, 4}, {4}}, {{5, 4}, {1, 4}}, {{5, 4}, {5, 1}}, {{5, 4}, {}}, {{4}, {5, 4}}, {{6}, {6}}};
  for (const auto& op : ops)
    for (const auto& [sa, sb] : shapes) {
      auto a = sg::randn(sa, opts());
      auto b = sg::abs(sg::randn(sb, opts())) + 0.5;
      auto c = op.op(a, b);
      const auto av = a.to_vector(), bv = b.to_vector();
      const int64_t rows = c.dim() == 2 ? c.size(0) : 1, cols = c.shape().empty() ? 1 : c.shape().back();
      auto at = [](const sg::Shape& s, const std::vector<double>& v, int64_t r, int64_t col) {
        if (v.size() == 1) return v[0];
        const int64_t sr = s.size() == 2 ? s[0] : 1, sc = s.back();
        return v[(sr == 1 ? 0 : r) * sc + (sc == 1 ? 0 : col)];
      };
      std::vector<double> ref;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t col = 0; col < cols; ++col) ref.push_back(op.ref(at(sa, av, r, col), at(sb, bv, r, col)));
      EXPECT_TRUE(sgtest::all_close(c.to_vector(), ref, rtol(), 1e-6))
          << op.name << " " << sg::shape_str(sa) << " " << sg::shape_str(sb);
      auto a64 = a.to(sg::kFloat64).detach().requires_grad_();
      auto b64 = b.to(sg::kFloat64).detach().requires_grad_();
      auto r = sg::gradcheck([&](const std::vector<sg::Tensor>& in) { return op.op(in[0], in[1]); }, {a64, b64});
      EXPECT_TRUE(r.ok) << op.name << " " << sg::shape_str(sa) << " " << sg::shape_str(sb) << ": " << r.message;
    }
}

TEST_P(OpsOnDevice, ReductionsShapeOpsAndLoss) {
  auto x = sg::randn({6, 5}, opts());
  const auto v = x.to_vector();
  double total = 0;
  std::vector<double> col(5, 0.0), row(6, 0.0);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 5; ++j) {
      total += v[i * 5 + j];
      col[j] += v[i * 5 + j];
      row[i] += v[i * 5 + j];
    }
  const double tol = GetParam().dtype == sg::kFloat32 ? 1e-5 : 1e-12;
  EXPECT_NEAR(sg::sum(x).item(), total, tol);
  EXPECT_NEAR(sg::mean(x).item(), total / 30, tol);
  EXPECT_TRUE(sgtest::all_close(sg::sum(x, 0).to_vector(), col, tol, tol));
  EXPECT_TRUE(sgtest::all_close(sg::sum(x, 1).to_vector(), row, tol, tol));
  EXPECT_EQ(sg::sum(x, 1, true).shape(), (sg::Shape{6, 1}));
  EXPECT_EQ(sg::mean(x, 0).shape(), (sg::Shape{5}));
  auto t = sg::transpose(x).to_vector();
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 5; ++j) ASSERT_EQ(t[j * 6 + i], v[i * 5 + j]);
  EXPECT_EQ(sg::reshape(x, {5, -1}).shape(), (sg::Shape{5, 6}));
  auto sq = sg::randn({4, 4}, opts());
  auto d = sg::diagonal(sq).to_vector();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(d[i], sq.to_vector()[i * 5]);
  auto y = sg::randn({6, 5}, opts());
  double mse = 0;
  for (size_t i = 0; i < v.size(); ++i) mse += std::pow(v[i] - y.to_vector()[i], 2) / 30;
  EXPECT_NEAR(sg::mse_loss(x, y).item(), mse, tol * 10);

  auto x64 = sg::randn({4, 3}, opts64()).requires_grad_();
  auto y64 = sg::randn({4, 3}, opts64()).requires_grad_();
  auto sq64 = sg::randn({3, 3}, opts64()).requires_grad_();
  auto d64 = sg::randn({3}, opts64()).requires_grad_();
  std::vector<std::pair<const char*, sg::GradcheckResult>> checks = {
      {"sum", sg::gradcheck([](auto& in) { return sg::sum(in[0]); }, {x64})},
      {"sum0", sg::gradcheck([](auto& in) { return sg::sum(in[0], 0); }, {x64})},
      {"sum1", sg::gradcheck([](auto& in) { return sg::sum(in[0], 1, true); }, {x64})},
      {"mean", sg::gradcheck([](auto& in) { return sg::mean(in[0]); }, {x64})},
      {"mean1", sg::gradcheck([](auto& in) { return sg::mean(in[0], 1); }, {x64})},
      {"transpose", sg::gradcheck([](auto& in) { return sg::transpose(in[0]); }, {x64})},
      {"reshape", sg::gradcheck([](auto& in) { return sg::reshape(in[0], {2, 6}); }, {x64})},
      {"diagonal", sg::gradcheck([](auto& in) { return sg::diagonal(in[0]); }, {sq64})},
      {"with_diagonal", sg::gradcheck([](auto& in) { return sg::with_diagonal(in[0], in[1]); }, {sq64, d64})},
      {"mse_loss", sg::gradcheck([](auto& in) { return sg::mse_loss(in[0], in[1]); }, {x64, y64})},
      {"matmul", sg::gradcheck([](auto& in) { return sg::matmul(in[0], in[1]); }, {x64, sq64})},
      {"linear", sg::gradcheck([](auto& in) { return sg::linear(in[0], in[1], in[2]); }, {x64, sq64, d64})},
  };
  for (auto& [name, r] : checks) EXPECT_TRUE(r.ok) << name << ": " << r.message;
}

TEST_P(OpsOnDevice, CudaMatchesCpu) {
  if (GetParam().device.is_cpu()) GTEST_SKIP() << "compares cuda with cpu";
  auto xc = sg::randn({33, 17}, sg::TensorOptions().dtype(GetParam().dtype));
  auto wc = sg::randn({17, 17}, sg::TensorOptions().dtype(GetParam().dtype));
  auto x = xc.to(GetParam().device), w = wc.to(GetParam().device);
  auto f = [](const sg::Tensor& a, const sg::Tensor& b) {
    return sg::sum(sg::tanh(sg::matmul(a, b)) * sg::sigmoid(a), 0) + sg::sum(sg::softplus(b), 1);
  };
  EXPECT_TRUE(sgtest::all_close(f(x, w).to_vector(), f(xc, wc).to_vector(), rtol() * 10, 1e-5));
  for (const auto& c : unary_cases()) {
    auto in = input_for(c, {8, 8}, sg::TensorOptions().dtype(GetParam().dtype));
    EXPECT_TRUE(sgtest::all_close(c.op(in.to(GetParam().device)).to_vector(), c.op(in).to_vector(), rtol(), 1e-6))
        << c.name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllDevices, OpsOnDevice,
                         ::testing::Values(Case{sg::kCPU, sg::kFloat32}, Case{sg::kCPU, sg::kFloat64},
                                           Case{sg::kCUDA, sg::kFloat32}, Case{sg::kCUDA, sg::kFloat64}),
                         case_name);

}  // namespace
