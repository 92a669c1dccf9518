// The tile scheduler (tile_scheduler.h): work items, their order and their splits for every
// kernel of the structured GEMM, chosen with a cost model of each kernel's blocks. Host code only.
#include "cuda/gemm/tile_scheduler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <sstream>
#include <utility>

#include <structgrad/core/error.h>

namespace sg::detail::cuda {

// Tile costs are uneven: Upper·Upper tile (i, j) has a k-range of j − i + 1 tiles, so the top-right
// tiles are up to T times heavier than the diagonal ones. Two measures keep every SM busy to the end:
//   * heaviest first: the blocks are ordered by cost, so the hardware block scheduler (which
//     dispatches in blockIdx order as slots free up) runs a longest-processing-time-first list
//     schedule — the long tiles start at once and the short ones fill the gaps at the end,
//     instead of a long tile starting last and running alone;
//   * split-K, guided: a tile whose k-range is long compared with the work still to come
//     (remaining work / slots) is cut into chunks, so no single item is much longer than the
//     per-slot average and the last wave ends level. Chunks cost a partial-tile write and a
//     read-back, so the planner evaluates a few split granularities (and none) with a cost
//     model and an LPT simulation of the slots and keeps the cheapest.
// The model's constants are estimates (H100-like); they only rank candidate plans.

namespace {

struct ConfigTraits {
  int tile, k_step, element_bytes;
  double fma_per_sm_cycle;  // FP32 or FP64 lanes per SM
  double efficiency;        // fraction of those lanes the kernel keeps busy (estimate)
  int min_chunk_steps;      // shortest split chunk, in k-steps
  double partial_scale = 1; // the partial-tile round trip of a split chunk, relative to the generic estimate
};

// The rates are multiply-adds per SM cycle (FFMA: 128; DFMA: 64; the TF32 tensor cores about 4× and
// 8× that on mma.sync and wgmma; the FP64 tensor cores 128) times the share of them each mainloop
// keeps busy. The wgmma loop's steps are latency-bound, and so is a chunk's partial-tile round trip:
// it is charged 6× the generic estimate. The FP64 loop runs dense-shaped float32 tiles about 1.2×
// faster than FFMA, hence its efficiency of 1.0 on FFMA's scale; its partial tiles are float64 (2×).
// On float64 tiles it keeps 56 % of its rate busy and DFMA 33 % of its own (Upper·Upper at 4096), so
// that the tensor cores take float64 products from about 768 on. The choices were tuned against
// measured plans.
ConfigTraits traits_of(GemmTileConfig config) {
  const TileShape s = tile_shape(config);
  switch (config) {
    case GemmTileConfig::Float32Large: return {s.rows, s.k_step, 4, 128, 0.85, 16};
    case GemmTileConfig::Float32Small: return {s.rows, s.k_step, 4, 128, 0.70, 8};
    case GemmTileConfig::Float32Tf32: return {s.rows, s.k_step, 4, 512, 0.50, 8};
    case GemmTileConfig::Float32Tf32Wgmma: return {s.rows, s.k_step, 4, 1024, 0.30, 8, 6.0};
    case GemmTileConfig::Float64: return {s.rows, s.k_step, 8, 64, 0.33, 16};
    case GemmTileConfig::Float32Dmma: return {s.rows, s.k_step, 4, 128, 1.0, 16, 2.0};
    case GemmTileConfig::Float64Dmma: return {s.rows, s.k_step, 8, 128, 0.56, 16};
  }
  return {};
}

struct TileWork {
  int row, col;
  int k_begin, k_end;
  int steps;  // k-steps of the k-range
};

struct CostModel {
  double step_cycles;     // one k-step of one block, with blocks_per_sm sharing the SM
  double fixed_cycles;    // launch latency of a block plus its tile store
  double partial_cycles;  // a chunk's partial store plus its share of the read-back
};

CostModel cost_model(const ConfigTraits& t, int blocks_per_sm) {
  const double tile_bytes = double(t.tile) * t.tile * t.element_bytes;
  CostModel model;
  model.step_cycles = double(t.tile) * t.tile * t.k_step / (t.fma_per_sm_cycle * t.efficiency / blocks_per_sm);
  model.fixed_cycles = 2000.0 + tile_bytes / (32.0 / blocks_per_sm);
  model.partial_cycles = 2.0 * tile_bytes / (64.0 / blocks_per_sm) * t.partial_scale;
  return model;
}

double item_cost(const GemmWorkItem& item, int k_step, const CostModel& model) {
  const int steps = (item.k_end - item.k_begin + k_step - 1) / k_step;
  return steps * model.step_cycles + model.fixed_cycles + (item.chunk_count > 1 ? model.partial_cycles : 0.0);
}

// Makespan of list scheduling in the given order over `slots` equal slots.
double simulate_makespan(const std::vector<GemmWorkItem>& items, int slots, int k_step, const CostModel& model) {
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int s = 0; s < slots; ++s) free_at.push(0.0);
  double makespan = 0;
  for (const GemmWorkItem& item : items) {
    const double start = free_at.top();
    free_at.pop();
    const double end = start + item_cost(item, k_step, model);
    makespan = std::max(makespan, end);
    free_at.push(end);
  }
  return makespan;
}

std::vector<TileWork> enumerate_tiles(const GemmProblem& p, int tile, int k_step, bool heaviest_first) {
  std::vector<TileWork> tiles;
  const int64_t tiles_m = (p.m + tile - 1) / tile, tiles_n = (p.n + tile - 1) / tile;
  for (int64_t ti = 0; ti < tiles_m; ++ti) {
    for (int64_t tj = 0; tj < tiles_n; ++tj) {
      const int64_t row0 = ti * tile, row1 = std::min<int64_t>(row0 + tile, p.m);
      const int64_t col0 = tj * tile, col1 = std::min<int64_t>(col0 + tile, p.n);
      if (p.mask == Structure::Symmetric && ti > tj) continue;  // written as the mirror of (tj, ti)
      TileWork w{static_cast<int>(ti), static_cast<int>(tj), 0, 0, 0};
      const bool below_diagonal = p.mask == Structure::UpperTriangular && row0 >= col1;  // only zeros
      if (!below_diagonal) {
        const KRange range = structured_k_range(p, row0, row1, col0, col1);
        if (range.end > range.begin) {
          w.k_begin = static_cast<int>(range.begin);
          w.k_end = static_cast<int>(range.end);
          w.steps = static_cast<int>((range.end - range.begin + k_step - 1) / k_step);
        }
      }
      tiles.push_back(w);
    }
  }
  // Heaviest first; ties in raster order (neighbouring tiles share panels in L2).
  if (heaviest_first)
    std::stable_sort(tiles.begin(), tiles.end(), [](const TileWork& x, const TileWork& y) { return x.steps > y.steps; });
  return tiles;
}

// The most chunks a tile is cut into.
constexpr int kMaxChunks = 16;

// Appends tile w as `chunks` items of about equal k-step counts, in k order.
void append_chunks(std::vector<GemmWorkItem>& items, const TileWork& w, int chunks, int k_step) {
  for (int c = 0; c < chunks; ++c) {
    GemmWorkItem item;
    item.tile_row = w.row;
    item.tile_col = w.col;
    const int first_step = static_cast<int>(int64_t(c) * w.steps / chunks);
    const int end_step = static_cast<int>(int64_t(c + 1) * w.steps / chunks);
    item.k_begin = w.k_begin + first_step * k_step;
    item.k_end = c + 1 == chunks ? w.k_end : w.k_begin + end_step * k_step;
    item.chunk = c;
    item.chunk_count = chunks;
    items.push_back(item);
  }
}

// Guided split: a tile is cut into chunks of about granularity·(remaining work)/slots
// k-steps (at least min_chunk_steps); granularity 0 splits nothing.
std::vector<GemmWorkItem> split_tiles(const std::vector<TileWork>& tiles, double granularity, int slots,
                                      const ConfigTraits& t) {
  double remaining = 0;
  for (const TileWork& w : tiles) remaining += w.steps;
  std::vector<GemmWorkItem> items;
  items.reserve(tiles.size());
  for (const TileWork& w : tiles) {
    int chunks = 1;
    if (granularity > 0 && w.steps >= 2 * t.min_chunk_steps) {
      const double target = std::max<double>(t.min_chunk_steps, granularity * remaining / slots);
      chunks = static_cast<int>(std::ceil(w.steps / target));
      chunks = std::min({chunks, kMaxChunks, w.steps / t.min_chunk_steps});
      chunks = std::max(chunks, 1);
    }
    remaining -= w.steps;
    append_chunks(items, w, chunks, t.k_step);
  }
  return items;
}

// Even split: every tile long enough cut into the same number of chunks, as many as fit the
// slots in one wave (`chunks` = slots / non-empty tiles) — for few, equal tiles (the dense-
// shaped products at N ≈ 1024 on 128 tiles) where the guided split leaves a ragged second wave.
std::vector<GemmWorkItem> split_tiles_evenly(const std::vector<TileWork>& tiles, int chunks, const ConfigTraits& t) {
  std::vector<GemmWorkItem> items;
  for (const TileWork& w : tiles)
    append_chunks(items, w, std::max(1, std::min(chunks, w.steps / t.min_chunk_steps)), t.k_step);
  return items;
}

// Capped split: only the tiles longer than the per-slot share of all the work (total k-steps /
// slots, the ideal makespan) are cut, each into as few chunks as bring it under the share — for
// skewed tile costs (Upper·Upper) where a few long tiles set the makespan and the guided split
// would also cut the many short tiles that list scheduling places whole. A candidate of the
// configs other than the wgmma loop's, whose plans split the tiles that would finish late
// instead (split_late_tiles).
std::vector<GemmWorkItem> split_long_tiles(const std::vector<TileWork>& tiles, int slots, const ConfigTraits& t) {
  int64_t total = 0;
  for (const TileWork& w : tiles) total += w.steps;
  const int64_t share = std::max<int64_t>(t.min_chunk_steps, (total + slots - 1) / slots);
  std::vector<GemmWorkItem> items;
  items.reserve(tiles.size());
  for (const TileWork& w : tiles) {
    const int chunks = w.steps > share ? static_cast<int>((w.steps + share - 1) / share) : 1;
    append_chunks(items, w, std::max(1, std::min({chunks, kMaxChunks, w.steps / t.min_chunk_steps})), t.k_step);
  }
  return items;
}

// The plans of the wgmma loop (TF32 on sm_90a, schedule Balanced): the tiles in shared-panel
// order, the ones that would finish late split.
//
// Order. Heaviest first puts tiles of equal cost side by side; where the cost changes along both
// tile axes (Upper·Upper's forward: tile (i, j) runs k ∈ [128i, 128j + 128)) those are the tiles
// of one diagonal, which share no operand panel, so the blocks running at one time read most of
// both operands and their copies miss in L2. Tiles that start at the same k of a shared panel
// read it in step instead, each panel step fetched from DRAM once for all of them. So: tiles by first k, heaviest first among
// equal first k, the empty tiles (zeros only) last. For Upper·Upper's forward that is row by
// row; where every tile starts at k = 0 (dB, the products with a Dense operand) it is heaviest
// first; for dA = triu(G·Bᵀ) (column j over k ∈ [128j, n)) column by column.
//
// Split. In that order a row's long tiles start only when the rows before it have been taken,
// so a long tile of a middle row can finish well after the rest. So list scheduling is simulated in that order, and each tile that would finish
// after `target` cycles is cut into as few chunks as end it by then (at most kMaxChunks, each
// at least min_chunk_steps long); its chunks go together at the tile's place, each to the next
// free slot. plan_in_panel_order tries targets from the mean load per slot up.
std::vector<GemmWorkItem> split_late_tiles(std::vector<TileWork> tiles, int slots, const ConfigTraits& t,
                                           const CostModel& model, double target) {
  std::stable_sort(tiles.begin(), tiles.end(), [](const TileWork& x, const TileWork& y) {
    const bool x_empty = x.steps == 0, y_empty = y.steps == 0;
    if (x_empty != y_empty) return y_empty;
    if (x.k_begin != y.k_begin) return x.k_begin < y.k_begin;
    return x.steps > y.steps;
  });
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int s = 0; s < slots; ++s) free_at.push(0.0);
  std::vector<GemmWorkItem> items;
  items.reserve(tiles.size());
  for (const TileWork& w : tiles) {
    const double start = free_at.top();
    auto cost = [&](int chunks) {
      return double(w.steps) / chunks * model.step_cycles + model.fixed_cycles +
             (chunks > 1 ? model.partial_cycles : 0.0);
    };
    const int most = std::min(kMaxChunks, w.steps / t.min_chunk_steps);
    int chunks = 1;
    while (chunks < most && start + cost(chunks) > target) ++chunks;
    const size_t first = items.size();
    append_chunks(items, w, chunks, t.k_step);
    for (size_t i = first; i < items.size(); ++i) {
      const double at = free_at.top();
      free_at.pop();
      free_at.push(at + item_cost(items[i], t.k_step, model));
    }
  }
  return items;
}

// The wgmma plan (split_late_tiles): unsplit, or split for a target from 1.00 to 1.60 times the
// mean load per slot, whichever the model gives the shortest makespan (a split must win by 2 %).
// Returns the modelled makespan.
double plan_in_panel_order(const std::vector<TileWork>& tiles, int slots, const ConfigTraits& t,
                           const CostModel& model, std::vector<GemmWorkItem>& items) {
  double load = 0;
  for (const TileWork& w : tiles) load += w.steps * model.step_cycles + model.fixed_cycles;
  load /= slots;
  items = split_late_tiles(tiles, slots, t, model, std::numeric_limits<double>::infinity());
  double best = simulate_makespan(items, slots, t.k_step, model);
  for (int percent = 100; percent <= 160; percent += 2) {
    std::vector<GemmWorkItem> split = split_late_tiles(tiles, slots, t, model, load * percent / 100.0);
    const double cycles = simulate_makespan(split, slots, t.k_step, model);
    if (cycles < 0.98 * best) {
      best = cycles;
      items = std::move(split);
    }
  }
  return best;
}

}  // namespace

const char* tile_config_name(GemmTileConfig config) {
  switch (config) {
    case GemmTileConfig::Float32Large: return "Float32Large";
    case GemmTileConfig::Float32Small: return "Float32Small";
    case GemmTileConfig::Float32Tf32: return "Float32Tf32";
    case GemmTileConfig::Float32Tf32Wgmma: return "Float32Tf32Wgmma";
    case GemmTileConfig::Float64: return "Float64";
    case GemmTileConfig::Float32Dmma: return "Float32Dmma";
    case GemmTileConfig::Float64Dmma: return "Float64Dmma";
  }
  return "?";
}

std::string GemmWorkPlan::summary() const {
  std::ostringstream out;
  out << tile_config_name(config) << " (" << tile << "x" << tile << ", BK " << k_step << "): " << items.size()
      << " items on " << slots << " slots, " << split_tiles << " split tiles, estimated balance "
      << (estimated_cycles > 0 ? useful_cycles / estimated_cycles : 1.0);
  return out.str();
}

GemmWorkPlan plan_structured_gemm(const GemmProblem& p, GemmTileConfig config, int slots, int blocks_per_sm,
                                  GemmSchedule schedule) {
  SG_CHECK(slots > 0 && blocks_per_sm > 0, "structured gemm: planning for ", slots, " slots");
  const ConfigTraits t = traits_of(config);
  const CostModel model = cost_model(t, blocks_per_sm);
  const bool heaviest_first = schedule != GemmSchedule::Raster;
  const std::vector<TileWork> tiles = enumerate_tiles(p, t.tile, t.k_step, heaviest_first);

  GemmWorkPlan best;
  best.config = config;
  best.tile = t.tile;
  best.k_step = t.k_step;
  best.slots = slots;
  double best_cycles = -1;
  if (config == GemmTileConfig::Float32Tf32Wgmma && schedule == GemmSchedule::Balanced)
    best_cycles = plan_in_panel_order(tiles, slots, t, model, best.items);
  // The other configs: no split, the guided split at three granularities, the even split that
  // fills one wave and the capped split of the long tiles, each in heaviest-first order.
  enum class Split { Guided, Even, Capped };
  struct Candidate {
    Split split;
    double value;  // Guided: granularity (0: no split); Even: chunks per tile
  };
  std::vector<Candidate> candidates;
  if (best_cycles < 0) candidates.push_back({Split::Guided, 0.0});
  if (best_cycles < 0 && schedule == GemmSchedule::Balanced) {
    for (const double granularity : {4.0, 2.0, 1.0}) candidates.push_back({Split::Guided, granularity});
    const int64_t busy = std::count_if(tiles.begin(), tiles.end(), [](const TileWork& w) { return w.steps > 0; });
    const int chunks = busy > 0 ? static_cast<int>(std::min<int64_t>(kMaxChunks, slots / busy)) : 0;
    if (chunks >= 2) candidates.push_back({Split::Even, double(chunks)});
    candidates.push_back({Split::Capped, 0.0});
  }
  for (const Candidate& candidate : candidates) {
    std::vector<GemmWorkItem> items =
        candidate.split == Split::Guided ? split_tiles(tiles, candidate.value, slots, t)
        : candidate.split == Split::Even ? split_tiles_evenly(tiles, static_cast<int>(candidate.value), t)
                                         : split_long_tiles(tiles, slots, t);
    // Chunks re-sorted among whole tiles; stable keeps a tile's chunks together.
    if (heaviest_first) std::stable_sort(items.begin(), items.end(), [&](const GemmWorkItem& x, const GemmWorkItem& y) {
      return item_cost(x, t.k_step, model) > item_cost(y, t.k_step, model);
    });
    const double cycles = simulate_makespan(items, slots, t.k_step, model);
    if (best_cycles < 0 || cycles < 0.98 * best_cycles) {  // a split must win clearly
      best_cycles = cycles;
      best.items = std::move(items);
    }
  }
  best.estimated_cycles = best_cycles;
  // Where C holds its zeros already (GemmProblem::c_zeros_stored), the tiles wholly below the
  // diagonal are left out of the deal made with them, which otherwise stays as it is: those tiles
  // have no k-steps, so they are never split, and the kernels that run this plan take an item per
  // block. (Leaving them out before the deal gave worse plans.)
  if (p.c_zeros_stored && p.mask == Structure::UpperTriangular) {
    best.items.erase(std::remove_if(best.items.begin(), best.items.end(),
                                    [&](const GemmWorkItem& item) {
                                      const int64_t row0 = int64_t(item.tile_row) * t.tile;
                                      const int64_t col1 = std::min<int64_t>(int64_t(item.tile_col + 1) * t.tile, p.n);
                                      return row0 >= col1;
                                    }),
                     best.items.end());
  }
  double total = 0;
  for (const GemmWorkItem& item : best.items) total += item_cost(item, t.k_step, model);
  best.useful_cycles = total / slots;

  // Arrival counters and workspace slots for the split tiles. After the cost sort a tile's
  // chunks are no longer adjacent (nor in chunk order), so they are found by tile.
  int64_t partial_tiles = 0;
  int split = 0;
  std::map<std::pair<int32_t, int32_t>, std::pair<int32_t, int64_t>> split_slots;  // tile -> counter, partials
  for (GemmWorkItem& item : best.items) {
    if (item.chunk_count == 1) continue;
    const auto [slot, first_seen] =
        split_slots.try_emplace({item.tile_row, item.tile_col}, split, partial_tiles);
    if (first_seen) {
      ++split;
      partial_tiles += item.chunk_count;
    }
    item.counter_index = slot->second.first;
    item.partial_index = static_cast<int32_t>(slot->second.second);
  }
  best.split_tiles = split;
  best.partial_tiles = partial_tiles;
  return best;
}

// The wide kernel's items go in groups of kWideGroupRows tile rows, column by column within a
// group. Its persistent blocks take items i, i + SMs, …, so the items in flight at once are one
// group's rows across about SMs / kWideGroupRows columns: on 132 SMs, 16 A row panels (128 rows
// each) and 8 B column panels (256 columns), which is about the fewest operand bytes for 132
// tiles (rows ≈ 2 × columns). In row-major order they would be 4 rows across all 32 column panels
// at N = 8192, twice the panel bytes, and the L2 would serve fewer of the reads.
constexpr int kWideGroupRows = 16;

std::vector<GemmWorkItem> wide_tile_items(const GemmProblem& p) {
  constexpr int kRows = kWideTile.rows, kCols = kWideTile.cols;
  const int64_t tile_rows = (p.m + kRows - 1) / kRows, tile_cols = (p.n + kCols - 1) / kCols;
  std::vector<GemmWorkItem> items;
  items.reserve(static_cast<size_t>(tile_rows * tile_cols));
  for (int64_t group0 = 0; group0 < tile_rows; group0 += kWideGroupRows) {
    const int64_t group_rows = std::min<int64_t>(kWideGroupRows, tile_rows - group0);
    for (int64_t j = 0; j < tile_cols; ++j) {
      for (int64_t i = group0; i < group0 + group_rows; ++i) {
        // Wholly below the diagonal: a Symmetric mask's tile is the mirror's, an Upper mask's is
        // zeros (an empty k-range).
        const bool below = i * kRows > std::min(p.n, (j + 1) * kCols) - 1;
        if (below && p.mask == Structure::Symmetric) continue;
        GemmWorkItem item;
        item.tile_row = static_cast<int32_t>(i);
        item.tile_col = static_cast<int32_t>(j);
        item.k_begin = 0;
        item.k_end = below && p.mask == Structure::UpperTriangular ? 0 : static_cast<int32_t>(p.k);
        items.push_back(item);
      }
    }
  }
  return items;
}

// The model's cost of a wide item beyond its k-steps, in k-steps: its epilogue (128 KB of TMA
// stores from the consumers' accumulators, about three k-steps' time).
constexpr double kWideItemSteps = 3;
// Auto cuts the last round's tiles only where no block gets more than this many tails: with more,
// the cut measured slower although the model put it ahead.
constexpr int64_t kWideTailsMost = 2;

WidePlan wide_tile_plan(const GemmProblem& p, int sms, Choice split) {
  SG_CHECK(sms > 0, "wide_tile_plan: needs sms > 0, got ", sms);
  const std::vector<GemmWorkItem> tiles = wide_tile_items(p);
  const int64_t count = static_cast<int64_t>(tiles.size());
  const int blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(count, sms)));
  auto steps = [](const GemmWorkItem& item) {
    return std::max<int64_t>(0, (item.k_end - item.k_begin + kWideTile.k_step - 1) / kWideTile.k_step);
  };
  // Whole tiles, block b taking tiles b, b + blocks, …: the plan without split tiles.
  WidePlan whole;
  whole.offsets.push_back(0);
  std::vector<double> loads(static_cast<size_t>(blocks), 0.0);
  for (int b = 0; b < blocks; ++b) {
    for (int64_t i = b; i < count; i += blocks) {
      whole.items.push_back(tiles[static_cast<size_t>(i)]);
      loads[static_cast<size_t>(b)] += static_cast<double>(steps(tiles[static_cast<size_t>(i)])) + kWideItemSteps;
    }
    whole.offsets.push_back(static_cast<int32_t>(whole.items.size()));
  }
  whole.makespan = whole.unsplit_makespan = *std::max_element(loads.begin(), loads.end());

  // The last round split: where the tiles leave the last round part empty (rest of them), each of
  // its tiles is cut at k-step c. Block b < rest runs the head [0, c) of tile rounds·blocks + b, as
  // it would have run the whole tile; the tails [c, end) go to the blocks without a tile in that
  // round, dealt in turn. So the heads run together at the same k, as whole rounds do (the L2 serves
  // their operand panels to many blocks at once), and each tile is cut once: two chunks, which
  // meet in C. c balances a head against the most tails a block gets. (Sharing out the last two
  // rounds' k-steps evenly instead would leave the blocks at unrelated k, and the L2 would no longer
  // hold what they share.)
  const int64_t rounds = count / blocks, rest = count % blocks;
  const bool same_range = count > 0 && std::all_of(tiles.begin(), tiles.end(), [&](const GemmWorkItem& t) {
    return t.k_begin == tiles[0].k_begin && t.k_end == tiles[0].k_end && t.k_end > t.k_begin;
  });
  const int64_t k_steps = count > 0 ? steps(tiles[0]) : 0;
  if (split == Choice::Never || !same_range || rest == 0 || rounds < 1 || k_steps < 2) return whole;
  const int64_t tails_most = (rest + (blocks - rest) - 1) / (blocks - rest);
  if (split == Choice::Auto && tails_most > kWideTailsMost) return whole;
  int64_t cut = 1;
  double last_round = std::numeric_limits<double>::infinity();
  for (int64_t c = 1; c < k_steps; ++c) {
    const double load = std::max(static_cast<double>(c) + kWideItemSteps,
                                 static_cast<double>(tails_most) * (static_cast<double>(k_steps - c) + kWideItemSteps));
    if (load < last_round) last_round = load, cut = c;
  }
  WidePlan plan;
  plan.unsplit_makespan = whole.makespan;
  plan.split_tiles = static_cast<int>(rest);
  plan.makespan = static_cast<double>(rounds) * (static_cast<double>(k_steps) + kWideItemSteps) + last_round;
  plan.offsets.push_back(0);
  const int32_t k_cut = static_cast<int32_t>(tiles[0].k_begin + cut * kWideTile.k_step);
  for (int b = 0; b < blocks; ++b) {
    for (int64_t i = b; i < rounds * blocks; i += blocks) plan.items.push_back(tiles[static_cast<size_t>(i)]);
    auto chunk = [&](int64_t j, int part) {  // part 0 of tile rounds·blocks + j: its head; 1: its tail
      GemmWorkItem item = tiles[static_cast<size_t>(rounds * blocks + j)];
      (part == 0 ? item.k_end : item.k_begin) = k_cut;
      item.chunk = part;
      item.chunk_count = 2;
      item.counter_index = static_cast<int32_t>(j);
      plan.items.push_back(item);
    };
    if (b < rest) chunk(b, 0);
    else
      for (int64_t j = b - rest; j < rest; j += blocks - rest) chunk(j, 1);
    plan.offsets.push_back(static_cast<int32_t>(plan.items.size()));
  }
  // Auto: where the model's makespan is at least 2 % shorter for it, as the other planners' splits.
  if (split == Choice::Auto && plan.makespan > 0.98 * whole.makespan) return whole;
  return plan;
}

std::vector<GemmWorkItem> items_with_mirror_zeros(const GemmProblem& p, const GemmWorkPlan& plan) {
  SG_CHECK(p.mask == Structure::UpperTriangular && p.m == p.n,
           "items_with_mirror_zeros: needs a square product under an Upper mask, got ", p.m, "x", p.n);
  std::vector<GemmWorkItem> items;
  items.reserve(plan.items.size());
  for (const GemmWorkItem& item : plan.items) {
    // Square tiles on a square grid: tile (i, j) lies wholly below the diagonal exactly where i > j.
    if (item.tile_row > item.tile_col) {
      SG_CHECK(item.k_begin >= item.k_end, "items_with_mirror_zeros: tile (", item.tile_row, ", ", item.tile_col,
               ") below the diagonal has a k-range");
      continue;
    }
    items.push_back(item);
    // The mirror tile lies wholly below the diagonal: where C holds its zeros already, it stays as it is.
    items.back().mirror_zeros = item.tile_row < item.tile_col && item.chunk == 0 && !p.c_zeros_stored;
  }
  return items;
}

namespace {

double tall_item_cost(const GemmWorkItem& t, const TallCosts& costs) {
  constexpr int kStep = kTallTile.k_step;
  return (t.k_end - t.k_begin + kStep - 1) / kStep + costs.item + (t.chunk_count > 1 ? costs.chunk : 0.0);
}

/// A tile cut into two chunks at `k_split`: chunk 0 the lower k, chunk 1 the rest, sharing arrival
/// counter `counter`.
std::pair<GemmWorkItem, GemmWorkItem> tall_chunks(GemmWorkItem t, int k_split, int counter) {
  t.chunk_count = 2;
  t.counter_index = counter;
  GemmWorkItem second = t;
  t.k_end = second.k_begin = k_split;
  second.chunk = 1;
  return {t, second};
}

/// The tiles with a k-range dealt in shared-panel order, each to the least loaded block (ties: the
/// lowest index): by the first k of the tile, heaviest first among equal first k, ties in raster
/// order. So the blocks start together the tiles that read one operand panel from the same k (for
/// Upper·Upper, one tile row), and read it in step; heaviest first alone starts the tiles of one
/// diagonal together, which share no panel. Where every tile starts at the same k (Dense·Upper) or the first k rises
/// as the cost falls (Upper·Dense), the order is heaviest first.
/// Two ways to cut a tile in two chunks: a tile longer than `cap` k-steps is halved before the deal
/// (both chunks at the tile's place in the order); a tile that would take its block's load past
/// `target` is cut where the block reaches it, the second chunk going to the next least loaded
/// block. Returns the model's makespan.
/// `cost`: an item's load (tall_item_cost, plus its transposed writes in a writing plan); `costs`:
/// the plan's (tall_costs).
template <class Cost>
double deal_tall_tiles(const std::vector<GemmWorkItem>& tiles, int sms, double cap, double target, const Cost& cost,
                       const TallCosts& costs, std::vector<std::vector<GemmWorkItem>>& per_block, int& split_tiles) {
  constexpr int kStep = kTallTile.k_step;
  constexpr int kMinChunkSteps = 8;
  auto steps_of = [](const GemmWorkItem& t) { return (t.k_end - t.k_begin + kStep - 1) / kStep; };
  struct Dealt {
    int32_t first_k;  // the tile's (for a halved tile's chunks, the first chunk's)
    GemmWorkItem item;
  };
  std::vector<Dealt> items;
  split_tiles = 0;
  for (const GemmWorkItem& t : tiles) {
    const int steps = steps_of(t);
    if (steps < 2 || steps <= cap) {
      items.push_back({t.k_begin, t});
      continue;
    }
    const auto [first, second] = tall_chunks(t, t.k_begin + steps / 2 * kStep, split_tiles++);
    items.push_back({t.k_begin, first});
    items.push_back({t.k_begin, second});
  }
  std::stable_sort(items.begin(), items.end(), [&](const Dealt& x, const Dealt& y) {
    if (x.first_k != y.first_k) return x.first_k < y.first_k;
    return cost(x.item) > cost(y.item);
  });
  using Slot = std::pair<double, int>;
  std::priority_queue<Slot, std::vector<Slot>, std::greater<Slot>> slots;
  for (int b = 0; b < sms; ++b) slots.push({0.0, b});
  double makespan = 0;
  auto place = [&](const GemmWorkItem& t) {
    Slot slot = slots.top();
    slots.pop();
    per_block[static_cast<size_t>(slot.second)].push_back(t);
    slot.first += cost(t);
    makespan = std::max(makespan, slot.first);
    slots.push(slot);
  };
  for (const Dealt& dealt : items) {
    const GemmWorkItem& t = dealt.item;
    const int steps = steps_of(t);
    const double load = slots.top().first;
    const int room = static_cast<int>(std::min<double>(target - load - costs.item - costs.chunk, steps));
    if (t.chunk_count > 1 || load + cost(t) <= target || room < kMinChunkSteps ||
        steps - room < kMinChunkSteps) {
      place(t);
      continue;
    }
    const auto [first, second] = tall_chunks(t, t.k_begin + room * kStep, split_tiles++);
    place(first);
    place(second);
  }
  return makespan;
}

/// The k-steps of A that each tile with a k-range writes transposed where the launch writes op(A)ᵀ
/// (GemmProblem::at): per tile, [begin, end) in k, keyed by (tile row, tile column). A tile
/// row's tiles share its k-steps of A; each step must be written once, by a tile whose k-range
/// holds it. Each tile writes one run of steps, the runs laid end to end in the order of the tiles'
/// k-ranges (by first k, then last), their lengths in proportion to the tiles' k-steps, so that a
/// block's share of the writes follows its share of the steps (a writing step costs a block about
/// two and a half). Where the runs cannot lie so (a tile row whose k-ranges leave no such order),
/// each step goes to the tile whose columns hold its k.
std::map<std::pair<int32_t, int32_t>, KRange> transposed_write_runs(const std::vector<GemmWorkItem>& tiles,
                                                                  int cols) {
  constexpr int kStep = kTallTile.k_step;
  std::map<int32_t, std::vector<GemmWorkItem>> rows;
  for (const GemmWorkItem& t : tiles) rows[t.tile_row].push_back(t);
  std::map<std::pair<int32_t, int32_t>, KRange> runs;
  for (auto& [row, row_tiles] : rows) {
    std::sort(row_tiles.begin(), row_tiles.end(), [](const GemmWorkItem& x, const GemmWorkItem& y) {
      return x.k_begin != y.k_begin ? x.k_begin < y.k_begin : x.k_end < y.k_end;
    });
    const int32_t lo = row_tiles.front().k_begin;
    int32_t hi = lo;
    double total = 0;
    for (const GemmWorkItem& t : row_tiles) {
      hi = std::max(hi, t.k_end);
      total += (t.k_end - t.k_begin + kStep - 1) / kStep;
    }
    const int32_t steps = (hi - lo + kStep - 1) / kStep;
    std::vector<KRange> cut(row_tiles.size());
    bool fits = true;
    double done = 0;
    int32_t x = lo;
    for (size_t i = 0; i < row_tiles.size(); ++i) {
      const GemmWorkItem& t = row_tiles[i];
      done += (t.k_end - t.k_begin + kStep - 1) / kStep;
      int32_t next = i + 1 == row_tiles.size() ? hi : lo + kStep * static_cast<int32_t>(std::lround(steps * done / total));
      if (i + 1 < row_tiles.size()) next = std::max(next, row_tiles[i + 1].k_begin);  // no gap before the next
      next = std::min(std::max(next, x), hi);
      fits = fits && (next == x || (x >= t.k_begin && next <= t.k_end));
      cut[i] = {x, next};
      x = next;
    }
    for (size_t i = 0; i < row_tiles.size(); ++i) {
      const GemmWorkItem& t = row_tiles[i];
      const int32_t col0 = t.tile_col * cols;
      runs[{row, t.tile_col}] = fits ? cut[i] : KRange{std::max(col0, t.k_begin), std::min(col0 + cols, t.k_end)};
    }
  }
  return runs;
}

}  // namespace

TallPlan tall_tile_plan(const GemmProblem& p, int sms, int rows, int cols, double write_cost) {
  SG_CHECK(sms > 0 && p.mask != Structure::Symmetric && rows > 0 && cols > 0,
           "tall_tile_plan: needs sms > 0, tiles and a mask other than Symmetric");
  const int64_t tile_rows = (p.m + rows - 1) / rows, tile_cols = (p.n + cols - 1) / cols;
  std::vector<GemmWorkItem> tiles, zeros;
  for (int64_t i = 0; i < tile_rows; ++i) {
    for (int64_t j = 0; j < tile_cols; ++j) {
      const int64_t row0 = i * rows, row1 = std::min<int64_t>(row0 + rows, p.m);
      const int64_t col0 = j * cols, col1 = std::min<int64_t>(col0 + cols, p.n);
      const KRange range = p.mask == Structure::UpperTriangular && row0 >= col1
                               ? KRange{0, 0}  // only zeros
                               : structured_k_range(p, row0, row1, col0, col1);
      GemmWorkItem item;
      item.tile_row = static_cast<int32_t>(i);
      item.tile_col = static_cast<int32_t>(j);
      if (range.end > range.begin) {
        item.k_begin = static_cast<int32_t>(range.begin);
        item.k_end = static_cast<int32_t>(range.end);
      }
      if (range.end > range.begin)
        tiles.push_back(item);
      else if (!(p.c_zeros_stored && p.mask == Structure::UpperTriangular && row0 >= col1))
        zeros.push_back(item);  // C's zeros below the diagonal, where it holds them already, stay as they are
    }
  }
  TallPlan plan;
  plan.compute_tiles = static_cast<int64_t>(tiles.size());
  const TallCosts& costs = tall_costs(rows, cols);
  // Each tile's run of transposed writes; in a writing plan (write_cost > 0) an item's load counts
  // the steps of its run in its k-range, write_cost each on top.
  const auto runs = transposed_write_runs(tiles, cols);
  auto writes_of = [&](const GemmWorkItem& t) {
    const auto run = runs.find({t.tile_row, t.tile_col});
    if (run == runs.end()) return KRange{};
    const int64_t begin = std::max<int64_t>(run->second.begin, t.k_begin);
    const int64_t end = std::min<int64_t>(run->second.end, t.k_end);
    return KRange{begin, std::max(begin, end)};
  };
  auto cost = [&](const GemmWorkItem& t) {
    if (write_cost == 0) return tall_item_cost(t, costs);
    const KRange w = writes_of(t);
    return tall_item_cost(t, costs) + write_cost * ((w.end - w.begin + kTallTile.k_step - 1) / kTallTile.k_step);
  };
  for (const GemmWorkItem& t : tiles) plan.mean_load += cost(t) / sms;
  // Whichever candidate the model gives the shortest makespan, ties to the fewest split tiles; a
  // split must win by 2 % over the unsplit deal (the first candidate).
  std::vector<std::vector<GemmWorkItem>> per_block;
  plan.makespan = std::numeric_limits<double>::infinity();
  double unsplit = plan.makespan;
  // Candidates: unsplit; the tiles longer than 1, 0.8 or 0.6 of the mean load halved; or each tile
  // that would take its block past a target (1 … 1.3 of the mean load, in steps of 0.01) cut where
  // the block reaches it (written as the target's negative fraction). In shared-panel order the
  // long tiles of a late panel need the higher targets (Upper·Upper at 3072: 1.15).
  std::vector<double> fractions{0.0, 1.0, 0.8, 0.6};
  for (int percent = 100; percent <= 130; ++percent) fractions.push_back(-percent / 100.0);
  for (const double fraction : fractions) {
    constexpr double kNone = std::numeric_limits<double>::infinity();
    const double cap = fraction > 0 ? fraction * plan.mean_load : kNone;
    const double target = fraction < 0 ? -fraction * plan.mean_load : kNone;
    std::vector<std::vector<GemmWorkItem>> blocks(static_cast<size_t>(sms));
    int split = 0;
    const double makespan = deal_tall_tiles(tiles, sms, cap, target, cost, costs, blocks, split);
    if (per_block.empty()) unsplit = makespan;  // the first candidate
    const bool better = makespan < plan.makespan || (makespan == plan.makespan && split < plan.split_tiles);
    if (per_block.empty() || (better && makespan < 0.98 * unsplit)) {
      plan.makespan = makespan;
      plan.split_tiles = split;
      per_block = std::move(blocks);
    }
  }
  // The tiles of zeros, each to the least loaded block (ties: the lowest index). They head its list,
  // and the kernel stores them after the block's other items.
  std::vector<double> loads;
  for (const auto& block : per_block) {
    loads.push_back(0.0);
    for (const GemmWorkItem& t : block) loads.back() += cost(t);
  }
  std::vector<std::vector<GemmWorkItem>> block_zeros(per_block.size());
  for (const GemmWorkItem& z : zeros) {
    const size_t b = static_cast<size_t>(std::min_element(loads.begin(), loads.end()) - loads.begin());
    block_zeros[b].push_back(z);
    loads[b] += costs.zero;
  }
  plan.offsets.reserve(static_cast<size_t>(sms) + 1);
  for (size_t b = 0; b < per_block.size(); ++b) {
    plan.offsets.push_back(static_cast<int32_t>(plan.items.size()));
    plan.items.insert(plan.items.end(), block_zeros[b].begin(), block_zeros[b].end());
    plan.items.insert(plan.items.end(), per_block[b].begin(), per_block[b].end());
  }
  plan.offsets.push_back(static_cast<int32_t>(plan.items.size()));
  // Each item's part of its tile's run of transposed writes (a chunk: the part in its k-range).
  plan.transposed_writes.reserve(plan.items.size());
  for (const GemmWorkItem& t : plan.items) plan.transposed_writes.push_back(writes_of(t));
  return plan;
}

}  // namespace sg::detail::cuda
