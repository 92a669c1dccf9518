// The tile scheduler (cuda/gemm/tile_scheduler.h) on its own: host code, so these run on any
// machine. Every plan covers each output tile once with its structured k-range, splits meet through
// distinct counters, and the orders and balances are the ones the kernels were tuned for.
#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/gemm/selection.h"
#include "cuda/gemm/tile_scheduler.h"
#include "gemm_check.h"

namespace {

namespace cu = sg::detail::cuda;
using namespace sgtest::gemm;
using cu::GemmTileConfig;
using cu::GemmWorkPlan;
using sg::Structure;
using sg::detail::GemmProblem;

using sg::detail::cuda::GemmSchedule;
using sg::detail::cuda::GemmWorkItem;
using sg::detail::cuda::plan_structured_gemm;
using sg::detail::cuda::items_with_mirror_zeros;

/// Multiply-adds a plan issues, counting whole tiles (edge tiles at full size).
double planned_macs(const GemmWorkPlan& plan) {
  double macs = 0;
  for (const auto& item : plan.items) macs += double(plan.tile) * plan.tile * (item.k_end - item.k_begin);
  return macs;
}

TEST(TileScheduler, ItemsCoverEveryTileExactlyOnceWithContiguousChunks) {
  // Every tile once, its k-range in contiguous chunks; under an Upper mask whose C holds its zeros
  // already (c_zeros_stored) the tiles wholly below the diagonal have no item, and the rest as ever.
  auto zeros_stored = [](GemmProblem p) {
    p.c_zeros_stored = true;
    return p;
  };
  for (GemmTileConfig config : {GemmTileConfig::Float32Large, GemmTileConfig::Float32Small, GemmTileConfig::Float64,
                                GemmTileConfig::Float32Tf32, GemmTileConfig::Float32Tf32Wgmma,
                                GemmTileConfig::Float32Dmma, GemmTileConfig::Float64Dmma}) {
    for (int64_t n : {1, 129, 1000, 4096})
    for (const GemmProblem& p :
         {square(n, {Structure::UpperTriangular, false}, {Structure::UpperTriangular, false}, Structure::UpperTriangular),
          square(n, {Structure::Symmetric, false}, {Structure::Dense, false}, Structure::Dense),
          square(n, {Structure::Dense, false}, {Structure::Dense, true}, Structure::UpperTriangular),
          zeros_stored(square(n, {Structure::UpperTriangular, false}, {Structure::UpperTriangular, false}, Structure::UpperTriangular)),
          zeros_stored(square(n, {Structure::Dense, false}, {Structure::Dense, true}, Structure::UpperTriangular))}) {
      const GemmWorkPlan plan = plan_structured_gemm(p, config, 132 * 2, 2);
      const int64_t tiles = (n + plan.tile - 1) / plan.tile;
      // Per tile: its chunks, in k order, must tile [k_begin, k_end) of structured_k_range.
      std::vector<std::vector<const sg::detail::cuda::GemmWorkItem*>> by_tile(static_cast<size_t>(tiles * tiles));
      std::vector<int> counters_seen;
      std::vector<int64_t> partial_slots_seen;
      for (const auto& item : plan.items) by_tile[item.tile_row * tiles + item.tile_col].push_back(&item);
      for (int64_t ti = 0; ti < tiles; ++ti) {
        for (int64_t tj = 0; tj < tiles; ++tj) {
          auto& chunks = by_tile[ti * tiles + tj];
          std::sort(chunks.begin(), chunks.end(), [](auto* x, auto* y) { return x->chunk < y->chunk; });
          const int64_t row0 = ti * plan.tile, col0 = tj * plan.tile;
          const int64_t row1 = std::min(row0 + plan.tile, n), col1 = std::min(col0 + plan.tile, n);
          if (p.c_zeros_stored && row0 >= col1) {
            EXPECT_TRUE(chunks.empty()) << "tile (" << ti << ", " << tj << ") lies below the diagonal, where C holds its zeros";
            continue;
          }
          ASSERT_FALSE(chunks.empty()) << "tile (" << ti << ", " << tj << ") has no item (it must write its zeros)";
          auto range = sg::detail::structured_k_range(p, row0, row1, col0, col1);
          if (p.mask == Structure::UpperTriangular && row0 >= col1) range.end = range.begin;  // below the diagonal: zeros only
          int64_t k = range.end > range.begin ? range.begin : 0;
          for (size_t c = 0; c < chunks.size(); ++c) {
            ASSERT_EQ(chunks[c]->chunk, static_cast<int>(c));
            ASSERT_EQ(chunks[c]->chunk_count, static_cast<int>(chunks.size()));
            if (range.end <= range.begin) {
              EXPECT_GE(chunks[c]->k_begin, chunks[c]->k_end);
              continue;
            }
            EXPECT_EQ(chunks[c]->k_begin, k) << "tile (" << ti << ", " << tj << ") chunk " << c;
            EXPECT_EQ(chunks[c]->k_begin % plan.k_step, 0);
            k = chunks[c]->k_end;
          }
          if (range.end > range.begin) EXPECT_EQ(k, range.end) << "tile (" << ti << ", " << tj << ")";
          // A split tile's chunks share one arrival counter and one run of partial slots.
          for (const auto* chunk : chunks) {
            EXPECT_EQ(chunk->counter_index, chunks[0]->counter_index);
            EXPECT_EQ(chunk->partial_index, chunks[0]->partial_index);
            if (chunks.size() > 1) {
              EXPECT_GE(chunk->counter_index, 0);
              counters_seen.push_back(chunk->counter_index);
              for (int c = 0; c < chunk->chunk_count; ++c) partial_slots_seen.push_back(chunk->partial_index + c);
            } else {
              EXPECT_EQ(chunk->counter_index, -1);
            }
          }
        }
      }
      // Distinct tiles never share a counter or a partial slot; the plan's totals match.
      std::sort(counters_seen.begin(), counters_seen.end());
      counters_seen.erase(std::unique(counters_seen.begin(), counters_seen.end()), counters_seen.end());
      EXPECT_EQ(static_cast<int>(counters_seen.size()), plan.split_tiles);
      std::sort(partial_slots_seen.begin(), partial_slots_seen.end());
      partial_slots_seen.erase(std::unique(partial_slots_seen.begin(), partial_slots_seen.end()),
                               partial_slots_seen.end());
      EXPECT_EQ(static_cast<int64_t>(partial_slots_seen.size()), plan.partial_tiles);
    }
  }
}

TEST(TileScheduler, PlansLeaveOutTheTilesBelowTheDiagonalWhereCHoldsItsZerosAndKeepTheDeal) {
  // c_zeros_stored under an Upper mask: the plan is the one made without it, in the same order and
  // with the same splits, counters and partial slots, less the items of the tiles wholly below the
  // diagonal (of which there are some wherever the grid has more than one tile row).
  const Variant upper{Structure::UpperTriangular, false}, dense{Structure::Dense, false}, dense_t{Structure::Dense, true};
  for (GemmTileConfig config : {GemmTileConfig::Float32Large, GemmTileConfig::Float32Small, GemmTileConfig::Float64,
                                GemmTileConfig::Float32Tf32, GemmTileConfig::Float32Tf32Wgmma,
                                GemmTileConfig::Float32Dmma, GemmTileConfig::Float64Dmma}) {
    for (int64_t n : {129, 1000, 2048, 4096}) {
      for (GemmProblem p : {square(n, upper, upper, Structure::UpperTriangular), square(n, dense, dense_t, Structure::UpperTriangular)}) {
        const std::string what = std::string(sg::detail::cuda::tile_config_name(config)) + ", " + describe(p, sg::kFloat32);
        const GemmWorkPlan plain = plan_structured_gemm(p, config, 132 * 2, 2);
        p.c_zeros_stored = true;
        const GemmWorkPlan plan = plan_structured_gemm(p, config, 132 * 2, 2);
        auto key = [](const sg::detail::cuda::GemmWorkItem& t) {
          return std::tuple{t.tile_row, t.tile_col, t.k_begin, t.k_end, t.chunk, t.chunk_count, t.counter_index,
                            t.partial_index};
        };
        std::vector<decltype(key(plain.items[0]))> kept, got;
        int64_t left_out = 0;
        for (const auto& t : plain.items) {
          if (int64_t(t.tile_row) * plain.tile >= std::min<int64_t>(int64_t(t.tile_col + 1) * plain.tile, n)) {
            EXPECT_GE(t.k_begin, t.k_end) << what;
            ++left_out;
          } else {
            kept.push_back(key(t));
          }
        }
        for (const auto& t : plan.items) got.push_back(key(t));
        EXPECT_EQ(got, kept) << what;
        EXPECT_GT(left_out, 0) << what;
        EXPECT_EQ(plan.split_tiles, plain.split_tiles) << what;
        EXPECT_EQ(plan.partial_tiles, plain.partial_tiles) << what;
      }
    }
  }
}

TEST(TileScheduler, WideItemsCoverTheOutputOnceInGroupsOfSixteenRows) {
  // The wide kernel's items: 128 × 256 tiles, each over [0, k), in groups of 16 tile rows taken
  // column by column (within a group, down each column, then the next column) — except that a
  // tile wholly below the diagonal is left out under a Symmetric mask (the mirror writes it) and
  // has an empty range under an Upper mask (it writes zeros). Every entry the mask writes lies
  // in exactly one item. 2500 (20 tile rows: a group of 16 and one of 4), 4000 and 8192 have
  // several groups.
  for (int64_t n : {1, 129, 300, 640, 2500, 4000, 8192}) {
    for (Structure mask : {Structure::Dense, Structure::UpperTriangular, Structure::Symmetric}) {
      GemmProblem p = square(n, {Structure::Dense, false}, {Structure::Dense, true}, mask);
      p.k = 77;
      if (mask == Structure::Dense) p.n = n + 300;  // rectangular
      const std::vector<GemmWorkItem> items = sg::detail::cuda::wide_tile_items(p);
      const int64_t rows = (p.m + 127) / 128, cols = (p.n + 255) / 256;
      std::vector<int> covered(static_cast<size_t>(rows * cols), 0);
      int64_t last = -1;
      for (const GemmWorkItem& item : items) {
        ASSERT_GE(item.tile_row, 0);
        ASSERT_LT(item.tile_row, rows);
        ASSERT_GE(item.tile_col, 0);
        ASSERT_LT(item.tile_col, cols);
        const int64_t index = item.tile_row * cols + item.tile_col;
        const int64_t group0 = item.tile_row / 16 * 16, group_rows = std::min<int64_t>(16, rows - group0);
        const int64_t position = group0 * cols + item.tile_col * group_rows + (item.tile_row - group0);
        EXPECT_GT(position, last) << "groups of 16 rows, column by column: tile (" << item.tile_row << ", "
                                  << item.tile_col << "), n = " << n;
        last = position;
        ++covered[static_cast<size_t>(index)];
        const bool below = item.tile_row * 128 > std::min<int64_t>(p.n, (item.tile_col + 1) * 256) - 1;
        EXPECT_EQ(item.k_begin, 0);
        EXPECT_EQ(item.k_end, below && mask == Structure::UpperTriangular ? 0 : p.k)
            << "tile (" << item.tile_row << ", " << item.tile_col << ")";
        EXPECT_EQ(item.chunk_count, 1);
        EXPECT_FALSE(below && mask == Structure::Symmetric);
      }
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          const bool below = i * 128 > std::min<int64_t>(p.n, (j + 1) * 256) - 1;
          EXPECT_EQ(covered[static_cast<size_t>(i * cols + j)], below && mask == Structure::Symmetric ? 0 : 1)
              << "n = " << n << ", mask " << mask_name(mask) << ", tile (" << i << ", " << j << ")";
        }
    }
  }
}

TEST(TileScheduler, WidePlansCutTheLastRoundsTilesOnceAndDealTheirTails) {
  // wide_tile_plan on 132 blocks. Without a split, block b runs tiles b, b + 132, … of
  // wide_tile_items. With one, every block runs its tiles of the whole rounds in the same way; then
  // each tile of the part-empty last round is cut once, at the same k for all (a multiple of 32):
  // block b runs the head of that round's tile b, and the tails go to the blocks without a tile
  // there, dealt in turn. Each tile covers [0, k) exactly once, as one item or as two chunks in two
  // blocks that share an arrival counter. Auto splits where the model gains 2 % and no block gets
  // more than two tails: 8192 (2048 tiles: 15.5 rounds, two tails at most), 3072 (288: one), not
  // 4096 (512 tiles: 3.9 rounds, but 116 tails for 16 blocks; Always splits it), not 2048 (128
  // tiles, one round), not where the rounds are full (4096 on 128 blocks), not under an Upper mask
  // (tiles of zeros) even when forced. 21120 × 300 with k = 300: an odd last k-step, two tile
  // columns.
  const Variant dense{Structure::Dense, false}, dense_t{Structure::Dense, true};
  struct Case {
    GemmProblem p;
    int sms;
    bool auto_splits, can_split;
  };
  auto product = [&](int64_t m, int64_t n, int64_t k, Structure mask) {
    GemmProblem p = square(m, dense, dense_t, mask);
    p.n = n;
    p.k = k;
    return p;
  };
  const std::vector<Case> cases = {
      {product(4096, 4096, 4096, Structure::Dense), 132, false, true},
      {product(8192, 8192, 8192, Structure::Dense), 132, true, true},
      {product(3072, 3072, 3072, Structure::Dense), 132, true, true},
      {product(2048, 2048, 2048, Structure::Dense), 132, false, false},
      {product(4096, 4096, 4096, Structure::Dense), 128, false, false},
      {product(4096, 4096, 4096, Structure::UpperTriangular), 132, false, false},
      {product(4096, 4096, 4096, Structure::Symmetric), 132, true, true},  // 272 tiles on or above the diagonal
      {product(128 * 165, 300, 300, Structure::Dense), 132, true, true},
  };
  for (const Case& c : cases) {
    const std::vector<GemmWorkItem> tiles = cu::wide_tile_items(c.p);
    const int64_t count = static_cast<int64_t>(tiles.size());
    const int blocks = static_cast<int>(std::min<int64_t>(count, c.sms));
    const int64_t rounds = count / blocks, rest = count % blocks;
    for (cu::Choice mode : {cu::Choice::Never, cu::Choice::Auto, cu::Choice::Always}) {
      const cu::WidePlan plan = cu::wide_tile_plan(c.p, c.sms, mode);
      const std::string what = describe(c.p, sg::kFloat32) + " on " + std::to_string(c.sms) + " blocks, split " +
                               std::to_string(int(mode));
      const bool split = mode == cu::Choice::Always ? c.can_split : mode == cu::Choice::Auto && c.auto_splits;
      EXPECT_EQ(plan.split_tiles, split ? rest : 0) << what;
      ASSERT_EQ(plan.offsets.size(), static_cast<size_t>(blocks) + 1) << what;
      EXPECT_EQ(plan.offsets.front(), 0) << what;
      EXPECT_EQ(plan.offsets.back(), static_cast<int32_t>(plan.items.size())) << what;
      const int64_t whole_tiles = split ? rounds * blocks : count;
      std::map<std::pair<int, int>, std::vector<std::pair<int, GemmWorkItem>>> by_tile;  // (block, chunk)
      std::set<int32_t> cuts;
      double makespan = 0;
      for (int b = 0; b < blocks; ++b) {
        ASSERT_LE(plan.offsets[b], plan.offsets[b + 1]) << what;
        int64_t whole = 0;
        double load = 0;
        for (int i = plan.offsets[b]; i < plan.offsets[b + 1]; ++i) {
          const GemmWorkItem& item = plan.items[static_cast<size_t>(i)];
          load += static_cast<double>((item.k_end - item.k_begin + 31) / 32) + 3.0;
          const int64_t tile = b + whole * blocks;  // the tile this block's next whole item must be
          if (tile < whole_tiles) {
            ASSERT_EQ(item.tile_row, tiles[static_cast<size_t>(tile)].tile_row) << what << ", block " << b;
            ASSERT_EQ(item.tile_col, tiles[static_cast<size_t>(tile)].tile_col) << what << ", block " << b;
            EXPECT_EQ(item.chunk_count, 1) << what;
            ++whole;
          } else {
            ASSERT_EQ(item.chunk_count, 2) << what << ", block " << b;
            // Heads in the blocks with a tile in the last round (its own), tails in the others.
            EXPECT_EQ(item.chunk, b < rest ? 0 : 1) << what << ", block " << b;
            if (item.chunk == 0) {
              EXPECT_EQ(item.tile_row, tiles[static_cast<size_t>(tile)].tile_row) << what << ", block " << b;
              EXPECT_EQ(item.tile_col, tiles[static_cast<size_t>(tile)].tile_col) << what << ", block " << b;
              cuts.insert(item.k_end);
            }
          }
          by_tile[{item.tile_row, item.tile_col}].push_back({b, item});
        }
        EXPECT_EQ(whole, whole_tiles / blocks + (b < whole_tiles % blocks ? 1 : 0)) << what << ", block " << b;
        makespan = std::max(makespan, load);
      }
      EXPECT_DOUBLE_EQ(makespan, plan.makespan) << what;
      if (split) {
        EXPECT_EQ(cuts.size(), 1u) << what << ": the heads end at one k";
        EXPECT_LT(plan.makespan, plan.unsplit_makespan) << what;
        if (mode == cu::Choice::Auto) EXPECT_LE(plan.makespan, 0.98 * plan.unsplit_makespan) << what;
      }
      ASSERT_EQ(by_tile.size(), tiles.size()) << what;
      std::set<int> counters;
      for (const GemmWorkItem& tile : tiles) {
        auto chunks = by_tile[{tile.tile_row, tile.tile_col}];
        std::sort(chunks.begin(), chunks.end(),
                  [](const auto& x, const auto& y) { return x.second.k_begin < y.second.k_begin; });
        ASSERT_TRUE(chunks.size() == 1 || chunks.size() == 2) << what;
        EXPECT_EQ(chunks.front().second.k_begin, tile.k_begin) << what;
        EXPECT_EQ(chunks.back().second.k_end, tile.k_end) << what;
        if (chunks.size() == 1) {
          EXPECT_EQ(chunks[0].second.chunk_count, 1) << what;
          continue;
        }
        const GemmWorkItem &head = chunks[0].second, &tail = chunks[1].second;
        EXPECT_NE(chunks[0].first, chunks[1].first) << what << ": both chunks in one block";
        EXPECT_EQ(head.chunk, 0) << what;
        EXPECT_EQ(tail.chunk, 1) << what;
        EXPECT_EQ(head.k_end, tail.k_begin) << what;
        EXPECT_LT(head.k_begin, head.k_end) << what;
        EXPECT_LT(tail.k_begin, tail.k_end) << what;
        EXPECT_EQ((head.k_end - tile.k_begin) % 32, 0) << what;
        EXPECT_EQ(head.counter_index, tail.counter_index) << what;
        EXPECT_TRUE(head.counter_index >= 0 && head.counter_index < plan.split_tiles) << what;
        EXPECT_TRUE(counters.insert(head.counter_index).second) << what << ": a counter twice";
      }
      EXPECT_EQ(counters.size(), static_cast<size_t>(plan.split_tiles)) << what;
    }
  }
}

TEST(TileScheduler, FewEqualTilesAreSplitEvenlyIntoOneWave) {
  // Sym·Dense at N = 1024 on 128 tiles: 64 equal tiles for 264 slots. The guided split left 332
  // items (a ragged second wave); the even split cuts every tile into 4 chunks: 256 items, one
  // wave, and a shorter modelled makespan.
  const GemmProblem p = square(1024, {Structure::Symmetric, false}, {Structure::Dense, false}, Structure::Dense);
  const GemmWorkPlan plan = plan_structured_gemm(p, GemmTileConfig::Float32Large, 132 * 2, 2);
  EXPECT_EQ(plan.items.size(), 256u) << plan.summary();
  for (const auto& item : plan.items) EXPECT_EQ(item.chunk_count, 4);
  EXPECT_GE(plan.useful_cycles / plan.estimated_cycles, 0.95) << plan.summary();
  // Without the split candidates (heaviest-first schedule) the same tiles run unsplit.
  const GemmWorkPlan unsplit =
      plan_structured_gemm(p, GemmTileConfig::Float32Large, 132 * 2, 2, GemmSchedule::HeaviestFirst);
  EXPECT_EQ(unsplit.items.size(), 64u);
  EXPECT_LT(plan.estimated_cycles, unsplit.estimated_cycles);
}

/// A plan's k-steps: all of its items' together, and its longest item's.
std::pair<int64_t, int64_t> plan_steps(const GemmWorkPlan& plan) {
  int64_t total_steps = 0, longest = 0;
  for (const auto& item : plan.items) {
    const int64_t steps = (item.k_end - item.k_begin + plan.k_step - 1) / plan.k_step;
    total_steps += std::max<int64_t>(steps, 0);
    longest = std::max(longest, steps);
  }
  return {total_steps, longest};
}

TEST(TileScheduler, WgmmaPlansRunTilesInSharedPanelOrderAndSplitTheLateOnes) {
  // The wgmma plans (split_late_tiles): tiles by first k (a row's tiles of Upper·Upper's forward
  // start at the same k of A's row panel), heaviest first among equal first k, the empty tiles
  // last; a split tile's chunks together at its place, in k order, covering its k-range once.
  // Forward, dA = triu(G·Bᵀ), dB = triu(Aᵀ·G) (both k-major) and Dense·Upper, at 2048 and 4096.
  const Variant upper{Structure::UpperTriangular, false}, upper_t{Structure::UpperTriangular, true};
  const Variant lower_t{Structure::LowerTriangular, true}, dense{Structure::Dense, false};
  for (int64_t n : {2048, 4096}) {
    for (const GemmProblem& p : {square(n, upper, upper, Structure::UpperTriangular), square(n, dense, upper_t, Structure::UpperTriangular),
                                 square(n, lower_t, upper, Structure::UpperTriangular), square(n, dense, upper, Structure::Dense)}) {
      const GemmWorkPlan plan = plan_structured_gemm(p, GemmTileConfig::Float32Tf32Wgmma, 132 * 2, 2);
      const std::string what = describe(p, sg::kFloat32) + ": " + plan.summary();
      struct Tile {
        int first_k, k_end, steps;
        bool empty;
      };
      std::vector<Tile> order;  // the tiles in item order
      std::map<std::pair<int, int>, int> seen;
      for (size_t i = 0; i < plan.items.size(); ++i) {
        const GemmWorkItem& item = plan.items[i];
        if (item.chunk > 0) {  // follows the tile's previous chunk, where it ended
          ASSERT_GT(i, 0u) << what;
          const GemmWorkItem& prev = plan.items[i - 1];
          ASSERT_TRUE(prev.tile_row == item.tile_row && prev.tile_col == item.tile_col && prev.chunk + 1 == item.chunk &&
                      prev.k_end == item.k_begin && prev.chunk_count == item.chunk_count)
              << what << ", item " << i;
          order.back().k_end = item.k_end;
          order.back().steps += (item.k_end - item.k_begin + plan.k_step - 1) / plan.k_step;
          continue;
        }
        ASSERT_EQ((++seen[{item.tile_row, item.tile_col}]), 1) << what << ", item " << i;
        order.push_back({item.k_begin, item.k_end, (item.k_end - item.k_begin + plan.k_step - 1) / plan.k_step,
                         item.k_end <= item.k_begin});
      }
      ASSERT_EQ(order.size(), static_cast<size_t>((n / 128) * (n / 128))) << what;  // every tile once
      for (size_t i = 1; i < order.size(); ++i) {
        const Tile &prev = order[i - 1], &cur = order[i];
        if (cur.empty) continue;
        ASSERT_FALSE(prev.empty) << what << ", tile " << i << " after an empty one";
        EXPECT_LE(prev.first_k, cur.first_k) << what << ", tile " << i;
        if (prev.first_k == cur.first_k) EXPECT_GE(prev.steps, cur.steps) << what << ", tile " << i;
      }
    }
  }
  // Upper·Upper's forward at 4096: in that order its long tiles of the middle rows would start
  // late and set the makespan; the split brings the model's makespan well under the unsplit one.
  // At 8192 the unsplit order is within 2 % of the mean load already: nothing is split.
  const GemmProblem fwd = square(4096, upper, upper, Structure::UpperTriangular);
  const GemmWorkPlan plan = plan_structured_gemm(fwd, GemmTileConfig::Float32Tf32Wgmma, 132 * 2, 2);
  const GemmWorkPlan whole =
      plan_structured_gemm(fwd, GemmTileConfig::Float32Tf32Wgmma, 132 * 2, 2, GemmSchedule::HeaviestFirst);
  EXPECT_GT(plan.split_tiles, 0) << plan.summary();
  EXPECT_EQ(whole.split_tiles, 0) << whole.summary();
  EXPECT_LT(plan.estimated_cycles, 0.9 * whole.estimated_cycles) << plan.summary() << " against " << whole.summary();
  EXPECT_GE(plan.useful_cycles / plan.estimated_cycles, 0.9) << plan.summary();
  EXPECT_EQ(plan_structured_gemm(square(8192, upper, upper, Structure::UpperTriangular), GemmTileConfig::Float32Tf32Wgmma,
                                 132 * 2, 2)
                .split_tiles,
            0);
}

TEST(TileScheduler, MirrorZerosDropTheTilesBelowTheDiagonal) {
  // items_with_mirror_zeros: the plan's items in the plan's order without the tiles below the
  // diagonal (each of them empty), and the first chunk of every tile above it marked to write its
  // mirror's zeros, so each tile below is written exactly once. Upper·Upper's forward, dA and dB,
  // with edge tiles (300, 1000) and split tiles (4096); a mask other than Upper is refused.
  const Variant upper{Structure::UpperTriangular, false}, lower_t{Structure::LowerTriangular, true}, dense{Structure::Dense, false};
  for (int64_t n : {300, 1000, 4096}) {
    for (const GemmProblem& p : {square(n, upper, upper, Structure::UpperTriangular), square(n, dense, lower_t, Structure::UpperTriangular),
                                 square(n, lower_t, upper, Structure::UpperTriangular)}) {
      const GemmWorkPlan plan = plan_structured_gemm(p, GemmTileConfig::Float32Tf32Wgmma, 132 * 2, 2);
      const std::vector<GemmWorkItem> items = items_with_mirror_zeros(p, plan);
      const std::string what = describe(p, sg::kFloat32) + ": " + plan.summary();
      std::vector<GemmWorkItem> kept;
      std::set<std::pair<int, int>> below;
      for (const GemmWorkItem& item : plan.items) {
        if (item.tile_row > item.tile_col) {
          EXPECT_GE(item.k_begin, item.k_end) << what;
          below.insert({item.tile_row, item.tile_col});
        } else {
          kept.push_back(item);
        }
      }
      ASSERT_EQ(items.size(), kept.size()) << what;
      std::set<std::pair<int, int>> mirrored;
      for (size_t i = 0; i < items.size(); ++i) {
        const GemmWorkItem &item = items[i], &same = kept[i];
        ASSERT_TRUE(item.tile_row == same.tile_row && item.tile_col == same.tile_col && item.k_begin == same.k_begin &&
                    item.k_end == same.k_end && item.chunk == same.chunk && item.chunk_count == same.chunk_count &&
                    item.counter_index == same.counter_index && item.partial_index == same.partial_index)
            << what << ", item " << i;
        EXPECT_EQ(item.mirror_zeros != 0, item.tile_row < item.tile_col && item.chunk == 0) << what << ", item " << i;
        if (item.mirror_zeros) EXPECT_TRUE(mirrored.insert({item.tile_col, item.tile_row}).second) << what;
      }
      const int64_t tiles = (n + 127) / 128;
      EXPECT_EQ(below.size(), static_cast<size_t>(tiles * (tiles - 1) / 2)) << what;
      EXPECT_EQ(mirrored, below) << what;
    }
  }
  const GemmProblem full = square(300, dense, upper, Structure::Dense);
  const GemmWorkPlan plan = plan_structured_gemm(full, GemmTileConfig::Float32Tf32Wgmma, 132 * 2, 2);
  EXPECT_THROW(items_with_mirror_zeros(full, plan), sg::Error);
}

TEST(TileScheduler, TallPlansCoverEveryTileOnceAndBalanceTheBlocks) {
  // tall_tile_plan: offsets for every block, each block's tiles of zeros first, every 256 × 128
  // tile exactly once (or as two chunks that cover its k-range, each once, with one arrival counter
  // per split tile), with the k-range of structured_k_range (empty where it lies below an Upper
  // mask's diagonal), and the modelled makespan: never over the unsplit heaviest-first deal's, and
  // at 4096 within one item of the mean load; Upper·Upper's longest tile, which alone would set the
  // makespan, split. The same with 128 × 256 tiles for the wide kernel's structured products (dA =
  // triu(G·Bᵀ), Dense·Lowerᵀ, Upper·Dᵀ), whose dA at 4096 splits tiles too.
  const Variant upper{Structure::UpperTriangular, false}, dense{Structure::Dense, false}, lower{Structure::LowerTriangular, false};
  const Variant lower_t{Structure::LowerTriangular, true}, dense_t{Structure::Dense, true};
  const std::vector<std::pair<int, int>> tiles = {{256, 128}, {128, 256}};  // tall, then wide
  for (const auto& [tile_rows, tile_cols] : tiles) {
    const bool wide = tile_rows == 128;
    for (int64_t n : {300, 1000, 4096}) {
      const std::vector<GemmProblem> products =
          wide ? std::vector<GemmProblem>{square(n, upper, lower_t, Structure::UpperTriangular),
                                          square(n, dense, lower_t, Structure::Dense),
                                          square(n, upper, dense_t, Structure::Dense)}
               : std::vector<GemmProblem>{square(n, upper, upper, Structure::UpperTriangular),
                                          square(n, dense, upper, Structure::Dense),
                                          square(n, lower, upper, Structure::Dense)};
      for (const GemmProblem& p : products) {
        const int sms = 132;
        const cu::TallPlan plan = cu::tall_tile_plan(p, sms, tile_rows, tile_cols);
        const cu::TallCosts& costs = cu::tall_costs(tile_rows, tile_cols);
        const std::string what = describe(p, sg::kFloat32);
        ASSERT_EQ(plan.offsets.size(), static_cast<size_t>(sms) + 1) << what;
        EXPECT_EQ(plan.offsets.front(), 0) << what;
        EXPECT_EQ(plan.offsets.back(), static_cast<int32_t>(plan.items.size())) << what;
        std::map<std::pair<int, int>, std::vector<GemmWorkItem>> by_tile;
        std::set<int> counters;
        int64_t computed = 0;
        double makespan = 0;
        std::vector<double> loads;      // each block's model load without its tiles of zeros
        std::vector<int> zero_counts;   // and its count of them
        for (int b = 0; b < sms; ++b) {
          ASSERT_LE(plan.offsets[b], plan.offsets[b + 1]) << what;
          bool computing = false;
          double load = 0;
          zero_counts.push_back(0);
          for (int i = plan.offsets[b]; i < plan.offsets[b + 1]; ++i) {
            const GemmWorkItem& item = plan.items[static_cast<size_t>(i)];
            const bool zeros = item.k_begin >= item.k_end;
            EXPECT_FALSE(zeros && computing) << what << ": block " << b << " has a tile of zeros after a computed one";
            computing = computing || !zeros;
            zero_counts.back() += zeros ? 1 : 0;
            if (!zeros) load += (item.k_end - item.k_begin + 31) / 32 + costs.item + (item.chunk_count > 1 ? costs.chunk : 0.0);
            auto& chunks = by_tile[{item.tile_row, item.tile_col}];
            if (item.chunk_count == 1) {
              EXPECT_TRUE(chunks.empty()) << what << ": a tile twice";
              computed += zeros ? 0 : 1;
            } else {
              EXPECT_EQ(item.chunk_count, 2) << what;
              EXPECT_FALSE(zeros) << what;
              EXPECT_TRUE(item.counter_index >= 0 && item.counter_index < plan.split_tiles) << what;
              if (item.chunk == 0) {
                ++computed;
                EXPECT_TRUE(counters.insert(item.counter_index).second) << what << ": a counter twice";
              }
            }
            chunks.push_back(item);
          }
          makespan = std::max(makespan, load);
          loads.push_back(load);
        }
        // The tiles of zeros went one by one to the least loaded block (costs.zero each, ties: the lowest index).
        std::vector<int> expected_zeros(static_cast<size_t>(sms), 0);
        for (int z = 0; z < std::accumulate(zero_counts.begin(), zero_counts.end(), 0); ++z) {
          const size_t b = static_cast<size_t>(std::min_element(loads.begin(), loads.end()) - loads.begin());
          ++expected_zeros[b];
          loads[b] += costs.zero;
        }
        EXPECT_EQ(zero_counts, expected_zeros) << what;
        EXPECT_EQ(computed, plan.compute_tiles) << what;
        EXPECT_EQ(counters.size(), static_cast<size_t>(plan.split_tiles)) << what;
        EXPECT_DOUBLE_EQ(makespan, plan.makespan) << what;
        const int64_t rows = (n + tile_rows - 1) / tile_rows, cols = (n + tile_cols - 1) / tile_cols;
        ASSERT_EQ(by_tile.size(), static_cast<size_t>(rows * cols)) << what;
        int64_t longest = 0;
        for (auto& [tile, chunks] : by_tile) {
          const int64_t row0 = tile_rows * int64_t(tile.first), col0 = tile_cols * int64_t(tile.second);
          const sg::detail::KRange range = p.mask == Structure::UpperTriangular && row0 >= std::min(col0 + tile_cols, n)
                                               ? sg::detail::KRange{0, 0}
                                               : sg::detail::structured_k_range(p, row0, std::min(row0 + tile_rows, n), col0,
                                                                                std::min(col0 + tile_cols, n));
          if (range.end <= range.begin) {
            ASSERT_EQ(chunks.size(), 1u) << what;
            EXPECT_GE(chunks[0].k_begin, chunks[0].k_end) << what;
            continue;
          }
          std::sort(chunks.begin(), chunks.end(),
                    [](const GemmWorkItem& x, const GemmWorkItem& y) { return x.chunk < y.chunk; });
          ASSERT_EQ(chunks.size(), static_cast<size_t>(chunks[0].chunk_count)) << what;
          EXPECT_EQ(chunks.front().k_begin, range.begin) << what;
          EXPECT_EQ(chunks.back().k_end, range.end) << what;
          for (size_t c = 0; c < chunks.size(); ++c) {
            EXPECT_EQ(chunks[c].chunk, static_cast<int32_t>(c)) << what;
            EXPECT_LT(chunks[c].k_begin, chunks[c].k_end) << what;
            EXPECT_EQ(chunks[c].k_begin % 32, 0) << what;
            if (c > 0) {
              EXPECT_EQ(chunks[c].k_begin, chunks[c - 1].k_end) << what;
              EXPECT_EQ(chunks[c].counter_index, chunks[0].counter_index) << what;
            }
          }
          longest = std::max<int64_t>(longest, (range.end - range.begin + 31) / 32);
        }
        EXPECT_LE(plan.makespan, longest + costs.item + std::max(plan.mean_load, 0.0) + 1e-9) << what;
        if (n == 4096) {
          EXPECT_GE(plan.makespan, plan.mean_load) << what;
          EXPECT_LT(plan.makespan, plan.mean_load + longest / 2 + costs.item + costs.chunk) << what;
          if (p.a.structure == Structure::UpperTriangular && p.b.structure != Structure::Dense) {
            EXPECT_GT(plan.split_tiles, 0) << what;
            EXPECT_LT(plan.makespan, longest + costs.item) << what;  // the longest tile no longer alone sets it
          }
        }
      }
    }
  }
}

TEST(TileScheduler, TallPlansLeaveOutTheTilesBelowTheDiagonalWhereCHoldsItsZeros) {
  // GemmProblem::c_zeros_stored: the tall and wide plans (256 × 128 and 128 × 256 tiles) of Upper·Upper
  // and of dA's shape under the Upper mask have the same items with a k-range as without it, the
  // same makespan, and no tile of zeros wholly below the diagonal; the tiles of zeros the diagonal
  // does not keep clear of (none here) would stay. Items above the diagonal with no k-range (Upper A
  // times a Dense B with k cut short: rows past k) stay too.
  const int sms = 132;
  const Variant upper{Structure::UpperTriangular, false}, lower_t{Structure::LowerTriangular, true}, dense{Structure::Dense, false};
  for (int64_t n : {1000, 4096}) {
    for (const auto& [rows, cols] : {std::pair{256, 128}, std::pair{128, 256}}) {
      GemmProblem short_k = square(n, upper, dense, Structure::UpperTriangular);
      short_k.k = n / 2;
      for (GemmProblem p : {square(n, upper, upper, Structure::UpperTriangular), square(n, upper, lower_t, Structure::UpperTriangular), short_k}) {
        const std::string what = describe(p, sg::kFloat32) + " in tiles of " + std::to_string(rows) + " x " + std::to_string(cols);
        const cu::TallPlan plain = cu::tall_tile_plan(p, sms, rows, cols);
        p.c_zeros_stored = true;
        const cu::TallPlan plan = cu::tall_tile_plan(p, sms, rows, cols);
        EXPECT_EQ(plan.compute_tiles, plain.compute_tiles) << what;
        EXPECT_EQ(plan.makespan, plain.makespan) << what;
        auto split = [&](const cu::TallPlan& q, std::multiset<std::tuple<int, int, int, int>>& computed,
                         std::set<std::pair<int, int>>& zeros) {
          for (const GemmWorkItem& t : q.items) {
            if (t.k_end > t.k_begin) computed.insert({t.tile_row, t.tile_col, t.k_begin, t.k_end});
            else zeros.insert({t.tile_row, t.tile_col});
          }
        };
        std::multiset<std::tuple<int, int, int, int>> computed, plain_computed;
        std::set<std::pair<int, int>> zeros, plain_zeros;
        split(plan, computed, zeros);
        split(plain, plain_computed, plain_zeros);
        EXPECT_EQ(computed, plain_computed) << what;
        int64_t below = 0;
        for (const auto& [i, j] : plain_zeros) {
          const bool wholly_below = int64_t(i) * rows >= std::min<int64_t>(int64_t(j + 1) * cols, p.n);
          below += wholly_below;
          EXPECT_EQ(zeros.count({i, j}), wholly_below ? 0u : 1u) << what << ": tile (" << i << ", " << j << ")";
        }
        EXPECT_EQ(zeros.size() + below, plain_zeros.size()) << what;
        EXPECT_GT(below, 0) << what;
      }
    }
  }
}

TEST(TileScheduler, TallPlansWriteEveryStepOfAOnceFromAnItemThatReadsIt) {
  // Where the tall kernel writes op(A)ᵀ (GemmProblem::at), each item writes the k-steps of A
  // in its run (TallPlan::transposed_writes): the runs lie within the items' k-ranges, and over a
  // tile row (whose items share A's steps) every step that the row's items read is written exactly
  // once. In the writing plan (write_cost kTallCosts.write) the runs follow the tiles' lengths, and
  // the deal counts them: at 3072, 4096 and 8192 its modelled makespan (writes included) is below that of the plain
  // deal with the columns' rule (each step written by the tile whose columns hold its k, the rule the
  // runs replaced: at 4096 one block wrote 20 steps against a mean of 8.2) and below that of the plain
  // deal with the runs counted (the runs alone): with kTallCosts, 77 against 78 and 83.5 at 3072, 141
  // against 148 and 149.5 at 4096, 850 against 858 and 851.5 at 8192.
  const Variant upper{Structure::UpperTriangular, false}, dense{Structure::Dense, false};
  for (int64_t n : {300, 1000, 3072, 4096, 8192}) {
    for (const GemmProblem& p : {square(n, upper, upper, Structure::UpperTriangular), square(n, dense, upper, Structure::Dense),
                                 square(n, upper, dense, Structure::Dense), square(n, dense, dense, Structure::Dense)}) {
      for (double write_cost : {0.0, cu::kTallCosts.write}) {
        const int sms = 132;
        const cu::TallPlan plan = cu::tall_tile_plan(p, sms, 256, 128, write_cost);
        const std::string what = describe(p, sg::kFloat32) + ", write cost " + std::to_string(write_cost);
        ASSERT_EQ(plan.transposed_writes.size(), plan.items.size()) << what;
        std::map<int, std::map<int, int>> read, written;  // tile row → k-step → count
        for (int b = 0; b < sms; ++b) {
          for (int i = plan.offsets[b]; i < plan.offsets[b + 1]; ++i) {
            const GemmWorkItem& item = plan.items[static_cast<size_t>(i)];
            const sg::detail::KRange run = plan.transposed_writes[static_cast<size_t>(i)];
            EXPECT_LE(run.begin, run.end) << what;
            if (run.begin < run.end) {
              EXPECT_GE(run.begin, item.k_begin) << what;
              EXPECT_LE(run.end, item.k_end) << what;
            }
            for (int k = item.k_begin; k < item.k_end; k += 32) {
              read[item.tile_row][k] = 1;
              if (k >= run.begin && k < run.end) ++written[item.tile_row][k];
            }
          }
        }
        EXPECT_EQ(written.size(), read.size()) << what;
        for (const auto& [row, steps] : read)
          for (const auto& [k, one] : steps) EXPECT_EQ(written[row][k], one) << what << ": tile row " << row << ", k " << k;
        if (n >= 3072 && p.a.structure == Structure::UpperTriangular && p.b.structure == Structure::UpperTriangular && write_cost > 0) {
          const cu::TallPlan plain = cu::tall_tile_plan(p, sms, 256, 128);
          // The plain deal's makespan with the columns' rule's writes counted, and with its own runs'.
          double columns_rule = 0, plain_runs = 0;
          for (int b = 0; b < sms; ++b) {
            double load = 0, writes_by_columns = 0, writes_by_runs = 0;
            for (int i = plain.offsets[b]; i < plain.offsets[b + 1]; ++i) {
              const GemmWorkItem& item = plain.items[static_cast<size_t>(i)];
              const sg::detail::KRange run = plain.transposed_writes[static_cast<size_t>(i)];
              if (item.k_begin >= item.k_end) continue;
              load += (item.k_end - item.k_begin + 31) / 32 + cu::kTallCosts.item + (item.chunk_count > 1 ? cu::kTallCosts.chunk : 0.0);
              for (int k = item.k_begin; k < item.k_end; k += 32) {
                writes_by_columns += k >= 128 * item.tile_col && k < 128 * item.tile_col + 128 ? 1 : 0;
                writes_by_runs += k >= run.begin && k < run.end ? 1 : 0;
              }
            }
            columns_rule = std::max(columns_rule, load + write_cost * writes_by_columns);
            plain_runs = std::max(plain_runs, load + write_cost * writes_by_runs);
          }
          double makespan = 0;  // the writing plan's, its runs' writes counted
          for (int b = 0; b < sms; ++b) {
            double load = 0;
            for (int i = plan.offsets[b]; i < plan.offsets[b + 1]; ++i) {
              const GemmWorkItem& item = plan.items[static_cast<size_t>(i)];
              const sg::detail::KRange run = plan.transposed_writes[static_cast<size_t>(i)];
              if (item.k_begin >= item.k_end) continue;
              load += (item.k_end - item.k_begin + 31) / 32 + cu::kTallCosts.item + (item.chunk_count > 1 ? cu::kTallCosts.chunk : 0.0);
              load += write_cost * ((run.end - run.begin + 31) / 32);
            }
            makespan = std::max(makespan, load);
          }
          EXPECT_DOUBLE_EQ(plan.makespan, makespan) << what;
          EXPECT_LT(makespan, columns_rule) << what;
          EXPECT_LT(makespan, plain_runs) << what;
        }
      }
    }
  }
}

TEST(TileScheduler, TallPlansDealTheTilesInSharedPanelOrder) {
  // tall_tile_plan deals the tiles by their first k, heaviest first among equal first k: along each
  // block's list the first k of the items' tiles (a chunk's: its tile's) never falls, so the blocks
  // start together the tiles that read one operand panel from the same k. Upper·Upper's tile (i, j)
  // runs from k = 256i: at 4096 on 132 blocks the blocks' first items come from tile rows 0 … 4
  // (32 + 30 + 28 + 26 + 24 tiles), which share five panels of A.
  const Variant upper{Structure::UpperTriangular, false}, dense{Structure::Dense, false}, lower{Structure::LowerTriangular, false};
  for (const GemmProblem& p :
       {square(4096, upper, upper, Structure::UpperTriangular), square(3072, upper, upper, Structure::UpperTriangular),
        square(2048, upper, upper, Structure::UpperTriangular), square(4096, dense, upper, Structure::Dense),
        square(2048, upper, dense, Structure::Dense), square(1000, lower, upper, Structure::Dense)}) {
    const int sms = 132;
    const cu::TallPlan plan = cu::tall_tile_plan(p, sms);
    const std::string what = describe(p, sg::kFloat32);
    ASSERT_EQ(plan.offsets.size(), static_cast<size_t>(sms) + 1) << what;
    std::set<int> first_rows;
    for (int b = 0; b < sms; ++b) {
      int64_t last_first_k = -1;
      bool first = true;
      for (int i = plan.offsets[b]; i < plan.offsets[b + 1]; ++i) {
        const GemmWorkItem& item = plan.items[static_cast<size_t>(i)];
        if (item.k_begin >= item.k_end) continue;  // a tile of zeros
        const int64_t row0 = 256 * int64_t(item.tile_row), col0 = 128 * int64_t(item.tile_col);
        const sg::detail::KRange tile = sg::detail::structured_k_range(
            p, row0, std::min(row0 + 256, p.m), col0, std::min(col0 + 128, p.n));
        EXPECT_GE(tile.begin, last_first_k) << what << ": block " << b << ", item " << i;
        last_first_k = tile.begin;
        if (first) first_rows.insert(item.tile_row);
        first = false;
      }
    }
    if (p.m == 4096 && p.a.structure == Structure::UpperTriangular && p.b.structure == Structure::UpperTriangular) {
      EXPECT_EQ(first_rows.size(), 5u) << what;
      EXPECT_EQ(*first_rows.rbegin(), 4) << what;
    }
  }
}

TEST(TileScheduler, UpperTimesUpperDoesAboutOneSixthOfTheDenseWork) {
  const int64_t n = 4096;
  const double n3 = double(n) * n * n;
  const GemmProblem upper = square(n, {Structure::UpperTriangular, false}, {Structure::UpperTriangular, false}, Structure::UpperTriangular);
  const GemmWorkPlan plan = plan_structured_gemm(upper, GemmTileConfig::Float32Large, 132 * 2, 2);
  const double macs = planned_macs(plan);
  EXPECT_GE(macs, n3 / 6);
  EXPECT_LE(macs, 1.15 * n3 / 6) << plan.summary();  // whole 128-tiles along the diagonal
  // Sym·Dense reads half of S but does all n³ multiply-adds; gram (Symmetric mask) half of them.
  const GemmProblem gram = square(n, {Structure::Dense, false}, {Structure::Dense, true}, Structure::Symmetric);
  const double gram_macs = planned_macs(plan_structured_gemm(gram, GemmTileConfig::Float32Large, 132 * 2, 2));
  EXPECT_GE(gram_macs, n3 / 2);
  EXPECT_LE(gram_macs, 1.05 * n3 / 2);
}

TEST(TileScheduler, HeaviestItemsComeFirstAndBalanceIsNearTheBound) {
  const GemmProblem p = square(4096, {Structure::UpperTriangular, false}, {Structure::UpperTriangular, false}, Structure::UpperTriangular);
  const GemmWorkPlan plan = plan_structured_gemm(p, GemmTileConfig::Float32Large, 132 * 2, 2);
  for (size_t i = 1; i < plan.items.size(); ++i) {
    const auto &prev = plan.items[i - 1], &cur = plan.items[i];
    // Split chunks carry a partial-tile cost of about two k-steps in the model.
    EXPECT_GE(prev.k_end - prev.k_begin + 3 * plan.k_step, cur.k_end - cur.k_begin) << "item " << i;
  }
  // The modelled makespan within 15% of total work / slots (heaviest-first plus split-K).
  EXPECT_GE(plan.useful_cycles / plan.estimated_cycles, 0.85) << plan.summary();
}

TEST(TileScheduler, Float64RunsOnTheFp64TensorCoresFromAbout768) {
  // Where the FP64 tensor cores run (sm_90a code on compute capability 9.0 with full-rate float64),
  // float64 plans on them and on DFMA and keeps the cheaper plan; forced, on one of them; on other
  // devices, on DFMA. The plans' estimates put the crossover for Upper·Upper between 512 (DFMA) and
  // 1024 (tensor cores), and Dense·Upper at 768 already on the tensor cores, as measured on an H200.
  cu::DeviceCaps hopper;
  hopper.sms = 132;
  hopper.compute_capability = 90;
  hopper.sm90a_code = true;
  hopper.full_rate_fp64 = true;
  cu::DeviceCaps consumer = hopper;
  consumer.full_rate_fp64 = false;
  using V = std::vector<GemmTileConfig>;
  cu::GemmTuning options;
  auto candidates = [&](const cu::DeviceCaps& caps) {
    return cu::tile_config_candidates(sg::kFloat64, cu::select_family(sg::kFloat64, false, caps, options), options);
  };
  EXPECT_EQ(candidates(hopper), (V{GemmTileConfig::Float64Dmma, GemmTileConfig::Float64}));
  EXPECT_EQ(candidates(consumer), V{GemmTileConfig::Float64});
  options.fp64_loop = cu::Fp64Loop::Dfma;
  EXPECT_EQ(candidates(hopper), V{GemmTileConfig::Float64});
  options.fp64_loop = cu::Fp64Loop::Dmma;
  EXPECT_EQ(candidates(hopper), V{GemmTileConfig::Float64Dmma});
  EXPECT_EQ(candidates(consumer), V{GemmTileConfig::Float64});
  // float32's loop option leaves float64 alone, and the other way round.
  options.fp64_loop = cu::Fp64Loop::Auto;
  options.fp32_loop = cu::Fp32Loop::Fma;
  EXPECT_EQ(candidates(hopper), (V{GemmTileConfig::Float64Dmma, GemmTileConfig::Float64}));
  options = cu::GemmTuning{};
  options.fp64_loop = cu::Fp64Loop::Dfma;
  EXPECT_TRUE(cu::select_family(sg::kFloat32, false, hopper, options).dmma);
  // The cheaper plan (DFMA: two blocks per SM; the tensor cores: one).
  auto cores_win = [](const GemmProblem& p) {
    return plan_structured_gemm(p, GemmTileConfig::Float64Dmma, 132, 1).estimated_cycles <
           plan_structured_gemm(p, GemmTileConfig::Float64, 132 * 2, 2).estimated_cycles;
  };
  const Variant upper{Structure::UpperTriangular, false}, dense{Structure::Dense, false};
  EXPECT_FALSE(cores_win(square(512, upper, upper, Structure::UpperTriangular)));
  EXPECT_TRUE(cores_win(square(1024, upper, upper, Structure::UpperTriangular)));
  EXPECT_TRUE(cores_win(square(768, dense, upper, Structure::Dense)));
  EXPECT_TRUE(cores_win(square(4096, upper, upper, Structure::UpperTriangular)));
}

}  // namespace
