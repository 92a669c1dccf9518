// The structured GEMM's operand and output handling against the float64 reference: vouched zeros
// and mirrors, relayout copies, the wide kernel, TMA stores, and outputs whose zeros are already there.
#include "cuda/gemm_cuda_check.h"

namespace {

using namespace sgtest::gemm;

#if defined(SG_WITH_CUDA)
using cu::GemmTileConfig;
using cu::GemmWorkPlan;

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

#endif

}  // namespace
