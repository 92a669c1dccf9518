// The tile shapes of the structured GEMM's kernel instances, as the host sees them: the tile
// scheduler plans in these tiles and k-steps, and each device configuration (tile_config.cuh)
// is built from them. Plain C++: no CUDA needed.
#pragma once

#include <cstdint>

namespace sg::detail::cuda {

/// The tile configurations a plan can be made for (one kernel family each: tile_config.cuh).
enum class GemmTileConfig : uint8_t {
  Float32Large,      ///< FFMA, 128 × 128 tiles, BK 8: exact float32 on large problems
  Float32Small,      ///< FFMA, 64 × 64 tiles, BK 16: fills the machine on small problems
  Float64,           ///< DFMA, 64 × 64 tiles, BK 8
  Float32Tf32,       ///< TF32 on mma.sync (sm_80+), 128 × 128 tiles, BK 16
  Float32Tf32Wgmma,  ///< TF32 on wgmma (sm_90a), 128 × 128 tiles, BK 32
  Float32Dmma,       ///< exact float32 on the FP64 tensor cores (sm_90), 128 × 128 tiles, BK 32
  Float64Dmma,       ///< float64 on the FP64 tensor cores (sm_90), 128 × 128 tiles, BK 16
};
const char* tile_config_name(GemmTileConfig config);

/// An output tile of rows × cols, whose k-range is walked in steps of k_step.
struct TileShape {
  int rows, cols, k_step;
};

/// The tiles of the one-item-per-block kernels (square: rows == cols).
inline constexpr TileShape tile_shape(GemmTileConfig config) {
  switch (config) {
    case GemmTileConfig::Float32Large: return {128, 128, 8};
    case GemmTileConfig::Float32Small: return {64, 64, 16};
    case GemmTileConfig::Float64: return {64, 64, 8};
    case GemmTileConfig::Float32Tf32: return {128, 128, 16};
    case GemmTileConfig::Float32Tf32Wgmma: return {128, 128, 32};
    case GemmTileConfig::Float32Dmma: return {128, 128, 32};
    case GemmTileConfig::Float64Dmma: return {128, 128, 16};
  }
  return {0, 0, 0};
}

/// The persistent wgmma kernels' tiles: the tall kernel's 256 rows × 128 columns (B from
/// registers) and the wide kernel's 128 × 256 (both operands from shared memory).
inline constexpr TileShape kTallTile{256, 128, 32};
inline constexpr TileShape kWideTile{128, 256, 32};
/// Rows of the tall kernel's epilogue boxes (its output map's box height).
inline constexpr int kTallOutRows = 64;

}  // namespace sg::detail::cuda
