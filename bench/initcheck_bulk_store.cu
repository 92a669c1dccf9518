// Probe (standalone, not part of the build): does compute-sanitizer initcheck see writes made by
// bulk (TMA) stores? Writes 1024 floats to a fresh cudaMalloc block with plain stores and to
// another with cp.async.bulk from shared memory, then copies each back to the host. A report on
// the second only, with its values right, means initcheck does not track bulk stores.
//   nvcc -arch=sm_90a -o /tmp/probe bench/initcheck_bulk_store.cu
//   compute-sanitizer --tool initcheck /tmp/probe
#include <cuda_runtime.h>
#include <cstdio>
__global__ void plain(float* out) { for (int i = threadIdx.x; i < 1024; i += blockDim.x) out[i] = i; }
__global__ void bulk(float* out) {
  __shared__ alignas(128) float buf[1024];
  for (int i = threadIdx.x; i < 1024; i += blockDim.x) buf[i] = i;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(buf));
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], 4096;" ::"l"(out), "r"(s) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
}
int main() {
  float *a, *b, h[1024];
  cudaMalloc(&a, 4096); cudaMalloc(&b, 4096);
  plain<<<1, 128>>>(a);
  bulk<<<1, 128>>>(b);
  cudaMemcpy(h, a, 4096, cudaMemcpyDeviceToHost); std::printf("plain: h[1023] = %g\n", h[1023]);
  cudaMemcpy(h, b, 4096, cudaMemcpyDeviceToHost); std::printf("bulk:  h[1023] = %g (%s)\n", h[1023], cudaGetErrorString(cudaGetLastError()));
  return 0;
}
