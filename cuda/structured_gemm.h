// The CUDA structured GEMM (DESIGN §5): one tiled kernel family (FFMA/DFMA, FP64 and TF32
// tensor-core inner loops) for every product whose
// operands or output mask are structured, plus the host-side work planner (tile skipping,
// k-ranges, heaviest-first order, split-K) that it runs from. Design: docs/structured_gemm.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/types.h"
#include "ops/gemm_desc.h"

namespace sg::detail::cuda {

/// C = alpha·op(A)·op(B) for the descriptors of `p`, queued on the library stream of
/// `device` (asynchronous; no allocation in steady state besides the caching allocator's).
/// Every OperandKind, trans flag and OutputMask of gemm_desc.h, any sizes.
void launch_structured_gemm(const GemmProblem& p, DType dtype, int device);

/// The kernel instances: tile edge (BM = BN) and k-step (BK) of each.
enum class GemmTileConfig : uint8_t {
  Float32Large,  ///< 128×128 tiles, BK 8, 128 threads × 8×16 outputs: the fast path for large problems
  Float32Small,  ///< 64×64 tiles, BK 16, 4×4 per thread: fills the machine on small problems
  Float64,       ///< 64×64 tiles, BK 8, 4×4 per thread
  Float32Tf32,   ///< TF32 mode: 128×128 tiles, BK 16, 4 warps of 64×64 on tensor cores (mma.sync)
  Float32Tf32Wgmma,  ///< TF32 mode on sm_90a: 128×128 tiles, BK 32, 2 warpgroups of 64×128 (wgmma)
  Float32Dmma,  ///< exact float32 on compute capability 9.0: 128×128 tiles, BK 16, 8 warps of 64×32 on the
                ///< FP64 tensor cores (mma.sync m16n8k8 .f64; float64 products and sums, one rounding)
};
const char* tile_config_name(GemmTileConfig config);

/// One unit of work of a launch: the k-range [k_begin, k_end) of output tile (tile_row,
/// tile_col). A tile whose k-range was split has chunk_count > 1 chunks; each writes its
/// partial tile to partial slot partial_index + chunk and the last to arrive (arrival
/// counter counter_index) sums them in chunk order and writes C. An empty k-range writes
/// the tile as alpha·0 (and the mask's zeros). mirror_zeros: the item also writes the mirror
/// tile (tile_col, tile_row) as zeros (items_with_mirror_zeros).
struct GemmWorkItem {
  int32_t tile_row = 0, tile_col = 0;
  int32_t k_begin = 0, k_end = 0;
  int32_t chunk = 0, chunk_count = 1;
  int32_t counter_index = -1;
  int32_t partial_index = -1;
  int32_t mirror_zeros = 0;
};

/// The schedule of one problem shape on one device (what the launcher caches).
struct GemmWorkPlan {
  GemmTileConfig config = GemmTileConfig::Float32Large;
  int tile = 0;                       ///< BM = BN of the config
  int k_step = 0;                     ///< BK of the config
  int slots = 0;                      ///< resident blocks the plan was balanced for
  std::vector<GemmWorkItem> items;    ///< heaviest first; blockIdx.x runs items[blockIdx.x]
  int split_tiles = 0;                ///< tiles whose k-range is split (arrival counters)
  int64_t partial_tiles = 0;          ///< workspace tiles for the partial sums
  double estimated_cycles = 0;        ///< the cost model's makespan (SM cycles)
  double useful_cycles = 0;           ///< the same model's total work / slots (a lower bound)
  std::string summary() const;        ///< "Float32Large: 560 items, 40 split tiles, ..."
};

/// How the planner orders and cuts the work. Balanced is what the library uses; the other
/// two exist so the benchmark can measure what each measure buys (docs/structured_gemm.md).
enum class GemmSchedule : uint8_t {
  Balanced,       ///< heaviest first, and split-K where the cost model says it pays
  HeaviestFirst,  ///< heaviest first, no split
  Raster,         ///< tiles in row-major order, no split
};

/// Builds the schedule for `p` with `config` on a machine of `slots` resident blocks with
/// `blocks_per_sm` of them per multiprocessor. Pure host code (no device call): the tests
/// check its invariants and the benchmark prints it.
GemmWorkPlan plan_structured_gemm(const GemmProblem& p, GemmTileConfig config, int slots, int blocks_per_sm,
                                  GemmSchedule schedule = GemmSchedule::Balanced);

/// The work items of the wide kernel (TF32 wgmma products whose operands are both outer-major
/// Dense): 128 × 256 tiles over [0, k), in groups of 16 tile rows taken column by column (the
/// tiles in flight at once share few operand panels), without the tiles wholly below the
/// diagonal under a Symmetric mask, with an empty k-range (zeros) for those under an Upper mask.
/// Pure host code.
std::vector<GemmWorkItem> wide_tile_items(const GemmProblem& p);

/// The items of `plan` (for `p`, whose mask is Upper) without the tiles below the diagonal: each
/// tile above it has its first chunk write the zeros of its mirror tile too (mirror_zeros), so
/// the zeros cost no block of their own. Order and splits as in `plan`. The register-B kernel runs
/// these where it writes its tiles by TMA stores (docs/structured_gemm.md, "Zeros stored by the
/// mirror tile"). Pure host code.
std::vector<GemmWorkItem> items_with_mirror_zeros(const GemmProblem& p, const GemmWorkPlan& plan);

/// Sets the schedule of every later launch (process-wide; for benchmarks and tests).
void set_gemm_schedule(GemmSchedule schedule);
GemmSchedule gemm_schedule();

/// Which tensor-core loop TF32 mode runs. Auto: wgmma where the device is compute capability
/// 9.0 and the library was built for sm_90a (the fast-path tiles copied by TMA: outer-major ones
/// straight into the wgmma tiles, k-major ones raw and transposed by the threads; products whose
/// operands both come directly, one of them Upper or Lower, run on the pipelined kernel, a
/// producer warp and two consumer warpgroups; large ones whose operands both come directly and
/// are Dense on the wide kernel, WideTiles), mma.sync on other sm_80+ devices.
/// WgmmaBarrierPerStep: as Auto, but those products too on the one-barrier-per-k-step kernel
/// (the loop of commit 73b3141).
/// WgmmaTmaOuterMajor: the wgmma loop with TMA for the outer-major Dense/Upper/Lower operands
/// only (the loop of commit 4cf16cc). WgmmaStaged: the wgmma loop with every tile staged
/// through registers (no TMA). MmaSync: the mma.sync loop everywhere. (For tests and the
/// benchmark's ablations.)
enum class Tf32Loop : uint8_t { Auto, WgmmaStaged, MmaSync, WgmmaTmaOuterMajor, WgmmaBarrierPerStep };
void set_tf32_loop(Tf32Loop loop);
Tf32Loop tf32_loop();

/// Whether a wgmma product first copies its k-major and Symmetric operands outer-major
/// (relayout), so that every k-step of theirs comes by direct TMA. Auto: where it measured
/// faster (docs/structured_gemm.md, "Relayout"); Never and Always: for tests and the
/// benchmark's comparison. Only the wgmma loop with every TMA copy (Tf32Loop::Auto and
/// WgmmaBarrierPerStep) relayouts. The same setting governs the FP64 loop's k-major copies
/// (exact float32, Float32Dmma): its Symmetric and outer-major operands copied k-major first,
/// so that every k-step of theirs is staged with 16-byte stores; Auto copies the Symmetric ones
/// from extent 1024 on (docs/structured_gemm.md, "The FP64 loop, thirteenth session").
enum class OperandRelayout : uint8_t { Auto, Never, Always };
void set_operand_relayout(OperandRelayout relayout);
OperandRelayout operand_relayout();
/// Operand copies made by relayout (and by the FP64 loop's k-major copies) since the process started (for the tests).
int64_t relayout_copies();
/// Those of them that were mirror copies: a Symmetric operand's mirrored part and a band above
/// the diagonal only, the k-steps in its stored triangle read from its own storage (for the tests).
int64_t mirror_copies();
/// Whether relayout fills each copy with NaN before writing it, so that a product that reads a
/// part the copy does not hold fails its check (for the tests; off by default).
void set_poison_relayout_copies(bool poison);
/// Launches of the pipelined wgmma kernel since the process started (for the tests).
int64_t pipelined_launches();

/// Whether wgmma products whose A comes by direct copies and whose B is k-major (B not
/// transposed: the forward products), one of them Upper or Lower and neither Symmetric, run on
/// the register-B kernel: it computes the tile transposed, Cᵀ = op(B)ᵀ·op(A)ᵀ, with op(B)ᵀ as
/// wgmma's register operand loaded from B's raw copies, so B is neither transposed through shared
/// memory nor copied by relayout (docs/structured_gemm.md, "The register-B kernel"). Auto:
/// wherever it applies on the default loop (Tf32Loop::Auto); Always: the same, and B uncopied
/// under OperandRelayout::Always too; Never: those products as before (the raw ring, or
/// relayout). Always and Never are for the tests and the benchmark's comparison.
enum class RegisterB : uint8_t { Auto, Never, Always };
void set_register_b(RegisterB setting);
RegisterB register_b();
/// Launches of the register-B kernel since the process started (for the tests).
int64_t register_b_launches();
/// Those of them that copied each k-step of B as one 3-D box (B's rows hold whole 32-column
/// blocks: ldb at least n rounded up to 32) rather than four 32 × 32 boxes (for the tests).
int64_t raw_block_map_launches();
/// Launches of the register-B kernel that wrote their tiles by TMA stores (TmaMaps::kCStore).
int64_t tma_store_launches();
/// Those of them whose tiles below the diagonal were written by their mirror tiles' blocks
/// (items_with_mirror_zeros).
int64_t mirror_zero_launches();
/// Whether wgmma products whose operands both come directly and are Dense run on the wide
/// kernel (128 × 256 tiles, persistent, one block per SM). Auto: where its blocks' rounds of
/// items are at least 80 % full, except under an Upper mask (docs/structured_gemm.md, "The wide
/// kernel"); Never and Always for tests and the benchmark's comparison. Only on the default loop
/// (Tf32Loop::Auto).
/// Products whose operands both come directly and one or both are Upper or Lower (dA = triu(G·Bᵀ)
/// of Upper·Upper) run on it too, from a schedule dealt in shared-panel order (tall_tile_plan with
/// 128 × 256 tiles), where B holds its structural zeros (Dense, or zeros_stored; A's are written
/// into its tile where its storage lacks them) and C takes TMA stores. Auto: at least one tile
/// with a k-range per SM where both operands are Upper or Lower, one per two SMs where one is Dense
/// (docs/structured_gemm.md, "dA on the wide kernel").
enum class WideTiles : uint8_t { Auto, Never, Always };
void set_wide_tiles(WideTiles setting);
WideTiles wide_tiles();
/// Launches of the wide kernel since the process started (for the tests).
int64_t wide_launches();
/// Those of them that ran a structured product from its panel-ordered schedule (for the tests).
int64_t wide_structured_launches();
/// Whether the wide kernel writes its tiles by TMA stores where C takes them (16-byte aligned rows,
/// a mask other than Symmetric; docs/structured_gemm.md, "The wide kernel's epilogue by TMA"). On by
/// default; off for the tests and the benchmark's comparison.
void set_wide_tma_store(bool on);
bool wide_tma_store();
/// Launches of the wide kernel with TMA stores since the process started (for the tests).
int64_t wide_tma_store_launches();
/// A schedule of the persistent kernels (wide and tall): block b runs items[offsets[b]] …
/// items[offsets[b + 1] − 1]; a tile in two chunks (chunk_count 2) has the arrival counter
/// counter_index, one of split_tiles. Pure host data.
struct BlockPlan {
  std::vector<GemmWorkItem> items;
  std::vector<int32_t> offsets;  // blocks + 1 of them
  int split_tiles = 0;           // tiles cut into two chunks (arrival counters)
  double makespan = 0;           // the model's largest load per block, in k-steps
};
/// Whether the wide kernel splits the tiles of its last round. Its persistent blocks take the tiles
/// in rounds of one per block; where the last round is part empty (512 tiles on 132 SMs: 3.9
/// rounds), each of its tiles is cut in k, its head run where the whole tile was and its tail by a
/// block that had none there; the two chunks meet in C (wide_tile_plan). Only where the tiles go out
/// by TMA stores. Auto: where the model's makespan is at least 2 % shorter for it
/// (docs/structured_gemm.md, "The wide kernel's last round split"); Never and Always for the tests
/// and the benchmark's comparison.
enum class WideSplit : uint8_t { Auto, Never, Always };
void set_wide_split(WideSplit setting);
WideSplit wide_split();
/// Launches of the wide kernel with split tiles since the process started (for the tests).
int64_t wide_split_launches();
/// The wide kernel's schedule for `p` on `sms` blocks (blocks: min(tiles, sms)): block b runs
/// items[offsets[b]] … items[offsets[b + 1] − 1]. Block b takes tiles b, b + blocks, … of
/// wide_tile_items. With a split (`split` Always, or Auto where the model's makespan is 2 % shorter;
/// only where every tile has the same non-empty k-range, there is a whole round, and the last is
/// part empty), each tile of the last round is cut at one k-step for all: the head stays with its
/// block, the tails are dealt in turn to the blocks without a tile in that round, and the cut
/// balances a head against the most tails a block gets. The two chunks of a tile: chunk_count 2,
/// counter_index their arrival counter. Model: a tile costs its k-steps plus a fixed epilogue cost.
/// Pure host code.
struct WidePlan : BlockPlan {
  double unsplit_makespan = 0;  // the model's makespan without the split
};
WidePlan wide_tile_plan(const GemmProblem& p, int sms, WideSplit split);
/// Whether the register-B kernel's products whose operands hold their structural zeros (Dense, or
/// GemmOperand::zeros_stored) and whose output takes TMA stores (16-byte aligned rows, mask not
/// Symmetric) run on the tall kernel: 256 × 128 tiles, persistent, one block per SM, a four-stage
/// ring filled three k-steps ahead across items, the tiles dealt by tall_tile_plan
/// (docs/structured_gemm.md, "The tall kernel"). Auto: where one operand is Dense and there is at
/// least one tile with a k-range per two SMs, or neither is (Upper·Upper) and there is at least one
/// per SM (measured faster there); Never and Always for the tests and the benchmark's comparison.
/// Only on the default loop (Tf32Loop::Auto).
enum class TallTiles : uint8_t { Auto, Never, Always };
void set_tall_tiles(TallTiles setting);
TallTiles tall_tiles();
/// Launches of the tall kernel since the process started (for the tests).
int64_t tall_launches();
/// Whether the tall kernel also writes op(A)ᵀ where the caller offers it a buffer
/// (GemmProblem::at_buffer: the forward of a product whose dB = op(A)ᵀ·G will be needed), from the
/// tiles of A it reads anyway, so that the backward need not copy A (docs/structured_gemm.md, "A's
/// transpose written by the forward"). On by default; off for the tests and the benchmark's
/// comparison.
void set_transposed_a_output(bool on);
bool transposed_a_output();
/// Tall launches that wrote op(A)ᵀ since the process started (for the tests).
int64_t transposed_a_outputs();
/// Whether the tall and wide kernels are launched with programmatic stream serialization, so that
/// a launch may begin once the kernel before it in the stream has no blocks left, before that grid
/// has completed; its blocks wait for it to complete before they touch memory (docs/structured_gemm.md,
/// "Launches that begin before the kernel before them ends"). On by default; off for the tests and
/// the benchmark's comparison.
void set_dependent_launch(bool on);
bool dependent_launch();
/// The tall kernel's schedule for `p` on `sms` blocks: block b runs items[offsets[b]] …
/// items[offsets[b + 1] − 1], its tiles of zeros (empty k-range, written by TMA stores of a zeroed
/// box after the block's other items) first. Tiles of 256 rows × 128 columns with the k-ranges of
/// structured_k_range, dealt in shared-panel order (by first k, heaviest first among equal first
/// k), each to the least loaded block (load: k-steps plus kTallCosts per item), then the tiles of
/// zeros, each to the least loaded block. Where
/// the model's makespan is 2 % shorter for it, the tiles longer than a cap are cut into two chunks
/// (chunk_count 2, counter_index their arrival counter): the first chunk to finish stores its
/// partial tile, the second adds its own to it by TMA reductions, so the sum is the same in either
/// order. `rows` × `cols`: the tile (the wide kernel's structured products take 128 × 256: see
/// WideTiles). Pure host code.
/// [begin, end) in k.
struct KRun {
  int32_t begin = 0, end = 0;
};
/// transposed_writes: per item, the k-steps of A it writes transposed where the launch writes op(A)ᵀ
/// (GemmProblem::at_buffer; the tall kernel): each step of A that the launch reads is written once,
/// by an item that reads it, and a tile's share of a tile row's writes follows its share of the
/// row's k-steps, so the blocks' writes follow their loads (a tile row whose k-ranges do not allow
/// that: each step by the tile whose columns hold its k).
struct TallPlan : BlockPlan {
  int64_t compute_tiles = 0;  // tiles with a k-range
  double mean_load = 0;       // the unsplit tiles' load per block
  std::vector<KRun> transposed_writes;
};
/// The plans' model costs (tall_tile_plan; the tall kernel's and the wide kernel's structured
/// launches), in k-steps of one block on top of an item's own k-steps: an item's fill and epilogue,
/// a chunk of a split tile (the first to arrive waits for its stores to complete), a tile of zeros
/// (128 KB of TMA stores after the block's other items), and a step that also writes its A tile
/// transposed (the writing plan). Fitted to the blocks' measured times in Upper·Upper's forward +
/// backward at 3072, 4096 and 8192, then chosen by a sweep on the H100 (docs/structured_gemm.md,
/// "The plan's costs fitted to the blocks' times"; they were 5, 2, 2 and 2).
struct TallCosts {
  double item, chunk, zero, write;
};
inline constexpr TallCosts kTallCosts{8.0, 4.0, 5.0, 1.5};
/// The wide kernel's (128 × 256 tiles: its structured products, dA = triu(G·Bᵀ)), chosen the same
/// way: its items, split chunks and tiles of zeros cost more beside its steps.
inline constexpr TallCosts kWideCosts{10.0, 6.0, 6.0, 0.0};
/// The costs of a plan of `rows` × `cols` tiles: kWideCosts for the wide kernel's, else kTallCosts.
inline const TallCosts& tall_costs(int rows, int cols) { return rows == 128 && cols == 256 ? kWideCosts : kTallCosts; }
/// write_cost > 0: the plan of a launch that writes op(A)ᵀ, whose items' loads count each step they
/// write (transposed_writes) write_cost k-steps more.
TallPlan tall_tile_plan(const GemmProblem& p, int sms, int rows = 256, int cols = 128, double write_cost = 0);

/// Which loop exact float32 products (not TF32 mode) run. Auto: the large tiles on the FP64 tensor
/// cores (Float32Dmma) where the device is compute capability 9.0 with full-rate float64 and the
/// library was built for sm_90a, else on FFMA (the small 64 tiles, on FFMA, where the planner
/// finds the large ones too few); Fma: FFMA everywhere; Dmma: as Auto, but every product where
/// the FP64 loop runs takes it, small ones too (Fma and Dmma: for the tests and the benchmark's
/// comparison). All are exact float32 in the sense of the precision setting: no operand is
/// rounded; the FP64 loop's products are exact and its sums float64 (docs/structured_gemm.md,
/// "Exact float32 on the FP64 tensor cores").
enum class Fp32Loop : uint8_t { Auto, Fma, Dmma };
void set_fp32_loop(Fp32Loop loop);
Fp32Loop fp32_loop();
/// Launches of the Float32Dmma config since the process started (for the tests).
int64_t dmma_launches();

/// The plan launch_structured_gemm uses for `p` on `device` (built on first use, cached).
const GemmWorkPlan& structured_gemm_plan(const GemmProblem& p, DType dtype, int device);

}  // namespace sg::detail::cuda
