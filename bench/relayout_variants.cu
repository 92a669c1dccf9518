// Microbenchmark (standalone, not part of the build): the relayout copy of cuda/gemm/relayout.cuh
// (v0, the shipped 32 × 32 kernel, restated here) against three variants, on a 4096 × 4096
// k-major operand copied outer-major, Dense and Upper-as-B (k <= outer, zeros within a band of the
// diagonal). Each variant is checked against v0 wherever v0 writes. docs/structured_gemm.md,
// "Relayout", has the figures. Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 bench/relayout_variants.cu -o /tmp/relayout_variants && /tmp/relayout_variants
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
constexpr int kBand = 256;
// pattern: 0 = all, 1 = k <= o (B upper)
__device__ __forceinline__ bool allows(int pat, int o, int k) { return pat == 0 || k <= o; }
__device__ __forceinline__ int zero_dist(int pat, int o0, int k0, int to, int tk) { return pat == 1 ? k0 - (o0 + to - 1) : 0; }

__global__ void __launch_bounds__(256) v0(const float* d, int ld, int ext, int kext, int pat, float* out, int ldo) {
  __shared__ float tile[32][33];
  const int o0 = blockIdx.y * 32, k0 = blockIdx.x * 32, tx = threadIdx.x, ty = threadIdx.y;
  const int zd = zero_dist(pat, o0, k0, 32, 32);
  if (zd >= kBand) return;
  for (int r = ty; r < 32; r += 8) {
    const int o = o0 + tx, k = k0 + r;
    float v = 0.f;
    if (zd <= 0 && o < ext && k < kext && allows(pat, o, k)) v = d[(long)k * ld + o];
    tile[r][tx] = v;
  }
  __syncthreads();
  for (int r = ty; r < 32; r += 8) {
    const int o = o0 + r, k = k0 + tx;
    if (o < ext && k < kext) out[(long)o * ldo + k] = tile[tx][r];
  }
}
// 64x64 tile, 32x8 threads, 16 elements per thread, loads batched.
__global__ void __launch_bounds__(256) v1(const float* d, int ld, int ext, int kext, int pat, float* out, int ldo) {
  __shared__ float tile[64][65];
  const int o0 = blockIdx.y * 64, k0 = blockIdx.x * 64, tx = threadIdx.x, ty = threadIdx.y;
  const int zd = zero_dist(pat, o0, k0, 64, 64);
  if (zd >= kBand) return;
  float v[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int r = ty + 8 * (i & 7), c = tx + 32 * (i >> 3);
    const int o = o0 + c, k = k0 + r;
    v[i] = (zd <= 0 && o < ext && k < kext && allows(pat, o, k)) ? d[(long)k * ld + o] : 0.f;
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) tile[ty + 8 * (i & 7)][tx + 32 * (i >> 3)] = v[i];
  __syncthreads();
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int r = ty + 8 * (i & 7), c = tx + 32 * (i >> 3);
    const int o = o0 + r, k = k0 + c;
    if (o < ext && k < kext) out[(long)o * ldo + k] = tile[c][r];
  }
}
// Register transpose: thread = 4 o x 8 k, float4 loads (8 rows of k), float4 stores (2 per o row: 32 B).
// Block 256 threads = 32 (o4) x 8 (k8): a 128 (o) x 64 (k) tile. Interior tiles only (sizes multiple of 128/64).
__global__ void __launch_bounds__(256) v2(const float* d, int ld, int ext, int kext, int pat, float* out, int ldo) {
  const int o0 = blockIdx.y * 128, k0 = blockIdx.x * 64;
  const int zd = zero_dist(pat, o0, k0, 128, 64);
  if (zd >= kBand) return;
  const int o = o0 + 4 * (threadIdx.x & 31), k = k0 + 8 * (threadIdx.x >> 5);
  float4 in[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    in[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (zd <= 0) in[j] = *reinterpret_cast<const float4*>(d + (long)(k + j) * ld + o);
  }
  float m[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j) { m[j][0] = in[j].x; m[j][1] = in[j].y; m[j][2] = in[j].z; m[j][3] = in[j].w; }
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    float w[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j] = allows(pat, o + q, k + j) ? m[j][q] : 0.f;
    float4* dst = reinterpret_cast<float4*>(out + (long)(o + q) * ldo + k);
    dst[0] = make_float4(w[0], w[1], w[2], w[3]);
    dst[1] = make_float4(w[4], w[5], w[6], w[7]);
  }
}
// v3: smem transpose with float4 both ways: 64 (o) x 64 (k) tile, 256 threads.
// load: thread (t%16 -> o4, t/16 -> k row, 4 rows apart by 16) float4 along o; store to smem S[k][o] (row 68 floats)
// write: thread (t%16 -> k4, t/16 -> o row) reads S[k4*4+q][o] scalars, float4 store along k.
__global__ void __launch_bounds__(256) v3(const float* d, int ld, int ext, int kext, int pat, float* out, int ldo) {
  __shared__ __align__(16) float S[64][65];
  const int o0 = blockIdx.y * 64, k0 = blockIdx.x * 64, t = threadIdx.x;
  const int zd = zero_dist(pat, o0, k0, 64, 64);
  if (zd >= kBand) return;
  float4 in[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int kr = (t >> 4) + 16 * i;
    in[i] = zd <= 0 ? *reinterpret_cast<const float4*>(d + (long)(k0 + kr) * ld + o0 + 4 * (t & 15)) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int kr = (t >> 4) + 16 * i, oc = 4 * (t & 15);
    S[kr][oc] = in[i].x; S[kr][oc + 1] = in[i].y; S[kr][oc + 2] = in[i].z; S[kr][oc + 3] = in[i].w;
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int orow = (t >> 4) + 16 * i, kc = 4 * (t & 15);
    const int o = o0 + orow, k = k0 + kc;
    float w[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) w[q] = allows(pat, o, k + q) ? S[kc + q][orow] : 0.f;
    *reinterpret_cast<float4*>(out + (long)o * ldo + k) = make_float4(w[0], w[1], w[2], w[3]);
  }
}

int main() {
  const int n = 4096;
  float *d, *out, *ref;
  CK(cudaMalloc(&d, sizeof(float) * n * n));
  CK(cudaMalloc(&out, sizeof(float) * n * n));
  CK(cudaMalloc(&ref, sizeof(float) * n * n));
  std::vector<float> h((size_t)n * n);
  for (size_t i = 0; i < h.size(); ++i) h[i] = float((i * 2654435761u) % 1000) - 500.f;
  CK(cudaMemcpy(d, h.data(), sizeof(float) * n * n, cudaMemcpyHostToDevice));
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> r1((size_t)n * n), r2((size_t)n * n);
  for (int pat = 0; pat < 2; ++pat) {
    for (int var = 0; var < 4; ++var) {
      auto launch = [&](float* dst) {
        if (var == 0) v0<<<dim3(n / 32, n / 32), dim3(32, 8)>>>(d, n, n, n, pat, dst, n);
        if (var == 1) v1<<<dim3(n / 64, n / 64), dim3(32, 8)>>>(d, n, n, n, pat, dst, n);
        if (var == 2) v2<<<dim3(n / 64, n / 128), 256>>>(d, n, n, n, pat, dst, n);
        if (var == 3) v3<<<dim3(n / 64, n / 64), 256>>>(d, n, n, n, pat, dst, n);
      };
      CK(cudaMemset(out, 0xff, sizeof(float) * n * n));
      CK(cudaMemset(ref, 0xff, sizeof(float) * n * n));
      v0<<<dim3(n / 32, n / 32), dim3(32, 8)>>>(d, n, n, n, pat, ref, n);
      launch(out);
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(r1.data(), ref, sizeof(float) * n * n, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(r2.data(), out, sizeof(float) * n * n, cudaMemcpyDeviceToHost));
      // compare inside the band region where v0 writes (others may write a wider band of zeros)
      long bad = 0;
      for (long o = 0; o < n; ++o) for (long k = 0; k < n; ++k) {
        const float x = r1[o * n + k], y = r2[o * n + k];
        bool v0wrote = !(x != x);
        if (v0wrote && !(x == y)) ++bad;
      }
      for (int i = 0; i < 5; ++i) launch(out);
      const int reps = 30;
      std::vector<float> ts;
      for (int i = 0; i < reps; ++i) { cudaEventRecord(a); launch(out); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); ts.push_back(ms); }
      std::sort(ts.begin(), ts.end());
      printf("pattern %d variant v%d: median %.1f us, min %.1f us, mismatches %ld\n", pat, var, 1000 * ts[reps / 2], 1000 * ts[0], bad);
    }
  }
  return 0;
}
