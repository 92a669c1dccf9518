// The tile scheduler of the structured GEMM: host code that turns a product into work items (an
// output tile over a chunk of its k-range), orders them and cuts the long ones (split-K), for the
// one-item-per-block kernels and for the persistent tall and wide kernels. Plain C++ with no CUDA
// dependency: its tests run on any machine. Design: docs/structured_gemm.md, "Tile scheduler".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/gemm/tuning.h"
#include "cuda/gemm/tile_shapes.h"
#include "ops/gemm_desc.h"

namespace sg::detail::cuda {

/// One unit of work: the k-range [k_begin, k_end) of output tile (tile_row, tile_col). A tile whose
/// k-range is split has chunk_count > 1 chunks; they meet through arrival counter counter_index
/// (and, in the workspace fix-up, partial slots partial_index + chunk). An empty k-range writes the
/// tile as zeros. mirror_zeros: the item also stores the mirror tile (tile_col, tile_row) as zeros.
struct GemmWorkItem {
  int32_t tile_row = 0, tile_col = 0;
  int32_t k_begin = 0, k_end = 0;
  int32_t chunk = 0, chunk_count = 1;
  int32_t counter_index = -1;
  int32_t partial_index = -1;
  int32_t mirror_zeros = 0;
};

/// The plan of one product shape for the one-item-per-block kernels: block b runs items[b].
struct GemmWorkPlan {
  GemmTileConfig config = GemmTileConfig::Float32Large;
  int tile = 0;                     ///< rows = columns of a tile
  int k_step = 0;                   ///< k per step of the mainloop
  int slots = 0;                    ///< resident blocks the plan was balanced for
  std::vector<GemmWorkItem> items;  ///< in launch order
  int split_tiles = 0;              ///< tiles whose k-range is split (arrival counters)
  int64_t partial_tiles = 0;        ///< workspace tiles for the partial sums of split tiles
  double estimated_cycles = 0;      ///< the cost model's makespan (SM cycles)
  double useful_cycles = 0;         ///< the same model's total work / slots (a lower bound)
  std::string summary() const;      ///< "Float32Large (128x128, BK 8): 560 items on 264 slots, ..."
};

/// The plan of `p` in the tiles of `config` on a machine of `slots` resident blocks, `blocks_per_sm`
/// of them per multiprocessor. Tiles the mask leaves empty write zeros (or are left out where C
/// holds them: GemmProblem::c_zeros_stored); each tile's k-range is structured_k_range's. Balanced:
/// the wgmma config in shared-panel order with the tiles that would finish late split, the others
/// heaviest first with the split the cost model prefers.
GemmWorkPlan plan_structured_gemm(const GemmProblem& p, GemmTileConfig config, int slots, int blocks_per_sm,
                                  GemmSchedule schedule = GemmSchedule::Balanced);

/// The items of `plan` (square, Upper mask) without the tiles below the diagonal: the first chunk
/// of each tile above it also stores its mirror tile's zeros (mirror_zeros), unless C holds them.
std::vector<GemmWorkItem> items_with_mirror_zeros(const GemmProblem& p, const GemmWorkPlan& plan);

/// The plan of a persistent kernel: block b runs items[offsets[b]] … items[offsets[b + 1] − 1].
/// A tile cut in two (chunk_count 2) meets in C through arrival counter counter_index, one of
/// split_tiles.
struct BlockPlan {
  std::vector<GemmWorkItem> items;
  std::vector<int32_t> offsets;  // blocks + 1 of them
  int split_tiles = 0;
  double makespan = 0;  // the cost model's largest load of a block, in k-steps
};

/// The wide kernel's tiles of a dense-shaped product (kWideTile) over [0, k), in groups of 16 tile
/// rows taken column by column (the tiles in flight at once share few operand panels); under a
/// Symmetric mask without the tiles below the diagonal, under an Upper mask with them as zeros.
std::vector<GemmWorkItem> wide_tile_items(const GemmProblem& p);

/// The wide kernel's plan on `sms` blocks: block b takes tiles b, b + blocks, … of wide_tile_items.
/// Where the last round is part empty, `split` (Auto: where the model's makespan is 2 % shorter and
/// no block gets more than two tails) cuts each of its tiles at one k-step: the head stays with its
/// block, the tails go to the blocks without a tile in that round.
struct WidePlan : BlockPlan {
  double unsplit_makespan = 0;
};
WidePlan wide_tile_plan(const GemmProblem& p, int sms, Choice split);

/// The model costs of the persistent plans, in k-steps of one block on top of an item's own k-steps:
/// an item's fill and epilogue, a chunk of a split tile, a tile of zeros, and a k-step whose A tile
/// is also written transposed. Fitted to the blocks' measured times (docs/structured_gemm.md).
struct TallCosts {
  double item, chunk, zero, write;
};
inline constexpr TallCosts kTallCosts{8.0, 4.0, 5.0, 1.5};  ///< the tall kernel (256 × 128)
inline constexpr TallCosts kWideCosts{10.0, 6.0, 6.0, 0.0};  ///< the wide kernel's structured plans (128 × 256)
/// The costs of a plan in tiles of rows × cols.
inline const TallCosts& tall_costs(int rows, int cols) {
  return rows == kWideTile.rows && cols == kWideTile.cols ? kWideCosts : kTallCosts;
}

/// A persistent kernel's plan of a structured product. transposed_writes: per item, the k-steps of A
/// it writes transposed where the launch also writes op(A)ᵀ (each step of A the launch reads is
/// written once, by an item that reads it, in proportion to the items' k-steps).
struct TallPlan : BlockPlan {
  int64_t compute_tiles = 0;  // tiles with a k-range
  double mean_load = 0;       // the unsplit tiles' load per block
  std::vector<KRange> transposed_writes;
};

/// The plan of a structured product on `sms` persistent blocks in tiles of rows × cols (the tall
/// kernel's by default; the wide kernel's structured products take kWideTile): tiles with a k-range
/// dealt in shared-panel order (by first k, heaviest first among equal first k) to the least loaded
/// block, each cut in two where the model says that balances the blocks (a split must shorten the
/// makespan by 2 %); then the tiles of zeros, each to the least loaded block, first in its list.
/// write_cost > 0: the plan of a launch that writes op(A)ᵀ, whose items' loads count their writes.
TallPlan tall_tile_plan(const GemmProblem& p, int sms, int rows = kTallTile.rows, int cols = kTallTile.cols,
                        double write_cost = 0);

}  // namespace sg::detail::cuda
