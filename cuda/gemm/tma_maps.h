// The TMA maps of the Hopper kernels (a __grid_constant__ kernel parameter, as TMA requires) and
// the host functions that encode them through the driver's cuTensorMapEncodeTiled.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <type_traits>

#include "cuda/gemm/kernel_args.h"

namespace sg::detail::cuda {

/// The tall kernel's second output (GemmProblem::at_buffer): op(A)ᵀ outer-major, at[p·m + i] =
/// op(A)[i][p], written by TMA stores (`on`: the launch writes it). A kernel parameter of its own: in
/// GemmArgs, the tall kernel took 255 registers rather than 234 and ran 4–9 % slower.
struct TransposedOutput {
  CUtensorMap map;  // over at: k rows × m columns, boxes of 32 × 32 (the epilogue buffer's 8 boxes hold a step)
  const KRange* writes = nullptr;  // per item of the plan, the k-steps it writes (TallPlan::transposed_writes)
  bool on = false;
};

/// wgmma loop only: TMA maps of the operands, a separate kernel parameter (__grid_constant__,
/// as TMA requires) so the other configs' arguments keep their layout. Per operand:
///   direct: a kTile × kKStep box in the 128-byte swizzle over the outer-major storage — it lands
///           in the wgmma tile layout (A not transposed, B transposed, Symmetric's stored part);
///   raw:    a 32 × 32 box (32 outer × 32 k, the 128-byte swizzle) over the k-major storage (A
///           transposed, B not transposed, Symmetric's mirrored part), copied four at a time
///           into a raw tile that the threads transpose into the wgmma tile (TF32 wgmma reads
///           K-major tiles only).
/// `has` says which maps were made: bit 0 A direct, 1 A raw, 2 B direct, 3 B raw.
///   stored: a Symmetric operand's relayout copy that holds only its mirrored part (a mirror
///           copy, relayout_outer_major_kernel): the direct map over the operand's own storage,
///           from which the k-steps wholly in its stored triangle come (direct_map). `stored`
///           says which: bit 0 A, bit 1 B.
///   c:      the register-B kernel's output, written by TMA stores from shared memory in 128 × 32
///           boxes (bit kCStore of `has`; store_tile_by_tma).
struct TmaMaps {
  CUtensorMap a, b, a_raw, b_raw, a_stored, b_stored, c;
  uint32_t has;
  uint32_t stored;
};

/// The other configs' stand-in in the shared block body (their kernels take no maps).
struct NoTmaMaps {};

template <class Cfg>
using TmaMapsOf = std::conditional_t<Cfg::kWgmma, TmaMaps, NoTmaMaps>;

/// Whether the driver offers cuTensorMapEncodeTiled (through the runtime; no link against libcuda).
bool tensor_maps_available();
/// The direct map of operand view `v` (outer-major storage: boxes of box_rows outer × kKStep k, in
/// the 128-byte swizzle, landing in the wgmma tile layout) or its raw map (k-major storage: 32 × 32
/// boxes, transposed by the threads).
void encode_tile_map(const OperandView<float>& v, int64_t k_extent, bool raw, CUtensorMap* map, uint32_t box_rows);
/// The maps `wanted` of an operand (bits 1: direct, 2: raw; selection's tile_maps_wanted).
void encode_tile_maps(const OperandView<float>& v, int64_t k_extent, uint32_t wanted, CUtensorMap* direct,
                      CUtensorMap* raw, uint32_t direct_rows);
/// The raw map of k-major `v` as a 3-D tensor (column c, k, column block q), whose box lands as the
/// four 32 × 32 boxes of a raw tile in one copy. False where v's rows do not hold whole column blocks.
bool encode_raw_block_map(const OperandView<float>& v, int64_t k_extent, CUtensorMap* map);
/// A map for TMA stores into a rows × cols float32 matrix (row stride ld, 16-byte aligned): boxes of
/// 32 columns × box_rows rows in the 128-byte swizzle. `what` names it in an error.
void encode_store_map(CUtensorMap* map, void* data, int64_t rows, int64_t cols, int64_t ld, uint32_t box_rows,
                      const char* what);

}  // namespace sg::detail::cuda
