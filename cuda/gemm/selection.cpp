// Kernel selection (selection.h): select_launch makes a product's launch plan, in this order:
//
//   family      float64: DFMA. float32: exact on the FP64 tensor cores (sm_90a code on a full-rate
//               float64 device) or FFMA; TF32 on wgmma (sm_90a code, compute capability 9.0) or
//               mma.sync (sm_80+), unless the tuning forces another loop.
//   tiles       TF32: one configuration. Exact float32 and float64: the tensor cores' tiles against
//               the CUDA cores', whichever plan the cost model finishes first (the plan cache ranks them).
//   copies      relayout (wgmma): a k-major or Symmetric operand copied outer-major where the reuse
//               of the copy pays for it, B not where the register-B or the tall kernel reads it as it
//               lies; the FP64 loop copies Symmetric operands k-major.
//   wgmma       wide structured   both operands by direct copies, one triangular, B holding its
//   kernels                       zeros, C taking TMA stores, ≥ 1 tile per SM (2 SMs with a Dense operand)
//               wide              both operands direct and Dense, the persistent rounds ≥ 80 % full
//                                 or the last round cut, not under an Upper mask
//               tall              A direct, B raw (k-major), A holding its zeros, C taking TMA stores,
//                                 ≥ 1 tile per SM (2 SMs with a Dense operand)
//               pipelined         both operands direct, one triangular
//               register-B        A direct, B raw, one triangular
//               tiled + TMA       any operand with a map (the variant by which, and by structure)
//               tiled, staged     no maps (small or unaligned operands)
//   encoding    the maps each kernel reads and writes: C by TMA stores where it takes them, B's raw
//               steps as one box where its rows hold whole column blocks, op(A)ᵀ from the tall kernel.
//
// The thresholds are measured on an H100 (docs/structured_gemm.md, "Kernel selection").
#include "cuda/gemm/selection.h"

#include <algorithm>

#include "cuda/gemm/relayout.h"

namespace sg::detail::cuda {

namespace {

/// The wgmma loop with every kind of TMA copy and relayout: the default, and its ablation without
/// the pipelined kernel.
bool full_tma(Tf32Loop loop) { return loop == Tf32Loop::Auto || loop == Tf32Loop::WgmmaBarrierPerStep; }

bool wgmma_usable(const DeviceCaps& caps) { return caps.sm90a_code && caps.compute_capability == 90; }

bool register_b_on(const GemmTuning& options) { return options.register_b != Choice::Never; }

bool triangular(const OperandView<float>& v) {
  return v.pattern == Pattern::KAtLeastOuter || v.pattern == Pattern::KAtMostOuter;
}

/// Products up to this many rows run on the tall kernel with B as it lies rather than on the wide
/// kernel with B copied outer-major: the copy's share of the time falls as the rows that reuse it grow.
constexpr int64_t kTallForCopyRows = 4096;
/// The FP64 loop copies Symmetric operands k-major from this extent on.
constexpr int64_t kKMajorCopySymmetricFrom = 1024;

bool wide_split_runs(const GemmArgs<float>& args, const PlanFacts& plans, const DeviceCaps& caps,
                     const GemmTuning& options) {
  return plans.wide_split_tiles > 0 && options.wide_tma_store && output_takes_tma_stores(args, caps.tensor_maps);
}

/// The wide kernel on a dense-shaped product: where the persistent blocks' rounds of items are at
/// least 80 % full or its last round is cut in k, and not under an Upper mask.
bool wide_tiles_pay(const GemmProblem& p, size_t items, bool split, const DeviceCaps& caps,
                    const GemmTuning& options) {
  if (options.tf32_loop != Tf32Loop::Auto || options.wide_tiles == Choice::Never) return false;
  if (options.wide_tiles == Choice::Always) return true;
  if (p.mask == Structure::UpperTriangular) return false;
  const size_t sms = static_cast<size_t>(caps.sms), rounds = (items + sms - 1) / sms;
  return split || 10 * items >= 8 * rounds * sms;
}

bool wide_structured_pays(const GemmArgs<float>& args, const PlanFacts& plans, const DeviceCaps& caps,
                          const GemmTuning& options) {
  if (options.wide_tiles == Choice::Never || options.tf32_loop != Tf32Loop::Auto || !options.wide_tma_store ||
      plans.wide_structured_tiles < 0 || !output_takes_tma_stores(args, caps.tensor_maps))
    return false;
  // A's zeros are written into its tile where its storage lacks them; B's must be there.
  if (args.b.pattern != Pattern::All && !args.b.zeros_stored) return false;
  if (options.wide_tiles == Choice::Always) return true;
  const bool one_dense = args.a.pattern == Pattern::All || args.b.pattern == Pattern::All;
  return (one_dense ? 2 : 1) * plans.wide_structured_tiles >= static_cast<int64_t>(caps.sms);
}

bool tall_pays(const GemmProblem& p, const OperandView<float>& a, const OperandView<float>& b, const PlanFacts& plans,
               const DeviceCaps& caps, const GemmTuning& options) {
  if (options.tall_tiles == Choice::Never || options.tf32_loop != Tf32Loop::Auto || !register_b_on(options) ||
      plans.tall_tiles < 0)
    return false;
  // B's zeros are written into its fragments where its storage lacks them; A's must be there.
  const bool zeros = a.pattern == Pattern::All || a.zeros_stored;
  if (!zeros || !rows_take_tma_stores(p.c_data, p.ldc, p.n)) return false;
  if (options.tall_tiles == Choice::Always) return true;
  const bool one_dense = a.pattern == Pattern::All || b.pattern == Pattern::All;
  return (one_dense ? 2 : 1) * plans.tall_tiles >= static_cast<int64_t>(caps.sms);
}

/// The tiled-family kernel of a wgmma product whose operands have the maps `has`.
WgmmaChoice tiled_wgmma_kernel(const OperandView<float>& a, const OperandView<float>& b, uint32_t has,
                               const GemmTuning& options) {
  const Tf32Loop loop = options.tf32_loop;
  const bool a_tma = has & (kADirect | kARaw), b_tma = has & (kBDirect | kBRaw);
  const bool any_triangular = triangular(a) || triangular(b);
  // Both operands by direct copies only: no raw ring, its space a third buffer.
  const bool deep = has == (kADirect | kBDirect);
  // Where both are Dense the one-barrier-per-step kernel is faster than the pipelined one.
  if (deep && any_triangular && loop == Tf32Loop::Auto) return {GemmKernel::Pipelined, TmaVariant::AB, has};
  if (has == (kADirect | kBRaw) && any_triangular && loop == Tf32Loop::Auto && register_b_on(options))
    return {GemmKernel::RegisterB, TmaVariant::AB, has};
  // A triangular operand's diagonal-crossing steps by TMA too, except where both operands are
  // k-major (one of them stays on the register stager).
  const bool diag = any_triangular && full_tma(loop) && !(a.layout == Layout::KMajor && b.layout == Layout::KMajor);
  // Both triangles of Symmetric operands by TMA: Symmetric·Symmetric only (with one Symmetric
  // operand the other takes the ring).
  const bool sym = full_tma(loop) && a.pattern == Pattern::Symmetric && b.pattern == Pattern::Symmetric;
  const TmaVariant variant = deep && diag             ? TmaVariant::ABDeepDiag
                             : deep                   ? TmaVariant::ABDeep
                             : a_tma && b_tma && diag ? TmaVariant::ABDiag
                             : a_tma && b_tma && sym  ? TmaVariant::ABSym
                             : a_tma && b_tma         ? TmaVariant::AB
                             : a_tma                  ? TmaVariant::A
                                                      : TmaVariant::B;
  return {GemmKernel::Tma, variant, has};
}

}  // namespace

GemmFamily select_family(DType dtype, bool tf32, const DeviceCaps& caps, const GemmTuning& options) {
  GemmFamily family;
  family.tf32 = dtype == DType::Float32 && tf32 && caps.compute_capability >= 80;
  family.wgmma = family.tf32 && options.tf32_loop != Tf32Loop::MmaSync && wgmma_usable(caps);
  const bool dmma_asked = dtype == DType::Float32 ? !family.tf32 && options.fp32_loop != Fp32Loop::Fma
                                                  : options.fp64_loop != Fp64Loop::Dfma;
  family.dmma = dmma_asked && wgmma_usable(caps) && caps.full_rate_fp64;
  return family;
}

std::vector<GemmTileConfig> tile_config_candidates(DType dtype, const GemmFamily& family,
                                                   const GemmTuning& options) {
  if (dtype == DType::Float64) {
    if (!family.dmma) return {GemmTileConfig::Float64};
    if (options.fp64_loop == Fp64Loop::Dmma) return {GemmTileConfig::Float64Dmma};
    return {GemmTileConfig::Float64Dmma, GemmTileConfig::Float64};
  }
  if (family.tf32) return {family.wgmma ? GemmTileConfig::Float32Tf32Wgmma : GemmTileConfig::Float32Tf32};
  const GemmTileConfig large = family.dmma ? GemmTileConfig::Float32Dmma : GemmTileConfig::Float32Large;
  if (family.dmma && options.fp32_loop == Fp32Loop::Dmma) return {large};
  return {large, GemmTileConfig::Float32Small};
}

GemmProblem with_stored_mirrors_as_dense(GemmProblem p, bool tensor_cores) {
  // A symmetric matrix is its own transpose, so either layout reads the same values: outer-major
  // for the TF32 loops (the wgmma loop's direct copies; Sym·Sym becomes a wide-kernel product),
  // k-major for the others (the layout the FP64 loop copies Symmetric operands into).
  if (p.a.structure == Structure::Symmetric && p.a.mirror_stored) p.a = GemmOperand{Structure::Dense, !tensor_cores};
  if (p.b.structure == Structure::Symmetric && p.b.mirror_stored) p.b = GemmOperand{Structure::Dense, tensor_cores};
  return p;
}

bool gets_wide_plan(const GemmProblem& p) {
  return p.a.structure == Structure::Dense && !p.a.trans && p.b.structure == Structure::Dense && p.b.trans;
}

bool gets_tall_plan(const GemmProblem& p) {
  // The register-B kernel's shape (A outer-major, B k-major, neither Symmetric), Dense·Dense too (a
  // Sym·Dense whose mirror is stored), a mask other than Symmetric (TMA stores), a whole tile row.
  const bool dense_dense = p.a.structure == Structure::Dense && p.b.structure == Structure::Dense;
  return p.mask != Structure::Symmetric && p.a.structure != Structure::Symmetric &&
         p.b.structure != Structure::Symmetric && !p.a.trans && !p.b.trans &&
         (is_triangular(p.a.structure) || is_triangular(p.b.structure) || dense_dense) && p.m >= kTallTile.rows;
}

bool gets_wide_structured_plan(const GemmProblem& p) {
  // Both operands outer-major, neither Symmetric, one triangular (dA = triu(G·Bᵀ) and its kin).
  return p.mask != Structure::Symmetric && p.a.structure != Structure::Symmetric &&
         p.b.structure != Structure::Symmetric && !p.a.trans && p.b.trans &&
         (is_triangular(p.a.structure) || is_triangular(p.b.structure)) && p.m >= kWideTile.rows;
}

uint32_t tile_maps_wanted(const OperandView<float>& v, int64_t k_extent, Tf32Loop loop, bool tensor_maps) {
  if (!full_tma(loop) && loop != Tf32Loop::WgmmaTmaOuterMajor) return 0;
  // The copies take whole tiles and k-steps only.
  if (!v.vector_ok || v.extent < kWgmmaTile.rows || k_extent < kWgmmaTile.k_step || !tensor_maps) return 0;
  const bool outer_major_only = loop == Tf32Loop::WgmmaTmaOuterMajor;
  const bool symmetric = v.pattern == Pattern::Symmetric;
  // Outer-major operands get the direct map, k-major ones the raw map, Symmetric ones both (a
  // tile's fast path lies in the stored or in the mirrored triangle).
  const bool want_direct = outer_major_only ? v.layout == Layout::OuterMajor && !symmetric
                                            : v.layout == Layout::OuterMajor || symmetric;
  const bool want_raw = !outer_major_only && (v.layout == Layout::KMajor || symmetric);
  return (want_direct ? 1u : 0u) | (want_raw ? 2u : 0u);
}

bool rows_take_tma_stores(const void* c, int64_t ldc, int64_t n) {
  // TMA stores write whole 16-byte chunks: rows of n floats not ending on a chunk boundary would
  // get the floats past n written.
  return reinterpret_cast<uintptr_t>(c) % 16 == 0 && ldc % 4 == 0 && n % 4 == 0;
}

bool output_takes_tma_stores(const GemmArgs<float>& args, bool tensor_maps) {
  // (A Symmetric mask's mirror is written by the kernels' own stores.)
  return rows_take_tma_stores(args.c, args.ldc, args.n) && args.mask != Structure::Symmetric && tensor_maps;
}

bool rows_hold_column_blocks(const OperandView<float>& v) {
  // The columns past the extent are read from the row's padding or the next row, and meet only
  // output columns past n.
  return v.ld >= 32 * ((int64_t{v.extent} + 31) / 32);
}

WgmmaChoice select_wgmma_kernel(const GemmProblem& p, const GemmArgs<float>& args, const PlanFacts& plans,
                                const DeviceCaps& caps, const GemmTuning& options) {
  const uint32_t a_maps = tile_maps_wanted(args.a, p.k, options.tf32_loop, caps.tensor_maps);
  const uint32_t b_maps = tile_maps_wanted(args.b, p.k, options.tf32_loop, caps.tensor_maps);
  const uint32_t has = a_maps | b_maps << 2;
  const bool both_direct = has == (kADirect | kBDirect);
  const bool wide = both_direct && args.a.pattern == Pattern::All && args.b.pattern == Pattern::All &&
                    plans.wide_plan &&
                    wide_tiles_pay(p, plans.wide_tiles, wide_split_runs(args, plans, caps, options), caps, options);
  if (!wide && both_direct && wide_structured_pays(args, plans, caps, options))
    return {GemmKernel::WideStructured, TmaVariant::AB, has};
  if (wide) return {GemmKernel::Wide, TmaVariant::AB, has};
  if (has == (kADirect | kBRaw) && tall_pays(p, args.a, args.b, plans, caps, options))
    return {GemmKernel::Tall, TmaVariant::AB, has};
  if (has & (kADirect | kARaw | kBDirect | kBRaw)) return tiled_wgmma_kernel(args.a, args.b, has, options);
  return {GemmKernel::Tiled, TmaVariant::AB, 0};  // every tile staged through registers
}

bool tall_writes_transposed_a(const GemmProblem& p, const OperandView<float>& a, const GemmTuning& options) {
  // Each k-step of A that the launch reads is written by one item that reads it; where the plan
  // cannot lie so, by the item whose column tile holds its k, so k must lie within C's column tiles.
  // A Upper (the tiles an Upper mask leaves empty hold only its zeros) or Dense under a Full mask
  // (every tile runs): then every k-step of A the backward reads is read, so written.
  if (p.at == nullptr || !options.transposed_a_output || p.m % 4 != 0) return false;
  const bool a_ok = a.pattern == Pattern::KAtLeastOuter || (a.pattern == Pattern::All && p.mask == Structure::Dense);
  const int64_t column_tiles_end = (p.n + kTallTile.cols - 1) / kTallTile.cols * kTallTile.cols;
  return a_ok && p.k <= column_tiles_end;
}

bool relayout_pays(const GemmProblem& p, bool is_b, const DeviceCaps& caps, const GemmTuning& options) {
  if (options.relayout == Choice::Never || !full_tma(options.tf32_loop) || !caps.tensor_maps) return false;
  const GemmOperand d = is_b ? p.b : p.a;
  const int64_t extent = is_b ? p.n : p.m;
  const bool k_major = d.trans != is_b;  // operand_view's layout
  if (d.structure != Structure::Symmetric && !k_major) return false;  // direct copies already
  if (extent < kWgmmaTile.rows || p.k < kWgmmaTile.k_step || extent > kRelayoutMaxExtent || p.k > kRelayoutMaxExtent)
    return false;
  if (options.relayout == Choice::Always) return true;
  // Auto. The copy is one pass over the operand; it saves a transposition in every tile that reads
  // the operand, so it pays with reuse (the other extent and k), most where the product's other
  // operand needs a transposition too.
  const GemmOperand other = is_b ? p.a : p.b;
  const int64_t reuse = std::min(is_b ? p.m : p.n, p.k);
  const bool other_outer_major = other.structure != Structure::Symmetric && other.trans != is_b;
  if (d.structure == Structure::Symmetric && other.structure == Structure::Symmetric) return true;
  if (!other_outer_major) return reuse >= 2048;  // dB = triu(Aᵀ·G), Sym·Dense, Sym·Upper
  // Upper·Upper forward: the copy puts it on the pipelined kernel.
  if (is_triangular(d.structure) && is_triangular(other.structure)) return reuse >= 2048 && reuse <= 4096;
  if (d.structure == Structure::Symmetric && other.structure == Structure::Dense) return reuse >= 2048;  // Dense·Sym
  // Sym·Dense with A's mirror stored (A outer-major Dense).
  if (d.structure == Structure::Dense && other.structure == Structure::Dense) return reuse >= 2048;
  return reuse >= 4096;  // Dense·Upper, Upper·Dense, Upper·Sym
}

bool k_major_copy_pays(const GemmProblem& p, bool is_b, const GemmTuning& options) {
  // The FP64 loop stages k-major tiles with 16-byte stores, outer-major ones with four scalar
  // stores per vector, and a Symmetric operand's steps element by element near the diagonal. A
  // Symmetric operand's k-major copy pays from kKMajorCopySymmetricFrom on; an outer-major
  // operand's costs more than the stores it saves.
  if (options.relayout == Choice::Never) return false;
  const GemmOperand d = is_b ? p.b : p.a;
  const int64_t extent = is_b ? p.n : p.m;
  const bool k_major = d.trans != is_b;  // operand_view's layout
  if ((d.structure != Structure::Symmetric && k_major) || extent < 1 || p.k < 1 || extent > kRelayoutMaxExtent ||
      p.k > kRelayoutMaxExtent)
    return false;  // (an empty copy would be an empty grid)
  if (options.relayout == Choice::Always) return true;
  return d.structure == Structure::Symmetric && std::min(extent, p.k) >= kKMajorCopySymmetricFrom;
}

bool register_b_replaces_copy(const GemmProblem& p, bool a_copied, const GemmTuning& options) {
  // Under forced relayout (tests, benchmark) B is still copied, unless the kernel is forced too.
  if (!register_b_on(options) || options.tf32_loop != Tf32Loop::Auto) return false;
  if (options.relayout == Choice::Always && options.register_b != Choice::Always) return false;
  auto aligned = [](const void* data, int64_t ld) { return reinterpret_cast<uintptr_t>(data) % 16 == 0 && ld % 4 == 0; };
  const Structure a_kind = a_copied && p.a.structure == Structure::Symmetric ? Structure::Dense : p.a.structure;
  const bool a_outer_major = a_copied || (p.a.structure != Structure::Symmetric && !p.a.trans && aligned(p.a_data, p.lda));
  const bool b_k_major = p.b.structure != Structure::Symmetric && !p.b.trans && aligned(p.b_data, p.ldb);
  return a_outer_major && b_k_major && (is_triangular(a_kind) || is_triangular(p.b.structure));
}

bool tall_replaces_copy(const GemmProblem& p, const PlanFacts& plans, const DeviceCaps& caps,
                        const GemmTuning& options) {
  if (p.a.structure != Structure::Dense || p.b.structure != Structure::Dense || p.a.trans || p.b.trans) return false;
  if (p.m > kTallForCopyRows && options.tall_tiles != Choice::Always) return false;
  if (options.relayout == Choice::Always && options.tall_tiles != Choice::Always) return false;
  const OperandView<float> a = operand_view<float>(p.a_data, p.a, false, p.m, p.lda);
  const OperandView<float> b = operand_view<float>(p.b_data, p.b, true, p.n, p.ldb);
  const uint32_t has = tile_maps_wanted(a, p.k, options.tf32_loop, caps.tensor_maps) |
                       tile_maps_wanted(b, p.k, options.tf32_loop, caps.tensor_maps) << 2;
  return has == (kADirect | kBRaw) && tall_pays(p, a, b, plans, caps, options);
}

PlanFacts ProductPlans::facts() const {
  PlanFacts facts;
  facts.wide_tiles = wide_tiles;
  facts.wide_split_tiles = wide_split.split_tiles;
  facts.wide_plan = !wide_split.items.empty();
  facts.wide_structured_tiles = wide_structured.items.empty() ? -1 : wide_structured.compute_tiles;
  facts.tall_tiles = tall.items.empty() ? -1 : tall.compute_tiles;
  facts.mirrored_items = !mirrored.empty();
  return facts;
}

ProductPlans plan_product(const GemmProblem& p, const std::vector<GemmTileConfig>& configs, bool wgmma, int sms,
                          const std::function<int(GemmTileConfig)>& blocks_per_sm, const GemmTuning& options) {
  ProductPlans plans;
  bool first = true;
  for (const GemmTileConfig config : configs) {
    const int per_sm = blocks_per_sm(config);
    GemmWorkPlan plan = plan_structured_gemm(p, config, sms * per_sm, per_sm, options.schedule);
    if (first || plan.estimated_cycles < plans.plan.estimated_cycles) plans.plan = std::move(plan);
    first = false;
  }
  if (!wgmma) return plans;
  if (gets_wide_plan(p)) {
    plans.wide_tiles = wide_tile_items(p).size();
    plans.wide_split = wide_tile_plan(p, sms, options.wide_split);
    if (plans.wide_split.split_tiles > 0) plans.wide_whole = wide_tile_plan(p, sms, Choice::Never);
  }
  if (p.mask == Structure::UpperTriangular) plans.mirrored = items_with_mirror_zeros(p, plans.plan);
  if (gets_tall_plan(p)) {
    plans.tall = tall_tile_plan(p, sms);
    plans.tall_writing = tall_tile_plan(p, sms, kTallTile.rows, kTallTile.cols, kTallCosts.write);
  }
  if (gets_wide_structured_plan(p)) plans.wide_structured = tall_tile_plan(p, sms, kWideTile.rows, kWideTile.cols);
  return plans;
}

const char* gemm_kernel_name(GemmKernel kernel) {
  switch (kernel) {
    case GemmKernel::Tiled: return "tiled";
    case GemmKernel::Tma: return "tiled with TMA copies";
    case GemmKernel::Pipelined: return "pipelined";
    case GemmKernel::RegisterB: return "register-B";
    case GemmKernel::Tall: return "tall";
    case GemmKernel::Wide: return "wide";
    case GemmKernel::WideStructured: return "wide, structured plan";
  }
  return "?";
}

int64_t copy_ld(const GemmProblem& p, bool is_b, bool k_major) {
  const int64_t extent = is_b ? p.n : p.m;
  const int64_t cols = k_major ? extent : p.k;
  return (cols + 3) / 4 * 4;  // 16-byte rows: the vector and TMA paths take them
}

bool mirror_copy(const GemmProblem& p, bool is_b, bool k_major) {
  const OperandView<float> v = operand_view<float>(is_b ? p.b_data : p.a_data, is_b ? p.b : p.a, is_b,
                                                   is_b ? p.n : p.m, is_b ? p.ldb : p.lda);
  return !k_major && v.pattern == Pattern::Symmetric && v.vector_ok;
}

GemmProblem on_copies(const GemmProblem& p, const OperandCopies& copies, const void* a_copy, const void* b_copy) {
  GemmProblem q = p;
  for (const bool is_b : {false, true}) {
    if (!(is_b ? copies.b : copies.a)) continue;
    // Outer-major: A not transposed, B transposed; k-major the other way (operand_view). The structure
    // of op(X) stays; a Symmetric operand's copy holds both triangles.
    const GemmOperand d = is_b ? p.b : p.a;
    (is_b ? q.b : q.a) = GemmOperand{d.structure == Structure::Symmetric ? Structure::Dense : d.structure,
                                     copies.k_major != is_b};
    (is_b ? q.b_data : q.a_data) = is_b ? b_copy : a_copy;
    (is_b ? q.ldb : q.lda) = copy_ld(p, is_b, copies.k_major);
  }
  return q;
}

namespace {

/// Where a copy will be: any 16-byte aligned address stands in (the caching allocator's blocks are).
const void* const kCopyStandIn = reinterpret_cast<const void*>(uintptr_t{256});

/// The wgmma product's plan: the copies, then the kernel on them and what it encodes.
void select_wgmma_launch(const GemmProblem& p, const PlanFactsOf& facts_of, const DeviceCaps& caps,
                         const GemmTuning& options, LaunchPlan& plan) {
  const PlanFacts facts = facts_of(p);
  OperandCopies& copies = plan.copies;
  copies.a = relayout_pays(p, false, caps, options);
  copies.b = relayout_pays(p, true, caps, options) && !register_b_replaces_copy(p, copies.a, options) &&
             !(!copies.a && tall_replaces_copy(p, facts, caps, options));
  const GemmProblem q = copies.any() ? on_copies(p, copies, kCopyStandIn, kCopyStandIn) : p;
  const PlanFacts q_facts = copies.any() ? facts_of(q) : facts;
  const GemmArgs<float> args = gemm_args<float>(q, copies);
  const WgmmaChoice choice = select_wgmma_kernel(q, args, q_facts, caps, options);
  plan.kernel = choice.kernel;
  plan.variant = choice.variant;
  plan.maps = choice.maps;
  // A mirror copy's stored triangle comes from the operand's own storage, through a direct map.
  if (copies.a && mirror_copy(p, false, false) && (plan.maps & kADirect)) plan.stored_maps |= 1;
  if (copies.b && mirror_copy(p, true, false) && (plan.maps & kBDirect)) plan.stored_maps |= 2;
  const bool c_stores = output_takes_tma_stores(args, caps.tensor_maps);
  switch (plan.kernel) {
    case GemmKernel::WideStructured: plan.maps |= kCStore; break;  // (wide_structured_pays asked for it)
    case GemmKernel::Wide:
      if (options.wide_tma_store && c_stores) plan.maps |= kCStore;
      // Split tiles meet in C by TMA stores and reductions; without those, the plan without.
      plan.whole_plan = q_facts.wide_split_tiles > 0 && !(plan.maps & kCStore);
      break;
    case GemmKernel::Tall: {
      plan.maps |= kCStore;  // (tall_pays asked for it)
      if (rows_hold_column_blocks(args.b)) plan.maps |= kBRawBlocks;
      GemmProblem with_buffer = q;  // a buffer stands in: the question is the kernel's
      with_buffer.at = reinterpret_cast<void*>(uintptr_t{16});
      plan.writes_at = !copies.any() && tall_writes_transposed_a(with_buffer, args.a, options);
      break;
    }
    case GemmKernel::RegisterB:
      // B's k-step as one 3-D box where its rows hold whole column blocks; C by TMA stores where it
      // takes them, and then the tiles below the diagonal stored by their mirror tiles' blocks.
      if (rows_hold_column_blocks(args.b)) plan.maps |= kBRawBlocks;
      if (c_stores) plan.maps |= kCStore;
      plan.mirrored_items = c_stores && q_facts.mirrored_items;
      break;
    default: break;
  }
}

}  // namespace

LaunchPlan select_launch(const GemmProblem& p, GemmTileConfig config, const PlanFactsOf& facts_of,
                         const DeviceCaps& caps, const GemmTuning& options) {
  LaunchPlan plan;
  plan.config = config;
  switch (config) {
    case GemmTileConfig::Float32Tf32Wgmma: select_wgmma_launch(p, facts_of, caps, options, plan); break;
    case GemmTileConfig::Float32Dmma:
      // The FP64 loop reads the copies through the plan of `p` (the same op(A), op(B)).
      plan.copies = {k_major_copy_pays(p, false, options), k_major_copy_pays(p, true, options), true};
      break;
    default: break;
  }
  return plan;
}

}  // namespace sg::detail::cuda
