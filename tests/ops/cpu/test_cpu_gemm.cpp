// The CPU fast path of the structured GEMM (ops/cpu/blocked_gemm.cpp, what the CPU backend
// runs for every structured product) against the float64 reference: every operand descriptor
// and output mask at sizes that are and are not multiples of its tiles, rectangular Dense
// operands, float32 and float64, through the checks of gemm_check.h. Also that tile skipping
// and k-ranges are real: Upper·Upper issues about N³/6 multiply-adds.
#include "gemm_check.h"

namespace {

using namespace sgtest::gemm;
using sg::Structure;
using sg::detail::GemmProblem;

class CpuGemm : public ::testing::TestWithParam<sg::DType> {};

TEST_P(CpuGemm, EveryDescriptorAndMaskMatchesTheReference) {
  std::mt19937_64 rng(11);
  for (int64_t n : {1, 2, 17, 31, 33, 127, 129}) check_every_descriptor(sg::kCPU, n, GetParam(), rng);
}

TEST_P(CpuGemm, MatmulTableProductsAt1000) {
  std::mt19937_64 rng(12);
  for (const GemmProblem& p : matmul_table_products(1000)) SG_EXPECT_PRODUCT(sg::kCPU, p, GetParam(), rng);
}

TEST_P(CpuGemm, RectangularDenseOperandsBesideStructuredOnes) {
  std::mt19937_64 rng(13);
  const sg::DType dtype = GetParam();
  for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{1, 7}, {33, 300}, {129, 31}, {300, 1}}) {
    for (const Variant& s : kVariants) {
      if (s.structure == Structure::Dense) continue;
      for (bool dense_trans : {false, true}) {
        GemmProblem left = square(n, s, {Structure::Dense, dense_trans}, Structure::Dense, 0.5);
        left.n = m;
        SG_EXPECT_PRODUCT(sg::kCPU, left, dtype, rng);
        GemmProblem right = square(n, {Structure::Dense, dense_trans}, s, Structure::Dense);
        right.m = m;
        SG_EXPECT_PRODUCT(sg::kCPU, right, dtype, rng);
      }
    }
  }
}

TEST_P(CpuGemm, TallDenseTimesStructuredOnTheThreads) {
  // x[1000, k]·op(B): large enough for the threads, so a column panel is cut into row blocks; every
  // structured B, read as it lies and transposed, against the reference, and the same bits twice.
  std::mt19937_64 rng(15);
  const sg::DType dtype = GetParam();
  for (int64_t k : {129, 300}) {
    for (const Variant& s : kVariants) {
      if (s.structure == Structure::Dense) continue;
      GemmProblem p = square(k, {Structure::Dense, false}, s, Structure::Dense);
      p.m = 1000;
      ASSERT_GE(p.m * p.n * p.k, sg::detail::cpu::kMinParallelMacs);
      SG_EXPECT_PRODUCT(sg::kCPU, p, dtype, rng);
    }
  }
  const int64_t m = 1000, k = 300;
  const auto x_values = random_values(m * k, rng), b_values = random_values(k * k, rng);
  const sg::Tensor x = sg::from_vector(x_values, {m, k}), b = sg::UpperTriangular(sg::triu(sg::from_vector(b_values, {k, k})));
  const sg::Tensor first = sg::linear(x, b), second = sg::linear(x, b);
  EXPECT_EQ(first.to_vector(), second.to_vector());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuGemm, ::testing::Values(sg::kFloat32, sg::kFloat64),
                         [](const testing::TestParamInfo<sg::DType>& info) {
                           return std::string(sg::dtype_name(info.param));
                         });

TEST(CpuGemm, UpperTimesUpperDoesAboutOneSixthOfTheDenseWork) {
  const int64_t n = 1024;
  std::mt19937_64 rng(14);
  const auto values = random_values(n * n, rng);
  sg::Tensor a = sg::from_vector(values, {n, n}), b = sg::from_vector(values, {n, n});
  sg::Tensor c = sg::Tensor::empty({n, n});
  GemmProblem p = square(n, {Structure::UpperTriangular, false}, {Structure::UpperTriangular, false}, Structure::UpperTriangular);
  p.tf32 = false;
  p.a_data = a.data_ptr();
  p.b_data = b.data_ptr();
  p.c_data = c.data_ptr();
  p.lda = p.ldb = p.ldc = n;
  sg::detail::backend_for(sg::kCPU).gemm(p, sg::kFloat32);  // the backend's choice: the blocked path
  const double macs = static_cast<double>(sg::detail::cpu::blocked_gemm_last_macs());
  const double n3 = double(n) * n * n;
  EXPECT_GE(macs, n3 / 6);
  EXPECT_LE(macs, 1.3 * n3 / 6);  // whole blocks along the diagonal
}

}  // namespace
