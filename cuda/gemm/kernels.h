// The kernel instances of the structured GEMM, one translation unit each (cuda/gemm/instances/),
// so they compile in parallel and a change to one kernel rebuilds only its instances. Each
// function returns its instance's entry point and launch shape; the launcher includes no device code.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include <structgrad/core/error.h>

#include "cuda/gemm/kernel_args.h"
#include "cuda/gemm/tma_maps.h"
#include "cuda/gemm/tile_shapes.h"

namespace sg::detail::cuda {

/// A kernel instance: its entry point, its name (for errors), threads per block and dynamic shared memory.
template <class Fn>
struct KernelInstance {
  Fn fn;
  const char* name;
  unsigned threads;
  int dynamic_smem;
};

template <typename T>
using TiledKernel = void (*)(GemmArgs<T>);
using TmaKernel = void (*)(GemmArgs<float>, TmaMaps);
using TallKernel = void (*)(GemmArgs<float>, TmaMaps, const int*, TransposedOutput);
using WideKernel = void (*)(GemmArgs<float>, TmaMaps, const int*);
using RelayoutKernel = void (*)(OperandView<float>, int32_t, float*, int64_t, bool);
using SymmetricCopyKernel = void (*)(const float*, int64_t, int32_t, bool, float*, int64_t);

/// The tiled kernel of a float32 configuration (kernel_tiled.cuh): FFMA, mma.sync, wgmma with
/// every tile staged through registers, or the FP64 tensor cores.
template <GemmTileConfig kConfig>
KernelInstance<TiledKernel<float>> tiled_kernel();
template <>
KernelInstance<TiledKernel<float>> tiled_kernel<GemmTileConfig::Float32Large>();
template <>
KernelInstance<TiledKernel<float>> tiled_kernel<GemmTileConfig::Float32Small>();
template <>
KernelInstance<TiledKernel<float>> tiled_kernel<GemmTileConfig::Float32Tf32>();
template <>
KernelInstance<TiledKernel<float>> tiled_kernel<GemmTileConfig::Float32Tf32Wgmma>();
template <>
KernelInstance<TiledKernel<float>> tiled_kernel<GemmTileConfig::Float32Dmma>();
/// The tiled kernels of float64: DFMA, and the FP64 tensor cores.
KernelInstance<TiledKernel<double>> tiled_f64_kernel();
KernelInstance<TiledKernel<double>> tiled_f64_dmma_kernel();

/// The wgmma tiled kernel with TMA copies, per variant (kernel_args.h).
template <TmaVariant kVariant>
KernelInstance<TmaKernel> tiled_tma_kernel();
template <>
KernelInstance<TmaKernel> tiled_tma_kernel<TmaVariant::A>();
template <>
KernelInstance<TmaKernel> tiled_tma_kernel<TmaVariant::B>();
template <>
KernelInstance<TmaKernel> tiled_tma_kernel<TmaVariant::AB>();
template <>
KernelInstance<TmaKernel> tiled_tma_kernel<TmaVariant::ABDeep>();
template <>
KernelInstance<TmaKernel> tiled_tma_kernel<TmaVariant::ABDiag>();
template <>
KernelInstance<TmaKernel> tiled_tma_kernel<TmaVariant::ABDeepDiag>();
template <>
KernelInstance<TmaKernel> tiled_tma_kernel<TmaVariant::ABSym>();

/// The tiled wgmma kernel with TMA copies of `variant`.
inline KernelInstance<TmaKernel> tiled_tma_kernel(TmaVariant variant) {
  switch (variant) {
    case TmaVariant::A: return tiled_tma_kernel<TmaVariant::A>();
    case TmaVariant::B: return tiled_tma_kernel<TmaVariant::B>();
    case TmaVariant::AB: return tiled_tma_kernel<TmaVariant::AB>();
    case TmaVariant::ABDeep: return tiled_tma_kernel<TmaVariant::ABDeep>();
    case TmaVariant::ABDiag: return tiled_tma_kernel<TmaVariant::ABDiag>();
    case TmaVariant::ABDeepDiag: return tiled_tma_kernel<TmaVariant::ABDeepDiag>();
    case TmaVariant::ABSym: return tiled_tma_kernel<TmaVariant::ABSym>();
  }
  return tiled_tma_kernel<TmaVariant::AB>();
}

/// The tiled kernel of configuration `config` for element type T; throws for a configuration of the
/// other type.
template <typename T>
KernelInstance<TiledKernel<T>> tiled_kernel_of(GemmTileConfig config) {
  if constexpr (std::is_same_v<T, double>) {
    if (config == GemmTileConfig::Float64Dmma) return tiled_f64_dmma_kernel();
    if (config == GemmTileConfig::Float64) return tiled_f64_kernel();
  } else {
    switch (config) {
      case GemmTileConfig::Float32Large: return tiled_kernel<GemmTileConfig::Float32Large>();
      case GemmTileConfig::Float32Small: return tiled_kernel<GemmTileConfig::Float32Small>();
      case GemmTileConfig::Float32Tf32: return tiled_kernel<GemmTileConfig::Float32Tf32>();
      case GemmTileConfig::Float32Tf32Wgmma: return tiled_kernel<GemmTileConfig::Float32Tf32Wgmma>();
      case GemmTileConfig::Float32Dmma: return tiled_kernel<GemmTileConfig::Float32Dmma>();
      default: break;
    }
  }
  SG_FAIL("structured gemm: no ", sizeof(T) == 8 ? "float64" : "float32", " tiled kernel for ",
          tile_config_name(config));
}

/// The pipelined kernel (kernel_pipelined.cuh): a producer warp, two consumer warpgroups.
KernelInstance<TmaKernel> pipelined_kernel();
/// The register-B kernel (kernel_pipelined.cuh): the tile computed transposed, B from registers.
KernelInstance<TmaKernel> register_b_kernel();
/// The tall kernel (kernel_tall.cuh), with or without the op(A)ᵀ output.
template <TransposedA kOutput>
KernelInstance<TallKernel> tall_kernel();
template <>
KernelInstance<TallKernel> tall_kernel<TransposedA::None>();
template <>
KernelInstance<TallKernel> tall_kernel<TransposedA::Written>();
/// The wide kernel (kernel_wide.cuh).
KernelInstance<WideKernel> wide_kernel();

/// The operand copies (relayout.cuh): one operand outer-major or k-major, in blocks of
/// kRelayoutTile × kRelayoutRows threads, and the whole copy of a Symmetric matrix.
KernelInstance<RelayoutKernel> relayout_copy();
KernelInstance<SymmetricCopyKernel> symmetric_copy();

}  // namespace sg::detail::cuda
