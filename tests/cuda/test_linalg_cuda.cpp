// The CUDA backend's solves, Cholesky factors and triangular inverses (cuda/linalg_*.cu) against the
// CPU backend in float64: every case of solve_triangular (left and right, op(T) lower and upper, T
// read transposed or not, unit diagonal or not) on both of its paths (one launch for a few
// right-hand sides, blocked over the GEMM), at sizes around the kernels' blocks, with T's other
// triangle (and a unit diagonal) holding NaN so that reading it shows; Cholesky factors with NaN
// above the diagonal of A and the first failing pivot reported as the CPU reports it. Each test
// prints the largest relative error per case and size. SG_TEST_SIZES (e.g. "3,65,129") picks the
// orders (compute-sanitizer runs take small ones).
#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ops/backend.h"
#if defined(SG_WITH_CUDA)
#include "cuda/linalg_tuning.h"
#endif

namespace {

using sg::Structure;

const sg::Device kCuda0{sg::DeviceType::CUDA, 0};
const double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<int64_t> test_sizes() {
  if (const char* env = std::getenv("SG_TEST_SIZES")) {
    std::vector<int64_t> sizes;
    std::stringstream in(env);
    std::string item;
    while (std::getline(in, item, ',')) sizes.push_back(std::stoll(item));
    return sizes;
  }
  return {1, 2, 3, 31, 48, 64, 65, 127, 128, 129, 255, 257, 1000};
}

sg::TensorOptions on(sg::Device device, sg::DType dtype) { return sg::TensorOptions().dtype(dtype).device(device); }

/// Row-major values of a triangular T [n, n] stored in its lower (or upper) triangle: off-diagonal
/// N(0, 1)/(2√n), a diagonal of magnitude 1.5–2.5 with random signs (NaN with `unit`), NaN in the
/// other triangle.
std::vector<double> triangular_values(int64_t n, bool stored_lower, bool unit, uint64_t seed) {
  sg::manual_seed(seed);
  const std::vector<double> r = sg::randn({n, n}, sg::kFloat64).to_vector();
  std::vector<double> v(static_cast<size_t>(n * n), kNaN);
  const double scale = 0.5 / std::sqrt(static_cast<double>(n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double x = r[static_cast<size_t>(i * n + j)];
      if (i == j)
        v[static_cast<size_t>(i * n + j)] = unit ? kNaN : (x < 0 ? -1.0 : 1.0) * (1.5 + std::min(1.0, std::abs(x)));
      else if ((j < i) == stored_lower) v[static_cast<size_t>(i * n + j)] = x * scale;
    }
  return v;
}

/// Row-major values of the SPD matrix M·Mᵀ/n + I, NaN above the diagonal (never read).
std::vector<double> spd_values(int64_t n, uint64_t seed) {
  sg::manual_seed(seed);
  const sg::Tensor m = sg::randn({n, n}, sg::kFloat64);
  std::vector<double> a = (sg::matmul(m, sg::transpose(m)) / static_cast<double>(n)).to_vector();
  for (int64_t i = 0; i < n; ++i) {
    a[static_cast<size_t>(i * n + i)] += 1.0;
    for (int64_t j = i + 1; j < n; ++j) a[static_cast<size_t>(i * n + j)] = kNaN;
  }
  return a;
}

/// Whether the row-major values of an n×n lower (or upper) triangular matrix hold exact zeros in
/// the other triangle; a failure names the first entry that does not.
testing::AssertionResult zero_outside_triangle(const std::vector<double>& v, int64_t n, bool lower) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double e = v[static_cast<size_t>(i * n + j)];
      if ((lower ? j > i : j < i) && e != 0.0)
        return testing::AssertionFailure() << "entry (" << i << ", " << j << ") is " << e << ", not 0";
    }
  return testing::AssertionSuccess();
}

/// Largest errors per case, printed as a table when the test ends.
class ErrorTable {
 public:
  void add(const std::string& row, int64_t n, double error) {
    double& e = errors_[row][n];
    e = std::max(e, error);
  }
  void print(const char* title) const {
    std::printf("%s: largest relative error (Frobenius) against the CPU in float64\n", title);
    for (const auto& [row, by_n] : errors_) {
      std::printf("  %-34s", row.c_str());
      for (const auto& [n, e] : by_n) std::printf(" n=%lld %.1e", static_cast<long long>(n), e);
      std::printf("\n");
    }
  }

 private:
  std::map<std::string, std::map<int64_t, double>> errors_;
};

double tolerance(sg::DType dtype) { return dtype == sg::kFloat32 ? 2e-4 : 1e-11; }

#if defined(SG_WITH_CUDA)
namespace cu = sg::detail::cuda;
/// The library's settings and the others that change which kernels run: the small-product kernel up
/// to 256 in both dtypes, every product on the GEMM, and that with the float32 / float64 choice of
/// Dense triangular operands flipped.
const std::vector<std::pair<std::string, std::function<void(cu::LinalgTuning&)>>>& settings() {
  static const std::vector<std::pair<std::string, std::function<void(cu::LinalgTuning&)>>> all = {
      {"", [](cu::LinalgTuning&) {}},
      {" (own products to 256)", [](cu::LinalgTuning& o) {
         o.own_products_up_to_f32 = 256;
         o.own_products_up_to_f64 = 256;
       }},
      {" (GEMM only)", [](cu::LinalgTuning& o) {
         o.own_products_up_to_f32 = 0;
         o.own_products_up_to_f64 = 0;
       }},
      {" (GEMM only, dense flipped)", [](cu::LinalgTuning& o) {
         o.own_products_up_to_f32 = 0;
         o.own_products_up_to_f64 = 0;
         o.dense_triangles_f32 = !o.dense_triangles_f32;
         o.dense_triangles_f64 = !o.dense_triangles_f64;
         o.dense_solve_leaves = !o.dense_solve_leaves;
       }}};
  return all;
}

/// settings() and the Cholesky's other order of leaves (64 or 128, whichever is not the default).
const std::vector<std::pair<std::string, std::function<void(cu::LinalgTuning&)>>>& cholesky_settings() {
  static const auto all = [] {
    auto list = settings();
    list.emplace_back(" (other leaf order)", [](cu::LinalgTuning& o) {
      o.cholesky_leaf_f32 = 192 - o.cholesky_leaf_f32;
      o.cholesky_leaf_f64 = 192 - o.cholesky_leaf_f64;
    });
    return list;
  }();
  return all;
}
#endif

class LinalgCuda : public ::testing::TestWithParam<sg::DType> {};

std::string dtype_name(const testing::TestParamInfo<sg::DType>& info) { return sg::dtype_name(info.param); }

TEST_P(LinalgCuda, SolveTriangularMatchesCpu) {
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
#if defined(SG_WITH_CUDA)
  const sg::DType dtype = GetParam();
  sg::detail::Backend& cpu = sg::detail::cpu_backend();
  sg::detail::Backend& gpu = sg::detail::cuda_backend(0);
  ErrorTable table;
  uint64_t seed = 1;
  for (const int64_t n : test_sizes()) {
    for (const int64_t k : {int64_t{1}, int64_t{3}, int64_t{17}, int64_t{130}}) {
      if (n >= 1000 && k == 3) continue;
      for (int variant = 0; variant < 16; ++variant) {
        const bool left = variant & 1, lower = variant & 2, trans = variant & 4, unit = variant & 8;
        const Structure kind = lower ? Structure::LowerTriangular : Structure::UpperTriangular;
        const bool stored_lower = lower != trans;
        const std::vector<double> tv = triangular_values(n, stored_lower, unit, ++seed);
        const sg::Shape shape = left ? sg::Shape{n, k} : sg::Shape{k, n};
        sg::manual_seed(++seed);
        const std::vector<double> bv = sg::randn(shape, sg::kFloat64).to_vector();
        sg::Tensor t_ref = sg::from_vector(tv, {n, n}, on(sg::kCPU, sg::kFloat64));
        sg::Tensor x_ref = sg::from_vector(bv, shape, on(sg::kCPU, sg::kFloat64));
        cpu.solve_triangular(t_ref, kind, trans, unit, left, x_ref, x_ref);
        const std::vector<double> ref = x_ref.to_vector_as<double>();
        const sg::Tensor t = sg::from_vector(tv, {n, n}, on(kCuda0, dtype));
        for (size_t path = 0; path <= settings().size(); ++path) {
          const bool few = path == settings().size();
          cu::LinalgTuningGuard guard([&](cu::LinalgTuning& o) {
            if (!few) settings()[path].second(o);
            o.few_columns = few ? k : 0;
          });
          sg::Tensor x = sg::from_vector(bv, shape, on(kCuda0, dtype));
          gpu.solve_triangular(t, kind, trans, unit, left, x, x);
          const double error = sgtest::rel_error(x.to_vector_as<double>(), ref);
          std::ostringstream name;
          name << (few ? "one launch " : "blocked    ") << (left ? "left  " : "right ") << (lower ? "lower " : "upper ")
               << (trans ? "trans " : "      ") << (unit ? "unit" : "    ") << (few ? "" : settings()[path].first);
          table.add(name.str(), n, error);
          EXPECT_LE(error, tolerance(dtype)) << name.str() << " n=" << n << " k=" << k;
        }
      }
    }
  }
  table.print(("solve_triangular " + std::string(sg::dtype_name(dtype))).c_str());
#endif
}

TEST_P(LinalgCuda, CholeskyMatchesCpu) {
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
#if defined(SG_WITH_CUDA)
  const sg::DType dtype = GetParam();
  sg::detail::Backend& cpu = sg::detail::cpu_backend();
  sg::detail::Backend& gpu = sg::detail::cuda_backend(0);
  ErrorTable table;
  uint64_t seed = 100;
  for (const int64_t n : test_sizes()) {
    const std::vector<double> av = spd_values(n, ++seed);
    sg::Tensor a_ref = sg::from_vector(av, {n, n}, on(sg::kCPU, sg::kFloat64));
    sg::Tensor l_ref = sg::Tensor::empty({n, n}, on(sg::kCPU, sg::kFloat64));
    sg::Tensor info_ref = sg::Tensor::empty({}, on(sg::kCPU, sg::kInt64));
    cpu.cholesky(a_ref, l_ref, info_ref);
    ASSERT_EQ(info_ref.item(), 0.0);
    const sg::Tensor a = sg::from_vector(av, {n, n}, on(kCuda0, dtype));
    sg::Tensor l = sg::Tensor::empty({n, n}, on(kCuda0, dtype));
    sg::Tensor info = sg::Tensor::empty({}, on(kCuda0, sg::kInt64));
    const std::vector<double> lv_ref = l_ref.to_vector_as<double>();
    for (const auto& [setting, edit] : cholesky_settings()) {
      cu::LinalgTuningGuard guard(edit);
      gpu.cholesky(a, l, info);
      EXPECT_EQ(info.item(), 0.0) << "n=" << n << setting;
      const std::vector<double> lv = l.to_vector_as<double>();
      const double error = sgtest::rel_error(lv, lv_ref);
      table.add("cholesky" + setting, n, error);
      EXPECT_LE(error, tolerance(dtype)) << "n=" << n << setting;
      ASSERT_TRUE(zero_outside_triangle(lv, n, true)) << "L, n=" << n << setting;
    }
    // Pivots that are not positive: a negative one and a NaN, early, in the middle and last, with
    // either order of leaves.
    for (const int64_t p : {int64_t{0}, n / 2, n - 1}) {
      for (const double bad : {-1.0, kNaN}) {
        std::vector<double> bv = av;
        bv[static_cast<size_t>(p * n + p)] = bad;
        sg::Tensor b_ref = sg::from_vector(bv, {n, n}, on(sg::kCPU, sg::kFloat64));
        cpu.cholesky(b_ref, l_ref, info_ref);
        const sg::Tensor b = sg::from_vector(bv, {n, n}, on(kCuda0, dtype));
        for (const int64_t leaf : {int64_t{64}, int64_t{128}}) {
          cu::LinalgTuningGuard guard(
              [leaf](cu::LinalgTuning& o) { o.cholesky_leaf_f32 = o.cholesky_leaf_f64 = leaf; });
          gpu.cholesky(b, l, info);
          EXPECT_EQ(info.item(), info_ref.item()) << "n=" << n << " bad pivot " << bad << " at " << p << " leaf "
                                                  << leaf;
        }
      }
    }
  }
  // Order 0: info is 0.
  sg::Tensor empty = sg::Tensor::empty({0, 0}, on(kCuda0, dtype));
  sg::Tensor l0 = sg::Tensor::empty({0, 0}, on(kCuda0, dtype));
  sg::Tensor info0 = sg::full({}, 5.0, on(kCuda0, sg::kInt64));
  gpu.cholesky(empty, l0, info0);
  EXPECT_EQ(info0.item(), 0.0);
  table.print(("cholesky " + std::string(sg::dtype_name(dtype))).c_str());
#endif
}

TEST_P(LinalgCuda, TriangularInverseMatchesCpu) {
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
#if defined(SG_WITH_CUDA)
  const sg::DType dtype = GetParam();
  sg::detail::Backend& cpu = sg::detail::cpu_backend();
  sg::detail::Backend& gpu = sg::detail::cuda_backend(0);
  ErrorTable table;
  uint64_t seed = 200;
  for (const int64_t n : test_sizes()) {
    for (int variant = 0; variant < 4; ++variant) {
      const bool lower = variant & 1, unit = variant & 2;
      const Structure kind = lower ? Structure::LowerTriangular : Structure::UpperTriangular;
      const std::vector<double> tv = triangular_values(n, lower, unit, ++seed);
      sg::Tensor t_ref = sg::from_vector(tv, {n, n}, on(sg::kCPU, sg::kFloat64));
      sg::Tensor m_ref = sg::Tensor::empty({n, n}, on(sg::kCPU, sg::kFloat64));
      cpu.triangular_inverse(t_ref, kind, unit, m_ref);
      const sg::Tensor t = sg::from_vector(tv, {n, n}, on(kCuda0, dtype));
      sg::Tensor m = sg::Tensor::empty({n, n}, on(kCuda0, dtype));
      const std::vector<double> mv_ref = m_ref.to_vector_as<double>();
      for (const auto& [setting, edit] : settings()) {
        cu::LinalgTuningGuard guard(edit);
        gpu.triangular_inverse(t, kind, unit, m);
        const std::vector<double> mv = m.to_vector_as<double>();
        const double error = sgtest::rel_error(mv, mv_ref);
        const std::string name =
            std::string(lower ? "inverse lower" : "inverse upper") + (unit ? " unit" : "") + setting;
        table.add(name, n, error);
        EXPECT_LE(error, tolerance(dtype)) << name << " n=" << n;
        ASSERT_TRUE(zero_outside_triangle(mv, n, lower)) << name << " n=" << n;
      }
    }
  }
  table.print(("triangular_inverse " + std::string(sg::dtype_name(dtype))).c_str());
#endif
}

TEST_P(LinalgCuda, EmptyOperandsDoNothing) {
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const sg::DType dtype = GetParam();
  sg::detail::Backend& gpu = sg::detail::cuda_backend(0);
  const sg::Tensor t = sg::from_vector(triangular_values(5, true, false, 7), {5, 5}, on(kCuda0, dtype));
  sg::Tensor x = sg::Tensor::empty({5, 0}, on(kCuda0, dtype));
  gpu.solve_triangular(t, Structure::LowerTriangular, false, false, true, x, x);
  sg::Tensor y = sg::Tensor::empty({0, 5}, on(kCuda0, dtype));
  gpu.solve_triangular(t, Structure::LowerTriangular, false, false, false, y, y);
  const sg::Tensor t0 = sg::Tensor::empty({0, 0}, on(kCuda0, dtype));
  sg::Tensor x0 = sg::Tensor::empty({0, 3}, on(kCuda0, dtype));
  gpu.solve_triangular(t0, Structure::UpperTriangular, true, false, true, x0, x0);
  sg::Tensor m0 = sg::Tensor::empty({0, 0}, on(kCuda0, dtype));
  gpu.triangular_inverse(t0, Structure::UpperTriangular, false, m0);
  sg::cuda::synchronize();
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LinalgCuda, ::testing::Values(sg::kFloat32, sg::kFloat64), dtype_name);

}  // namespace
