// The out-style products (matmul_out, matmul_backward_out, gram_out, gram_backward_out) and
// from_blob: operands read through the structures named, outputs poisoned before the kernels
// run, every value against a float64 reference computed here, bad input named alike on each device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include <structgrad/structgrad.h>
#include "test_util.h"

namespace {

using sg::Structure;
using Matrix = std::vector<double>;  // row-major

/// The matrix `x` [n, n] stands for read through `s`.
Matrix read_as(const Matrix& x, int64_t n, Structure s) {
  Matrix r(x.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double v = x[i * n + j];
      if (s == Structure::UpperTriangular) r[i * n + j] = j >= i ? v : 0.0;
      else if (s == Structure::Symmetric) r[i * n + j] = j >= i ? v : x[j * n + i];
      else r[i * n + j] = v;
    }
  return r;
}

Matrix product(const Matrix& a, const Matrix& b, int64_t n, bool ta = false, bool tb = false) {
  Matrix c(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < n; ++p) s += (ta ? a[p * n + i] : a[i * n + p]) * (tb ? b[j * n + p] : b[p * n + j]);
      c[i * n + j] = s;
    }
  return c;
}

Matrix project(const Matrix& g, int64_t n, Structure s) {
  Matrix r(g.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      if (s == Structure::UpperTriangular) r[i * n + j] = j >= i ? g[i * n + j] : 0.0;
      else if (s == Structure::Symmetric) r[i * n + j] = 0.5 * (g[i * n + j] + g[j * n + i]);
      else r[i * n + j] = g[i * n + j];
    }
  return r;
}

sg::Tensor poisoned(int64_t n, const sgtest::DeviceDtype& c) {
  sg::Tensor t = sg::Tensor::empty({n, n}, sg::TensorOptions().dtype(c.dtype).device(c.device));
  t.fill_(std::numeric_limits<double>::quiet_NaN());
  return t;
}

double tolerance(sg::DType dtype, int64_t n) { return dtype == sg::kFloat64 ? 1e-12 : 2e-6 * std::sqrt(double(n)); }

const Structure kStructures[] = {Structure::Dense, Structure::UpperTriangular, Structure::Symmetric};

class MatmulOut : public ::testing::TestWithParam<sgtest::DeviceDtype> {};

TEST_P(MatmulOut, ProductsReadTheirOperandsThroughTheStructuresNamed) {
  const auto c = GetParam();
  SG_SKIP_IF_UNAVAILABLE(c.device);
  sg::set_matmul_precision(sg::Precision::Float32);
  for (int64_t n : {1, 17, 64, 255}) {
    const sg::TensorOptions o = sg::TensorOptions().dtype(c.dtype).device(c.device);
    sg::Tensor a = sg::randn({n, n}, o), b = sg::randn({n, n}, o);  // triangles that disagree
    const Matrix av = a.to_vector(), bv = b.to_vector();
    for (Structure sa : kStructures)
      for (Structure sb : kStructures) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " " << sa << "·" << sb);
        sg::Tensor out = poisoned(n, c);
        sg::matmul_out(out, a, sa, b, sb);
        Matrix want = product(read_as(av, n, sa), read_as(bv, n, sb), n);
        const bool upper = sa == Structure::UpperTriangular && sb == Structure::UpperTriangular;
        if (upper) want = project(want, n, Structure::UpperTriangular);
        EXPECT_TRUE(sgtest::all_close(out.to_vector(), want, tolerance(c.dtype, n), tolerance(c.dtype, n)));
        EXPECT_EQ(out.structure(), Structure::Dense);  // the caller's tensor keeps its tag
      }
  }
}

TEST_P(MatmulOut, GradientsAreTheProjectedGradients) {
  const auto c = GetParam();
  SG_SKIP_IF_UNAVAILABLE(c.device);
  sg::set_matmul_precision(sg::Precision::Float32);
  for (int64_t n : {1, 31, 130}) {
    const sg::TensorOptions o = sg::TensorOptions().dtype(c.dtype).device(c.device);
    sg::Tensor a = sg::randn({n, n}, o), b = sg::randn({n, n}, o), g = sg::randn({n, n}, o);
    const Matrix av = a.to_vector(), bv = b.to_vector(), gv = g.to_vector();
    for (Structure sa : kStructures)
      for (Structure sb : kStructures) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " " << sa << "·" << sb);
        const bool upper = sa == Structure::UpperTriangular && sb == Structure::UpperTriangular;
        const Matrix gc = upper ? project(gv, n, Structure::UpperTriangular) : gv;  // read through C's structure
        sg::Tensor da = poisoned(n, c), db = poisoned(n, c);
        sg::matmul_backward_out(g, a, sa, b, sb, da, db);
        const Matrix want_a = project(product(gc, read_as(bv, n, sb), n, false, true), n, sa);
        const Matrix want_b = project(product(read_as(av, n, sa), gc, n, true, false), n, sb);
        EXPECT_TRUE(sgtest::all_close(da.to_vector(), want_a, tolerance(c.dtype, n), tolerance(c.dtype, n)));
        EXPECT_TRUE(sgtest::all_close(db.to_vector(), want_b, tolerance(c.dtype, n), tolerance(c.dtype, n)));
        sg::Tensor none, only_b = poisoned(n, c);
        sg::matmul_backward_out(g, a, sa, b, sb, none, only_b);  // an undefined output is skipped
        EXPECT_TRUE(sgtest::all_close(only_b.to_vector(), want_b, tolerance(c.dtype, n), tolerance(c.dtype, n)));
      }
  }
}

TEST_P(MatmulOut, GramAndItsGradientForAnyUpstreamGradient) {
  const auto c = GetParam();
  SG_SKIP_IF_UNAVAILABLE(c.device);
  sg::set_matmul_precision(sg::Precision::Float32);
  for (int64_t n : {1, 40, 129}) {
    const sg::TensorOptions o = sg::TensorOptions().dtype(c.dtype).device(c.device);
    sg::Tensor a = sg::randn({n, n}, o), g = sg::randn({n, n}, o);  // g not symmetric
    const Matrix av = a.to_vector(), gv = g.to_vector();
    for (Structure sa : kStructures) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " " << sa);
      const Matrix ar = read_as(av, n, sa);
      sg::Tensor out = poisoned(n, c), da = poisoned(n, c);
      sg::gram_out(out, a, sa);
      EXPECT_TRUE(sgtest::all_close(out.to_vector(), product(ar, ar, n, false, true), tolerance(c.dtype, n),
                                    tolerance(c.dtype, n)));
      sg::gram_backward_out(g, a, sa, da);
      Matrix gsum(gv.size());
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) gsum[i * n + j] = gv[i * n + j] + gv[j * n + i];
      EXPECT_TRUE(sgtest::all_close(da.to_vector(), project(product(gsum, ar, n), n, sa), tolerance(c.dtype, n),
                                    tolerance(c.dtype, n)));
    }
  }
}

TEST_P(MatmulOut, RectangularDenseAndEmptyOperands) {
  const auto c = GetParam();
  SG_SKIP_IF_UNAVAILABLE(c.device);
  const sg::TensorOptions o = sg::TensorOptions().dtype(c.dtype).device(c.device);
  sg::Tensor a = sg::randn({5, 3}, o), b = sg::randn({3, 7}, o);
  sg::Tensor out = sg::Tensor::empty({5, 7}, o);
  sg::matmul_out(out, a, Structure::Dense, b, Structure::Dense);
  EXPECT_TRUE(sgtest::all_close(out.to_vector(), sg::matmul(a, b).to_vector(), 1e-5, 1e-5));
  sg::Tensor e = sg::Tensor::empty({4, 0}, o), f = sg::Tensor::empty({0, 4}, o), z = poisoned(4, c);
  sg::matmul_out(z, e, Structure::Dense, f, Structure::Dense);  // an empty sum: zeros
  EXPECT_EQ(z.to_vector(), std::vector<double>(16, 0.0));
}

TEST_P(MatmulOut, BadInputIsNamedAndLeavesTheOutputAlone) {
  const auto c = GetParam();
  SG_SKIP_IF_UNAVAILABLE(c.device);
  const sg::TensorOptions o = sg::TensorOptions().dtype(c.dtype).device(c.device);
  sg::Tensor a = sg::randn({4, 4}, o), out = sg::zeros({4, 4}, o);
  auto msg = [&](auto f) { return sgtest::message_of(f); };
  EXPECT_EQ(msg([&] { sg::matmul_out(out, a, Structure::Dense, sg::randn({3, 4}, o), Structure::Dense); }),
            "matmul_out: shapes [4, 4] and [3, 4] cannot be multiplied");
  EXPECT_EQ(msg([&] {
              sg::matmul_out(out, sg::randn({4, 3}, o), Structure::UpperTriangular, sg::randn({3, 4}, o),
                             Structure::Dense);
            }),
            "matmul_out: a read as UpperTriangular must be square, got shape [4, 3]");
  sg::Tensor wrong = sg::zeros({4, 5}, o);
  EXPECT_EQ(msg([&] { sg::matmul_out(wrong, a, Structure::Dense, a, Structure::Dense); }),
            "matmul_out: expected out of shape [4, 4], got [4, 5]");
  EXPECT_EQ(msg([&] { sg::matmul_out(a, a, Structure::Dense, a, Structure::Dense); }),
            "matmul_out: out overlaps another argument");
  sg::Tensor upper_out = sg::triu(sg::zeros({4, 4}, o));  // a tag whose invariant a Dense product breaks
  EXPECT_EQ(msg([&] { sg::matmul_out(upper_out, a, Structure::Dense, a, Structure::Dense); }),
            "matmul_out: expected out to be a Dense tensor, got one tagged UpperTriangular");
  sg::Tensor g = sg::randn({4, 4}, o), shared = sg::zeros({4, 4}, o);
  const uint64_t before = shared.impl().storage->version.load();
  EXPECT_EQ(msg([&] { sg::matmul_backward_out(g, a, Structure::Dense, a, Structure::Dense, shared, shared); }),
            "matmul_backward_out: a_grad overlaps b_grad");
  EXPECT_EQ(shared.impl().storage->version.load(), before);  // nothing marked written when a check fails
  const sg::DType other = c.dtype == sg::kFloat32 ? sg::kFloat64 : sg::kFloat32;
  EXPECT_EQ(msg([&] { sg::matmul_out(out, a, Structure::Dense, a.to(other), Structure::Dense); }),
            std::string("matmul_out: expected every tensor of dtype ") + sg::dtype_name(c.dtype) +
                ", got b of dtype " + sg::dtype_name(other));
  EXPECT_EQ(msg([&] { sg::gram_backward_out(sg::randn({4, 3}, o), a, Structure::Dense, out); }),
            "gram_backward_out: expected grad of shape [4, 4], got [4, 3]");
  EXPECT_EQ(out.to_vector(), std::vector<double>(16, 0.0));
}

INSTANTIATE_TEST_SUITE_P(Devices, MatmulOut, ::testing::ValuesIn(sgtest::test_devices_and_dtypes()),
                         sgtest::device_dtype_test_name);

TEST(FromBlob, ViewsMemoryInPlaceAndCallsItsReleaseOnce) {
  std::vector<double> memory = {1, 2, 3, 4, 5, 6};
  int released = 0;
  {
    sg::Tensor t = sg::from_blob(memory.data(), {2, 3}, sg::kFloat64, [&] { ++released; });
    EXPECT_EQ(t.data_ptr(), memory.data());
    EXPECT_EQ(t.to_vector(), memory);
    sg::Tensor view = t;  // a second handle: released once, when the last goes
    t.fill_(7.0);
    EXPECT_EQ(memory[5], 7.0);
  }
  EXPECT_EQ(released, 1);
}

TEST(FromBlob, BadArgumentsAreNamed) {
  EXPECT_EQ(sgtest::message_of([] { sg::from_blob(nullptr, {2, 2}); }),
            "from_blob: null data for shape [2, 2] of float32");
  float x = 0;
  EXPECT_EQ(sgtest::message_of([&] { sg::from_blob(&x, {-1}); }).rfind("from_blob: negative dimension", 0), 0u);
  EXPECT_EQ(sgtest::message_of([&] { sg::from_blob(&x, {1}, sg::Device(sg::DeviceType::CUDA, 63)); }),
            std::string("from_blob: cuda:63 is not available (") + std::to_string(sg::cuda::device_count()) +
                " CUDA device(s) found)");
  EXPECT_NO_THROW(sg::from_blob(nullptr, {0, 3}));
}

}  // namespace
