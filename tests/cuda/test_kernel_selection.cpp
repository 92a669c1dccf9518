// The structured GEMM's launch plans (cuda/gemm/selection.h), made on the host for an H100's
// capabilities from the tile scheduler's plans, without a GPU: which copies a product makes, the
// kernel it runs on, the maps it encodes and the plans it reads, for the products the library's
// matmul, gram and backward issue.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda/gemm/selection.h"
#include "gemm_check.h"

namespace {

namespace cu = sg::detail::cuda;
using cu::GemmKernel;
using cu::GemmTileConfig;
using sg::Structure;
using sg::detail::GemmProblem;
using sgtest::gemm::Variant;

/// An H100 with this build's sm_90a code.
cu::DeviceCaps hopper() {
  cu::DeviceCaps caps;
  caps.sms = 132;
  caps.compute_capability = 90;
  caps.sm90a_code = true;
  caps.full_rate_fp64 = true;
  caps.tensor_maps = true;
  return caps;
}

/// `p` over packed operands at 16-byte aligned addresses (the library's tensors), in TF32 or not.
GemmProblem packed(GemmProblem p, bool tf32) {
  p.tf32 = tf32;
  p.a_data = reinterpret_cast<const void*>(uintptr_t{1} << 20);
  p.b_data = reinterpret_cast<const void*>(uintptr_t{2} << 20);
  p.c_data = reinterpret_cast<void*>(uintptr_t{3} << 20);
  p.lda = p.a.trans ? p.m : p.k;
  p.ldb = p.b.trans ? p.k : p.n;
  p.ldc = p.n;
  return p;
}

/// The plans and the launch plan of `p` (its mirrors resolved as the launcher resolves them), on the
/// host: two resident blocks of every configuration per SM.
struct Planned {
  GemmProblem p;
  cu::ProductPlans plans;
  cu::LaunchPlan launch;
};

Planned plan(GemmProblem problem, sg::DType dtype, const cu::GemmTuning& options = {}) {
  const cu::DeviceCaps caps = hopper();
  const cu::GemmFamily family = cu::select_family(dtype, problem.tf32, caps, options);
  Planned out;
  out.p = cu::with_stored_mirrors_as_dense(problem, family.tf32);
  auto product_plans = [&](const GemmProblem& q) {
    return cu::plan_product(q, cu::tile_config_candidates(dtype, family, options), family.wgmma, caps.sms,
                            [](GemmTileConfig) { return 2; }, options);
  };
  out.plans = product_plans(out.p);
  out.launch = cu::select_launch(out.p, out.plans.plan.config, [&](const GemmProblem& q) { return product_plans(q).facts(); },
                                 caps, options);
  return out;
}

const Variant kDense{Structure::Dense, false}, kDenseT{Structure::Dense, true};
const Variant kUpper{Structure::UpperTriangular, false}, kLowerT{Structure::LowerTriangular, true};
const Variant kSymmetric{Structure::Symmetric, false};

TEST(LaunchPlan, Tf32UpperUpperForwardRunsOnTheTallKernelAndOffersTheTransposedA) {
  // C = triu(A·B), A and B UpperTriangular tensors: A outer-major, B k-major, read as they lie.
  const Planned p = plan(packed(sgtest::gemm::vouched(sgtest::gemm::square(4096, kUpper, kUpper, Structure::UpperTriangular)), true),
                         sg::kFloat32);
  EXPECT_EQ(p.launch.config, GemmTileConfig::Float32Tf32Wgmma);
  EXPECT_FALSE(p.launch.copies.any());
  EXPECT_EQ(p.launch.kernel, GemmKernel::Tall) << cu::gemm_kernel_name(p.launch.kernel);
  EXPECT_EQ(p.launch.maps & (cu::kADirect | cu::kBRaw | cu::kCStore), cu::kADirect | cu::kBRaw | cu::kCStore);
  EXPECT_TRUE(p.launch.maps & cu::kBRawBlocks);  // B's rows hold whole column blocks
  EXPECT_TRUE(p.launch.writes_at);
  // Unless the tuning turns the second output off.
  cu::GemmTuning no_at;
  no_at.transposed_a_output = false;
  EXPECT_FALSE(plan(p.p, sg::kFloat32, no_at).launch.writes_at);
}

TEST(LaunchPlan, Tf32GramRunsOnTheWideKernelWithTmaStores) {
  // gram(a) = a·aᵀ: both operands outer-major Dense, C Symmetric (its mirror by the kernel's stores).
  Planned p = plan(packed(sgtest::gemm::square(4096, kDense, kDenseT, Structure::Dense), true), sg::kFloat32);
  EXPECT_EQ(p.launch.kernel, GemmKernel::Wide) << cu::gemm_kernel_name(p.launch.kernel);
  EXPECT_TRUE(p.launch.maps & cu::kCStore);
  EXPECT_FALSE(p.launch.whole_plan);
  EXPECT_TRUE(p.plans.facts().wide_plan);
  // An output whose rows take no TMA stores (a leading dimension that is no multiple of 4): where the
  // wide plan cuts its last round in k, the launch reads the plan without the cut.
  GemmProblem odd = p.p;
  odd.ldc = odd.n + 1;
  const Planned q = plan(odd, sg::kFloat32);
  EXPECT_EQ(q.launch.kernel, GemmKernel::Wide);
  EXPECT_FALSE(q.launch.maps & cu::kCStore);
  EXPECT_EQ(q.launch.whole_plan, q.plans.wide_split.split_tiles > 0);
}

TEST(LaunchPlan, Tf32UpperBackwardRunsOnTheWideKernelsStructuredPlan) {
  // dA = triu(G·Bᵀ) of Upper·Upper: G outer-major (read through the Upper structure), Bᵀ outer-major
  // with its zeros stored.
  GemmProblem g = sgtest::gemm::square(4096, kUpper, kLowerT, Structure::UpperTriangular);
  g.b.zeros_stored = true;
  const Planned p = plan(packed(g, true), sg::kFloat32);
  EXPECT_EQ(p.launch.kernel, GemmKernel::WideStructured) << cu::gemm_kernel_name(p.launch.kernel);
  EXPECT_TRUE(p.launch.maps & cu::kCStore);
  EXPECT_FALSE(p.launch.copies.any());
}

TEST(LaunchPlan, SmallProductsStageEveryTileThroughRegisters) {
  const Planned p = plan(packed(sgtest::gemm::square(17, kUpper, kUpper, Structure::UpperTriangular), true), sg::kFloat32);
  EXPECT_EQ(p.launch.config, GemmTileConfig::Float32Tf32Wgmma);
  EXPECT_EQ(p.launch.kernel, GemmKernel::Tiled);
  EXPECT_EQ(p.launch.maps, 0u);
  EXPECT_FALSE(p.launch.copies.any());
}

TEST(LaunchPlan, ASymmetricOperandWithoutItsMirrorIsCopiedFirst) {
  // Dense·Sym in TF32 with the Symmetric operand read from its upper triangle only (an unprojected
  // gradient): B is copied outer-major first, as a mirror copy whose stored triangle comes from B itself.
  const Planned p = plan(packed(sgtest::gemm::square(4096, kDense, kSymmetric, Structure::Dense), true), sg::kFloat32);
  EXPECT_TRUE(p.launch.copies.b);
  EXPECT_FALSE(p.launch.copies.k_major);
  EXPECT_TRUE(cu::mirror_copy(p.p, true, false));
  EXPECT_EQ(p.launch.stored_maps & 2u, (p.launch.maps & cu::kBDirect) ? 2u : 0u);
  // Its mirror stored (a Symmetric tensor), it is the Dense matrix it is: nothing is copied.
  const Planned stored = plan(packed(sgtest::gemm::vouched(sgtest::gemm::square(4096, kDense, kSymmetric, Structure::Dense)), true),
                              sg::kFloat32);
  EXPECT_EQ(stored.p.b.structure, Structure::Dense);
  EXPECT_FALSE(stored.launch.copies.any());
  // Copies off: the same product reads B as it lies.
  cu::GemmTuning never;
  never.relayout = cu::Choice::Never;
  EXPECT_FALSE(plan(p.p, sg::kFloat32, never).launch.copies.any());
}

TEST(LaunchPlan, ExactFloat32CopiesSymmetricOperandsKMajorForTheFp64Loop) {
  const Planned p = plan(packed(sgtest::gemm::square(2048, kSymmetric, kDense, Structure::Dense), false), sg::kFloat32);
  ASSERT_EQ(p.launch.config, GemmTileConfig::Float32Dmma) << cu::tile_config_name(p.launch.config);
  EXPECT_TRUE(p.launch.copies.a);
  EXPECT_FALSE(p.launch.copies.b);
  EXPECT_TRUE(p.launch.copies.k_major);
  EXPECT_FALSE(cu::copy_holds_zeros(p.launch.copies, false));  // (only the relayout copies' bands)
  EXPECT_EQ(p.launch.kernel, GemmKernel::Tiled);
  EXPECT_FALSE(p.launch.writes_at);
}

TEST(LaunchPlan, Float64AndForcedLoopsRunTheTiledKernel) {
  const Planned f64 = plan(packed(sgtest::gemm::square(1024, kUpper, kUpper, Structure::UpperTriangular), false), sg::kFloat64);
  EXPECT_EQ(f64.launch.kernel, GemmKernel::Tiled);
  EXPECT_FALSE(f64.launch.copies.any());
  cu::GemmTuning mma_sync;
  mma_sync.tf32_loop = cu::Tf32Loop::MmaSync;
  const Planned forced = plan(packed(sgtest::gemm::square(1024, kUpper, kUpper, Structure::UpperTriangular), true),
                              sg::kFloat32, mma_sync);
  EXPECT_EQ(forced.launch.config, GemmTileConfig::Float32Tf32);
  EXPECT_EQ(forced.launch.kernel, GemmKernel::Tiled);
}

TEST(LaunchPlan, CopiesChangeOnlyTheCopiedOperands) {
  GemmProblem p = packed(sgtest::gemm::square(300, kDenseT, kSymmetric, Structure::Dense), true);
  const void* a_copy = reinterpret_cast<const void*>(uintptr_t{4} << 20);
  const GemmProblem q = cu::on_copies(p, {true, false, false}, a_copy, nullptr);
  EXPECT_EQ(q.a.structure, Structure::Dense);
  EXPECT_FALSE(q.a.trans);  // outer-major
  EXPECT_EQ(q.a_data, a_copy);
  EXPECT_EQ(q.lda, 300);    // 300 columns of k: already whole 16-byte vectors
  EXPECT_EQ(cu::copy_ld(p, false, true), 300);
  EXPECT_EQ(q.b_data, p.b_data);
  EXPECT_EQ(q.b.structure, Structure::Symmetric);
  EXPECT_EQ(cu::copy_ld(packed(sgtest::gemm::square(17, kDense, kDense, Structure::Dense), true), true, false), 20);
}

}  // namespace
