// Kernel selection for the structured GEMM: which tile configuration a product is planned in,
// which kernel of the wgmma family runs it, and which operands are copied first. One table, in
// selection.cpp; plain C++ over the problem, the device's capabilities and the options, so its
// tests run without a GPU. Why each rule is what it is: docs/structured_gemm.md, "Kernel selection".
#pragma once

#include <cstdint>
#include <vector>

#include <structgrad/core/types.h>
#include "cuda/gemm/kernel_args.h"
#include "cuda/gemm/options.h"
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
GemmFamily select_family(DType dtype, bool tf32, const DeviceCaps& caps, const GemmOptions& options);

/// The tile configurations a product of `family` is planned in; the launcher keeps the first plan
/// whose modelled time no later one beats.
std::vector<GemmTileConfig> tile_config_candidates(DType dtype, const GemmFamily& family, const GemmOptions& options);

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
};

/// The TMA maps an operand gets on the wgmma loop: kADirect-style bits of one operand (1: direct,
/// 2: raw). None for unaligned or small operands (no whole tile or k-step) or without tensor maps.
uint32_t tile_maps_wanted(const OperandView<float>& v, int64_t k_extent, Tf32Loop loop, bool tensor_maps);
/// Whether rows of n floats at c, ldc apart, take TMA stores (16-byte aligned, whole 16-byte chunks).
bool rows_take_tma_stores(const void* c, int64_t ldc, int64_t n);
/// Whether C takes TMA stores: rows that do, a mask other than Symmetric, and tensor maps.
bool output_takes_tma_stores(const GemmArgs<float>& args, bool tensor_maps);

/// The kernels of the wgmma loop.
enum class WgmmaKernel : uint8_t {
  Wide,            ///< 128 × 256 persistent, dense plan (both operands direct, Dense)
  WideStructured,  ///< 128 × 256 persistent, a structured product's panel-ordered plan
  Tall,            ///< 256 × 128 persistent, B from registers
  Pipelined,       ///< producer warp + two consumer warpgroups, both operands direct, one triangular
  RegisterB,       ///< A direct, B raw into registers, one operand triangular
  Tma,             ///< the tiled kernel with TMA copies (variant)
  Staged,          ///< the tiled kernel with every tile staged through registers
};
struct WgmmaChoice {
  WgmmaKernel kernel = WgmmaKernel::Staged;
  TmaVariant variant = TmaVariant::AB;  ///< for WgmmaKernel::Tma
  uint32_t maps = 0;                    ///< TmaMaps::has: the operands' maps (bits of TmaMapBits)
};
/// The kernel of a wgmma product, from its problem, its operand views and output (args), its plans.
WgmmaChoice select_wgmma_kernel(const GemmProblem& p, const GemmArgs<float>& args, const PlanFacts& plans,
                                const DeviceCaps& caps, const GemmOptions& options);

/// Whether the tall launch of `p` also writes op(A)ᵀ (GemmProblem::at): A Upper, or Dense under a
/// Full mask, m a multiple of 4, k within C's column tiles.
bool tall_writes_transposed_a(const GemmProblem& p, const OperandView<float>& a, const GemmOptions& options);

/// Operand copies before a wgmma product (relayout: an outer-major copy) or an FP64-loop product
/// (a k-major copy): for A (is_b false) or B.
bool relayout_pays(const GemmProblem& p, bool is_b, const DeviceCaps& caps, const GemmOptions& options);
bool k_major_copy_pays(const GemmProblem& p, bool is_b, const GemmOptions& options);
/// Whether B's outer-major copy is not needed: the register-B kernel reads it as it lies (A copied
/// first where a_copied), or the tall kernel runs the product (a Dense·Dense whose B is k-major).
bool register_b_replaces_copy(const GemmProblem& p, bool a_copied, const GemmOptions& options);
bool tall_replaces_copy(const GemmProblem& p, const PlanFacts& plans, const DeviceCaps& caps,
                        const GemmOptions& options);

}  // namespace sg::detail::cuda
