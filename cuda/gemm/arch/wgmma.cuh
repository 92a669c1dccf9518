// Hopper warpgroup MMAs (wgmma.mma_async, TF32 into float32): m64n128k8 and m64n256k8 with A from
// shared memory or from registers, B from shared memory, and the fences and waits around them.
#pragma once

#include <cstdint>

#include "cuda/gemm/arch/sm90.cuh"

namespace sg::detail::cuda {

/// Descriptor of a K-major operand tile in the 128-byte swizzle: rows of 128 bytes (32 TF32
/// values of k), 8-row swizzle atoms 1024 bytes apart (stride byte offset); the leading byte
/// offset is unused for swizzled K-major tiles (one wgmma reads 32 bytes of k, inside the
/// atom). `address` is the tile base (1024-byte aligned) plus the byte offset of the k8 slice.
__device__ __forceinline__ uint64_t wgmma_descriptor(uint32_t address) {
  return static_cast<uint64_t>((address & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() {
#if SG_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#if SG_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_wait_all() {
#if SG_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}

/// Waits until at most one of this warpgroup's committed wgmma groups is still running (the
/// latest): the groups before it are complete, their shared-memory operands free.
__device__ __forceinline__ void wgmma_wait_all_but_latest() {
#if SG_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
#endif
}

template <int R, int C>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[R][C]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < C; ++j) asm volatile("" : "+f"(d[i][j])::"memory");
}

/// The accumulator operands of a wgmma in the order of its D registers: per n8 block c/2, the
/// thread's rows g (d[0]) and g + 8 (d[1]) at columns c and c + 1. 64 operands for n128, 128 for n256.
#define SG_WGMMA_N8(d, c) "+f"(d[0][c]), "+f"(d[0][c + 1]), "+f"(d[1][c]), "+f"(d[1][c + 1])
#define SG_WGMMA_N32(d, c) SG_WGMMA_N8(d, c), SG_WGMMA_N8(d, c + 2), SG_WGMMA_N8(d, c + 4), SG_WGMMA_N8(d, c + 6)
#define SG_WGMMA_N128_ACCUMULATORS(d) SG_WGMMA_N32(d, 0), SG_WGMMA_N32(d, 8), SG_WGMMA_N32(d, 16), SG_WGMMA_N32(d, 24)
#define SG_WGMMA_N256_ACCUMULATORS(d) \
  SG_WGMMA_N128_ACCUMULATORS(d), SG_WGMMA_N32(d, 32), SG_WGMMA_N32(d, 40), SG_WGMMA_N32(d, 48), SG_WGMMA_N32(d, 56)

/// D += A·B for one warpgroup: A 64×8 and B 128×8 (K-major, TF32 bit patterns in shared
/// memory), D 64×128 float32 in the m16n8 fragment layout (d[r][c]: row g + 8r of the warp's
/// 16, column 8·(c/2) + 2t + c%2).
__device__ __forceinline__ void wgmma_m64n128k8_tf32(float (&d)[2][32], uint64_t a_desc, uint64_t b_desc) {
#if SG_HAS_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, accumulate, 1, 1;\n"
      "}\n"
      : SG_WGMMA_N128_ACCUMULATORS(d)
      : "l"(a_desc), "l"(b_desc), "r"(1));
#else
  __trap();  // the host launches the wgmma configuration only on sm_90a code
#endif
}

/// The same with A from registers (the register-B kernel): a[4] this thread's TF32 bit patterns of
/// A (64 × 8, the m16n8k8 A fragment layout per warp: rows g and g + 8 of the warp's 16, k t and
/// t + 4, as a[0] (g, t), a[1] (g + 8, t), a[2] (g, t + 4), a[3] (g + 8, t + 4)), B K-major in
/// shared memory as above.
__device__ __forceinline__ void wgmma_m64n128k8_tf32_register_a(float (&d)[2][32], const uint32_t (&a)[4],
                                                                uint64_t b_desc) {
#if SG_HAS_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, accumulate, 1, 1;\n"
      "}\n"
      : SG_WGMMA_N128_ACCUMULATORS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
#else
  __trap();  // the host launches the register-B kernel only on sm_90a code
#endif
}

/// The same for n256 (the wide kernel's 64 × 256 warpgroup tile): d[0] rows g, d[1] rows g + 8, of
/// the 32 n8 blocks.
__device__ __forceinline__ void wgmma_m64n256k8_tf32(float (&d)[2][64], uint64_t a_desc, uint64_t b_desc) {
#if SG_HAS_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, accumulate, 1, 1;\n"
      "}\n"
      : SG_WGMMA_N256_ACCUMULATORS(d)
      : "l"(a_desc), "l"(b_desc), "r"(1));
#else
  __trap();  // the host launches the wide kernel only on sm_90a code
#endif
}

/// The same with A from registers (the tall kernel): a[4] this thread's TF32 bit patterns of A as in
/// wgmma_m64n128k8_tf32_register_a, B 256 × 8 K-major in shared memory, d as in wgmma_m64n256k8_tf32.
__device__ __forceinline__ void wgmma_m64n256k8_tf32_register_a(float (&d)[2][64], const uint32_t (&a)[4],
                                                                uint64_t b_desc) {
#if SG_HAS_WGMMA
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, accumulate, 1, 1;\n"
      "}\n"
      : SG_WGMMA_N256_ACCUMULATORS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
#else
  __trap();  // the host launches the tall kernel only on sm_90a code
#endif
}

}  // namespace sg::detail::cuda
