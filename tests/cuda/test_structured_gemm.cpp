// The CUDA structured GEMM against the CPU float64 reference (ops/cpu/reference_gemm.cpp):
// every operand descriptor (Dense / Upper / Lower / Symmetric, stored transposed or not) on
// each side, every output mask, sizes that are and are not tile multiples, rectangular Dense
// operands, float32, float64 and TF32, through the checks of gemm_check.h (poisoned outputs,
// random values outside the structures). Also the host planner's invariants (no GPU needed).
#include "test_util.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "gemm_check.h"
#include "ops/backend.h"
#include "ops/output_pool.h"
#include "ops/cpu/cpu_gemm.h"
#if defined(SG_WITH_CUDA)
#include <cuda_runtime.h>

#include "cuda/gemm/plan_cache.h"
#include "cuda/gemm/tuning.h"
#include "cuda/structured_gemm.h"
#endif

namespace {

#if defined(SG_WITH_CUDA)
namespace cu = sg::detail::cuda;

/// Changes the options of every later product (each test puts the defaults back as it goes).
template <class Edit>
void set_option(Edit edit) {
  cu::GemmTuning options = cu::gemm_tuning();
  edit(options);
  cu::set_gemm_tuning(options);
}
#endif

using namespace sgtest::gemm;
using sg::Structure;
using sg::detail::GemmProblem;

const sg::Device kCuda0{sg::DeviceType::CUDA, 0};

/// float32 (exact: on its default loops, the FP64 tensor cores for the large tiles on compute
/// capability 9.0 and FFMA for the small ones; forced to FFMA; on the FP64 tensor cores at every
/// size, where they run, with the operands read in place and with the Symmetric and outer-major
/// ones copied k-major first at every size — the copies poisoned with NaN beforehand), float64 (on
/// its default loops, the FP64 tensor cores or DFMA by the plans' estimates; forced to DFMA; on
/// the FP64 tensor cores at every size, where they run), and float32 in TF32 mode: on its default tensor-core loop (wgmma
/// with TMA copies on an sm_90a build on compute capability 9.0, else mma.sync) with the
/// k-major and Symmetric operands read in place (relayout off) and copied outer-major first
/// (relayout on at every size that has TMA copies), on the wgmma loop with every tile
/// register-staged, and forced to mma.sync.
/// The loop of exact float32 and float64 (cu::Fp32Loop, cu::Fp64Loop in a CUDA build; the CPU-only
/// build has none): Fma is FFMA or DFMA.
enum class ExactLoop { Auto, Fma, Dmma };

#if defined(SG_WITH_CUDA)
/// Sets the loops of exact float32 and of float64 as `loop` says.
void apply(ExactLoop loop, cu::GemmTuning& o) {
  o.fp32_loop = loop == ExactLoop::Fma ? cu::Fp32Loop::Fma : loop == ExactLoop::Dmma ? cu::Fp32Loop::Dmma
                                                                                    : cu::Fp32Loop::Auto;
  o.fp64_loop = loop == ExactLoop::Fma ? cu::Fp64Loop::Dfma : loop == ExactLoop::Dmma ? cu::Fp64Loop::Dmma
                                                                                     : cu::Fp64Loop::Auto;
}
#endif

struct GemmPrecision {
  sg::DType dtype;
  bool tf32;
  bool mma_sync = false;
  bool staged = false;
  bool relayout = false;
  ExactLoop exact_loop = ExactLoop::Auto;
};

class CudaGemm : public ::testing::TestWithParam<GemmPrecision> {
 protected:
  void SetUp() override {
    SG_SKIP_IF_UNAVAILABLE(kCuda0);
    g_tf32 = GetParam().tf32;
    sg::set_matmul_precision(g_tf32 ? sg::Precision::TF32 : sg::Precision::Float32);
#if defined(SG_WITH_CUDA)
    const GemmPrecision& precision = GetParam();
    set_option([&](cu::GemmTuning& o) {
      o.tf32_loop = precision.mma_sync ? cu::Tf32Loop::MmaSync
                    : precision.staged ? cu::Tf32Loop::WgmmaStaged
                                       : cu::Tf32Loop::Auto;
      o.relayout = precision.relayout ? cu::Choice::Always : cu::Choice::Never;
      o.poison_copies = precision.relayout;
      apply(precision.exact_loop, o);
    });
#endif
    g_max_rel_error = 0;
  }
  void TearDown() override {
    // The measured figure, for docs/performance.md (largest relative Frobenius error).
    if (g_max_rel_error > 0) {
      std::printf("[ measured ] largest relative error of this test's products: %.3g\n", g_max_rel_error);
      RecordProperty("max_rel_error", std::to_string(g_max_rel_error));
    }
    g_tf32 = false;
    sg::set_matmul_precision(sg::Precision::Float32);
#if defined(SG_WITH_CUDA)
    cu::set_gemm_tuning(cu::GemmTuning{});
#endif
  }
  sg::DType dtype() const { return GetParam().dtype; }
};

/// The sizes of the descriptor sweep; SG_TEST_SIZES="17,255" narrows it (the device script
/// does so under compute-sanitizer racecheck, which runs each launch hundreds of times slower).
std::vector<int64_t> sweep_sizes() {
  std::vector<int64_t> sizes = {1, 2, 17, 31, 64, 127, 128, 129, 255};
  if (const char* env = std::getenv("SG_TEST_SIZES"); env != nullptr && *env != '\0') {
    sizes.clear();
    std::stringstream in(env);
    std::string item;
    while (std::getline(in, item, ',')) sizes.push_back(std::stoll(item));
  }
  return sizes;
}

TEST_P(CudaGemm, EveryDescriptorAndMaskAtSmallSizes) {
  std::mt19937_64 rng(1);
  for (int64_t n : sweep_sizes()) check_every_descriptor(kCuda0, n, dtype(), rng);
}

TEST_P(CudaGemm, RectangularDenseOperandsBesideStructuredOnes) {
  std::mt19937_64 rng(2);
  const sg::DType dtype = this->dtype();
  for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{1, 7}, {17, 300}, {129, 31}, {255, 1}, {64, 1000}}) {
    for (const Variant& s : kVariants) {
      if (s.structure == Structure::Dense) continue;
      for (bool dense_trans : {false, true}) {
        // Structured(n×n) · Dense(n×m)
        GemmProblem left = square(n, s, {Structure::Dense, dense_trans}, Structure::Dense, 0.5);
        left.n = m;
        SG_EXPECT_PRODUCT(kCuda0, left, dtype, rng);
        // Dense(m×n) · Structured(n×n)
        GemmProblem right = square(n, {Structure::Dense, dense_trans}, s, Structure::Dense);
        right.m = m;
        SG_EXPECT_PRODUCT(kCuda0, right, dtype, rng);
      }
    }
    // Dense·Dense with an Upper mask over a rectangular inner dimension (triu(G·Bᵀ) shapes).
    GemmProblem masked = square(n, {Structure::Dense, false}, {Structure::Dense, true}, Structure::UpperTriangular);
    masked.k = m;
    SG_EXPECT_PRODUCT(kCuda0, masked, dtype, rng);
  }
}

TEST_P(CudaGemm, PaddedLeadingDimensions) {
  // Storage rows longer than the operands (ld > width). Four extra elements keep float32 rows
  // 16-byte aligned: the vector paths take them, and in TF32 on sm_90a so do the TMA copies of
  // outer-major operands, whose tensor maps carry the row stride. One extra element leaves
  // the rows unaligned: the per-element path. Sizes past one 128 tile, so full fast-path tiles
  // exist, and an inner dimension that is not a tile multiple.
  std::mt19937_64 rng(6);
  const sg::DType dtype = this->dtype();
  const Variant dense{Structure::Dense, false}, dense_t{Structure::Dense, true};
  const Variant upper{Structure::UpperTriangular, false}, lower_t{Structure::LowerTriangular, true};
  const Variant symmetric{Structure::Symmetric, false};
  for (int64_t pad : {1, 4}) {
    SG_EXPECT_PRODUCT_PADDED(kCuda0, square(300, upper, upper, Structure::UpperTriangular), dtype, rng, pad);
    SG_EXPECT_PRODUCT_PADDED(kCuda0, square(300, dense, lower_t, Structure::UpperTriangular), dtype, rng, pad);
    SG_EXPECT_PRODUCT_PADDED(kCuda0, square(300, dense_t, upper, Structure::Dense), dtype, rng, pad);
    SG_EXPECT_PRODUCT_PADDED(kCuda0, square(300, symmetric, dense, Structure::Dense), dtype, rng, pad);
    GemmProblem gram_shaped = square(300, dense, dense_t, Structure::UpperTriangular);
    gram_shaped.k = 333;
    SG_EXPECT_PRODUCT_PADDED(kCuda0, gram_shaped, dtype, rng, pad);
  }
}

TEST_P(CudaGemm, LargeMatmulTableProductsAt1000And1024) {
  std::mt19937_64 rng(3);
  for (int64_t n : {1000, 1024})
    for (const GemmProblem& p : matmul_table_products(n)) SG_EXPECT_PRODUCT(kCuda0, p, dtype(), rng);
}

TEST_P(CudaGemm, LargeMatmulTableProductsAt4096) {
  // (The k-major copies of exact float32 are size-blind: 1000 and 1024 check them, and the
  // float32_dmma instance checks their loop here; another sweep at 4096 costs a minute of CPU
  // reference.)
  if (!GetParam().tf32 && GetParam().relayout)
    GTEST_SKIP() << "float32_dmma_copied: the copies are checked at 1000 and 1024, their loop at 4096 by float32_dmma";
  if (GetParam().dtype == sg::kFloat64 && GetParam().exact_loop != ExactLoop::Auto)
    GTEST_SKIP() << "a forced float64 loop: its loops are checked at 1000 and 1024, the default ones at 4096 by float64";
  std::mt19937_64 rng(4);
  for (const GemmProblem& p : matmul_table_products(4096)) SG_EXPECT_PRODUCT(kCuda0, p, dtype(), rng);
}

TEST_P(CudaGemm, MatmulIssuedProductsWithTheirInvariantsAt2048) {
  // The products as sg::matmul issues them: operands vouched for, and every kernel choice on
  // Auto as in the library (the fixture runs relayout Never or Always). 2048 is where the
  // relayout copies, the tall kernel and the split plans all start to run.
  // One instance per precision as the library runs it: the others force a loop or a relayout
  // setting that this test overrides or that matmul never picks on its own where wgmma runs.
  const GemmPrecision& precision = GetParam();
  if (precision.exact_loop != ExactLoop::Auto || precision.relayout || precision.mma_sync || precision.staged)
    GTEST_SKIP() << "a forced loop or relayout: the default float32, float64 and tf32 instances run this at 2048";
#if defined(SG_WITH_CUDA)
  set_option([&](cu::GemmTuning& o) { o.relayout = cu::Choice::Auto; });
#endif
  std::mt19937_64 rng(12);
  for (const GemmProblem& p : matmul_issued_products(2048)) SG_EXPECT_PRODUCT(kCuda0, p, dtype(), rng);
}

TEST_P(CudaGemm, RepeatedLaunchesOfOnePlanAreBitwiseIdentical) {
  // Split-K sums its partials in chunk order, so the result must not depend on which chunk
  // of a tile finishes last; and the arrival counters must be reset for the next launch.
  const sg::DType dtype = this->dtype();
  const int64_t n = 1024;
  auto opts = sg::TensorOptions().dtype(dtype).device(kCuda0);
  sg::UpperTriangular a = sg::UpperTriangular::randn(n, opts), b = sg::UpperTriangular::randn(n, opts);
  const std::vector<double> first = sg::matmul(a, b).to_vector();
  for (int rep = 0; rep < 5; ++rep) ASSERT_EQ(sg::matmul(a, b).to_vector(), first) << "launch " << rep + 2;
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaGemm,
                         ::testing::Values(GemmPrecision{sg::kFloat32, false},
                                           GemmPrecision{sg::kFloat32, false, false, false, false,
                                                         ExactLoop::Fma},
                                           GemmPrecision{sg::kFloat32, false, false, false, false,
                                                         ExactLoop::Dmma},
                                           GemmPrecision{sg::kFloat32, false, false, false, true,
                                                         ExactLoop::Dmma},
                                           GemmPrecision{sg::kFloat64, false},
                                           GemmPrecision{sg::kFloat64, false, false, false, false,
                                                         ExactLoop::Fma},
                                           GemmPrecision{sg::kFloat64, false, false, false, false,
                                                         ExactLoop::Dmma},
                                           GemmPrecision{sg::kFloat32, true},
                                           GemmPrecision{sg::kFloat32, true, false, false, true},
                                           GemmPrecision{sg::kFloat32, true, false, true},
                                           GemmPrecision{sg::kFloat32, true, true}),
                         [](const testing::TestParamInfo<GemmPrecision>& info) {
                           if (info.param.tf32)
                             return std::string(info.param.mma_sync ? "tf32_mma_sync"
                                                : info.param.staged   ? "tf32_staged"
                                                : info.param.relayout ? "tf32_relayout"
                                                                      : "tf32");
                           const ExactLoop loop = info.param.exact_loop;
                           return std::string(sg::dtype_name(info.param.dtype)) +
                                  (loop == ExactLoop::Fma    ? "_fma"
                                   : loop == ExactLoop::Dmma ? "_dmma"
                                                             : "") +
                                  (info.param.relayout ? "_copied" : "");
                         });

// ---- TF32 mode through the public API ---------------------------------------------------------

TEST(MatmulPrecision, Tf32AppliesToFloat32ProductsOnCudaOnly) {
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const int64_t n = 512;
  sg::manual_seed(5);
  auto f64 = sg::TensorOptions().dtype(sg::kFloat64);
  sg::Tensor u64 = sg::UpperTriangular::randn(n, f64), v64 = sg::UpperTriangular::randn(n, f64);
  sg::Tensor d64 = sg::randn({n, n}, f64), e64 = sg::randn({n, n}, f64);
  const std::vector<double> upper_ref = sg::matmul(u64, v64).to_vector();
  const std::vector<double> dense_ref = sg::matmul(d64, e64).to_vector();
  auto on_cuda = [&](const sg::Tensor& t, sg::DType dtype) { return t.to(dtype).to(kCuda0); };
  struct Errors {
    double upper, dense, upper_f64, upper_cpu;
  };
  auto measure = [&](sg::Precision precision) {
    sg::set_matmul_precision(precision);
    Errors e{};
    e.upper = sgtest::rel_error(sg::matmul(on_cuda(u64, sg::kFloat32), on_cuda(v64, sg::kFloat32)).to_vector(), upper_ref);
    e.dense = sgtest::rel_error(sg::matmul(on_cuda(d64, sg::kFloat32), on_cuda(e64, sg::kFloat32)).to_vector(), dense_ref);
    e.upper_f64 = sgtest::rel_error(sg::matmul(on_cuda(u64, sg::kFloat64), on_cuda(v64, sg::kFloat64)).to_vector(), upper_ref);
    e.upper_cpu = sgtest::rel_error(sg::matmul(u64.to(sg::kFloat32), v64.to(sg::kFloat32)).to_vector(), upper_ref);
    return e;
  };
  const Errors exact = measure(sg::Precision::Float32);
  const Errors tf32 = measure(sg::Precision::TF32);
  sg::set_matmul_precision(sg::Precision::Float32);
  EXPECT_EQ(sg::matmul_precision(), sg::Precision::Float32);
  // Exact float32 lands near 1e-7; TF32 rounds inputs to 10 mantissa bits: near 3e-4.
  EXPECT_LT(exact.upper, 1e-5);
  EXPECT_LT(exact.dense, 1e-5);
  EXPECT_GT(tf32.upper, 10 * exact.upper) << "structured product did not run in TF32";
  EXPECT_GT(tf32.dense, 10 * exact.dense) << "cuBLAS product did not run in TF32";
  EXPECT_LT(tf32.upper, 2e-3);
  EXPECT_LT(tf32.dense, 2e-3);
  // float64 and the CPU backend ignore the setting.
  EXPECT_EQ(tf32.upper_f64, exact.upper_f64);
  EXPECT_LT(tf32.upper_f64, 1e-12);
  EXPECT_EQ(tf32.upper_cpu, exact.upper_cpu);
}

#if defined(SG_WITH_CUDA)
/// Exact products for the scope of one test: float32 precision, problems built without TF32 (g_tf32),
/// the default options; the same again at its end, an early GTEST_SKIP's included.
class ScopedExact {
 public:
  ScopedExact() { reset(); }
  ~ScopedExact() { reset(); }
  ScopedExact(const ScopedExact&) = delete;
  ScopedExact& operator=(const ScopedExact&) = delete;

 private:
  static void reset() {
    g_tf32 = false;
    sg::set_matmul_precision(sg::Precision::Float32);
    cu::set_gemm_tuning(cu::GemmTuning{});
  }
};

/// TF32 mode on `loop` with relayout `relayout` for the scope of one test; everything back to
/// the exact defaults at its end (ScopedExact).
class ScopedTf32 : ScopedExact {
 public:
  explicit ScopedTf32(cu::Tf32Loop loop = cu::Tf32Loop::Auto, cu::Choice relayout = cu::Choice::Auto) {
    g_tf32 = true;
    sg::set_matmul_precision(sg::Precision::TF32);
    set_option([&](cu::GemmTuning& o) {
      o.tf32_loop = loop;
      o.relayout = relayout;
      o.poison_copies = true;  // a product reading what a copy does not hold fails
    });
  }
};

/// Whether TF32 products of device 0 run on the wgmma loop (an sm_90a build on compute
/// capability 9.0).
bool wgmma_loop_runs() {
  GemmProblem probe = square(300, {Structure::UpperTriangular, false}, {Structure::UpperTriangular, false}, Structure::UpperTriangular);
  probe.tf32 = true;
  probe.lda = probe.ldb = probe.ldc = probe.n;
  return cu::structured_gemm_plan(probe, sg::kFloat32, 0).config == cu::GemmTileConfig::Float32Tf32Wgmma;
}

/// Upper·Upper operands of order 200 with infinities and a NaN inside A's structure (rows 3, 5, 9),
/// and the float64 reference, which sums k = i … j only (the structure's non-zeros).
struct PoisonedUpperProduct {
  static constexpr int64_t n = 200;
  const std::vector<int64_t> poisoned_rows = {3, 5, 9};
  sg::Tensor a, b;  // float64, on the CPU
  std::vector<double> ref;

  PoisonedUpperProduct() {
    auto f64 = sg::TensorOptions().dtype(sg::kFloat64);
    std::vector<double> av = sg::UpperTriangular::randn(n, f64).to_vector();
    const std::vector<double> bv = sg::UpperTriangular::randn(n, f64).to_vector();
    av[3 * n + 10] = std::numeric_limits<double>::infinity();   // row 3: ±inf from column 10 on
    av[5 * n + 7] = std::numeric_limits<double>::quiet_NaN();   // row 5: NaN from column 7 on
    av[9 * n + 150] = -std::numeric_limits<double>::infinity();  // row 9: ±inf from column 150 on
    a = sg::as_upper(sg::from_vector(av, {n, n}, f64));
    b = sg::as_upper(sg::from_vector(bv, {n, n}, f64));
    ref.assign(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i; j < n; ++j)
        for (int64_t k = i; k <= j; ++k) ref[i * n + j] += av[i * n + k] * bv[k * n + j];
  }

  /// Checks a computed product: every NaN and infinity of the reference exactly, the rows without
  /// them finite and within `abs_tol` + `rel_tol`·|ref|. (Outputs of a poisoned row where the
  /// reference is finite are not checked: the kernels multiply the infinity by the structural zeros
  /// inside its tile, inf · 0 = NaN, where the reference skips them.)
  void check(const std::vector<double>& out, double abs_tol, double rel_tol, const std::string& what) const {
    int nonfinite = 0;
    for (int64_t i = 0; i < n; ++i) {
      const bool poisoned = std::count(poisoned_rows.begin(), poisoned_rows.end(), i) > 0;
      for (int64_t j = 0; j < n; ++j) {
        const double r = ref[i * n + j], o = out[i * n + j];
        if (std::isnan(r)) {
          EXPECT_TRUE(std::isnan(o)) << what << ", (" << i << ", " << j << "): " << o;
          ++nonfinite;
        } else if (std::isinf(r)) {
          EXPECT_EQ(o, r) << what << ", (" << i << ", " << j << ")";
          ++nonfinite;
        } else if (!poisoned) {
          ASSERT_TRUE(std::isfinite(o)) << what << ", (" << i << ", " << j << ")";
          EXPECT_NEAR(o, r, abs_tol + rel_tol * std::fabs(r)) << what << ", (" << i << ", " << j << ")";
        }
      }
    }
    EXPECT_EQ(nonfinite, (n - 10) + (n - 7) + (n - 150)) << what;
  }
};

TEST(MatmulPrecision, InfinitiesAndNaNsPropagateInEveryMode) {
  // The TF32 loops round operands in registers (the wgmma loop by adding half a TF32 ulp and
  // letting the tensor cores drop the low bits): an infinity must stay an infinity and a NaN a
  // NaN, and rows without them must stay finite and accurate.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const PoisonedUpperProduct product;
  // Modes: exact float32 (on the FP64 tensor cores where they run, and mode 7 on FFMA); TF32 on
  // the default loop (on sm_90a, the directly TMA'd tiles reach the tensor cores unrounded:
  // truncation keeps infinities and the quiet NaN too; the raw TMA'd ones are rounded when
  // transposed); with TMA for the outer-major operand only; on the register-staged wgmma loop;
  // on mma.sync; on the default loop with B copied outer-major first (relayout), so that its
  // tiles come directly too (the pipelined kernel); the same on the one-barrier-per-step instance
  // it replaced.
  const cu::Tf32Loop loops[8] = {
      cu::Tf32Loop::Auto, cu::Tf32Loop::Auto,
      cu::Tf32Loop::WgmmaTmaOuterMajor, cu::Tf32Loop::WgmmaStaged,
      cu::Tf32Loop::MmaSync, cu::Tf32Loop::Auto,
      cu::Tf32Loop::WgmmaBarrierPerStep, cu::Tf32Loop::Auto};
  const ScopedTf32 restore_defaults_at_end;
  for (int mode = 0; mode < 8; ++mode) {
    const bool exact = mode == 0 || mode == 7;
    sg::set_matmul_precision(exact ? sg::Precision::Float32 : sg::Precision::TF32);
    set_option([&](cu::GemmTuning& o) { o.fp32_loop = mode == 7 ? cu::Fp32Loop::Fma : cu::Fp32Loop::Auto; });
    set_option([&](cu::GemmTuning& o) { o.tf32_loop = loops[mode]; });
    set_option([&](cu::GemmTuning& o) { o.relayout = mode >= 5 ? cu::Choice::Always
                                                     : cu::Choice::Never; });
    const std::vector<double> out =
        sg::matmul(product.a.to(sg::kFloat32).to(kCuda0), product.b.to(sg::kFloat32).to(kCuda0)).to_vector();
    product.check(out, 0.02, 0.01, "mode " + std::to_string(mode));
  }
}

#endif

// ---- the host planner (pure host code: runs without a GPU) --------------------------------

#if defined(SG_WITH_CUDA)
using cu::GemmTileConfig;
using cu::GemmWorkPlan;

/// Whether device 0 runs this build's sm_90a code (compute capability 9.0 and an sm_90a build):
/// the wgmma loops and the FP64 MMA loop live there.
bool sm90a_code_runs() {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess)
    return false;
#if defined(SG_CUDA_SM90A)
  return major == 9 && minor == 0;
#else
  return false;
#endif
}

/// Whether device 0 runs the FP64 tensor-core loops: sm_90a code and full-rate float64.
bool fp64_tensor_cores_run() {
  int ratio = 0;
  return sm90a_code_runs() &&
         cudaDeviceGetAttribute(&ratio, cudaDevAttrSingleToDoublePrecisionPerfRatio, 0) == cudaSuccess && ratio <= 2;
}

TEST(MatmulPrecision, Float64InfinitiesAndNaNsPropagateOnBothLoops) {
  // float64 on DFMA and, where they run, on the FP64 tensor cores (each forced; one launch there):
  // the poisoned product of the float32 modes, its finite rows to float64 accuracy.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const PoisonedUpperProduct product;
  const ScopedExact exact;
  const bool fp64_cores = fp64_tensor_cores_run();
  for (const cu::Fp64Loop loop : {cu::Fp64Loop::Dfma, cu::Fp64Loop::Dmma}) {
    if (loop == cu::Fp64Loop::Dmma && !fp64_cores) continue;  // (forced, it would run DFMA again)
    set_option([&](cu::GemmTuning& o) { o.fp64_loop = loop; });
    const int64_t launches = cu::gemm_stats().dmma_f64_launches;
    const std::vector<double> out = sg::matmul(product.a.to(kCuda0), product.b.to(kCuda0)).to_vector();
    EXPECT_EQ(cu::gemm_stats().dmma_f64_launches - launches, loop == cu::Fp64Loop::Dmma ? 1 : 0);
    product.check(out, 1e-12, 1e-12, loop == cu::Fp64Loop::Dfma ? "DFMA" : "FP64 tensor cores");
  }
}

TEST(CudaGemmTf32Loop, EachLoopRunsWhereItShould) {
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major < 8) GTEST_SKIP() << "no TF32 tensor cores on this device";
  GemmProblem p = square(300, {Structure::UpperTriangular, false}, {Structure::UpperTriangular, false}, Structure::UpperTriangular);
  p.tf32 = true;
  p.lda = p.ldb = p.ldc = p.n;
  const GemmTileConfig expected = sm90a_code_runs() ? GemmTileConfig::Float32Tf32Wgmma : GemmTileConfig::Float32Tf32;
  EXPECT_EQ(cu::structured_gemm_plan(p, sg::kFloat32, 0).config, expected);
  set_option([&](cu::GemmTuning& o) { o.tf32_loop = cu::Tf32Loop::WgmmaStaged; });
  EXPECT_EQ(cu::structured_gemm_plan(p, sg::kFloat32, 0).config, expected);
  set_option([&](cu::GemmTuning& o) { o.tf32_loop = cu::Tf32Loop::WgmmaTmaOuterMajor; });
  EXPECT_EQ(cu::structured_gemm_plan(p, sg::kFloat32, 0).config, expected);
  set_option([&](cu::GemmTuning& o) { o.tf32_loop = cu::Tf32Loop::WgmmaBarrierPerStep; });
  EXPECT_EQ(cu::structured_gemm_plan(p, sg::kFloat32, 0).config, expected);
  set_option([&](cu::GemmTuning& o) { o.tf32_loop = cu::Tf32Loop::MmaSync; });
  EXPECT_EQ(cu::structured_gemm_plan(p, sg::kFloat32, 0).config, GemmTileConfig::Float32Tf32);
  set_option([&](cu::GemmTuning& o) { o.tf32_loop = cu::Tf32Loop::Auto; });
}

/// An FP64 tensor-core loop and the CUDA-core loop it stands beside, for one dtype.
struct TensorCoreLoop {
  sg::DType dtype;
  GemmTileConfig cores, fallback;
  int64_t cu::GemmStats::*launches;  // the counter of its launches
  double bound;                      // relative error against the reference
  uint64_t seed;
};

/// Upper·Upper at 4096 plans on `loop`'s tensor cores where they run (sm_90a code, full-rate
/// float64), under Auto and forced, and on the CUDA cores elsewhere and when they are forced; on the
/// tensor cores (forced at every size) every product of the matmul table, with edge tiles (300,
/// 1000), takes one launch and matches the reference with C poisoned.
void expect_tensor_core_loop(const TensorCoreLoop& loop) {
  const bool fp64_cores = fp64_tensor_cores_run();
  const ScopedExact exact;
  GemmProblem p = square(4096, {Structure::UpperTriangular, false}, {Structure::UpperTriangular, false}, Structure::UpperTriangular);
  p.lda = p.ldb = p.ldc = p.n;
  for (ExactLoop choice : {ExactLoop::Auto, ExactLoop::Fma, ExactLoop::Dmma}) {
    set_option([&](cu::GemmTuning& o) { apply(choice, o); });
    EXPECT_EQ(cu::structured_gemm_plan(p, loop.dtype, 0).config,
              fp64_cores && choice != ExactLoop::Fma ? loop.cores : loop.fallback)
        << "loop " << static_cast<int>(choice);
  }
  if (!fp64_cores) GTEST_SKIP() << "no FP64 tensor-core loop on this device or build (the plans are checked above)";
  std::mt19937_64 rng(loop.seed);
  for (int64_t n : {300, 1000}) {
    for (const GemmProblem& q : matmul_table_products(n)) {
      GemmProblem planned = q;  // (run_and_compare sets the leading dimensions itself)
      planned.lda = planned.ldb = planned.ldc = n;
      ASSERT_EQ(cu::structured_gemm_plan(planned, loop.dtype, 0).config, loop.cores) << describe(q, loop.dtype);
      const int64_t launches = cu::gemm_stats().*loop.launches;
      const Checked checked = run_and_compare(kCuda0, q, loop.dtype, rng);
      EXPECT_EQ(cu::gemm_stats().*loop.launches, launches + 1) << describe(q, loop.dtype);
      EXPECT_TRUE(checked.failure.empty()) << describe(q, loop.dtype) << ": " << checked.failure;
      EXPECT_LE(checked.rel_error, loop.bound) << describe(q, loop.dtype);
    }
  }
}

TEST(CudaGemmFp32Loop, ExactFloat32RunsOnTheFp64TensorCoresWhereTheyRunAtFullRate) {
  // Exact float32 takes the FP64 tensor cores on an sm_90a build on compute capability 9.0 with
  // full-rate float64, FFMA elsewhere and when forced. On the FP64 loop (forced at every size)
  // every product of the matmul table matches the float64 reference to about the float32
  // rounding of the result (products exact, sums in float64): a relative error of at most
  // 2⁻²⁴ ≈ 6e-8 per element, plus the float64 sums' own, far smaller.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  expect_tensor_core_loop(
      {sg::kFloat32, GemmTileConfig::Float32Dmma, GemmTileConfig::Float32Large, &cu::GemmStats::dmma_launches, 1e-7, 9});
}

TEST(CudaGemmFp64Loop, Float64RunsOnTheFp64TensorCoresWhereTheyRunAtFullRate) {
  // float64 plans on the FP64 tensor cores (128 tiles) beside DFMA (64 tiles), and at 4096 the
  // tensor cores' plan wins; the float64 bound of the suite.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  expect_tensor_core_loop({sg::kFloat64, GemmTileConfig::Float64Dmma, GemmTileConfig::Float64,
                           &cu::GemmStats::dmma_f64_launches, tolerance(sg::kFloat64), 10});
}

TEST(CudaGemmFp64Loop, EachDtypesLoopOptionKeepsItsOwnPlans) {
  // Plans are cached per shape and per the loop option of their own dtype. Forcing exact float32
  // onto the tensor cores leaves float64's plan as it is by default; then, with float64 forced onto
  // them and float32 onto FFMA, each dtype gets a plan of its own forced loop, not the plan cached
  // under the other's option.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  if (!fp64_tensor_cores_run()) GTEST_SKIP() << "no FP64 tensor-core loop on this device or build";
  const ScopedExact exact;
  GemmProblem p = square(512, {Structure::UpperTriangular, false}, {Structure::UpperTriangular, false}, Structure::UpperTriangular);
  p.lda = p.ldb = p.ldc = p.n;
  const GemmTileConfig float64_default = cu::structured_gemm_plan(p, sg::kFloat64, 0).config;
  set_option([&](cu::GemmTuning& o) { o.fp32_loop = cu::Fp32Loop::Dmma; });
  EXPECT_EQ(cu::structured_gemm_plan(p, sg::kFloat64, 0).config, float64_default);
  EXPECT_EQ(cu::structured_gemm_plan(p, sg::kFloat32, 0).config, GemmTileConfig::Float32Dmma);
  set_option([&](cu::GemmTuning& o) {
    o.fp32_loop = cu::Fp32Loop::Fma;
    o.fp64_loop = cu::Fp64Loop::Dmma;
  });
  EXPECT_EQ(cu::structured_gemm_plan(p, sg::kFloat64, 0).config, GemmTileConfig::Float64Dmma);
  const GemmTileConfig float32_fma = cu::structured_gemm_plan(p, sg::kFloat32, 0).config;
  EXPECT_TRUE(float32_fma == GemmTileConfig::Float32Large || float32_fma == GemmTileConfig::Float32Small)
      << cu::tile_config_name(float32_fma);
}

/// Relative errors of C = A·B and of dA, dB for the loss Σ C ⊙ W, computed in float32 on cuda:0 at
/// `precision`, against the same computed in float64 on the CPU.
std::array<double, 3> matmul_errors(sg::Precision precision, const sg::Tensor& a, const sg::Tensor& b,
                                    const sg::Tensor& w) {
  auto run = [&](sg::Device device, sg::DType dtype) {
    sg::Tensor x = a.to(dtype).to(device).clone().requires_grad_();
    sg::Tensor y = b.to(dtype).to(device).clone().requires_grad_();
    sg::Tensor c = sg::matmul(x, y);
    sg::sum(c * w.to(dtype).to(device)).backward();
    return std::array<std::vector<double>, 3>{c.to(sg::kCPU).to_vector(), x.grad().to(sg::kCPU).to_vector(),
                                              y.grad().to(sg::kCPU).to_vector()};
  };
  sg::set_matmul_precision(sg::Precision::Float32);
  const auto reference = run(sg::kCPU, sg::kFloat64);
  sg::set_matmul_precision(precision);
  const auto got = run(kCuda0, sg::kFloat32);
  std::array<double, 3> errors{};
  for (size_t i = 0; i < errors.size(); ++i) errors[i] = sgtest::rel_error(got[i], reference[i]);
  return errors;
}

TEST(MatmulPrecision, EachProductRunsAtThePrecisionOfItsOwnCall) {
  // Products of one shape share cached plans, operand copies and pooled outputs: an exact float32
  // product after a TF32 one of its shape is exact again, forward and backward, and a TF32 product
  // after an exact one is TF32 again. Exact float32 lands near 1e-7 of the float64 reference and
  // TF32, which keeps 10 bits of each operand's mantissa, near 3e-4.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major < 8) GTEST_SKIP() << "no TF32 tensor cores on this device";
  const ScopedExact restore_defaults_at_end;
  const int64_t n = 1024;
  const sg::Tensor w = sg::randn({n, n}, sg::kFloat64), d = sg::randn({n, n}, sg::kFloat64);
  const sg::Tensor u = sg::UpperTriangular::randn(n, sg::kFloat64), v = sg::UpperTriangular::randn(n, sg::kFloat64);
  struct Case {
    const char* name;
    sg::Tensor a, b;
  };
  for (const Case& c : {Case{"Upper·Upper", u, v}, Case{"Dense·Upper", d, u}}) {
    for (const auto& order : {std::array{sg::Precision::TF32, sg::Precision::Float32},
                              std::array{sg::Precision::Float32, sg::Precision::TF32}}) {
      for (const sg::Precision precision : order) {
        const std::array<double, 3> errors = matmul_errors(precision, c.a, c.b, w);
        for (size_t i = 0; i < errors.size(); ++i) {
          SCOPED_TRACE(std::string(c.name) + (i == 0 ? " forward" : i == 1 ? " dA" : " dB") +
                       (precision == sg::Precision::TF32 ? " in TF32" : " in float32") +
                       (precision == order[0] ? " first" : " second"));
          if (precision == sg::Precision::Float32) {
            EXPECT_LT(errors[i], 1e-5);
          } else {
            EXPECT_GT(errors[i], 2e-5);
            EXPECT_LT(errors[i], 2e-3);
          }
        }
      }
    }
  }
}

TEST(CudaGemmFp64Loop, Float64ProductsOfStoredSymmetricMatricesRunOnDgemm) {
  // In float64 sg::matmul's Symmetric tensors hold their mirrors, so Sym·Dense, Dense·Sym and Sym·Sym
  // are Dense·Dense products and run on cuBLAS DGEMM: with the float64 loop forced onto the tensor
  // cores they take no structured launch, where Dense·Upper takes one; every result matches the CPU's.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  if (!fp64_tensor_cores_run()) GTEST_SKIP() << "no FP64 tensor-core loop (and launch counter) on this device or build";
  const ScopedExact exact;
  set_option([&](cu::GemmTuning& o) { o.fp64_loop = cu::Fp64Loop::Dmma; });
  const int64_t n = 1024;
  const auto f64 = sg::TensorOptions().dtype(sg::kFloat64);
  const sg::Tensor s = sg::Symmetric::randn(n, f64), t = sg::Symmetric::randn(n, f64), d = sg::randn({n, n}, f64);
  const sg::Tensor u = sg::UpperTriangular::randn(n, f64);
  struct Case {
    const char* name;
    sg::Tensor a, b;
    int64_t launches;  // on the FP64 tensor cores
  };
  for (const Case& c : {Case{"Sym·Dense", s, d, 0}, Case{"Dense·Sym", d, s, 0}, Case{"Sym·Sym", s, t, 0},
                        Case{"Dense·Upper", d, u, 1}}) {
    const int64_t before = cu::gemm_stats().dmma_f64_launches;
    const sg::Tensor got = sg::matmul(c.a.to(kCuda0), c.b.to(kCuda0));
    EXPECT_EQ(cu::gemm_stats().dmma_f64_launches - before, c.launches) << c.name;
    EXPECT_LE(sgtest::rel_error(got.to(sg::kCPU).to_vector(), sg::matmul(c.a, c.b).to_vector()), 1e-12) << c.name;
  }
}

TEST(CudaGemmFp32Loop, KMajorCopiesOfSymmetricAndOuterMajorOperands) {
  // On the FP64 loop a Symmetric or outer-major operand is copied k-major first where it pays
  // (OperandRelayout::Auto: from 1024 and 2048 on), always under Always, never under Never: one
  // copy per such operand, none for k-major ones, and every product matches the reference with
  // the copies poisoned with NaN first (a k-step read from where a copy holds nothing fails).
  // Sizes with a partial last tile and k-step (300, 1000) and whole tiles (1024); pad 1 makes
  // the operands' rows unaligned (the copies' rows are 16-byte aligned all the same).
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  if (!fp64_tensor_cores_run()) GTEST_SKIP() << "no FP64 tensor-core loop on this device or build";
  const ScopedTf32 restore_defaults_at_end(cu::Tf32Loop::Auto, cu::Choice::Always);
  sg::set_matmul_precision(sg::Precision::Float32);
  g_tf32 = false;
  set_option([&](cu::GemmTuning& o) { o.fp32_loop = cu::Fp32Loop::Dmma; });
  const Variant dense{Structure::Dense, false}, dense_t{Structure::Dense, true};
  const Variant upper{Structure::UpperTriangular, false}, lower_t{Structure::LowerTriangular, true};
  const Variant symmetric{Structure::Symmetric, false};
  struct Case {
    Variant a, b;
    Structure mask;
    int64_t copies;  // under Always
  };
  const Case cases[] = {
      {upper, upper, Structure::UpperTriangular, 1},            // forward: A outer-major
      {upper, lower_t, Structure::UpperTriangular, 2},          // dA = triu(G·Bᵀ): both outer-major
      {lower_t, upper, Structure::UpperTriangular, 0},          // dB = triu(Aᵀ·G): both k-major
      {symmetric, symmetric, Structure::Dense, 2},
      {symmetric, dense, Structure::Dense, 1},
      {dense, symmetric, Structure::Symmetric, 2},
      {dense_t, upper, Structure::Dense, 0},
      {dense, dense_t, Structure::UpperTriangular, 2},          // gram
  };
  std::mt19937_64 rng(31);
  for (int64_t n : {300, 1000, 1024}) {
    for (cu::Choice setting : {cu::Choice::Always, cu::Choice::Never,
                                        cu::Choice::Auto}) {
      set_option([&](cu::GemmTuning& o) { o.relayout = setting; });
      for (const Case& c : cases) {
        const GemmProblem p = square(n, c.a, c.b, c.mask);
        const int64_t expected = setting == cu::Choice::Always ? c.copies
                                 : setting == cu::Choice::Never ? 0
                                 : (c.a.structure == Structure::Symmetric ? (n >= 1024 ? 1 : 0) : 0) +
                                       (c.b.structure == Structure::Symmetric ? (n >= 1024 ? 1 : 0) : 0);
        for (int64_t pad : {0, 1}) {
          const int64_t before = cu::gemm_stats().operand_copies;
          SG_EXPECT_PRODUCT_PADDED(kCuda0, p, sg::kFloat32, rng, pad);
          EXPECT_EQ(cu::gemm_stats().operand_copies - before, expected) << describe(p, sg::kFloat32) << " pad=" << pad;
        }
      }
    }
  }
  // An empty k under Always: no copy (its grid would be empty), and C is all zeros.
  set_option([&](cu::GemmTuning& o) { o.relayout = cu::Choice::Always; });
  GemmProblem empty_k = square(64, dense, dense_t, Structure::UpperTriangular);
  empty_k.k = 0;
  const auto f32 = sg::TensorOptions().device(kCuda0);
  const sg::Tensor a = sg::randn({64, 1}, f32), b = sg::randn({64, 1}, f32);
  sg::Tensor c = sg::Tensor::empty({64, 64}, f32);
  c.fill_(std::nan(""));
  empty_k.a_data = a.data_ptr();
  empty_k.b_data = b.data_ptr();
  empty_k.c_data = c.data_ptr();
  empty_k.lda = empty_k.ldb = 1;
  empty_k.ldc = 64;
  const int64_t before = cu::gemm_stats().operand_copies;
  sg::detail::backend_for(kCuda0).gemm(empty_k, sg::kFloat32);
  EXPECT_EQ(cu::gemm_stats().operand_copies, before);
  for (double x : c.to_vector()) ASSERT_EQ(x, 0.0);
}

TEST(CudaGemmTf32Loop, OuterMajorTmaAblationMatchesTheReference) {
  // The benchmark's ablation (bench_gemm_cuda --tma-outer-major): TMA for the outer-major
  // Dense/Upper/Lower operands only, the k-major and Symmetric ones register-staged. Every
  // product of the matmul table at a size with full fast-path tiles and a partial last one.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major < 8) GTEST_SKIP() << "no TF32 tensor cores on this device";
  const ScopedTf32 tf32(cu::Tf32Loop::WgmmaTmaOuterMajor);
  std::mt19937_64 rng(8);
  for (const GemmProblem& p : matmul_table_products(300)) SG_EXPECT_PRODUCT(kCuda0, p, sg::kFloat32, rng);
}

TEST(CudaGemmPipelined, RunsTheProductsWhoseOperandsBothComeDirectly) {
  // The pipelined kernel (producer warp, consumer warpgroups, mbarrier ring) takes exactly the
  // wgmma products whose operands both have direct TMA maps only — outer-major Dense, Upper and
  // Lower operands — with at least one triangular, on the default loop, not under its ablation
  // (WgmmaBarrierPerStep); each product matches the reference either way. Sizes with edge tiles
  // and a last k-step that is not whole (300: rows and k beyond the operands come as the copies'
  // zeros), the diagonal-crossing steps (structural zeros written after the copy, the storage
  // beyond them random), and split tiles (640: dA's plan splits 3 tiles; the consumers' named
  // barrier in the partial-tile path).
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const Variant dense{Structure::Dense, false}, dense_t{Structure::Dense, true};
  const Variant upper{Structure::UpperTriangular, false}, upper_t{Structure::UpperTriangular, true};
  const Variant lower{Structure::LowerTriangular, false}, lower_t{Structure::LowerTriangular, true};
  const Variant symmetric{Structure::Symmetric, false};
  const ScopedTf32 tf32(cu::Tf32Loop::Auto, cu::Choice::Never);
  struct Case {
    GemmProblem p;
    bool pipelined;  // on the default loop
  };
  std::vector<Case> cases;
  for (int64_t n : {300, 640}) {
    cases.push_back({square(n, upper, lower_t, Structure::UpperTriangular), true});   // dA = triu(G·Bᵀ)
    cases.push_back({square(n, lower, upper_t, Structure::Dense), true});    // op(A) Lower, op(B) Upper
    cases.push_back({square(n, dense, lower_t, Structure::Dense), true});
    cases.push_back({square(n, upper, upper, Structure::UpperTriangular), false});    // B k-major
    cases.push_back({square(n, symmetric, dense_t, Structure::Dense), false});  // Symmetric: a raw map too
    cases.push_back({square(n, dense, dense_t, Structure::Symmetric), false});  // gram: both Dense
  }
  if (!wgmma_loop_runs())
    GTEST_SKIP() << "the pipelined kernel serves the wgmma loop, which this device or build does not run";
  std::mt19937_64 rng(10);
  for (cu::Tf32Loop loop : {cu::Tf32Loop::Auto, cu::Tf32Loop::WgmmaBarrierPerStep}) {
    set_option([&](cu::GemmTuning& o) { o.tf32_loop = loop; });
    for (const Case& c : cases) {
      const int64_t before = cu::gemm_stats().pipelined_launches;
      SG_EXPECT_PRODUCT(kCuda0, c.p, sg::kFloat32, rng);
      EXPECT_EQ(cu::gemm_stats().pipelined_launches - before, c.pipelined && loop == cu::Tf32Loop::Auto ? 1 : 0)
          << kind_name(c.p.a.structure) << (c.p.a.trans ? "ᵀ" : "") << "·" << kind_name(c.p.b.structure)
          << (c.p.b.trans ? "ᵀ" : "") << " at n = " << c.p.n;
    }
  }
}

TEST(CudaGemmPipelined, BarrierPerStepAblationMatchesTheReferenceOnCopiedOperands) {
  // The benchmark's ablation (bench_gemm_cuda --barrier-per-step) with relayout forced on, so
  // that nearly every product of the matmul table runs on the one-barrier-per-step instances
  // the pipelined kernel replaced (with and without diagonal-crossing copies).
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major < 8) GTEST_SKIP() << "no TF32 tensor cores on this device";
  const ScopedTf32 tf32(cu::Tf32Loop::WgmmaBarrierPerStep, cu::Choice::Always);
  std::mt19937_64 rng(11);
  const int64_t launches = cu::gemm_stats().pipelined_launches;
  for (const GemmProblem& p : matmul_table_products(300)) SG_EXPECT_PRODUCT(kCuda0, p, sg::kFloat32, rng);
  EXPECT_EQ(cu::gemm_stats().pipelined_launches, launches);
}

TEST(CudaGemmRegisterB, RunsTheProductsWhoseADirectAndBKMajorOneTriangular) {
  // The register-B kernel (the tile computed transposed, op(B)ᵀ as wgmma's register operand from
  // B's raw copies) takes exactly the wgmma products whose A comes by direct copies and whose B is
  // k-major, neither Symmetric, one Upper or Lower, on the default loop and not when turned off;
  // each product matches the reference either way. Sizes with edge tiles and a last k-step that is
  // not whole (300), split tiles (640: the transposed accumulators through the partial-tile path),
  // a rectangular Dense A, the diagonal-crossing steps of both operands (structural zeros written
  // into A's tile and B's raw tile, the storage beyond them random), and the products whose other
  // operand relayout copies first (Aᵀ·G, Sym·Upper: A copied, B read as it lies).
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const Variant dense{Structure::Dense, false};
  const Variant upper{Structure::UpperTriangular, false};
  const Variant lower{Structure::LowerTriangular, false}, lower_t{Structure::LowerTriangular, true};
  const Variant symmetric{Structure::Symmetric, false};
  const ScopedTf32 tf32;
  struct Case {
    GemmProblem p;
    cu::Choice relayout;
    cu::Choice setting;
    bool register_b;  // on the default loop
    int64_t copies;   // relayout copies then
  };
  const auto never = cu::Choice::Never, always = cu::Choice::Always;
  const auto on = cu::Choice::Auto, forced = cu::Choice::Always, off = cu::Choice::Never;
  std::vector<Case> cases;
  for (int64_t n : {300, 640}) {
    cases.push_back({square(n, upper, upper, Structure::UpperTriangular), never, on, true, 0});  // Upper·Upper forward
    cases.push_back({square(n, dense, upper, Structure::Dense), never, on, true, 0});
    cases.push_back({square(n, upper, dense, Structure::Dense), never, on, true, 0});
    cases.push_back({square(n, lower, upper, Structure::Dense), never, on, true, 0});
    cases.push_back({square(n, upper, lower, Structure::Dense), never, on, true, 0});
    cases.push_back({square(n, dense, lower, Structure::Dense), never, on, true, 0});
    cases.push_back({square(n, upper, upper, Structure::UpperTriangular), never, off, false, 0});
    cases.push_back({square(n, upper, upper, Structure::UpperTriangular), always, on, false, 1});  // B copied: forced relayout
    cases.push_back({square(n, upper, upper, Structure::UpperTriangular), always, forced, true, 0});
    cases.push_back({square(n, lower_t, upper, Structure::UpperTriangular), never, on, false, 0});   // dB: A k-major
    cases.push_back({square(n, lower_t, upper, Structure::UpperTriangular), always, forced, true, 1});  // A copied
    cases.push_back({square(n, lower_t, dense, Structure::Dense), always, forced, true, 1});  // dB of Upper·Dense
    cases.push_back({square(n, symmetric, upper, Structure::Dense), never, on, false, 0});  // A has a raw map too
    cases.push_back({square(n, symmetric, upper, Structure::Dense), always, forced, true, 1});
    cases.push_back({square(n, upper, symmetric, Structure::Dense), never, on, false, 0});
    cases.push_back({square(n, upper, lower_t, Structure::UpperTriangular), never, on, false, 0});  // dA: B outer-major
    cases.push_back({square(n, dense, dense, Structure::Dense), never, on, false, 0});     // no triangle
  }
  GemmProblem rectangular = square(300, dense, upper, Structure::Dense);
  rectangular.m = 520;
  cases.push_back({rectangular, never, on, true, 0});
  // A wide B (1280², few rows of A) takes it on Auto too.
  GemmProblem wide_b = square(1280, dense, upper, Structure::Dense);
  wide_b.m = 130;
  cases.push_back({wide_b, never, on, true, 0});
  // Everything on Auto: the forward on the kernel, no copy of B, where relayout's own rule would
  // copy it (2048) and where it would not (1024); turned off, B copied at 2048.
  cases.push_back({square(1024, upper, upper, Structure::UpperTriangular), cu::Choice::Auto, on, true, 0});
  cases.push_back({square(2048, upper, upper, Structure::UpperTriangular), cu::Choice::Auto, on, true, 0});
  cases.push_back({square(2048, upper, upper, Structure::UpperTriangular), cu::Choice::Auto, off, false, 1});
  if (!wgmma_loop_runs())
    GTEST_SKIP() << "the register-B kernel serves the wgmma loop, which this device or build does not run";
  set_option([&](cu::GemmTuning& o) { o.tall_tiles = cu::Choice::Never; });  // (its products whose A holds its zeros: CudaGemmTall)
  std::mt19937_64 rng(13);
  // B's k-step as one 3-D box where its rows hold whole 32-column blocks: n = 640; n = 300 with
  // rows padded to 320 (columns 300…319 of the box come from the padding and meet only output
  // columns past n); not with rows of 300 or 304 (four 2-D boxes, zero-filled past n). The tiles
  // go out by TMA stores (clipped at C's edges: 300) where C's rows are 16-byte aligned, and by
  // the threads' own stores where they are not (n = 302: C's rows of 302 floats, A's and B's
  // padded to 304).
  set_option([&](cu::GemmTuning& o) { o.relayout = cu::Choice::Never; });
  for (const auto& [n, pad, one_box] : {std::tuple<int64_t, int64_t, bool>{640, 0, true}, {300, 20, true},
                                        {300, 0, false}, {300, 4, false}, {302, 2, false}}) {
    const int64_t launches = cu::gemm_stats().register_b_launches, one_box_launches = cu::gemm_stats().raw_block_map_launches;
    const int64_t store_launches = cu::gemm_stats().tma_store_launches, mirror_launches = cu::gemm_stats().mirror_zero_launches;
    SG_EXPECT_PRODUCT_PADDED(kCuda0, square(n, upper, upper, Structure::UpperTriangular), sg::kFloat32, rng, pad);
    EXPECT_EQ(cu::gemm_stats().register_b_launches - launches, 1) << "n = " << n << ", pad " << pad;
    EXPECT_EQ(cu::gemm_stats().raw_block_map_launches - one_box_launches, one_box ? 1 : 0) << "n = " << n << ", pad " << pad;
    EXPECT_EQ(cu::gemm_stats().tma_store_launches - store_launches, n % 4 == 0 ? 1 : 0) << "n = " << n << ", pad " << pad;
    // The tiles below the diagonal written by their mirror tiles' blocks, with the TMA stores only.
    EXPECT_EQ(cu::gemm_stats().mirror_zero_launches - mirror_launches, n % 4 == 0 ? 1 : 0) << "n = " << n << ", pad " << pad;
  }
  // Mirror zeros from empty items too: A Upper of 300 × 100 leaves the tile rows past k = 100 with
  // no k-range, so tile (1, 2) above the diagonal is empty and writes its mirror (2, 1) from the
  // same zero box. Under a Full mask nothing is mirrored.
  GemmProblem short_k = square(300, upper, dense, Structure::UpperTriangular);
  short_k.k = 100;
  for (const GemmProblem& p : {short_k, square(300, dense, upper, Structure::Dense)}) {
    const int64_t launches = cu::gemm_stats().register_b_launches, mirror_launches = cu::gemm_stats().mirror_zero_launches;
    SG_EXPECT_PRODUCT(kCuda0, p, sg::kFloat32, rng);
    EXPECT_EQ(cu::gemm_stats().register_b_launches - launches, 1) << describe(p, sg::kFloat32);
    EXPECT_EQ(cu::gemm_stats().mirror_zero_launches - mirror_launches, p.mask == Structure::UpperTriangular ? 1 : 0)
        << describe(p, sg::kFloat32);
  }
  for (cu::Tf32Loop loop : {cu::Tf32Loop::Auto, cu::Tf32Loop::WgmmaBarrierPerStep}) {
    set_option([&](cu::GemmTuning& o) { o.tf32_loop = loop; });
    for (const Case& c : cases) {
      set_option([&](cu::GemmTuning& o) { o.relayout = c.relayout; });
      set_option([&](cu::GemmTuning& o) { o.register_b = c.setting; });
      const int64_t launches = cu::gemm_stats().register_b_launches, copies = cu::gemm_stats().operand_copies;
      SG_EXPECT_PRODUCT(kCuda0, c.p, sg::kFloat32, rng);
      const bool expected = c.register_b && loop == cu::Tf32Loop::Auto;
      EXPECT_EQ(cu::gemm_stats().register_b_launches - launches, expected ? 1 : 0) << describe(c.p, sg::kFloat32);
      if (loop == cu::Tf32Loop::Auto)
        EXPECT_EQ(cu::gemm_stats().operand_copies - copies, c.copies) << describe(c.p, sg::kFloat32);
    }
  }
}

/// `p` with its triangular operands vouched to hold their structural zeros (zeros_stored), as
/// matmul vouches for UpperTriangular tensors, and its Symmetric ones not vouched.
GemmProblem with_stored_zeros(GemmProblem p) {
  p = vouched(p);
  p.a.mirror_stored = p.b.mirror_stored = false;
  return p;
}

/// One product of the tall kernel's tests: the setting it runs under, the rows' padding, and
/// whether the tall kernel must take it.
struct TallCase {
  GemmProblem p;
  cu::Choice setting;
  int64_t pad;
  bool tall;
};

/// Each case against the reference (poisoned C), and the tall kernel launched exactly where it must be.
void expect_tall_cases(const std::vector<TallCase>& cases, std::mt19937_64& rng) {
  for (const TallCase& c : cases) {
    set_option([&](cu::GemmTuning& o) { o.tall_tiles = c.setting; });
    const int64_t launches = cu::gemm_stats().tall_launches;
    SG_EXPECT_PRODUCT_PADDED(kCuda0, c.p, sg::kFloat32, rng, c.pad);
    EXPECT_EQ(cu::gemm_stats().tall_launches - launches, c.tall ? 1 : 0) << describe(c.p, sg::kFloat32) << ", pad " << c.pad;
  }
}

TEST(CudaGemmTall, RunsTheRegisterBProductsWhoseAHoldsItsZeros) {
  // The tall kernel (256 × 128 tiles, persistent, the producer warp writing the tiles of zeros)
  // takes the register-B kernel's products whose A holds its structural zeros (Dense, or vouched:
  // zeros_stored) and whose C rows are 16-byte aligned; each product matches the reference, the
  // tall kernel's or not. Edge tiles and a last k-step that is not whole (300, 1000), tiles of zeros
  // (the Upper mask; A Upper of 520 × 300, whose tile rows past k = 300 have no k-range), a
  // rectangular Dense A, Lower operands. An unvouched triangular B (random values outside its
  // structure, which Upper·Upper and Dense·Upper would add into C) gets its zeros in its fragments,
  // Upper (k at most the column) and Lower (at least). Not taken: an unvouched triangular A (its
  // diagonal-crossing steps would need zeros written into shared memory), C rows of 302 floats, the
  // kernel turned off.
  // Also a Symmetric A through its mirror copy. (Small enough for the sanitizers; the sizes of the
  // Auto rule are the next test's.)
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const Variant dense{Structure::Dense, false}, upper{Structure::UpperTriangular, false}, lower{Structure::LowerTriangular, false};
  const ScopedTf32 tf32;
  const auto forced = cu::Choice::Always, off = cu::Choice::Never;
  std::vector<TallCase> cases;
  for (int64_t n : {300, 640, 1000}) {
    cases.push_back({vouched(square(n, upper, upper, Structure::UpperTriangular)), forced, 0, true});  // Upper·Upper forward
    cases.push_back({vouched(square(n, dense, upper, Structure::Dense)), forced, 0, true});
    cases.push_back({vouched(square(n, upper, dense, Structure::Dense)), forced, 0, true});
    cases.push_back({vouched(square(n, lower, upper, Structure::Dense)), forced, 0, true});
    cases.push_back({vouched(square(n, dense, lower, Structure::UpperTriangular)), forced, 0, true});
    cases.push_back({vouched(square(n, upper, upper, Structure::UpperTriangular)), off, 0, false});
    cases.push_back({square(n, upper, upper, Structure::UpperTriangular), forced, 0, false});  // not vouched
    cases.push_back({vouched(square(n, upper, upper, Structure::UpperTriangular), true, false), forced, 0, true});  // B not
    cases.push_back({vouched(square(n, dense, upper, Structure::Dense), true, false), forced, 0, true});
    cases.push_back({vouched(square(n, dense, lower, Structure::UpperTriangular), true, false), forced, 0, true});
    cases.push_back({vouched(square(n, upper, upper, Structure::UpperTriangular), false, true), forced, 0, false});  // A not
  }
  cases.push_back({vouched(square(302, upper, upper, Structure::UpperTriangular)), forced, 2, false});  // C rows unaligned
  cases.push_back({vouched(square(300, upper, upper, Structure::UpperTriangular)), forced, 20, true});  // padded rows
  GemmProblem rectangular = vouched(square(300, dense, upper, Structure::Dense));
  rectangular.m = 520;
  cases.push_back({rectangular, forced, 0, true});
  GemmProblem short_k = vouched(square(520, upper, dense, Structure::UpperTriangular));
  short_k.k = 300;
  cases.push_back({short_k, forced, 0, true});
  if (!wgmma_loop_runs()) GTEST_SKIP() << "the tall kernel serves the wgmma loop, which this device or build does not run";
  std::mt19937_64 rng(19);
  set_option([&](cu::GemmTuning& o) { o.relayout = cu::Choice::Never; });
  expect_tall_cases(cases, rng);

  // A Symmetric A (unvouched) copied first: a mirror copy, which holds only the steps that are not
  // wholly in the stored triangle; those come from the storage, by a map with the kernel's 256-row
  // box. (The copy is poisoned: a step read from the wrong map fails.) B stays as it lies.
  const Variant symmetric{Structure::Symmetric, false};
  set_option([&](cu::GemmTuning& o) { o.relayout = cu::Choice::Always; });
  set_option([&](cu::GemmTuning& o) { o.register_b = cu::Choice::Always; });
  std::vector<TallCase> mirrored;
  for (int64_t n : {640, 1000}) mirrored.push_back({with_stored_zeros(square(n, symmetric, upper, Structure::Dense)), forced, 0, true});
  const int64_t copies = cu::gemm_stats().mirror_copies;
  expect_tall_cases(mirrored, rng);
  EXPECT_EQ(cu::gemm_stats().mirror_copies - copies, 2);
}

TEST(CudaGemmTall, AutoTakesDenseTimesTriangularFromOneTilePerTwoSmsAndUpperTimesUpperFromOnePerSm) {
  // On Auto the tall kernel takes Dense·Upper and Upper·Dense (operands vouched) from one tile of
  // 256 × 128 per two SMs: at 2048 (128 tiles, long ones split in two on 132 SMs) and 4096 (512
  // tiles); not at 1024 (32 tiles). Upper·Upper from one tile with a k-range per SM: at 3072 (156
  // tiles) and 4096 (272), not at 2048 (72). Forced, it takes Upper·Upper at 2048 (several tiles per
  // block, split tiles, tiles of zeros). Sym·Dense with the mirror stored
  // (a Dense·Dense product whose B is k-major) too, with B as it lies, at 2048 and 4096: no relayout
  // copy (not at 1024, where B is not copied either; with the tall kernel off, B copied for the wide
  // kernel). Above 4096 rows B is copied (Sym·Dense of 4352 × 4352 · 4352 × 512 here). Upper·Upper's
  // dB = triu(Aᵀ·G), A vouched and copied outer-major first, G read through C's structure (its zeros
  // written into its fragments), as Upper·Upper: at 4096, not at 2048.
  // Each product against the reference.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const Variant dense{Structure::Dense, false}, upper{Structure::UpperTriangular, false}, sym{Structure::Symmetric, false};
  const Variant lower_t{Structure::LowerTriangular, true};  // dB's op(A) = Aᵀ of an Upper A
  const ScopedTf32 tf32(cu::Tf32Loop::Auto, cu::Choice::Auto);
  const auto automatic = cu::Choice::Auto;
  const std::vector<TallCase> cases = {
      {vouched(square(2048, upper, upper, Structure::UpperTriangular)), cu::Choice::Always, 0, true},
      {vouched(square(2048, upper, upper, Structure::UpperTriangular)), automatic, 0, false},
      {vouched(square(1024, dense, upper, Structure::Dense)), automatic, 0, false},
      {vouched(square(2048, dense, upper, Structure::Dense)), automatic, 0, true},
      {vouched(square(2048, upper, dense, Structure::Dense)), automatic, 0, true},
      {vouched(square(3072, upper, upper, Structure::UpperTriangular)), automatic, 0, true},
      {vouched(square(4096, upper, upper, Structure::UpperTriangular)), automatic, 0, true},
      {vouched(square(4096, dense, upper, Structure::Dense)), automatic, 0, true},
      {vouched(square(4096, upper, dense, Structure::Dense)), automatic, 0, true},
      {vouched(square(4096, lower_t, upper, Structure::UpperTriangular), true, false), automatic, 0, true},  // dB
      {vouched(square(2048, lower_t, upper, Structure::UpperTriangular), true, false), automatic, 0, false}};
  if (!wgmma_loop_runs()) GTEST_SKIP() << "the tall kernel serves the wgmma loop, which this device or build does not run";
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  if (sms <= 72 || sms > 156)
    GTEST_SKIP() << "the cases assume 73 to 156 SMs (1024: under one tile per two SMs, 2048: over; Upper·Upper: "
                    "2048 under one tile per SM, 3072 not), this device has "
                 << sms;
  std::mt19937_64 rng(23);
  expect_tall_cases(cases, rng);
  const std::vector<std::tuple<int64_t, cu::Choice, bool, int64_t>> sym_dense = {
      {2048, automatic, true, 0}, {4096, automatic, true, 0}, {1024, automatic, false, 0},
      {2048, cu::Choice::Never, false, 1}};
  for (const auto& [n, setting, tall, copies] : sym_dense) {
    const int64_t relaid = cu::gemm_stats().operand_copies;
    expect_tall_cases({{vouched(square(n, sym, dense, Structure::Dense)), setting, 0, tall}}, rng);
    EXPECT_EQ(cu::gemm_stats().operand_copies - relaid, copies) << "Sym·Dense, mirror stored, n = " << n;
  }
  // Past kTallForCopyRows rows (a Dense·Dense product of the detail API would go to cuBLAS, so a
  // Sym·Dense of 4352 rows and 512 columns: 68 tiles, enough for the tall kernel's Auto rule).
  GemmProblem many_rows = vouched(square(4352, sym, dense, Structure::Dense));
  many_rows.n = 512;
  const int64_t relaid = cu::gemm_stats().operand_copies;
  expect_tall_cases({{many_rows, automatic, 0, false}}, rng);
  EXPECT_EQ(cu::gemm_stats().operand_copies - relaid, 1) << "Sym·Dense of 4352 rows";
}

TEST(CudaGemmTall, TheForwardWritesATransposeThatTheBackwardsDbReads) {
  // Where matmul's product will need dB = op(A)ᵀ·G (B requires grad; A Dense or Upper, neither read
  // transposed), the TF32 forward offers a [k, m] buffer and the tall kernel fills it with op(A)ᵀ from
  // the tiles of A it reads anyway; the backward then reads it and copies nothing. Upper·Upper,
  // Dense·Upper and Upper·Dense at 300, 640 and 1000 with the tall kernel forced (edge tiles, split
  // tiles, tiles of zeros), and Upper·Upper at 3072 on Auto. The buffer is NaN where the kernel
  // writes nothing (relayout copies poisoned), so a backward that read past what it holds would
  // fail. C, dA and dB against float64 on the CPU; one buffer written per forward and no relayout
  // copy in the backward. With the output off, nothing is written and the gradients match too. Not
  // offered: B without a gradient, a Symmetric A, the float32 (not TF32) precision.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const ScopedTf32 tf32(cu::Tf32Loop::Auto, cu::Choice::Auto);
  if (!wgmma_loop_runs()) GTEST_SKIP() << "the tall kernel serves the wgmma loop, which this device or build does not run";
  const auto f64 = sg::TensorOptions().dtype(sg::kFloat64);
  sg::manual_seed(41);
  auto random = [&](sg::Structure s, int64_t n) -> sg::Tensor {
    if (s == sg::Structure::UpperTriangular) return sg::UpperTriangular::randn(n, f64);
    if (s == sg::Structure::Symmetric) return sg::Symmetric::randn(n, f64);
    return sg::randn({n, n}, f64);
  };
  // C, dA and dB (dA, dB empty where not wanted) of sum(op(a)·op(b) ∘ g) on `device` in `dtype`.
  auto run = [](const sg::Tensor& a, const sg::Tensor& b, const sg::Tensor& g, sg::Device device, sg::DType dtype,
                bool a_grad, bool b_grad) {
    sg::Tensor x = a.to(dtype).to(device).detach(), y = b.to(dtype).to(device).detach();
    if (a_grad) x.requires_grad_();
    if (b_grad) y.requires_grad_();
    const sg::Tensor c = sg::matmul(x, y);
    sg::sum(c * g.to(dtype).to(device)).backward();
    return std::vector<std::vector<double>>{c.to(sg::kCPU).to_vector(),
                                            a_grad ? x.grad().to(sg::kCPU).to_vector() : std::vector<double>{},
                                            b_grad ? y.grad().to(sg::kCPU).to_vector() : std::vector<double>{}};
  };
  const sg::Structure upper = sg::Structure::UpperTriangular, dense = sg::Structure::Dense;
  struct Case {
    sg::Structure a, b;
    int64_t n;
    cu::Choice tall;
  };
  const std::vector<Case> cases = {
      {upper, upper, 300, cu::Choice::Always},  {dense, upper, 300, cu::Choice::Always},
      {upper, dense, 300, cu::Choice::Always},  {upper, upper, 640, cu::Choice::Always},
      {dense, upper, 640, cu::Choice::Always},  {upper, dense, 1000, cu::Choice::Always},
      {upper, upper, 1000, cu::Choice::Always}, {upper, upper, 3072, cu::Choice::Auto}};
  for (const Case& c : cases) {
    const sg::Tensor a = random(c.a, c.n), b = random(c.b, c.n), g = sg::randn({c.n, c.n}, f64);
    const auto ref = run(a, b, g, sg::kCPU, sg::kFloat64, true, true);
    set_option([&](cu::GemmTuning& o) { o.tall_tiles = c.tall; });
    for (bool on : {true, false}) {
      SCOPED_TRACE(std::string(sg::structure_name(c.a)) + "·" + sg::structure_name(c.b) + ", n = " +
                   std::to_string(c.n) + (on ? ", output on" : ", output off"));
      set_option([&](cu::GemmTuning& o) { o.transposed_a_output = on; });
      const int64_t written = cu::gemm_stats().transposed_a_outputs, tall = cu::gemm_stats().tall_launches;
      sg::set_matmul_precision(sg::Precision::TF32);
      sg::Tensor x = a.to(sg::kFloat32).to(kCuda0).detach().requires_grad_();
      sg::Tensor y = b.to(sg::kFloat32).to(kCuda0).detach().requires_grad_();
      const sg::Tensor product = sg::matmul(x, y);
      EXPECT_EQ(cu::gemm_stats().tall_launches - tall, 1) << "the forward on the tall kernel";
      EXPECT_EQ(cu::gemm_stats().transposed_a_outputs - written, on ? 1 : 0);
      const int64_t copies = cu::gemm_stats().operand_copies;
      sg::sum(product * g.to(sg::kFloat32).to(kCuda0)).backward();
      if (on) EXPECT_EQ(cu::gemm_stats().operand_copies - copies, 0) << "dB read the forward's op(A)ᵀ";
      const std::vector<std::vector<double>> got = {product.to(sg::kCPU).to_vector(), x.grad().to(sg::kCPU).to_vector(),
                                                    y.grad().to(sg::kCPU).to_vector()};
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_LE(sgtest::rel_error(got[i], ref[i]), 2e-3) << (i == 0 ? "C" : i == 1 ? "dA" : "dB");
    }
  }
  set_option([&](cu::GemmTuning& o) { o.transposed_a_output = true; });
  // Not offered: no dB wanted, a Symmetric A, exact float32.
  const int64_t n = 640;
  set_option([&](cu::GemmTuning& o) { o.tall_tiles = cu::Choice::Always; });
  const sg::Tensor u = random(upper, n), v = random(upper, n), s = random(sg::Structure::Symmetric, n);
  const sg::Tensor g = sg::randn({n, n}, f64);
  struct Unoffered {
    const char* what;
    sg::Tensor a, b;
    bool b_grad;
    sg::Precision precision;
  };
  for (const Unoffered& c : {Unoffered{"B without a gradient", u, v, false, sg::Precision::TF32},
                             Unoffered{"Symmetric A", s, v, true, sg::Precision::TF32},
                             Unoffered{"exact float32", u, v, true, sg::Precision::Float32}}) {
    SCOPED_TRACE(c.what);
    sg::set_matmul_precision(c.precision);
    const int64_t written = cu::gemm_stats().transposed_a_outputs;
    const auto got = run(c.a, c.b, g, kCuda0, sg::kFloat32, true, c.b_grad);
    EXPECT_EQ(cu::gemm_stats().transposed_a_outputs - written, 0);
    const auto ref = run(c.a, c.b, g, sg::kCPU, sg::kFloat64, true, c.b_grad);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(sgtest::rel_error(got[i], ref[i]), 2e-3) << "result " << i;
  }
}

/// Runs `p` (float32; A and B packed row-major, random values with the operands' invariants)
/// `launches` times on the same inputs, C poisoned with NaN before each launch, and expects no NaN
/// and the same bits each time: tiles split in two chunks meet in C as fl(P0 + P1) whichever chunk
/// ends first (split_tile_arrive), so the order the chunks end in must not show.
void expect_the_same_bits_each_launch(GemmProblem p, std::mt19937_64& rng, int launches, const std::string& what) {
  std::vector<double> a_values = random_values(p.m * p.k, rng), b_values = random_values(p.k * p.n, rng);
  fill_outside_structure(p.a, p.m, p.k, p.k, a_values);
  fill_outside_structure(p.b, p.k, p.n, p.n, b_values);
  const auto opts = sg::TensorOptions().dtype(sg::kFloat32);
  sg::Tensor a = sg::from_vector(a_values, {p.m, p.k}, opts).to(kCuda0);
  sg::Tensor b = sg::from_vector(b_values, {p.k, p.n}, opts).to(kCuda0);
  sg::Tensor out = sg::Tensor::empty({p.m, p.n}, opts.device(kCuda0));
  p.a_data = a.data_ptr();
  p.b_data = b.data_ptr();
  p.c_data = out.data_ptr();
  p.lda = p.k;
  p.ldb = p.n;
  p.ldc = p.n;
  std::vector<double> first;  // float32 values, exactly
  for (int run = 0; run < launches; ++run) {
    out.fill_(std::nan(""));
    sg::detail::backend_for(kCuda0).gemm(p, sg::kFloat32);
    const std::vector<double> values = out.to_vector();
    if (run == 0) {
      first = values;
      EXPECT_TRUE(std::none_of(first.begin(), first.end(), [](double x) { return std::isnan(x); })) << what;
    } else {
      ASSERT_EQ(values.size(), first.size());
      EXPECT_EQ(std::memcmp(values.data(), first.data(), values.size() * sizeof(double)), 0)
          << what << ": launch " << run << " differs from the first";
    }
  }
}

TEST(CudaGemmMeetInC, TilesSplitInTwoGiveTheSameBitsWhicheverChunkEndsFirst) {
  // A tile split in two chunks meets in C by the first chunk's TMA store and the second's TMA
  // reduction, fl(P0 + P1) whichever ends first (split_tile_arrive): repeated launches on the same
  // inputs, whose chunks end in varying order, give the same bits. The tall kernel (forced) on
  // products whose tall plans split tiles, and the register-B kernel on Upper·Upper at 2048, whose
  // plan has tiles in two chunks (checked on the plans).
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  if (!wgmma_loop_runs()) GTEST_SKIP() << "these kernels serve the wgmma loop, which this device or build does not run";
  const Variant dense{Structure::Dense, false}, upper{Structure::UpperTriangular, false};
  const ScopedTf32 tf32;
  set_option([&](cu::GemmTuning& o) { o.relayout = cu::Choice::Never; });
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  struct Case {
    GemmProblem p;
    bool tall;
  };
  const std::vector<Case> cases = {{with_stored_zeros(square(1000, dense, upper, Structure::Dense)), true},
                                   {with_stored_zeros(square(1000, upper, upper, Structure::UpperTriangular)), true},
                                   {with_stored_zeros(square(2048, upper, upper, Structure::UpperTriangular)), false}};
  std::mt19937_64 rng(29);
  for (const Case& c : cases) {
    GemmProblem p = c.p;
    p.tf32 = true;
    const std::string what = describe(p, sg::kFloat32) + (c.tall ? ", tall kernel" : ", register-B kernel");
    set_option([&](cu::GemmTuning& o) { o.tall_tiles = c.tall ? cu::Choice::Always : cu::Choice::Never; });
    p.lda = p.k;  // packed, as expect_the_same_bits_each_launch stores the operands (the plan checks them)
    p.ldb = p.n;
    p.ldc = p.n;
    if (c.tall) {
      ASSERT_GT(cu::tall_tile_plan(p, sms).split_tiles, 0) << what;
    } else {
      const GemmWorkPlan& plan = cu::structured_gemm_plan(p, sg::kFloat32, 0);
      ASSERT_TRUE(std::any_of(plan.items.begin(), plan.items.end(),
                              [](const cu::GemmWorkItem& item) { return item.chunk_count == 2; }))
          << what;
    }
    const int64_t tall = cu::gemm_stats().tall_launches, register_b = cu::gemm_stats().register_b_launches;
    expect_the_same_bits_each_launch(p, rng, 8, what);
    EXPECT_EQ(cu::gemm_stats().tall_launches - tall, c.tall ? 8 : 0) << what;
    EXPECT_EQ(cu::gemm_stats().register_b_launches - register_b, c.tall ? 0 : 8) << what;
  }
}

/// A precision and loop the stored-zeros and stored-mirrors tests run every product in.
struct LoopMode {
  const char* name;
  sg::DType dtype;
  bool tf32;
  cu::Fp32Loop loop;
  cu::Fp64Loop fp64 = cu::Fp64Loop::Auto;
};

/// The modes device 0 runs: TF32 on the wgmma loop and exact float32 and float64 on the FP64 tensor
/// cores where this build and device have them, exact float32 on FFMA and float64 on DFMA everywhere.
std::vector<LoopMode> loop_modes() {
  const bool fp64_cores = fp64_tensor_cores_run();
  std::vector<LoopMode> modes;
  if (wgmma_loop_runs()) modes.push_back({"TF32 (wgmma)", sg::kFloat32, true, cu::Fp32Loop::Auto});
  if (fp64_cores)
    modes.push_back({"float32 on the FP64 tensor cores", sg::kFloat32, false, cu::Fp32Loop::Dmma});
  modes.push_back({"float32 on FFMA", sg::kFloat32, false, cu::Fp32Loop::Fma});
  if (fp64_cores)
    modes.push_back({"float64 on the FP64 tensor cores", sg::kFloat64, false, cu::Fp32Loop::Auto, cu::Fp64Loop::Dmma});
  modes.push_back({"float64 on DFMA", sg::kFloat64, false, cu::Fp32Loop::Auto, cu::Fp64Loop::Dfma});
  return modes;
}

/// Sets the matmul precision and exact float32 loop of `mode` (ScopedTf32 restores the defaults).
void use(const LoopMode& mode) {
  g_tf32 = mode.tf32;
  sg::set_matmul_precision(mode.tf32 ? sg::Precision::TF32 : sg::Precision::Float32);
  set_option([&](cu::GemmTuning& o) {
    o.fp32_loop = mode.loop;
    o.fp64_loop = mode.fp64;
  });
}

TEST(CudaGemmZerosStored, TriangularOperandsWithStoredZerosMatchTheReference) {
  // An Upper or Lower operand whose storage holds zeros outside its structure (zeros_stored: the
  // UpperTriangular tensors matmul passes) lets the pipelined and register-B kernels use the
  // copied zeros instead of writing them, and the register-staged loops (exact float32 on the
  // FP64 tensor cores and on FFMA) read its diagonal-crossing k-steps as they lie, unmasked; the
  // unvouched operand (the upstream gradient of dA and dB, random outside its structure) still
  // gets them written or masked (float64 too, on both its loops). The products of matmul's
  // Upper·Upper and Dense·Upper, forward
  // and backward, with edge tiles (300), split tiles (640) and on Auto at 1024 and 2048 (A copied
  // for dB at 2048 in TF32), against the reference; also the zero tiles of the Upper mask,
  // written apart from the accumulators (NaN-poisoned C).
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const Variant dense{Structure::Dense, false}, dense_t{Structure::Dense, true};
  const Variant upper{Structure::UpperTriangular, false}, lower{Structure::LowerTriangular, false}, lower_t{Structure::LowerTriangular, true};
  const ScopedTf32 restore_defaults_at_end;
  std::mt19937_64 rng(17);
  for (const LoopMode& mode : loop_modes()) {
    SCOPED_TRACE(mode.name);
    use(mode);
    for (int64_t n : {300, 640, 1024, 2048}) {
      SG_EXPECT_PRODUCT(kCuda0, vouched(square(n, upper, upper, Structure::UpperTriangular), true, true), mode.dtype, rng);
      SG_EXPECT_PRODUCT(kCuda0, vouched(square(n, upper, lower_t, Structure::UpperTriangular), false, true), mode.dtype, rng);
      SG_EXPECT_PRODUCT(kCuda0, vouched(square(n, lower_t, upper, Structure::UpperTriangular), true, false), mode.dtype, rng);
      SG_EXPECT_PRODUCT(kCuda0, vouched(square(n, dense, upper, Structure::Dense), false, true), mode.dtype, rng);
      SG_EXPECT_PRODUCT(kCuda0, vouched(square(n, dense_t, upper, Structure::UpperTriangular), false, true), mode.dtype, rng);
      SG_EXPECT_PRODUCT(kCuda0, vouched(square(n, dense, lower, Structure::Dense), false, true), mode.dtype, rng);
      SG_EXPECT_PRODUCT(kCuda0, vouched(square(n, upper, dense_t, Structure::UpperTriangular), true, false), mode.dtype, rng);
    }
  }
}

TEST(CudaGemmStoredMirrors, SymmetricOperandsWithTheirMirrorStoredRunAsDense) {
  // A Symmetric operand whose storage holds its mirror bit for bit (mirror_stored: the Symmetric
  // tensors matmul passes) is read as the Dense matrix it is: outer-major on the TF32 loop, so
  // that no copy is made and Sym·Sym at 2048 runs on the wide kernel; k-major on the others, so
  // that the FP64 loop makes no k-major copy either. Unvouched, the same products still redirect
  // the lower triangle (random values there) and copy as before. Every product, vouched or not,
  // against the reference with C poisoned; edge tiles (300, 1000), and 2048.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const Variant dense{Structure::Dense, false}, dense_t{Structure::Dense, true};
  const Variant upper{Structure::UpperTriangular, false}, lower_t{Structure::LowerTriangular, true};
  const Variant symmetric{Structure::Symmetric, false};
  const ScopedTf32 restore_defaults_at_end;
  // The triangular operands always hold their zeros; the Symmetric ones' mirrors vouched for or not.
  auto with_mirrors = [](GemmProblem p, bool on) { return on ? vouched(p) : with_stored_zeros(p); };
  std::mt19937_64 rng(31);
  const std::vector<LoopMode> modes = loop_modes();
  int ran = 0;
  for (const LoopMode& mode : modes) {
    SCOPED_TRACE(mode.name);
    use(mode);
    const bool wgmma = mode.tf32;  // (loop_modes has TF32 only where it runs the wgmma loop)
    const bool dmma = mode.loop == cu::Fp32Loop::Dmma;
    for (int64_t n : {300, 1000, 2048}) {
      for (bool on : {true, false}) {
        for (const GemmProblem& p : {square(n, symmetric, symmetric, Structure::Dense),
                                     square(n, symmetric, dense, Structure::Dense),
                                     square(n, dense, symmetric, Structure::Dense),
                                     square(n, symmetric, upper, Structure::Dense),
                                     square(n, lower_t, symmetric, Structure::Dense),
                                     square(n, symmetric, symmetric, Structure::Symmetric),
                                     square(n, dense_t, symmetric, Structure::UpperTriangular)}) {
          SG_EXPECT_PRODUCT(kCuda0, with_mirrors(p, on), mode.dtype, rng);
          ++ran;
        }
        // Sym·Sym: the copies the Symmetric operands take unvouched, none vouched.
        const GemmProblem sym_sym = with_mirrors(square(n, symmetric, symmetric, Structure::Dense), on);
        const int64_t copies = cu::gemm_stats().operand_copies, wide = cu::gemm_stats().wide_launches;
        SG_EXPECT_PRODUCT(kCuda0, sym_sym, mode.dtype, rng);
        const int64_t copied = wgmma ? 2 : dmma && n >= 1024 ? 2 : 0;
        EXPECT_EQ(cu::gemm_stats().operand_copies - copies, on ? 0 : copied) << describe(sym_sym, mode.dtype) << " vouched " << on;
        if (wgmma && n == 2048 && on) EXPECT_EQ(cu::gemm_stats().wide_launches - wide, 1) << describe(sym_sym, mode.dtype);
      }
    }
  }
  EXPECT_EQ(ran, static_cast<int>(modes.size()) * 3 * 2 * 7);
}

TEST(CudaGemmStoredMirrors, MatmulAndGramPassSymmetricTensorsAsStored) {
  // sg::matmul and sg::gram pass their Symmetric tensors with mirror_stored, gram's backward its G
  // too (the engine projects it onto C's structure first): Sym·Sym and gram(S), forward and
  // backward, in TF32 at 1024, make no copy on the wgmma loop, and their results and gradients
  // match the CPU's float32 ones.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const ScopedTf32 tf32;
  const int64_t n = 1024;
  const auto f32 = sg::TensorOptions().dtype(sg::kFloat32);
  const sg::Symmetric s = sg::Symmetric::randn(n, f32), t = sg::Symmetric::randn(n, f32);
  const sg::Tensor g = sg::randn({n, n}, f32);  // weights of the loss: C's gradient, not symmetric
  // C, dS and dT (dT empty for gram) on `device`, with the matmul precision `precision`.
  auto run = [&](sg::Device device, sg::Precision precision, bool gram) {
    sg::set_matmul_precision(precision);
    sg::Tensor a = s.to(device).detach().requires_grad_(), b = t.to(device).detach().requires_grad_();
    const sg::Tensor c = gram ? sg::Tensor(sg::gram(a)) : sg::matmul(a, b);
    sg::sum(c * g.to(device)).backward();
    std::vector<std::vector<double>> out{c.to(sg::kCPU).to_vector(), a.grad().to(sg::kCPU).to_vector()};
    if (!gram) out.push_back(b.grad().to(sg::kCPU).to_vector());
    return out;
  };
  for (bool gram : {false, true}) {
    SCOPED_TRACE(gram ? "gram(S)" : "S·T");
    const int64_t copies = cu::gemm_stats().operand_copies;
    const auto on_gpu = run(kCuda0, sg::Precision::TF32, gram);
    if (wgmma_loop_runs()) EXPECT_EQ(cu::gemm_stats().operand_copies - copies, 0);
    const auto on_cpu = run(sg::kCPU, sg::Precision::Float32, gram);
    ASSERT_EQ(on_gpu.size(), on_cpu.size());
    for (size_t i = 0; i < on_gpu.size(); ++i) EXPECT_LE(sgtest::rel_error(on_gpu[i], on_cpu[i]), 2e-3) << "result " << i;
  }
}

TEST(CudaGemmRelayout, CopiesTheKMajorAndSymmetricOperandsOfWgmmaProductsOnly) {
  // Relayout copies exactly the operands whose tiles the wgmma loop would otherwise transpose
  // (k-major and Symmetric ones), only on the default wgmma loop, and only when on; each
  // product still matches the reference.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const Variant dense{Structure::Dense, false}, dense_t{Structure::Dense, true};
  const Variant upper{Structure::UpperTriangular, false}, lower_t{Structure::LowerTriangular, true};
  const Variant symmetric{Structure::Symmetric, false};
  const ScopedTf32 tf32;
  struct Case {
    GemmProblem p;
    int64_t copies;  // with relayout on
  };
  const int64_t n = 300;
  const Case cases[] = {
      {square(n, upper, upper, Structure::UpperTriangular), 1},      // B k-major
      {square(n, lower_t, upper, Structure::UpperTriangular), 2},    // dB = triu(Aᵀ·G): both k-major
      {square(n, upper, lower_t, Structure::UpperTriangular), 0},    // dA = triu(G·Bᵀ): both outer-major
      {square(n, symmetric, symmetric, Structure::Dense), 2},
      {square(n, symmetric, dense, Structure::Dense), 2},
      {square(n, dense, dense_t, Structure::UpperTriangular), 0},    // gram
  };
  if (!wgmma_loop_runs()) GTEST_SKIP() << "relayout serves the wgmma loop, which this device or build does not run";
  std::mt19937_64 rng(9);
  for (cu::Choice setting : {cu::Choice::Always, cu::Choice::Never}) {
    for (cu::Tf32Loop loop : {cu::Tf32Loop::Auto, cu::Tf32Loop::WgmmaStaged}) {
      set_option([&](cu::GemmTuning& o) { o.relayout = setting; });
      set_option([&](cu::GemmTuning& o) { o.tf32_loop = loop; });
      for (const Case& c : cases) {
        const int64_t before = cu::gemm_stats().operand_copies;
        SG_EXPECT_PRODUCT(kCuda0, c.p, sg::kFloat32, rng);
        const bool on = setting == cu::Choice::Always && loop == cu::Tf32Loop::Auto;
        EXPECT_EQ(cu::gemm_stats().operand_copies - before, on ? c.copies : 0)
            << kind_name(c.p.a.structure) << (c.p.a.trans ? "ᵀ" : "") << "·" << kind_name(c.p.b.structure)
            << (c.p.b.trans ? "ᵀ" : "") << ", relayout " << (on ? "on" : "off");
      }
    }
  }
}

TEST(CudaGemmRelayout, MirrorCopiesHoldEverythingTheProductsReadFromThem) {
  // A Symmetric operand with 16-byte aligned rows is copied as a mirror copy: only its mirrored
  // triangle and a band above the diagonal (which also covers a partial last tile's rows) and a
  // partial last k-step's columns, its stored triangle's whole k-steps read from its own storage. The copies
  // are poisoned with NaN first (ScopedTf32), so a k-step taken from a part the copy does not
  // hold fails the check. Every kernel that takes relaid operands: the wide kernel (forced on
  // and off: the one-barrier-per-step instance), the pipelined kernel (the other operand
  // triangular and copied too) and the register-B kernel (B triangular, read as it lies); on the
  // default loop and on WgmmaBarrierPerStep. Sizes with whole tiles only (1024) and with a partial
  // last tile and k-step (300, 1000). Unaligned rows (pad 1) take the whole copy as before.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const Variant dense{Structure::Dense, false}, upper{Structure::UpperTriangular, false};
  const Variant symmetric{Structure::Symmetric, false}, symmetric_t{Structure::Symmetric, true};
  const ScopedTf32 tf32(cu::Tf32Loop::Auto, cu::Choice::Always);
  if (!wgmma_loop_runs()) GTEST_SKIP() << "relayout serves the wgmma loop, which this device or build does not run";
  struct Case {
    GemmProblem p;
    int64_t mirror_copies;  // with 16-byte aligned rows
    cu::Choice register_b;
  };
  std::mt19937_64 rng(23);
  for (int64_t n : {300, 1000, 1024}) {
    const Case cases[] = {
        {square(n, symmetric, symmetric, Structure::Dense), 2, cu::Choice::Auto},
        {square(n, symmetric, dense, Structure::Dense), 1, cu::Choice::Auto},
        {square(n, dense, symmetric_t, Structure::Dense), 1, cu::Choice::Auto},
        {square(n, symmetric, upper, Structure::Dense), 1, cu::Choice::Auto},    // pipelined (B copied)
        {square(n, symmetric, upper, Structure::Dense), 1, cu::Choice::Always},  // register-B
        {square(n, upper, symmetric, Structure::Dense), 1, cu::Choice::Auto},
    };
    for (cu::Tf32Loop loop : {cu::Tf32Loop::Auto, cu::Tf32Loop::WgmmaBarrierPerStep}) {
      set_option([&](cu::GemmTuning& o) { o.tf32_loop = loop; });
      for (cu::Choice wide : {cu::Choice::Always, cu::Choice::Never}) {
        set_option([&](cu::GemmTuning& o) { o.wide_tiles = wide; });
        for (const Case& c : cases) {
          set_option([&](cu::GemmTuning& o) { o.register_b = c.register_b; });
          for (int64_t pad : {0, 1}) {
            const int64_t before = cu::gemm_stats().mirror_copies;
            SG_EXPECT_PRODUCT_PADDED(kCuda0, c.p, sg::kFloat32, rng, pad);
            EXPECT_EQ(cu::gemm_stats().mirror_copies - before, pad == 0 ? c.mirror_copies : 0)
                << describe(c.p, sg::kFloat32) << " pad=" << pad;
          }
        }
      }
    }
  }
  set_option([&](cu::GemmTuning& o) { o.wide_tiles = cu::Choice::Auto; });
}

TEST(CudaGemmWide, ForcedOnMatchesTheReferenceWhereBothOperandsAreOuterMajorDense) {
  // The wide kernel (128 × 256 tiles, persistent blocks, one per SM) forced on at small sizes:
  // it takes exactly the wgmma products whose operands both come directly and are Dense — gram
  // under both masks, the Symmetric products once relayout has copied them — on the default
  // loop only, and each product matches the reference, with its tiles written by TMA stores
  // (where C takes them) and by the accumulators' own stores. Edge tiles in both directions (300, 640:
  // 3 and 5 row tiles, 2 and 3 column tiles), blocks with several items (fewer SMs than items
  // nowhere here, so also blocks with one or none: the grid is min(items, SMs)), a last k-step
  // that is not whole (k = 40, 300), tiles wholly below the diagonal (zeros under Upper, skipped
  // under Symmetric), and a rectangular product.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const Variant dense{Structure::Dense, false}, dense_t{Structure::Dense, true};
  const Variant upper{Structure::UpperTriangular, false}, lower_t{Structure::LowerTriangular, true};
  const Variant symmetric{Structure::Symmetric, false};
  const ScopedTf32 tf32;
  if (!wgmma_loop_runs()) GTEST_SKIP() << "the wide kernel serves the wgmma loop, which this device or build does not run";
  struct Case {
    GemmProblem p;
    cu::Choice relayout;
    bool wide;  // on the default loop
  };
  std::vector<Case> cases;
  for (int64_t n : {300, 640}) {
    cases.push_back({square(n, dense, dense_t, Structure::UpperTriangular), cu::Choice::Never, true});  // gram
    cases.push_back({square(n, dense, dense_t, Structure::Symmetric), cu::Choice::Never, true});
    cases.push_back({square(n, symmetric, symmetric, Structure::Dense), cu::Choice::Always, true});
    cases.push_back({square(n, symmetric, dense, Structure::Dense), cu::Choice::Always, true});
    cases.push_back({square(n, dense, symmetric, Structure::Dense), cu::Choice::Always, true});
    cases.push_back({square(n, upper, lower_t, Structure::UpperTriangular), cu::Choice::Never, false});  // triangular
    cases.push_back({square(n, dense, dense_t, Structure::Dense), cu::Choice::Never, false});   // cuBLAS
    cases.push_back({square(n, symmetric, dense, Structure::Dense), cu::Choice::Never, false});  // raw copies
  }
  GemmProblem short_k = square(640, dense, dense_t, Structure::UpperTriangular);
  short_k.k = 40;
  cases.push_back({short_k, cu::Choice::Never, true});
  GemmProblem rectangular = square(300, symmetric, dense, Structure::Dense);
  rectangular.n = 520;
  cases.push_back({rectangular, cu::Choice::Always, true});
  // Rows of 302 floats are not 16-byte aligned: no direct copies, so not the wide kernel.
  cases.push_back({square(302, dense, dense_t, Structure::UpperTriangular), cu::Choice::Never, false});
  std::mt19937_64 rng(12);
  set_option([&](cu::GemmTuning& o) { o.wide_tiles = cu::Choice::Always; });
  for (bool tma_store : {true, false}) {
    set_option([&](cu::GemmTuning& o) { o.wide_tma_store = tma_store; });
    for (cu::Tf32Loop loop : {cu::Tf32Loop::Auto, cu::Tf32Loop::WgmmaBarrierPerStep}) {
      set_option([&](cu::GemmTuning& o) { o.tf32_loop = loop; });
      for (const Case& c : cases) {
        set_option([&](cu::GemmTuning& o) { o.relayout = c.relayout; });
        const int64_t before = cu::gemm_stats().wide_launches, stores_before = cu::gemm_stats().wide_tma_store_launches;
        SG_EXPECT_PRODUCT(kCuda0, c.p, sg::kFloat32, rng);
        const bool wide = c.wide && loop == cu::Tf32Loop::Auto;
        EXPECT_EQ(cu::gemm_stats().wide_launches - before, wide ? 1 : 0) << describe(c.p, sg::kFloat32);
        // By TMA stores wherever the wide kernel runs and C takes them: a mask other than Symmetric
        // (whose mirror the accumulators' own stores write); C's rows are aligned wherever the
        // operands' are, and the wide kernel needs those.
        const bool stores = wide && tma_store && c.p.mask != Structure::Symmetric;
        EXPECT_EQ(cu::gemm_stats().wide_tma_store_launches - stores_before, stores ? 1 : 0) << describe(c.p, sg::kFloat32);
      }
    }
  }
  set_option([&](cu::GemmTuning& o) { o.wide_tma_store = true; });
  set_option([&](cu::GemmTuning& o) { o.wide_tiles = cu::Choice::Auto; });
}

TEST(CudaGemmWide, LastRoundCutInKMatchesTheReferenceWithTheSameBitsEachLaunch) {
  // The wide kernel with its last round's tiles cut in k (WideSplit::Always): Dense·Sym
  // with 2.5 tiles per SM (rows 128 · (1.25 · SMs), 300 columns: two tile columns, the second
  // partial; k = 300, a partial last k-step), relayout on, C poisoned, against the float64
  // reference; then the same inputs launched eight times give the same bits (the split tiles'
  // chunks meet in C as fl(P0 + P1) whichever ends first). With the 4-byte stores the plan without
  // split tiles runs instead.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const Variant dense{Structure::Dense, false}, symmetric{Structure::Symmetric, false};
  const ScopedTf32 tf32(cu::Tf32Loop::Auto, cu::Choice::Always);
  if (!wgmma_loop_runs()) GTEST_SKIP() << "the wide kernel serves the wgmma loop, which this device or build does not run";
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  GemmProblem p = square(300, dense, symmetric, Structure::Dense);
  p.m = 128 * (sms + sms / 4);
  p.tf32 = true;
  set_option([&](cu::GemmTuning& o) { o.wide_tiles = cu::Choice::Always; });
  set_option([&](cu::GemmTuning& o) { o.wide_split = cu::Choice::Always; });
  GemmProblem planned = p;  // the wide kernel's problem: both operands outer-major Dense
  planned.b = {Structure::Dense, true};
  ASSERT_GT(cu::wide_tile_plan(planned, sms, cu::Choice::Always).split_tiles, 0) << describe(p, sg::kFloat32);
  std::mt19937_64 rng(31);
  for (bool tma_store : {true, false}) {
    set_option([&](cu::GemmTuning& o) { o.wide_tma_store = tma_store; });
    const int64_t wide = cu::gemm_stats().wide_launches, split = cu::gemm_stats().wide_split_launches;
    SG_EXPECT_PRODUCT(kCuda0, p, sg::kFloat32, rng);
    EXPECT_EQ(cu::gemm_stats().wide_launches - wide, 1) << describe(p, sg::kFloat32);
    EXPECT_EQ(cu::gemm_stats().wide_split_launches - split, tma_store ? 1 : 0) << describe(p, sg::kFloat32);
  }
  set_option([&](cu::GemmTuning& o) { o.wide_tma_store = true; });
  const int64_t split = cu::gemm_stats().wide_split_launches;
  expect_the_same_bits_each_launch(p, rng, 8, describe(p, sg::kFloat32));
  EXPECT_EQ(cu::gemm_stats().wide_split_launches - split, 8);
  set_option([&](cu::GemmTuning& o) { o.wide_split = cu::Choice::Auto; });
  set_option([&](cu::GemmTuning& o) { o.wide_tiles = cu::Choice::Auto; });
}

TEST(CudaGemmWide, AutoTakesProductsWhoseRoundsAreFourFifthsFullOrWhoseLastRoundIsCut) {
  // Under Auto the wide kernel takes a product where its persistent blocks' rounds of items are
  // at least 80 % full, or where its last round's tiles are cut (wide_tile_plan), except under an
  // Upper mask. gram-shaped products, k = 100: under a Symmetric mask 2560 has 110 items (one
  // round at 83 % on an H100's 132 SMs: wide) and 4000 has 272 (three rounds at 69 %, and no cut
  // under a Symmetric mask, whose C takes no TMA stores: not); under an Upper mask, 2560 stays off
  // the wide kernel. Then Dense·Sym (relaid) with 2.2 tiles per SM (three rounds at 73 %), whose
  // last round is cut: wide. Each matches the reference.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const ScopedTf32 tf32(cu::Tf32Loop::Auto, cu::Choice::Never);
  if (!wgmma_loop_runs()) GTEST_SKIP() << "the wide kernel serves the wgmma loop, which this device or build does not run";
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  std::mt19937_64 rng(13);
  int wide = 0;
  for (auto [n, mask] : std::vector<std::pair<int64_t, Structure>>{
           {2560, Structure::Symmetric}, {4000, Structure::Symmetric}, {2560, Structure::UpperTriangular}}) {
    GemmProblem p = square(n, {Structure::Dense, false}, {Structure::Dense, true}, mask);
    p.k = 100;
    const size_t items = cu::wide_tile_items(p).size();
    const size_t rounds = (items + sms - 1) / sms;
    const bool expected = mask != Structure::UpperTriangular && 10 * items >= 8 * rounds * static_cast<size_t>(sms);
    const int64_t before = cu::gemm_stats().wide_launches;
    SG_EXPECT_PRODUCT(kCuda0, p, sg::kFloat32, rng);
    EXPECT_EQ(cu::gemm_stats().wide_launches - before, expected ? 1 : 0)
        << items << " items on " << sms << " SMs, n = " << n << ", mask " << mask_name(mask);
    wide += expected;
  }
  if (sms == 132) EXPECT_EQ(wide, 1) << "on an H100 SXM, the Symmetric product at 2560 only";
  set_option([&](cu::GemmTuning& o) { o.relayout = cu::Choice::Always; });
  GemmProblem p = square(300, {Structure::Dense, false}, {Structure::Symmetric, false}, Structure::Dense);
  p.m = 128 * (sms + sms / 10);
  GemmProblem planned = p;  // as the wide kernel gets it: B relaid, outer-major Dense
  planned.b = {Structure::Dense, true};
  const size_t items = cu::wide_tile_items(planned).size(), rounds = (items + sms - 1) / sms;
  EXPECT_LT(10 * items, 8 * rounds * static_cast<size_t>(sms)) << items << " items on " << sms << " SMs";
  ASSERT_GT(cu::wide_tile_plan(planned, sms, cu::Choice::Auto).split_tiles, 0) << items << " items on " << sms << " SMs";
  const int64_t before = cu::gemm_stats().wide_launches, split = cu::gemm_stats().wide_split_launches;
  SG_EXPECT_PRODUCT(kCuda0, p, sg::kFloat32, rng);
  EXPECT_EQ(cu::gemm_stats().wide_launches - before, 1) << describe(p, sg::kFloat32);
  EXPECT_EQ(cu::gemm_stats().wide_split_launches - split, 1) << describe(p, sg::kFloat32);
}

TEST(CudaGemmWide, RunsStructuredProductsFromThePanelDealWithTheZerosOfAWrittenInItsTile) {
  // The wide kernel takes the structured products whose operands both come directly (A not
  // transposed, B transposed, one or both Upper or Lower) from tall_tile_plan's deal of 128 × 256
  // tiles, where B holds its structural zeros and C takes TMA stores. A's zeros, where its storage
  // lacks them, are written into its tile in the diagonal-crossing steps: with a Dense B (Upper·Dᵀ,
  // Lower·Dᵀ) the random values outside A's structure would otherwise reach C. Upper·Upper's dA =
  // triu(G·Bᵀ) (G unvouched) has tiles of zeros, stored after a block's other items; edge tiles and
  // a last k-step that is not whole (300, 1000); small sizes split long tiles, whose chunks meet in C.
  // Not taken: a B that does not hold its zeros, the kernel turned off. Each against the reference.
  // (Small enough for the sanitizers; Auto's sizes are the next test's.)
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const Variant dense_t{Structure::Dense, true}, upper{Structure::UpperTriangular, false};
  const Variant lower{Structure::LowerTriangular, false}, lower_t{Structure::LowerTriangular, true};
  const ScopedTf32 tf32(cu::Tf32Loop::Auto, cu::Choice::Never);
  if (!wgmma_loop_runs()) GTEST_SKIP() << "the wide kernel serves the wgmma loop, which this device or build does not run";
  struct Case {
    GemmProblem p;
    cu::Choice setting;
    bool structured;  // on the wide kernel's structured schedule
  };
  const auto forced = cu::Choice::Always;
  std::vector<Case> cases;
  for (int64_t n : {300, 640, 1000}) {
    cases.push_back({vouched(square(n, upper, lower_t, Structure::UpperTriangular), false, true), forced, true});  // dA
    cases.push_back({vouched(square(n, upper, lower_t, Structure::UpperTriangular)), forced, true});
    cases.push_back({square(n, upper, dense_t, Structure::Dense), forced, true});  // A's zeros not stored
    cases.push_back({square(n, lower, dense_t, Structure::Dense), forced, true});
    cases.push_back({square(n, upper, lower_t, Structure::UpperTriangular), forced, false});  // B's zeros not stored
    cases.push_back({vouched(square(n, upper, lower_t, Structure::UpperTriangular)), cu::Choice::Never, false});
  }
  std::mt19937_64 rng(41);
  for (const Case& c : cases) {
    set_option([&](cu::GemmTuning& o) { o.wide_tiles = c.setting; });
    const int64_t before = cu::gemm_stats().wide_structured_launches;
    SG_EXPECT_PRODUCT(kCuda0, c.p, sg::kFloat32, rng);
    EXPECT_EQ(cu::gemm_stats().wide_structured_launches - before, c.structured ? 1 : 0) << describe(c.p, sg::kFloat32);
  }
  set_option([&](cu::GemmTuning& o) { o.wide_tiles = cu::Choice::Auto; });
}

TEST(CudaGemmTmaStores, LeaveTheColumnsPastCsWidthAsTheyWere) {
  // C's rows padded to 16 bytes past its n columns: the padding must keep its poison. TMA stores
  // write whole 16-byte chunks, so where n is not a multiple of 4 (522) they would write the two
  // floats past it; there the tall and wide kernels, which write C by TMA only, must not run, and
  // the product goes to a kernel that stores C float by float at its edge. Where n is (520), they run.
  // An Upper A of n × 302 (300) under the Upper mask (tile rows with no k-range: tiles of zeros, the last
  // of them in C's last columns), the operands' rows padded to 16 bytes too; Upper·Dense is the
  // tall kernel's, Upper·Denseᵀ the wide kernel's structured schedule, both forced on.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const Variant dense{Structure::Dense, false}, dense_t{Structure::Dense, true}, upper{Structure::UpperTriangular, false};
  const ScopedTf32 tf32(cu::Tf32Loop::Auto, cu::Choice::Never);
  if (!wgmma_loop_runs()) GTEST_SKIP() << "the tall and wide kernels serve the wgmma loop, which this device or build does not run";
  set_option([&](cu::GemmTuning& o) { o.tall_tiles = cu::Choice::Always; });
  set_option([&](cu::GemmTuning& o) { o.wide_tiles = cu::Choice::Always; });
  std::mt19937_64 rng(53);
  for (int64_t n : {522, 520}) {
    for (bool wide : {false, true}) {
      GemmProblem p = vouched(square(n, upper, wide ? dense_t : dense, Structure::UpperTriangular));
      p.k = n == 522 ? 302 : 300;
      const int64_t pad = n == 522 ? 2 : 4, c_pad = pad;  // every row 16-byte aligned
      const int64_t tall = cu::gemm_stats().tall_launches, wide_launches = cu::gemm_stats().wide_structured_launches;
      SG_EXPECT_PRODUCT_PADDED_C(kCuda0, p, sg::kFloat32, rng, pad, c_pad);
      const int64_t expected = n % 4 == 0 ? 1 : 0;
      EXPECT_EQ(cu::gemm_stats().tall_launches - tall, wide ? 0 : expected) << describe(p, sg::kFloat32);
      EXPECT_EQ(cu::gemm_stats().wide_structured_launches - wide_launches, wide ? expected : 0) << describe(p, sg::kFloat32);
    }
  }
  set_option([&](cu::GemmTuning& o) { o.tall_tiles = cu::Choice::Auto; });
  set_option([&](cu::GemmTuning& o) { o.wide_tiles = cu::Choice::Auto; });
}

/// Entries below the diagonal of an n × n C in the tiles of `rows` × `cols` that lie wholly below it.
int64_t entries_in_tiles_below(int64_t n, int64_t rows, int64_t cols) {
  int64_t count = 0;
  for (int64_t row0 = 0; row0 < n; row0 += rows)
    for (int64_t col0 = 0; col0 < n; col0 += cols)
      if (row0 >= col0 + cols) count += (std::min(row0 + rows, n) - row0) * (std::min(col0 + cols, n) - col0);
  return count;
}

TEST(CudaGemmZerosReused, TheTallAndWideKernelsStoreNoTileOfZerosWhereCHoldsThem) {
  // GemmProblem::c_zeros_stored: C holds exact zeros below the diagonal already (a recycled
  // UpperTriangular output). The tall and wide kernels' plans then leave out the tiles wholly below
  // the diagonal, and nothing is stored there: run_and_compare writes kZerosSentinel below the
  // diagonal, which must stay in exactly those tiles (256 × 128 for the tall kernel, 128 × 256 for
  // the wide one), while the tiles the diagonal crosses write their zeros and everything on and
  // above the diagonal is the product's. Without the flag no sentinel is left. Upper·Upper (tall)
  // and dA = triu(G·Bᵀ) with G unvouched (wide), forced on, at 1000 and 520 (edge tiles). Then the
  // same products on neither kernel, right everywhere (+0 or the sentinel below the diagonal; the
  // next test holds those kernels to exactly their plans' tiles).
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const Variant upper{Structure::UpperTriangular, false}, lower_t{Structure::LowerTriangular, true};
  const ScopedTf32 tf32(cu::Tf32Loop::Auto, cu::Choice::Never);
  if (!wgmma_loop_runs()) GTEST_SKIP() << "the tall and wide kernels serve the wgmma loop, which this device or build does not run";
  std::mt19937_64 rng(59);
  for (bool forced : {true, false}) {
    set_option([&](cu::GemmTuning& o) { o.tall_tiles = forced ? cu::Choice::Always : cu::Choice::Never; });
    set_option([&](cu::GemmTuning& o) { o.wide_tiles = forced ? cu::Choice::Always : cu::Choice::Never; });
    for (int64_t n : {1000, 520}) {
      for (bool wide : {false, true}) {
        for (bool zeros : {false, true}) {
          GemmProblem p = wide ? vouched(square(n, upper, lower_t, Structure::UpperTriangular), false, true)
                               : vouched(square(n, upper, upper, Structure::UpperTriangular));
          p.c_zeros_stored = zeros;
          const int64_t tall = cu::gemm_stats().tall_launches, wide_launches = cu::gemm_stats().wide_structured_launches;
          const Checked checked = run_and_compare(kCuda0, p, sg::kFloat32, rng);
          const std::string what = describe(p, sg::kFloat32) + (zeros ? ", C's zeros stored" : "");
          EXPECT_LE(checked.rel_error, tolerance(sg::kFloat32)) << what;
          EXPECT_TRUE(checked.failure.empty()) << what << ": " << checked.failure;
          if (!forced) continue;
          EXPECT_EQ(cu::gemm_stats().tall_launches - tall, wide ? 0 : 1) << what;
          EXPECT_EQ(cu::gemm_stats().wide_structured_launches - wide_launches, wide ? 1 : 0) << what;
          const int64_t below = wide ? entries_in_tiles_below(n, 128, 256) : entries_in_tiles_below(n, 256, 128);
          ASSERT_GT(below, 0) << what;
          EXPECT_EQ(checked.kept_below, zeros ? below : 0) << what;
        }
      }
    }
  }
  set_option([&](cu::GemmTuning& o) { o.tall_tiles = cu::Choice::Auto; });
  set_option([&](cu::GemmTuning& o) { o.wide_tiles = cu::Choice::Auto; });
}

TEST(CudaGemmZerosReused, EveryOtherLoopStoresNoTileOfZerosWhereCHoldsThem) {
  // GemmProblem::c_zeros_stored on the kernels that run from plan_structured_gemm's plans: exact
  // float32 on FFMA and on the FP64 tensor cores, float64 on DFMA and on them, and TF32's register-B, pipelined and
  // mma.sync kernels. Their plans leave out the tiles wholly below the diagonal where C holds its
  // zeros, as the tall and wide kernels' do: run_and_compare's sentinel below the diagonal must stay
  // in exactly the plan's tiles (its tile size) that lie wholly below it, and nowhere without the
  // flag; everything else against float64. Upper·Upper at 1000 and 520 (edge tiles), each loop the
  // device runs (the plan says which config ran: the FP64 loop falls back to FFMA where it cannot).
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const Variant upper{Structure::UpperTriangular, false};
  struct Loop {
    const char* name;
    sg::DType dtype;
    bool tf32;
    cu::Fp32Loop fp32;
    cu::Tf32Loop tf32_loop;
    cu::Choice register_b;
    cu::Fp64Loop fp64 = cu::Fp64Loop::Auto;
  };
  const std::vector<Loop> loops = {
      {"float64 on DFMA", sg::kFloat64, false, cu::Fp32Loop::Auto, cu::Tf32Loop::Auto, cu::Choice::Auto,
       cu::Fp64Loop::Dfma},
      {"float64 on the FP64 tensor cores", sg::kFloat64, false, cu::Fp32Loop::Auto, cu::Tf32Loop::Auto,
       cu::Choice::Auto, cu::Fp64Loop::Dmma},
      {"float32 on FFMA", sg::kFloat32, false, cu::Fp32Loop::Fma, cu::Tf32Loop::Auto, cu::Choice::Auto},
      {"float32 on the FP64 tensor cores", sg::kFloat32, false, cu::Fp32Loop::Dmma, cu::Tf32Loop::Auto,
       cu::Choice::Auto},
      {"TF32, register-B", sg::kFloat32, true, cu::Fp32Loop::Auto, cu::Tf32Loop::Auto, cu::Choice::Always},
      {"TF32, pipelined", sg::kFloat32, true, cu::Fp32Loop::Auto, cu::Tf32Loop::Auto, cu::Choice::Never},
      {"TF32, mma.sync", sg::kFloat32, true, cu::Fp32Loop::Auto, cu::Tf32Loop::MmaSync, cu::Choice::Auto},
  };
  std::mt19937_64 rng(67);
  for (const Loop& loop : loops) {
    const ScopedTf32 restore_defaults_at_end(loop.tf32_loop, cu::Choice::Never);
    g_tf32 = loop.tf32;
    sg::set_matmul_precision(loop.tf32 ? sg::Precision::TF32 : sg::Precision::Float32);
    set_option([&](cu::GemmTuning& o) { o.fp32_loop = loop.fp32; });
    set_option([&](cu::GemmTuning& o) { o.fp64_loop = loop.fp64; });
    set_option([&](cu::GemmTuning& o) { o.register_b = loop.register_b; });
    set_option([&](cu::GemmTuning& o) { o.tall_tiles = cu::Choice::Never; });
    set_option([&](cu::GemmTuning& o) { o.wide_tiles = cu::Choice::Never; });
    for (int64_t n : {1000, 520}) {
      for (bool zeros : {false, true}) {
        GemmProblem p = vouched(square(n, upper, upper, Structure::UpperTriangular));
        p.c_zeros_stored = zeros;
        GemmProblem planned = p;  // (run_and_compare sets the leading dimensions itself)
        planned.lda = planned.ldb = planned.ldc = n;
        const cu::GemmWorkPlan& plan = cu::structured_gemm_plan(planned, loop.dtype, 0);
        const std::string what = std::string(loop.name) + " (" + cu::tile_config_name(plan.config) + "), " +
                                 describe(p, loop.dtype) + (zeros ? ", C's zeros stored" : "");
        const int64_t tall = cu::gemm_stats().tall_launches, wide = cu::gemm_stats().wide_launches;
        const Checked checked = run_and_compare(kCuda0, p, loop.dtype, rng);
        EXPECT_LE(checked.rel_error, tolerance(loop.dtype)) << what;
        EXPECT_TRUE(checked.failure.empty()) << what << ": " << checked.failure;
        EXPECT_EQ(cu::gemm_stats().tall_launches - tall, 0) << what;
        EXPECT_EQ(cu::gemm_stats().wide_launches - wide, 0) << what;
        const int64_t below = entries_in_tiles_below(n, plan.tile, plan.tile);
        ASSERT_GT(below, 0) << what;
        EXPECT_EQ(checked.kept_below, zeros ? below : 0) << what;
      }
    }
    set_option([&](cu::GemmTuning& o) { o.wide_tiles = cu::Choice::Auto; });
  }
}

TEST(CudaGemmZerosReused, UpperOutputsTakeTheBlocksThatHoldTheirZerosAndOnlyThose) {
  // An UpperTriangular product on CUDA takes its output from the matmul op's pool: a block an output
  // of its shape left with its zeros below the diagonal, untouched since (ops/output_pool.h); its
  // tall and wide kernels then store no tiles of zeros there. Each step below frees one output and
  // computes the next, against float64 on the CPU, below the diagonal exactly +0 (a block wrongly
  // trusted keeps its NaN there):
  //  1. a freed output: its block taken, its zeros reused;
  //  2. viewed as Dense and overwritten with NaN through data_ptr(): not reused;
  //  3. fill_(NaN) on the output itself (a write its version counts): not reused;
  //  4. a Dense tensor of the same size: never handed a pooled block;
  //  5. an output of another shape (599): not handed the 600 block;
  //  6. the reuse switched off (set_upper_output_reuse): not reused.
  // Then forward + backward twice: the second round's C, dA and dB reuse the first round's blocks, and
  // each gradient is right. TF32, the tall and wide kernels forced on.
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const ScopedTf32 tf32(cu::Tf32Loop::Auto, cu::Choice::Auto);
  if (!wgmma_loop_runs()) GTEST_SKIP() << "the tall and wide kernels serve the wgmma loop, which this device or build does not run";
  set_option([&](cu::GemmTuning& o) {
    o.tall_tiles = cu::Choice::Always;
    o.wide_tiles = cu::Choice::Always;
  });
  const auto f32 = sg::TensorOptions().dtype(sg::kFloat32).device(kCuda0);
  auto on_cpu = [](const sg::Tensor& t) { return t.to(sg::kCPU).to(sg::kFloat64); };
  sg::manual_seed(61);
  std::vector<sg::Tensor> u, v;
  for (int i = 0; i < 4; ++i) u.push_back(sg::UpperTriangular::randn(600, f32));
  for (int i = 0; i < 2; ++i) v.push_back(sg::UpperTriangular::randn(599, f32));
  // What an output must hold: the float64 product, and +0 below the diagonal.
  auto expect_right = [&](const sg::Tensor& c, const sg::Tensor& x, const sg::Tensor& y, const std::string& what) {
    const std::vector<double> got = on_cpu(c).to_vector(), want = sg::matmul(on_cpu(x), on_cpu(y)).to_vector();
    EXPECT_LE(sgtest::rel_error(got, want), 2e-3) << what;
    const int64_t n = c.size(0);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < i; ++j) wrong += got[static_cast<size_t>(i * n + j)] != 0.0 || std::signbit(got[static_cast<size_t>(i * n + j)]);
    EXPECT_EQ(wrong, 0) << what << ": entries below the diagonal that are not +0";
  };
  auto product = [](const sg::Tensor& x, const sg::Tensor& y) { return sg::matmul(x, y); };  // Upper·Upper: Upper
  sg::cuda::synchronize(0);
  sg::cuda::empty_cache();  // no pooled output, no other block of the outputs' size class in the cache
  sg::Tensor c = product(u[0], u[1]);
  void* const block = c.data_ptr();
  const size_t bytes = c.nbytes();
  // Frees c and computes x·y: reused or not as `reused` says (in the block under test where `same`).
  auto next = [&](const sg::Tensor& x, const sg::Tensor& y, bool reused, bool same, const std::string& what) {
    c = sg::Tensor();
    const int64_t before = sg::detail::upper_outputs_reused();
    c = product(x, y);
    if (same) EXPECT_EQ(c.data_ptr(), block) << what << ": the output did not land in the block under test";
    EXPECT_EQ(sg::detail::upper_outputs_reused() - before, reused ? 1 : 0) << what;
    expect_right(c, x, y, what);
  };
  next(u[2], u[3], true, true, "1. a freed output");
  {
    const sg::Tensor view = c.dense();
    sg::cuda::synchronize(0);
    ASSERT_EQ(cudaMemset(view.data_ptr(), 0xFF, bytes), cudaSuccess);  // NaN in every entry
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  next(u[0], u[1], false, true, "2. NaN written through a Dense view");
  c.fill_(std::nan(""));
  next(u[2], u[3], false, true, "3. fill_(NaN) on the output");
  next(u[0], u[1], true, true, "1 again");
  c = sg::Tensor();  // the block back in the pool
  {
    sg::Tensor dense = sg::Tensor::empty({600, 600}, f32);
    sg::Tensor other = product(v[0], v[1]);
    EXPECT_NE(dense.data_ptr(), block) << "4. a Dense tensor took the pooled block";
    EXPECT_NE(other.data_ptr(), block) << "5. an output of 599 took the pooled block of 600";
  }
  c = sg::Tensor();
  sg::detail::set_upper_output_reuse(false);
  next(u[1], u[0], false, false, "6. the reuse off");
  sg::detail::set_upper_output_reuse(true);
  c = sg::Tensor();

  // Forward + backward, twice.
  sg::Tensor a = u[0].detach().requires_grad_(), b = u[1].detach().requires_grad_();
  const sg::Tensor a64 = on_cpu(u[0]), b64 = on_cpu(u[1]);
  for (int round = 0; round < 2; ++round) {
    const sg::Tensor g = sg::randn({600, 600}, f32);
    const int64_t before = sg::detail::upper_outputs_reused();
    sg::matmul(a, b).backward(g);
    if (round == 1) EXPECT_EQ(sg::detail::upper_outputs_reused() - before, 3) << "C, dA and dB of the second round";
    sg::Tensor x = a64.detach().requires_grad_(), y = b64.detach().requires_grad_();
    sg::matmul(x, y).backward(on_cpu(g));
    for (const auto& [ours, want, name] : {std::tuple{a.grad(), x.grad(), "dA"}, std::tuple{b.grad(), y.grad(), "dB"}}) {
      const std::vector<double> got = on_cpu(ours).to_vector();
      EXPECT_LE(sgtest::rel_error(got, want.to_vector()), 2e-3) << name << ", round " << round;
      int64_t wrong = 0;
      for (int64_t i = 0; i < 600; ++i)
        for (int64_t j = 0; j < i; ++j) wrong += got[static_cast<size_t>(i * 600 + j)] != 0.0;
      EXPECT_EQ(wrong, 0) << name << ", round " << round << ": entries below the diagonal that are not 0";
    }
    a.zero_grad();
    b.zero_grad();
  }
  set_option([&](cu::GemmTuning& o) { o.tall_tiles = cu::Choice::Auto; });
  set_option([&](cu::GemmTuning& o) { o.wide_tiles = cu::Choice::Auto; });
}

TEST(CudaGemmWide, AutoTakesDaFromOneTilePerSmAndOneDenseOperandFromOnePerTwoSms) {
  // On Auto the wide kernel's structured schedule takes dA = triu(G·Bᵀ) of Upper·Upper (G
  // unvouched) at 4096 (272 tiles of 128 × 256 with a k-range), not at 2048 (72); with one Dense
  // operand (Upper·Dᵀ, the shape of Upper·Sym with the mirror stored) from one tile per two SMs:
  // at 2048 (128 tiles), not at 1024 (32). Each against the reference. dA at 4096, whose plan
  // splits tiles, gives the same bits in eight launches (the chunks meet in C in either order).
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const Variant dense_t{Structure::Dense, true}, upper{Structure::UpperTriangular, false}, lower_t{Structure::LowerTriangular, true};
  const ScopedTf32 tf32(cu::Tf32Loop::Auto, cu::Choice::Never);
  if (!wgmma_loop_runs()) GTEST_SKIP() << "the wide kernel serves the wgmma loop, which this device or build does not run";
  struct Case {
    GemmProblem p;
    bool structured;  // on the wide kernel's structured schedule
  };
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  if (sms <= 72 || sms > 156)
    GTEST_SKIP() << "the cases assume 73 to 156 SMs (dA at 2048: 72 tiles with a k-range; Upper·Dᵀ at 1024: 32, "
                    "at 2048: 128), this device has "
                 << sms;
  std::mt19937_64 rng(43);
  const GemmProblem da = vouched(square(4096, upper, lower_t, Structure::UpperTriangular), false, true);
  const std::vector<Case> cases = {{da, true},
                                   {vouched(square(2048, upper, lower_t, Structure::UpperTriangular), false, true), false},
                                   {square(2048, upper, dense_t, Structure::Dense), true},
                                   {square(1024, upper, dense_t, Structure::Dense), false}};
  for (const Case& c : cases) {
    const int64_t before = cu::gemm_stats().wide_structured_launches;
    SG_EXPECT_PRODUCT(kCuda0, c.p, sg::kFloat32, rng);
    EXPECT_EQ(cu::gemm_stats().wide_structured_launches - before, c.structured ? 1 : 0) << describe(c.p, sg::kFloat32);
  }
  GemmProblem planned = da;
  planned.tf32 = true;
  ASSERT_GT(cu::tall_tile_plan(planned, sms, 128, 256).split_tiles, 0) << "dA at 4096 splits tiles";
  const int64_t before = cu::gemm_stats().wide_structured_launches;
  expect_the_same_bits_each_launch(planned, rng, 8, describe(da, sg::kFloat32));
  EXPECT_EQ(cu::gemm_stats().wide_structured_launches - before, 8);
}

TEST(CudaGemmLaunch, ChainedProductsReadWhatTheKernelBeforeThemWrote) {
  // The tall and wide kernels are launched so that each may begin before the kernel before it in the
  // stream has completed (set_dependent_launch): its blocks must wait for that kernel before they
  // touch memory. A chain at 3072 on Auto in which each product reads the one before it, all queued before
  // anything is read back: c1 = U1·U2 and c2 = c1·U3 (tall), y = linear(c2, U4) = c2·U4ᵀ (the wide
  // kernel's structured schedule), z = y·U5 (tall). Each product against float64 on the CPU from its
  // inputs as the device holds them; dependent launches, then ordinary ones, then dependent again,
  // with new inputs each round (so an output read too early, from the last round's memory, is wrong).
  SG_SKIP_IF_UNAVAILABLE(kCuda0);
  const ScopedTf32 tf32(cu::Tf32Loop::Auto, cu::Choice::Auto);
  if (!wgmma_loop_runs()) GTEST_SKIP() << "the tall and wide kernels serve the wgmma loop, which this device or build does not run";
  const int64_t n = 3072;
  const auto f32 = sg::TensorOptions().dtype(sg::kFloat32).device(kCuda0);
  auto on_cpu = [](const sg::Tensor& t) { return t.to(sg::kCPU).to(sg::kFloat64); };
  sg::manual_seed(47);
  for (bool dependent : {true, false, true}) {
    SCOPED_TRACE(dependent ? "dependent launches" : "ordinary launches");
    set_option([&](cu::GemmTuning& o) { o.dependent_launch = dependent; });
    std::vector<sg::UpperTriangular> u;
    for (int i = 0; i < 5; ++i) u.push_back(sg::UpperTriangular::randn(n, f32));
    const int64_t tall = cu::gemm_stats().tall_launches, wide = cu::gemm_stats().wide_structured_launches;
    const sg::UpperTriangular c1 = sg::matmul(u[0], u[1]);
    const sg::UpperTriangular c2 = sg::matmul(c1, u[2]);
    const sg::Tensor y = sg::linear(c2, u[3]);
    const sg::Tensor z = sg::matmul(y, u[4]);
    EXPECT_EQ(cu::gemm_stats().tall_launches - tall, 3) << "c1, c2 and z on the tall kernel";
    EXPECT_EQ(cu::gemm_stats().wide_structured_launches - wide, 1) << "y on the wide kernel's structured schedule";
    const sg::Tensor c1_64 = on_cpu(c1), c2_64 = on_cpu(c2), y_64 = on_cpu(y);
    EXPECT_LE(sgtest::rel_error(c1_64.to_vector(), sg::matmul(on_cpu(u[0]), on_cpu(u[1])).to_vector()), 2e-3) << "c1";
    EXPECT_LE(sgtest::rel_error(c2_64.to_vector(), sg::matmul(c1_64, on_cpu(u[2])).to_vector()), 2e-3) << "c2";
    EXPECT_LE(sgtest::rel_error(y_64.to_vector(), sg::linear(c2_64, on_cpu(u[3])).to_vector()), 2e-3) << "y";
    EXPECT_LE(sgtest::rel_error(on_cpu(z).to_vector(), sg::matmul(y_64, on_cpu(u[4])).to_vector()), 2e-3) << "z";
  }
}


#endif

}  // namespace
