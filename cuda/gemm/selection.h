// Kernel selection for the structured GEMM: which tile configuration a product is planned in,
// which kernel of the wgmma family runs it, and which operands are copied first. One table, in
// selection.cpp; plain C++ over the problem, the device's capabilities and the tuning, so its
// tests run without a GPU. Why each rule is what it is: docs/structured_gemm.md, "Kernel selection".
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <structgrad/core/types.h>
#include "cuda/gemm/kernel_args.h"
#include "cuda/gemm/tuning.h"
#include "cuda/gemm/tile_scheduler.h"
#include "ops/gemm_desc.h"

namespace sg::detail::cuda {

/// What the selection needs to know of a device.
struct DeviceCaps {
  int sms = 0;                  ///< multiprocessors
  int compute_capability = 0;   ///< major·10 + minor (90: Hopper)
  bool sm90a_code = false;      ///< the library holds sm_90a code (wgmma, TMA, the FP64 MMA loop)
  bool full_rate_fp64 = false;  ///< float64 at half the float32 rate (H100, H200)
  bool tensor_maps = false;     ///< the driver encodes TMA maps (cuTensorMapEncodeTiled)
};

/// The mainloop family of a product: TF32 on tensor cores (wgmma or mma.sync), exact float32 or
/// float64 on the FP64 tensor cores (dmma), or else FFMA / DFMA.
struct GemmFamily {
  bool tf32 = false;
  bool wgmma = false;
  bool dmma = false;
};
GemmFamily select_family(DType dtype, bool tf32, const DeviceCaps& caps, const GemmTuning& options);

/// The tile configurations a product of `family` is planned in; the launcher keeps the first plan
/// whose modelled time no later one beats.
std::vector<GemmTileConfig> tile_config_candidates(DType dtype, const GemmFamily& family, const GemmTuning& options);

/// `p` with each Symmetric operand whose storage holds its mirror (GemmOperand::mirror_stored) read
/// as the Dense matrix it is: outer-major for the TF32 tensor-core loops, k-major for the others.
GemmProblem with_stored_mirrors_as_dense(GemmProblem p, bool tensor_cores);

/// The persistent kernels' plans a product gets (besides its one-item-per-block plan).
bool gets_wide_plan(const GemmProblem& p);             ///< both operands outer-major Dense
bool gets_tall_plan(const GemmProblem& p);             ///< the register-B kernel's shape, m ≥ 256
bool gets_wide_structured_plan(const GemmProblem& p);  ///< both outer-major, one triangular, m ≥ 128

/// What the launcher's cached plans hold for a product (selection reads, the plan cache fills).
struct PlanFacts {
  size_t wide_tiles = 0;             ///< wide_tile_items(p).size(), where it gets a wide plan
  int wide_split_tiles = 0;          ///< split tiles of its wide plan
  bool wide_plan = false;
  int64_t wide_structured_tiles = -1;  ///< compute tiles of its structured wide plan (-1: none)
  int64_t tall_tiles = -1;             ///< compute tiles of its tall plan (-1: none)
  bool mirrored_items = false;         ///< the Upper mask's items with their mirrors' zeros (items_with_mirror_zeros)
};

/// Every plan a product of one shape launches from (host code): the one-item-per-block plan and the
/// persistent kernels' plans where the product gets them. The plan cache uploads them (plan_cache.h);
/// the selection reads their facts.
struct ProductPlans {
  GemmWorkPlan plan;                  ///< the one-item-per-block plan (its config: the product's)
  /// The wide kernel's dense plans (gets_wide_plan): with the last round cut as the tuning says,
  /// and (where that one has split tiles) without, for launches whose C takes no TMA stores.
  size_t wide_tiles = 0;
  WidePlan wide_split, wide_whole;
  TallPlan wide_structured;           ///< the wide kernel's plan of a structured product
  /// Under an Upper mask: the plan's items with the tiles below the diagonal stored by their mirror
  /// tiles (items_with_mirror_zeros), for the register-B kernel's TMA stores.
  std::vector<GemmWorkItem> mirrored;
  /// The tall kernel's plans (gets_tall_plan): plain, and for a launch that also writes op(A)ᵀ.
  TallPlan tall, tall_writing;

  /// What the kernel selection needs to know of these plans.
  PlanFacts facts() const;
};

/// The plans of `p` on `sms` multiprocessors: the one-item-per-block plan in the first of `configs`
/// whose modelled time no later one beats (blocks_per_sm: resident blocks of a configuration's
/// kernels), and, on the wgmma loop, the persistent kernels' plans.
ProductPlans plan_product(const GemmProblem& p, const std::vector<GemmTileConfig>& configs, bool wgmma, int sms,
                          const std::function<int(GemmTileConfig)>& blocks_per_sm, const GemmTuning& options);

/// The TMA maps an operand gets on the wgmma loop: kADirect-style bits of one operand (1: direct,
/// 2: raw). None for unaligned or small operands (no whole tile or k-step) or without tensor maps.
uint32_t tile_maps_wanted(const OperandView<float>& v, int64_t k_extent, Tf32Loop loop, bool tensor_maps);
/// Whether rows of n floats at c, ldc apart, take TMA stores (16-byte aligned, whole 16-byte chunks).
bool rows_take_tma_stores(const void* c, int64_t ldc, int64_t n);
/// Whether C takes TMA stores: rows that do, a mask other than Symmetric, and tensor maps.
bool output_takes_tma_stores(const GemmArgs<float>& args, bool tensor_maps);
/// Whether k-major `v`'s rows hold whole blocks of 32 columns, so its raw steps come as one 3-D box
/// (encode_raw_block_map).
bool rows_hold_column_blocks(const OperandView<float>& v);

/// The kernel a structured product runs on (LaunchPlan::kernel).
enum class GemmKernel : uint8_t {
  Tiled,           ///< one block per item of the plan, on its configuration's mainloop (FFMA, DFMA, mma.sync,
                   ///< the FP64 tensor cores, or wgmma with every tile staged through registers)
  Tma,             ///< the tiled wgmma kernel with TMA copies (LaunchPlan::variant)
  Pipelined,       ///< producer warp + two consumer warpgroups, both operands direct, one triangular
  RegisterB,       ///< A direct, B raw into registers, one operand triangular
  Tall,            ///< 256 × 128 persistent, B from registers
  Wide,            ///< 128 × 256 persistent, dense plan (both operands direct, Dense)
  WideStructured,  ///< 128 × 256 persistent, a structured product's panel-ordered plan
};
const char* gemm_kernel_name(GemmKernel kernel);

struct WgmmaChoice {
  GemmKernel kernel = GemmKernel::Tiled;
  TmaVariant variant = TmaVariant::AB;  ///< for GemmKernel::Tma
  uint32_t maps = 0;                    ///< TmaMaps::has: the operands' maps (bits of TmaMapBits)
};
/// The kernel of a wgmma product, from its problem, its operand views and output (args), its plans.
WgmmaChoice select_wgmma_kernel(const GemmProblem& p, const GemmArgs<float>& args, const PlanFacts& plans,
                                const DeviceCaps& caps, const GemmTuning& options);

/// The operands a product copies before it runs (LaunchPlan::copies): outer-major for the wgmma loop
/// (relayout), k-major for the FP64 loop.
struct OperandCopies {
  bool a = false, b = false;
  bool k_major = false;
  bool any() const { return a || b; }
};
/// Whether operand A (is_b false) or B comes from a copy that holds its structural zeros near the
/// diagonal (relayout's outer-major copies: kRelayoutZeroBand).
inline bool copy_holds_zeros(const OperandCopies& copies, bool is_b) { return (is_b ? copies.b : copies.a) && !copies.k_major; }

/// How one product runs, chosen once per cached shape, operand layout and tuning (select_launch) and
/// executed by the launcher (launch.cpp): the copies it makes first, the kernel, the TMA maps it
/// encodes, and which of the cached plans the kernel reads.
struct LaunchPlan {
  GemmTileConfig config = GemmTileConfig::Float32Large;  ///< of the one-item-per-block plan
  OperandCopies copies;
  GemmKernel kernel = GemmKernel::Tiled;
  TmaVariant variant = TmaVariant::AB;  ///< GemmKernel::Tma
  uint32_t maps = 0;            ///< TmaMapBits: the operands' maps, B's raw block map, C's store map
  uint32_t stored_maps = 0;     ///< TmaMaps::stored: mirror copies whose stored triangle comes from the operand
  bool whole_plan = false;      ///< Wide: the plan without split tiles (C takes no TMA stores)
  bool mirrored_items = false;  ///< RegisterB: the items that also store their mirror tiles' zeros
  bool writes_at = false;       ///< Tall: also writes op(A)ᵀ where the caller gives a buffer (GemmProblem::at)
};

/// The facts of the cached plans of a problem (the plan cache's; the tile scheduler's in host tests).
using PlanFactsOf = std::function<PlanFacts(const GemmProblem&)>;

/// The launch plan of `p` (its stored mirrors resolved: with_stored_mirrors_as_dense), whose
/// one-item-per-block plan is in `config`. The table of the rules is at the top of selection.cpp.
LaunchPlan select_launch(const GemmProblem& p, GemmTileConfig config, const PlanFactsOf& facts_of,
                         const DeviceCaps& caps, const GemmTuning& options);

/// The row stride of the copy of operand A (is_b false) or B of `p`: outer × k, or k × outer when
/// k_major, in rows of whole 16-byte vectors.
int64_t copy_ld(const GemmProblem& p, bool is_b, bool k_major);
/// Whether the copy of operand A or B holds only a Symmetric operand's mirrored part (a mirror copy:
/// outer-major, its stored triangle read from the operand's own storage by TMA).
bool mirror_copy(const GemmProblem& p, bool is_b, bool k_major);
/// `p` on the copies `copies` makes, at `a_copy` and `b_copy`: each copied operand outer-major (k-major
/// with copies.k_major) with copy_ld's rows, a Symmetric one read as Dense.
GemmProblem on_copies(const GemmProblem& p, const OperandCopies& copies, const void* a_copy, const void* b_copy);
/// The kernel arguments of `p` (on its copies, where `copies` says it has them): the operands' views,
/// their zeros vouched where a copy or the caller holds them, and the output; no work list yet.
template <typename T>
GemmArgs<T> gemm_args(const GemmProblem& p, const OperandCopies& copies) {
  GemmArgs<T> args{};
  args.a = operand_view<T>(p.a_data, p.a, false, p.m, p.lda);
  args.b = operand_view<T>(p.b_data, p.b, true, p.n, p.ldb);
  // A copy holds its zeros, and so does an operand whose caller vouches for them (an UpperTriangular
  // tensor: GemmOperand::zeros_stored); the kernels that copy whole tiles then need not write them.
  args.a.zeros_stored = copy_holds_zeros(copies, false) || p.a.zeros_stored;
  args.b.zeros_stored = copy_holds_zeros(copies, true) || p.b.zeros_stored;
  args.c = static_cast<T*>(p.c_data);
  args.ldc = p.ldc;
  args.m = static_cast<int32_t>(p.m);
  args.n = static_cast<int32_t>(p.n);
  args.alpha = static_cast<T>(p.alpha);
  args.mask = p.mask;
  args.c_vector_ok = reinterpret_cast<uintptr_t>(p.c_data) % 16 == 0 && p.ldc % (16 / sizeof(T)) == 0;
  return args;
}

/// Whether the tall launch of `p` also writes op(A)ᵀ (GemmProblem::at): A Upper, or Dense under a
/// Full mask, m a multiple of 4, k within C's column tiles.
bool tall_writes_transposed_a(const GemmProblem& p, const OperandView<float>& a, const GemmTuning& options);

/// Operand copies before a wgmma product (relayout: an outer-major copy) or an FP64-loop product
/// (a k-major copy): for A (is_b false) or B.
bool relayout_pays(const GemmProblem& p, bool is_b, const DeviceCaps& caps, const GemmTuning& options);
bool k_major_copy_pays(const GemmProblem& p, bool is_b, const GemmTuning& options);
/// Whether B's outer-major copy is not needed: the register-B kernel reads it as it lies (A copied
/// first where a_copied), or the tall kernel runs the product (a Dense·Dense whose B is k-major).
bool register_b_replaces_copy(const GemmProblem& p, bool a_copied, const GemmTuning& options);
bool tall_replaces_copy(const GemmProblem& p, const PlanFacts& plans, const DeviceCaps& caps,
                        const GemmTuning& options);

}  // namespace sg::detail::cuda
