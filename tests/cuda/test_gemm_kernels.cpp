// The structured GEMM's wgmma kernels against the float64 reference, each where the selection
// sends products and forced: the pipelined, register-B and tall kernels, tiles split in two that meet
// in C, and products chained on one stream.
#include "cuda/gemm_cuda_check.h"

namespace {

using namespace sgtest::gemm;

#if defined(SG_WITH_CUDA)
using cu::GemmTileConfig;
using cu::GemmWorkPlan;

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
