// sg::cuda::StreamGuard and sg::cuda::use_external_allocator: work queued on another library's
// stream, memory from another library's allocator. Each test runs in a process of its own (CTest
// runs every discovered test separately), since the allocator choice is for the whole process.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include <structgrad/structgrad.h>
#include "test_util.h"

#ifdef SG_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace {

#define SKIP_WITHOUT_GPU()                                                                 \
  do {                                                                                    \
    if (!sg::cuda::is_available())                                                        \
      GTEST_SKIP() << (sg::cuda::built_with_cuda() ? "no CUDA device on this machine"      \
                                                    : "structgrad was built without CUDA"); \
  } while (0)

TEST(StreamGuard, WithoutCudaItIsAClearError) {
  if (sg::cuda::built_with_cuda()) GTEST_SKIP() << "this build has CUDA";
  EXPECT_EQ(sgtest::message_of([] { sg::cuda::StreamGuard guard(nullptr, 0); }),
            "cuda::StreamGuard: structgrad was built without CUDA");
}

#ifdef SG_WITH_CUDA

std::atomic<int> allocations{0}, frees{0};

// A plain allocator that follows every stream: cudaFree waits for the device's work.
void* counting_allocate(size_t nbytes, int device, CUstream_st*) {
  void* p = nullptr;
  if (cudaSetDevice(device) != cudaSuccess || cudaMalloc(&p, nbytes) != cudaSuccess) return nullptr;
  ++allocations;
  return p;
}

void counting_free(void* p, int) {
  (void)cudaFree(p);
  ++frees;
}

TEST(StreamGuard, NeedsAnAllocatorThatFollowsTheStream) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(sgtest::message_of([] { sg::cuda::StreamGuard guard(nullptr, 0); }).rfind("cuda::StreamGuard: structgrad's "
                                                                                      "own allocator reuses memory",
                                                                                      0),
            0u);
}

TEST(ExternalAllocator, RefusedOnceStructgradHoldsMemory) {
  SKIP_WITHOUT_GPU();
  sg::Tensor t = sg::zeros({4}, sg::kCUDA);
  EXPECT_EQ(sgtest::message_of([] { sg::cuda::use_external_allocator({&counting_allocate, &counting_free}); }),
            "cuda::use_external_allocator: cuda:0 already holds memory of structgrad's own allocator; call it before "
            "the first device allocation");
  EXPECT_EQ(sgtest::message_of([] { sg::cuda::use_external_allocator({}); }),
            "cuda::use_external_allocator: both functions are needed");
}

struct HostGate {
  std::atomic<bool> open{false};
  static void CUDART_CB wait(void* self) {
    while (!static_cast<HostGate*>(self)->open.load()) {
    }
  }
};

TEST(ExternalAllocator, ProductsRunOnTheGuardedStreamWithItsMemory) {
  SKIP_WITHOUT_GPU();
  sg::cuda::use_external_allocator({&counting_allocate, &counting_free});
  cudaStream_t user = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), cudaSuccess);
  const int64_t n = 257;
  const sg::TensorOptions o = sg::TensorOptions().dtype(sg::kFloat64).device(sg::kCUDA);
  sg::Tensor a, b, g, out, da, db;
  {
    sg::cuda::StreamGuard guard(user, 0);
    a = sg::randn({n, n}, o);
    b = sg::randn({n, n}, o);
    g = sg::randn({n, n}, o);
    out = sg::Tensor::empty({n, n}, o);
    da = sg::Tensor::empty({n, n}, o);
    db = sg::Tensor::empty({n, n}, o);
    out.fill_(std::numeric_limits<double>::quiet_NaN());
  }
  ASSERT_EQ(cudaStreamSynchronize(user), cudaSuccess);
  const int before = allocations.load();

  // The user stream waits on the host until the gate opens: a product queued on it cannot have run
  // before then, one queued elsewhere would.
  HostGate gate;
  ASSERT_EQ(cudaLaunchHostFunc(user, &HostGate::wait, &gate), cudaSuccess);
  {
    sg::cuda::StreamGuard guard(user, 0);
    sg::matmul_out(out, a, sg::Structure::UpperTriangular, b, sg::Structure::UpperTriangular);
    sg::matmul_backward_out(g, a, sg::Structure::Symmetric, b, sg::Structure::Dense, da, db);
  }
  std::vector<double> early(static_cast<size_t>(n * n));
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(early.data(), out.data_ptr(), early.size() * sizeof(double), cudaMemcpyDeviceToHost, other),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(other), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(user), cudaErrorNotReady);
  EXPECT_TRUE(std::isnan(early[0]));  // not written yet: the product waits behind the gate
  gate.open = true;
  ASSERT_EQ(cudaStreamSynchronize(user), cudaSuccess);

  const sg::Tensor want = sg::matmul(sg::triu(a.detach()), sg::triu(b.detach()));  // library stream, synchronised
  EXPECT_TRUE(sgtest::all_close(out.to_vector(), want.to_vector(), 1e-12, 1e-12));
  EXPECT_GT(allocations.load(), before);  // the symmetric gradient's temporary came from the external allocator
  EXPECT_EQ(sg::cuda::allocator_stats(0).num_cache_hits, 0u);
  ASSERT_EQ(cudaStreamDestroy(other), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(user), cudaSuccess);
}

#endif  // SG_WITH_CUDA

}  // namespace
