// The CUDA structured GEMM against the CPU float64 reference (ops/cpu/reference_gemm.cpp):
// every operand descriptor (Dense / Upper / Lower / Symmetric, stored transposed or not) on
// each side, every output mask, sizes that are and are not tile multiples, rectangular Dense
// operands, float32, float64 and TF32, through the checks of gemm_check.h (poisoned outputs,
// random values outside the structures).
#include "cuda/gemm_cuda_check.h"

namespace {

using namespace sgtest::gemm;

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

#endif

}  // namespace
