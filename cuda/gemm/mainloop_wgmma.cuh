// Warp-specialized wgmma mainloops: a producer fills a ring of shared buffers by TMA, consumer
// warpgroups run wgmma with A and B from shared memory (consume_steps) or B from registers
// (consume_steps_register_b); buffers change hands through mbarriers.
#pragma once

#include "cuda/gemm/arch/mbarrier.cuh"
#include "cuda/gemm/arch/tma.cuh"
#include "cuda/gemm/arch/wgmma.cuh"
#include "cuda/gemm/operand_staging.cuh"
#include "cuda/gemm/zero_fill.cuh"

namespace sg::detail::cuda {

// One k-step's MMAs of this warpgroup as one committed wgmma group: four k8 slices of its rows of
// A (a_base: the A tile plus the warpgroup's 64 rows) by all of B (b_base); a k8 slice is 32 bytes
// further along each 128-byte row.
template <class Cfg>
__device__ __forceinline__ void issue_step_mmas(float (&acc)[Cfg::kPerRow][Cfg::kPerCol], uint32_t a_base,
                                                uint32_t b_base) {
  wgmma_fence_operands(acc);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < Cfg::kKStep; ks += 8)
    wgmma_m64n128k8_tf32(acc, wgmma_descriptor(a_base + ks * sizeof(float)),
                         wgmma_descriptor(b_base + ks * sizeof(float)));
  wgmma_commit();
}

/// The ring of the pipelined and register-B kernels in dynamic shared memory, 1024-byte aligned
/// (the 128-byte swizzle's atoms): kPipelineStages tiles of A, then as many of B.
template <class Cfg>
struct PipelineRing {
  float (*a)[Cfg::kKStep * Cfg::kStride];
  float (*b)[Cfg::kKStep * Cfg::kStride];
};

template <class Cfg>
__device__ __forceinline__ PipelineRing<Cfg> pipeline_ring() {
  static_assert(Cfg::kWgmma && kPipelineStages * 2 * Cfg::kTileBytes + 1024 <= Cfg::kDynamicSmemTma,
                "the ring fits the TMA kernels' dynamic shared memory");
  using Tile = float[Cfg::kKStep * Cfg::kStride];
  extern __shared__ __align__(1024) unsigned char dynamic_smem[];
  unsigned char* base = dynamic_smem + ((1024 - (shared_address(dynamic_smem) & 1023)) & 1023);
  return {reinterpret_cast<Tile*>(base), reinterpret_cast<Tile*>(base + kPipelineStages * Cfg::kTileBytes)};
}

// The ring's mbarriers: full[s] completes with the producer's arrive.expect_tx and the copies'
// bytes, empty[s] with one arrival per consumer warpgroup.
__device__ __forceinline__ void init_pipeline_barriers(uint64_t* full, uint64_t* empty) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < kPipelineStages; ++s) {
      mbarrier_init(full + s, 1);
      mbarrier_init(empty + s, 2);
    }
  }
}

// The producer: thread 0 of the warp after the consumer warpgroups.
template <class Cfg>
__device__ __forceinline__ void produce_steps(const TmaMaps& maps, const GemmWorkItem& item, int row0, int col0,
                                              float (*a_tiles)[Cfg::kKStep * Cfg::kStride],
                                              float (*b_tiles)[Cfg::kKStep * Cfg::kStride], uint64_t* full,
                                              uint64_t* empty) {
  int stage = 0, round = 0;
#pragma unroll 1
  for (int k0 = item.k_begin; k0 < item.k_end; k0 += Cfg::kKStep) {
    // From the second round on, the buffer's previous step must have been released.
    if (round > 0) mbarrier_wait(empty + stage, (round - 1) & 1);
    mbarrier_arrive_expect_tx(full + stage, 2 * Cfg::kTileBytes);
    tma_load_tile(a_tiles[stage], direct_map<false, Cfg::kTile>(maps, k0, row0), k0, row0, full + stage);
    tma_load_tile(b_tiles[stage], direct_map<true, Cfg::kTile>(maps, k0, col0), k0, col0, full + stage);
    if (++stage == kPipelineStages) stage = 0, ++round;
  }
}

// The consumers: warpgroup w multiplies rows 64w … 64w + 63 of A by all of B, four k8 slices per
// step.
template <class Cfg>
__device__ __forceinline__ void consume_steps(const GemmArgs<float>& args, const GemmWorkItem& item, int row0,
                                              int col0, float (*a_tiles)[Cfg::kKStep * Cfg::kStride],
                                              float (*b_tiles)[Cfg::kKStep * Cfg::kStride], uint64_t* full,
                                              uint64_t* empty, float (&acc)[Cfg::kPerRow][Cfg::kPerCol]) {
  const uint32_t a_rows = (threadIdx.x >> 7) * 64 * Cfg::kKStep * sizeof(float);
  const bool signals = (threadIdx.x & 127) == 0;  // one arrival per warpgroup on empty[]
  int stage = 0, round = 0, released = -1;
#pragma unroll 1
  for (int k0 = item.k_begin; k0 < item.k_end; k0 += Cfg::kKStep) {
    mbarrier_wait(full + stage, round & 1);
    if (needs_structural_zeros<Cfg>(args.a, row0, k0) || needs_structural_zeros<Cfg>(args.b, col0, k0) ||
        k0 + Cfg::kKStep > item.k_end) {
      zero_outside_structure<Cfg, true>(a_tiles[stage], args.a.pattern, row0, k0, item.k_end);
      zero_outside_structure<Cfg, true>(b_tiles[stage], args.b.pattern, col0, k0, item.k_end);
      fence_shared_for_async_proxy();
      named_barrier_sync(kConsumerBarrier, Cfg::kThreads);
    }
    issue_step_mmas<Cfg>(acc, shared_address(a_tiles[stage]) + a_rows, shared_address(b_tiles[stage]));
    // The previous step's group is complete: its buffer goes back to the producer.
    wgmma_wait_all_but_latest();
    wgmma_fence_operands(acc);
    if (signals && released >= 0) mbarrier_arrive(empty + released);
    released = stage;
    if (++stage == kPipelineStages) stage = 0, ++round;
  }
  wgmma_wait_all();
  wgmma_fence_operands(acc);
}

/// The register-B kernel's first kPipelineStages − 1 steps' copies, issued by thread 0 (step t + 2's
/// is issued during step t: consume_steps_register_b). The last stage's buffer stays free until then.
template <class Cfg>
__device__ __forceinline__ void issue_first_register_b_steps(const TmaMaps& maps, const GemmWorkItem& item, int row0,
                                                             int col0, float (*a_tiles)[Cfg::kKStep * Cfg::kStride],
                                                             float (*b_raw)[Cfg::kKStep * Cfg::kStride],
                                                             uint64_t* full) {
  if (threadIdx.x != 0) return;
#pragma unroll 1
  for (int s = 0, k0 = item.k_begin; s < kPipelineStages - 1 && k0 < item.k_end; ++s, k0 += Cfg::kKStep)
    issue_register_b_step<Cfg>(maps, k0, row0, col0, a_tiles[s], b_raw[s], full + s);
}

// The consumers of the register-B kernel, after issue_first_register_b_steps: one k-step = two
// groups (half 0: slices 0, 1 from fragments f0; half 1: slices 2, 3 from f1). After issuing a group,
// each warpgroup waits for the one before it; after half 0 that is the previous step's last, so its
// buffer goes back. An item with mirror_zeros had the epilogue store its mirror's zeros from the last
// stage's buffer meanwhile: thread 0 waits for those stores before it loads that buffer.
template <class Cfg>
__device__ __forceinline__ void consume_steps_register_b(const GemmArgs<float>& args, const TmaMaps& maps,
                                                         const GemmWorkItem& item, int row0, int col0,
                                                         float (*a_tiles)[Cfg::kKStep * Cfg::kStride],
                                                         float (*b_raw)[Cfg::kKStep * Cfg::kStride], uint64_t* full,
                                                         uint64_t* empty, float (&acc)[2][32]) {
  const bool signals = (threadIdx.x & 127) == 0;
  const bool producer = threadIdx.x == 0;
  int ahead_stage = kPipelineStages - 1, ahead_round = 0;  // the buffer of step t + 2
  int offset[2][2];
  register_b_offsets(offset);
  uint32_t f0[2][4] = {}, f1[2][4] = {};
  int stage = 0, round = 0, released = -1;
#pragma unroll 1
  for (int k0 = item.k_begin; k0 < item.k_end; k0 += Cfg::kKStep) {
    mbarrier_wait(full + stage, round & 1);
    const bool ends = k0 + Cfg::kKStep > item.k_end;
    const bool zero_a = needs_structural_zeros<Cfg>(args.a, row0, k0) || ends;
    const bool zero_b = needs_structural_zeros<Cfg>(args.b, col0, k0) || ends;
    if (zero_a || zero_b) {
      if (zero_a) zero_outside_structure<Cfg, true>(a_tiles[stage], args.a.pattern, row0, k0, item.k_end);
      if (zero_b) zero_raw_outside_structure<Cfg>(b_raw[stage], args.b.pattern, col0, k0, item.k_end);
      fence_shared_for_async_proxy();
      named_barrier_sync(kConsumerBarrier, Cfg::kThreads);
    }
    const uint32_t a_tile = shared_address(a_tiles[stage]);
    // Half 0.
    load_register_b(b_raw[stage], offset, 0, f0);
    wgmma_fence_operands(acc);
    wgmma_fence();
    wgmma_m64n128k8_tf32_register_a(acc, f0[0], wgmma_descriptor(a_tile));
    wgmma_m64n128k8_tf32_register_a(acc, f0[1], wgmma_descriptor(a_tile + 8 * sizeof(float)));
    wgmma_commit();
    wgmma_wait_all_but_latest();  // the previous step's half 1: its buffer and f1 are free
    wgmma_fence_operands(acc);
    keep_fragments(f1);
    if (signals && released >= 0) mbarrier_arrive(empty + released);
    released = stage;
    // Step t + 2 goes into the buffer of step t − 1, once both warpgroups have released it.
    const int k_ahead = k0 + (kPipelineStages - 1) * Cfg::kKStep;
    if (producer && k_ahead < item.k_end) {
      if (ahead_round > 0) mbarrier_wait(empty + ahead_stage, (ahead_round - 1) & 1);
      else if (item.mirror_zeros) tma_store_wait_read();  // the mirror's zeros have left b_raw[2]
      issue_register_b_step<Cfg>(maps, k_ahead, row0, col0, a_tiles[ahead_stage], b_raw[ahead_stage],
                                 full + ahead_stage);
    }
    if (++ahead_stage == kPipelineStages) ahead_stage = 0, ++ahead_round;
    // Half 1.
    load_register_b(b_raw[stage], offset, 1, f1);
    wgmma_fence_operands(acc);
    wgmma_fence();
    wgmma_m64n128k8_tf32_register_a(acc, f1[0], wgmma_descriptor(a_tile + 16 * sizeof(float)));
    wgmma_m64n128k8_tf32_register_a(acc, f1[1], wgmma_descriptor(a_tile + 24 * sizeof(float)));
    wgmma_commit();
    wgmma_wait_all_but_latest();  // half 0: f0 is free
    wgmma_fence_operands(acc);
    keep_fragments(f0);
    if (++stage == kPipelineStages) stage = 0, ++round;
  }
  wgmma_wait_all();
  wgmma_fence_operands(acc);
  keep_fragments(f1);
}

}  // namespace sg::detail::cuda
