// Warp-level tensor-core MMAs, mma.sync m16n8k8: TF32 (sm_80 and newer) and float64 (sm_90),
// and the rounding of float32 to TF32 as the tensor cores read it.
#pragma once

#include <cstdint>

namespace sg::detail::cuda {

/// Rounds a float to TF32 (round to nearest, ties away; the low 13 mantissa bits cleared),
/// as the tensor cores read it. Applied once, when a tile is staged into shared memory.
__device__ __forceinline__ float round_to_tf32(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t bits;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(bits) : "f"(x));
  return __uint_as_float(bits);
#else
  return x;
#endif
}

__device__ __forceinline__ double round_to_tf32(double x) { return x; }

/// D = A·B + D for one m16n8k8 TF32 fragment (PTX ISA "mma.sync ... .tf32"): a[4], b[2] hold
/// TF32 bit patterns, d[4] the float32 accumulators.
__device__ __forceinline__ void mma_tf32_m16n8k8(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();  // the host never launches the MMA configuration below sm_80
#endif
}

/// D = A·B + D for one m16n8k8 float64 fragment (PTX ISA "mma.sync ... .f64", sm_90): the same
/// fragment layout as the TF32 shape above, with one float64 per element.
__device__ __forceinline__ void mma_f64_m16n8k8(double (&d)[4], const double (&a)[4], const double (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
#else
  __trap();  // the host launches the FP64 MMA configuration only on compute capability 9.0
#endif
}

}  // namespace sg::detail::cuda
