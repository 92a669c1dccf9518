// docs/api.md, "CUDA": the same code on a GPU when one exists, the CPU otherwise. Built and run by
// CTest (on a machine without a GPU it takes the CPU path); the guide shows the body of main()
// before its checks.
#include <structgrad/structgrad.h>

#include <iostream>

int main() {
  const sg::Device device = sg::cuda::is_available() ? sg::kCUDA : sg::kCPU;
  auto U = sg::UpperTriangular::randn(512, device);          // every factory takes a device
  auto x = sg::randn({512, 64}, device);
  auto y = sg::matmul(U, x);                                  // queued on the library's stream
  auto back_on_host = y.to(sg::kCPU);                         // copies to the host synchronise

  sg::set_matmul_precision(sg::Precision::TF32);              // float32 products on tensor cores (sm_80+)
  auto approximate = sg::matmul(U, x);                        // relative error ~1e-3 instead of ~1e-6
  sg::set_matmul_precision(sg::Precision::Float32);           // the default: exact float32

  if (device.is_cuda()) {
    sg::cuda::synchronize();                                  // wait for all queued work
    std::cout << sg::cuda::allocator_stats().num_device_mallocs << " cudaMalloc calls\n";
    sg::cuda::empty_cache();                                  // return cached blocks to the driver
  }
  const sg::AllocatorStats host = sg::host_memory_stats();    // host tensors' memory

  SG_CHECK(back_on_host.device() == sg::kCPU && host.bytes_in_use > 0, "cuda");
  SG_CHECK(approximate.size(0) == 512 && sg::matmul_precision() == sg::Precision::Float32, "precision");
  SG_CHECK(sg::cuda::device_count() >= 0 && (sg::cuda::built_with_cuda() || !sg::cuda::is_available()), "build");
}
