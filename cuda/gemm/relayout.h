// The operand copies' geometry, shared by their kernels (relayout.cuh) and the launcher: the copy
// tiles, the band of structural zeros a copy holds, and which tiles a Symmetric operand's mirror
// copy holds. Plain C++.
#pragma once

#include <cstdint>

#include "cuda/gemm/tile_shapes.h"

#if !defined(SG_HOST_DEVICE) && defined(__CUDACC__)
#define SG_HOST_DEVICE __host__ __device__
#elif !defined(SG_HOST_DEVICE)
#define SG_HOST_DEVICE
#endif

namespace sg::detail::cuda {

inline constexpr TileShape kWgmmaTile = tile_shape(GemmTileConfig::Float32Tf32Wgmma);

// Relayout: a k-major or Symmetric operand of a wgmma product copied outer-major first.
//
// The wgmma loop's TF32 tiles must be K-major in shared memory, so its direct TMA copies
// take outer-major operands only; a k-major tile goes through the raw ring and a transposition
// in registers, a Symmetric operand's mirrored part too. Where that costs more than one pass
// over the operand, the launcher first writes out[o·ldo + k] = V(o, k) — the operand as an
// outer-major matrix — and runs the product on the copy. Structural zeros are written near the
// diagonal only (kRelayoutZeroBand): the diagonal-crossing k-steps that read them lie within one
// tile of it; the steps beyond are outside every k-range.
//
// A Symmetric operand whose storage takes direct TMA copies gets a mirror copy: only what the
// product reads from the copy (mirror_copy_holds) — the mirrored triangle and a band above the
// diagonal — while the k-steps wholly in the stored triangle come from the storage (direct_map).
// Otherwise its copy is whole.
constexpr int kRelayoutTile = 32, kRelayoutRows = 8;

constexpr int kRelayoutZeroBand = 256;

// The mirror copy's band: a tile kOuter wide (outer0 a multiple of kOuter, kOuter dividing the
// band) takes its k-steps below k0 = outer0 + kOuter − 1 from the copy, so their columns end
// before the band's end plus one k-step.
constexpr int kMirrorBand = 256;

/// Whether the mirror copy of an n × n Symmetric operand holds the 32 × 32 copy tile at (o0, k0):
/// within the band (every k-step not wholly in the stored triangle, for tiles up to kMirrorBand
/// wide) and the last k-step's columns if that step is partial (the stagers read it element by
/// element from the copy). The band also holds every row of a partial last tile (which the
/// stagers read element by element too): those rows start at e = n − n mod kTile, and the band
/// of their kMirrorBand block ends at e + kTile or later, past n.
SG_HOST_DEVICE constexpr bool mirror_copy_holds(int o0, int k0, int n) {
  return k0 < o0 / kMirrorBand * kMirrorBand + kMirrorBand + kRelayoutTile ||
         k0 + kRelayoutTile > n / kWgmmaTile.k_step * kWgmmaTile.k_step;
}

// A step inside an item's k-range reads structural zeros at most kTile − 1 from the diagonal (the
// k-ranges end at tile edges), which is what lets the pipelined kernel skip zeroing a copy's
// diagonal-crossing steps (OperandView::zeros_stored).
static_assert(kRelayoutZeroBand >= kWgmmaTile.rows, "a copy's zeros cover every diagonal-crossing step");

static_assert(kMirrorBand % kWgmmaTile.rows == 0 && kMirrorBand % kWideTile.cols == 0 &&
                  kWgmmaTile.k_step <= kRelayoutTile,
              "a mirror copy holds every k-step that the kernels take from it (direct_map)");

/// Operands up to this extent and k are copied (the copy kernel's grid holds extent / 32 blocks in y).
inline constexpr int64_t kRelayoutMaxExtent = int64_t(1) << 20;

// The whole copy of a Symmetric operand (the FP64 loop's k-major copies, and an outer-major
// copy that is not a mirror copy: both are the full matrix, a symmetric view being its own
// transpose): out[i·ldo + j] = S[min(i, j)][max(i, j)] for i, j < n. A block takes a pair of
// kSymCopyTile tiles, (bi, bj) and (bj, bi) with bi ≤ bj: it reads tile (bi, bj) of the stored
// upper triangle once and writes it twice, as it lies and transposed (the diagonal tile once,
// its lower half mirrored), where relayout_outer_major_kernel would read every stored element twice.
constexpr int kSymCopyTile = 64, kSymCopyThreads = 256;

// Thread t covers rows t / 16 + 16·p (p < 4) and columns 4·(t mod 16) … + 3 of a tile.
constexpr int kSymCopyVecsPerRow = kSymCopyTile / 4, kSymCopyRowsPerPass = kSymCopyThreads / kSymCopyVecsPerRow;

}  // namespace sg::detail::cuda
