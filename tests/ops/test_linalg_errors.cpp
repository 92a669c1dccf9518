// Bad input to the structured linear algebra: one message on every device, and inputs left as they
// were by a failed call.
#include "ops/linalg_check.h"

namespace {

using namespace sgtest::linalg;

// ---- bad input: one message on every device ----------------------------------------------------

/// The message `f` throws with its tensors on `device`, after checking that the same call on the
/// CPU throws the same one; `expected` is the CPU's exact text.
void expect_message(sg::Device device, const std::function<void(sg::Device)>& f, const std::string& expected) {
  const std::string cpu = message_of([&] { f(sg::kCPU); });
  EXPECT_EQ(cpu, expected);
  EXPECT_EQ(message_of([&] { f(device); }), cpu) << "on " << device;
}

sg::TensorOptions f64_on(sg::Device d) { return sg::TensorOptions().dtype(sg::kFloat64).device(d); }
sg::TensorOptions f32_on(sg::Device d) { return sg::TensorOptions().dtype(sg::kFloat32).device(d); }

/// A 4×4 symmetric matrix whose leading minors of orders 1 and 2 are positive definite and the
/// one of order 3 is not (l₃₃² = 1 − 1 − 1 < 0).
sg::Tensor indefinite_at_3(sg::Device d) {
  return sg::as_symmetric(
      sg::from_vector(std::vector<double>{4, 2, 2, 0, 2, 5, 3, 0, 2, 3, 1, 1, 0, 0, 1, 3}, {4, 4}, f64_on(d)));
}

TEST_P(LinalgErrors, SolveTriangular) {
  const sg::Device dev = GetParam();
  auto upper = [](sg::Device d, int64_t n) { return sg::Tensor(sg::triu(sg::ones({n, n}, f64_on(d)))); };
  expect_message(dev, [](sg::Device d) { sg::solve_triangular(sg::ones({2, 3}, f64_on(d)), sg::ones({2, 1}, f64_on(d))); },
                 "solve_triangular: expected T to be a square matrix or a batch of them, got shape [2, 3]");
  expect_message(dev, [](sg::Device d) { sg::solve_triangular(sg::ones({3}, f64_on(d)), sg::ones({3, 1}, f64_on(d))); },
                 "solve_triangular: expected T to be a matrix or a batch of matrices, got shape [3]");
  expect_message(dev, [](sg::Device d) { sg::solve_triangular(sg::eye(3, f64_on(d)), sg::ones({3, 1}, f64_on(d))); },
                 "solve_triangular: expected T to be UpperTriangular or LowerTriangular (tag it with sg::triu, "
                 "sg::tril, sg::as_upper or sg::as_lower), got a Dense tensor");
  expect_message(dev, [](sg::Device d) { sg::solve_triangular(sg::Symmetric::eye(3, f64_on(d)), sg::ones({3, 1}, f64_on(d))); },
                 "solve_triangular: expected T to be UpperTriangular or LowerTriangular (tag it with sg::triu, "
                 "sg::tril, sg::as_upper or sg::as_lower), got a Symmetric tensor");
  expect_message(dev, [&](sg::Device d) { sg::solve_triangular(upper(d, 3), sg::ones({4, 2}, f64_on(d))); },
                 "solve_triangular: T of shape [3, 3] does not fit B of shape [4, 2] (a left solve needs B with 3 rows)");
  expect_message(dev, [&](sg::Device d) { sg::solve_triangular(upper(d, 3), sg::ones({3, 2}, f64_on(d)), false); },
                 "solve_triangular: T of shape [3, 3] does not fit B of shape [3, 2] (a right solve needs B with 3 "
                 "columns)");
  expect_message(dev, [&](sg::Device d) { sg::solve_triangular(upper(d, 3), sg::ones({3}, f64_on(d))); },
                 "solve_triangular: expected B to be a matrix or a batch of matrices, got shape [3]");
  expect_message(dev,
                 [](sg::Device d) {
                   const sg::Tensor t = sg::as_upper(sg::tensor({{2.0, 1.0, 1.0}, {0.0, 0.0, 1.0}, {0.0, 0.0, 3.0}}, f64_on(d)));
                   sg::solve_triangular(t, sg::ones({3, 1}, f64_on(d)));
                 },
                 "solve_triangular: T has an exact zero on its diagonal at (1, 1); a triangular matrix with a zero "
                 "pivot is singular");
  expect_message(dev, [&](sg::Device d) { sg::solve_triangular(sg::triu(sg::ones({3, 3}, f32_on(d))), sg::ones({3, 1}, f64_on(d))); },
                 "solve_triangular: expected T and B of one dtype, got float32 and float64");
  expect_message(dev,
                 [](sg::Device d) {
                   sg::solve_triangular(sg::ones({3, 3}, sg::TensorOptions().dtype(sg::kInt64).device(d)),
                                        sg::ones({3, 1}, f64_on(d)));
                 },
                 "solve_triangular: expected a floating-point tensor, got int64");
  expect_message(dev,
                 [&](sg::Device d) {
                   sg::solve_triangular(upper(d, 3), sg::ones({3, 1}, sg::TensorOptions().dtype(sg::kInt64).device(d)));
                 },
                 "solve_triangular: expected a floating-point tensor, got int64");
  if (dev.is_cuda()) {
    EXPECT_EQ(message_of([&] { sg::solve_triangular(upper(dev, 3), sg::ones({3, 1}, f64_on(sg::kCPU))); }),
              "solve_triangular: expected T and B on one device, got cuda:0 and cpu");
  }
}

TEST_P(LinalgErrors, CholeskyAndLogdet) {
  const sg::Device dev = GetParam();
  for (std::string op : {"cholesky", "cholesky_ex", "logdet"}) {
    auto call = [op](const sg::Tensor& s) {
      if (op == "cholesky") sg::cholesky(s);
      else if (op == "cholesky_ex") sg::cholesky_ex(s);
      else sg::logdet(s);
    };
    expect_message(dev, [&](sg::Device d) { call(sg::ones({2, 3}, f64_on(d))); },
                   op + ": expected a square matrix or a batch of them, got shape [2, 3]");
    expect_message(dev, [&](sg::Device d) { call(sg::ones({2, 2}, sg::TensorOptions().dtype(sg::kInt64).device(d))); },
                   op + ": expected a floating-point tensor, got int64");
  }
  const std::string tag_it = "expected a Symmetric positive definite matrix (tag it with sg::sym or sg::as_symmetric), got a ";
  expect_message(dev, [](sg::Device d) { sg::cholesky(sg::eye(3, f64_on(d))); }, "cholesky: " + tag_it + "Dense tensor");
  expect_message(dev, [](sg::Device d) { sg::cholesky(sg::LowerTriangular::eye(3, f64_on(d))); },
                 "cholesky: " + tag_it + "LowerTriangular tensor");
  expect_message(dev, [](sg::Device d) { sg::cholesky_ex(sg::eye(3, f64_on(d))); }, "cholesky_ex: " + tag_it + "Dense tensor");
  expect_message(dev, [](sg::Device d) { sg::logdet(sg::eye(3, f64_on(d))); },
                 "logdet: expected a Symmetric positive definite or a triangular matrix, got a Dense tensor (tag it "
                 "with sg::sym, sg::as_symmetric, sg::triu or sg::tril)");
  // Not positive definite: the message names the op and the failing pivot, the third here.
  expect_message(dev, [](sg::Device d) { sg::cholesky(indefinite_at_3(d)); },
                 "cholesky: the matrix is not positive definite: pivot 3 of 4 is not positive");
  expect_message(dev, [](sg::Device d) { sg::logdet(indefinite_at_3(d)); },
                 "logdet: the matrix is not positive definite: pivot 3 of 4 is not positive");
  // cholesky_ex never throws for it and returns that pivot.
  sg::CholeskyResult r;
  EXPECT_NO_THROW(r = sg::cholesky_ex(indefinite_at_3(dev)));
  EXPECT_EQ(r.info.item(), 3.0);
  // A NaN is named as one (the first in the lower triangle the factorization reads), while
  // cholesky_ex reports the pivot it reaches: its own on the diagonal, and from (2, 0) the pivot of
  // row 2, through the update of column 0. Without the NaN the matrix is positive definite (pivots
  // 2, 2, 2 and √2.75).
  auto with_nan = [](sg::Device d, int64_t i, int64_t j) {
    std::vector<double> v = {4, 2, 2, 0, 2, 5, 3, 0, 2, 3, 6, 1, 0, 0, 1, 3};
    v[static_cast<size_t>(i * 4 + j)] = v[static_cast<size_t>(j * 4 + i)] = NAN;
    return sg::as_symmetric(sg::from_vector(v, {4, 4}, f64_on(d)));
  };
  expect_message(dev, [&](sg::Device d) { sg::cholesky(with_nan(d, 1, 1)); }, "cholesky: the matrix holds a NaN at (1, 1)");
  expect_message(dev, [&](sg::Device d) { sg::cholesky(with_nan(d, 2, 0)); }, "cholesky: the matrix holds a NaN at (2, 0)");
  EXPECT_EQ(sg::cholesky_ex(with_nan(dev, 1, 1)).info.item(), 2.0);
  EXPECT_EQ(sg::cholesky_ex(with_nan(dev, 2, 0)).info.item(), 3.0);
}

TEST_P(LinalgErrors, CholeskySolve) {
  const sg::Device dev = GetParam();
  auto lower = [](sg::Device d, int64_t n) { return sg::Tensor(sg::tril(sg::ones({n, n}, f64_on(d)))); };
  expect_message(dev, [](sg::Device d) { sg::cholesky_solve(sg::ones({2, 3}, f64_on(d)), sg::ones({2, 1}, f64_on(d))); },
                 "cholesky_solve: expected L to be a square matrix or a batch of them, got shape [2, 3]");
  expect_message(dev, [](sg::Device d) { sg::cholesky_solve(sg::triu(sg::ones({3, 3}, f64_on(d))), sg::ones({3, 1}, f64_on(d))); },
                 "cholesky_solve: expected L to be the LowerTriangular Cholesky factor (sg::cholesky), got an "
                 "UpperTriangular tensor");
  expect_message(dev, [](sg::Device d) { sg::cholesky_solve(sg::eye(3, f64_on(d)), sg::ones({3, 1}, f64_on(d))); },
                 "cholesky_solve: expected L to be the LowerTriangular Cholesky factor (sg::cholesky), got a Dense "
                 "tensor");
  expect_message(dev, [&](sg::Device d) { sg::cholesky_solve(lower(d, 3), sg::ones({2, 1}, f64_on(d))); },
                 "cholesky_solve: L of shape [3, 3] does not fit B of shape [2, 1] (a left solve needs B with 3 rows)");
  expect_message(dev,
                 [](sg::Device d) {
                   const sg::Tensor l = sg::as_lower(sg::tensor({{1.0, 0.0, 0.0}, {1.0, 2.0, 0.0}, {1.0, 1.0, 0.0}}, f64_on(d)));
                   sg::cholesky_solve(l, sg::ones({3, 1}, f64_on(d)));
                 },
                 "cholesky_solve: L has an exact zero on its diagonal at (2, 2); a triangular matrix with a zero pivot "
                 "is singular");
  expect_message(dev, [&](sg::Device d) { sg::cholesky_solve(lower(d, 3), sg::ones({3, 1}, f32_on(d))); },
                 "cholesky_solve: expected L and B of one dtype, got float64 and float32");
  expect_message(dev,
                 [&](sg::Device d) { sg::cholesky_solve(lower(d, 3), sg::ones({3, 1}, sg::TensorOptions().dtype(sg::kInt64).device(d))); },
                 "cholesky_solve: expected a floating-point tensor, got int64");
  if (dev.is_cuda()) {
    EXPECT_EQ(message_of([&] { sg::cholesky_solve(lower(dev, 3), sg::ones({3, 1}, f64_on(sg::kCPU))); }),
              "cholesky_solve: expected L and B on one device, got cuda:0 and cpu");
  }
}

TEST_P(LinalgErrors, Inverse) {
  const sg::Device dev = GetParam();
  expect_message(dev, [](sg::Device d) { sg::inverse(sg::ones({2, 3}, f64_on(d))); },
                 "inverse: expected T to be a square matrix or a batch of them, got shape [2, 3]");
  expect_message(dev, [](sg::Device d) { sg::inverse(sg::Symmetric::eye(3, f64_on(d))); },
                 "inverse: expected T to be UpperTriangular or LowerTriangular (tag it with sg::triu, sg::tril, "
                 "sg::as_upper or sg::as_lower), got a Symmetric tensor");
  expect_message(dev, [](sg::Device d) { sg::inverse(sg::eye(3, f64_on(d))); },
                 "inverse: expected T to be UpperTriangular or LowerTriangular (tag it with sg::triu, sg::tril, "
                 "sg::as_upper or sg::as_lower), got a Dense tensor");
  expect_message(dev, [](sg::Device d) { sg::inverse(sg::tril(sg::ones({3, 3}, f64_on(d)), -1)); },
                 "inverse: T has an exact zero on its diagonal at (0, 0); a triangular matrix with a zero pivot is "
                 "singular");
  expect_message(dev, [](sg::Device d) { sg::inverse(sg::ones({3, 3}, sg::TensorOptions().dtype(sg::kInt64).device(d))); },
                 "inverse: expected a floating-point tensor, got int64");
}

TEST_P(LinalgErrors, FailedCallsLeaveTheirInputsUnchanged) {
  // Every failing call above throws before writing anything: its inputs keep their values and
  // tags, their gradients stay undefined, and the next valid call works.
  const sg::Device dev = GetParam();
  sg::manual_seed(503);
  sg::Tensor t = sg::as_upper(sg::tensor({{2.0, 1.0, 1.0}, {0.0, 0.0, 1.0}, {0.0, 0.0, 3.0}}, f64_on(dev)));
  t.requires_grad_();
  sg::Tensor b = sg::ones({3, 2}, f64_on(dev)).requires_grad_();
  sg::Tensor s = indefinite_at_3(dev).requires_grad_();
  const sg::Tensor t0 = t.detach().clone(), b0 = b.detach().clone(), s0 = s.detach().clone();
  EXPECT_THROW(sg::solve_triangular(t, b), sg::Error);
  EXPECT_THROW(sg::solve_triangular(t, b, false), sg::Error);
  EXPECT_THROW(sg::inverse(t), sg::Error);
  EXPECT_THROW(sg::cholesky(s), sg::Error);
  EXPECT_THROW(sg::logdet(s), sg::Error);
  EXPECT_THROW(sg::cholesky_solve(t, b), sg::Error);
  EXPECT_TRUE(unchanged(t, t0));
  EXPECT_TRUE(unchanged(b, b0));
  EXPECT_TRUE(unchanged(s, s0));
  EXPECT_FALSE(t.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  EXPECT_FALSE(s.grad().defined());
  // The unit-diagonal solve does not read the zero: it succeeds, and T's diagonal gets no gradient.
  sg::sum(sg::solve_triangular(t, b, true, true)).backward();
  EXPECT_TRUE(unchanged(t, t0));
  EXPECT_EQ(sg::diagonal(t.grad().detach()).to_vector(), (std::vector<double>{0.0, 0.0, 0.0}));
}

INSTANTIATE_TEST_SUITE_P(Devices, LinalgErrors, testing::ValuesIn(sgtest::test_devices()), sgtest::device_test_name);

}  // namespace
