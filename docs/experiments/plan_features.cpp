// Twenty-sixth session (docs/structured_gemm.md, "The plans' costs fitted to the blocks' times"): the
// per-block features of the three plans of Upper·Upper's TF32 forward + backward at N (host only; link
// against libstructgrad.a with -lcudart -lcublas -lcuda): the writing forward (kernel 0, 256 × 128), dA
// (1, the wide kernel's 128 × 256) and dB (2). Columns: kernel,block,steps,items,chunks,zeros,writes,
// crossing (diagonal-crossing steps of the operand whose zeros are written),model (the block's load
// under the plan's costs, cuda::tall_costs),list (the block's items, tile_row:tile_col:first-last k-step, cN a chunk).
// docs/experiments/plan_cost_fit.py joins it with fwd_bwd_timeline's stamps.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <string>
#include "cuda/structured_gemm.h"
using namespace sg::detail;
int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 4096;
  std::printf("kernel,block,steps,items,chunks,zeros,writes,crossing,model,list\n");
  for (int k = 0; k < 3; ++k) {
    GemmProblem p; p.m = p.n = p.k = n; p.mask = OutputMask::Upper; p.tf32 = true; p.lda = p.ldb = p.ldc = n;
    int rows = 256, cols = 128; double wc = 0;
    if (k == 0) { p.a = {OperandKind::Upper, false, true}; p.b = {OperandKind::Upper, false, true}; wc = cuda::kTallCosts.write; }
    if (k == 1) { p.a = {OperandKind::Upper, false, false}; p.b = {OperandKind::Lower, true, true}; rows = 128; cols = 256; }
    if (k == 2) { p.a = {OperandKind::Lower, false, true}; p.b = {OperandKind::Upper, false, false}; }
    auto plan = cuda::tall_tile_plan(p, 132, rows, cols, wc);
    const cuda::TallCosts& costs = cuda::tall_costs(rows, cols);
    for (size_t b = 0; b + 1 < plan.offsets.size(); ++b) {
      int steps = 0, items = 0, chunks = 0, zeros = 0, writes = 0, crossing = 0;
      double model = 0;
      std::string list;
      for (int i = plan.offsets[b]; i < plan.offsets[b + 1]; ++i) {
        const auto& t = plan.items[i];
        if (t.k_end <= t.k_begin) { ++zeros; model += costs.zero; continue; }
        list += std::to_string(t.tile_row) + ":" + std::to_string(t.tile_col) + ":" + std::to_string(t.k_begin / 32) + "-" + std::to_string(t.k_end / 32) + (t.chunk_count > 1 ? "c" + std::to_string(t.chunk) : "") + " ";
        ++items; if (t.chunk_count > 1) ++chunks;
        const int row0 = t.tile_row * rows;
        for (int kk = t.k_begin; kk < t.k_end; kk += 32) {
          ++steps;
          if (wc > 0 && kk >= plan.transposed_writes[i].begin && kk < plan.transposed_writes[i].end) ++writes;
          if (k == 1 && kk < row0 + rows && kk + 32 > row0) ++crossing;
          if (k == 2 && kk < t.tile_col * cols + cols && kk + 32 > t.tile_col * cols) ++crossing;  // B's (G's) diagonal
        }
        model += (t.k_end - t.k_begin + 31) / 32 + costs.item + (t.chunk_count > 1 ? costs.chunk : 0);
      }
      model += wc * writes;
      std::printf("%d,%zu,%d,%d,%d,%d,%d,%d,%.1f,%s\n", k, b, steps, items, chunks, zeros, writes, crossing, model, list.c_str());
    }
  }
}
