// sg::cuda::StreamGuard and sg::cuda::use_external_allocator: work queued on another library's
// stream, memory from structgrad's allocator or another library's. Each test runs in a process of
// its own (CTest runs every discovered test separately), since the allocator choice is for the
// whole process.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
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
std::mutex streams_mutex;
std::vector<cudaStream_t> asked;  // every allocation's stream, in order
std::map<void*, cudaStream_t> stream_of;  // each block's stream, for its stream-ordered free

// An allocator that follows every stream: CUDA's stream-ordered cudaMallocAsync / cudaFreeAsync.
void* stream_ordered_allocate(size_t nbytes, int device, CUstream_st* stream) {
  void* p = nullptr;
  if (cudaSetDevice(device) != cudaSuccess || cudaMallocAsync(&p, nbytes, stream) != cudaSuccess) return nullptr;
  std::lock_guard<std::mutex> lock(streams_mutex);
  stream_of[p] = stream;
  asked.push_back(stream);
  ++allocations;
  return p;
}

void stream_ordered_free(void* p, int) {
  cudaStream_t s = nullptr;
  {
    std::lock_guard<std::mutex> lock(streams_mutex);
    s = stream_of[p];
    stream_of.erase(p);
  }
  (void)cudaFreeAsync(p, s);
  ++frees;
}

TEST(StreamGuard, WorksWithStructgradsOwnAllocator) {
  SKIP_WITHOUT_GPU();
  cudaStream_t user = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), cudaSuccess);
  const sg::Tensor a = sg::randn({300, 300}, sg::kCUDA);
  const sg::Tensor want = sg::matmul(sg::triu(a), sg::triu(a));
  sg::cuda::synchronize();  // a is read on the user stream below
  sg::Tensor got;
  {
    sg::cuda::StreamGuard guard(user, 0);
    got = sg::matmul(sg::triu(a), sg::triu(a));
  }
  ASSERT_EQ(cudaStreamSynchronize(user), cudaSuccess);
  EXPECT_EQ(sg::sum(sg::abs(got - want)).item(), 0.0);
  got = sg::Tensor();
  ASSERT_EQ(cudaStreamDestroy(user), cudaSuccess);
}

TEST(ExternalAllocator, RefusedOnceStructgradHoldsMemory) {
  SKIP_WITHOUT_GPU();
  sg::Tensor t = sg::zeros({4}, sg::kCUDA);
  EXPECT_EQ(sgtest::message_of([] { sg::cuda::use_external_allocator({&stream_ordered_allocate, &stream_ordered_free}); }),
            "cuda::use_external_allocator: cuda:0 already holds memory of structgrad's own allocator; call it before "
            "the first device allocation");
  EXPECT_EQ(sgtest::message_of([] { sg::cuda::use_external_allocator({}); }),
            "cuda::use_external_allocator: both functions are needed");
}

/// The streams the allocator was asked for after its first `from` allocations.
std::vector<cudaStream_t> streams_since(size_t from) {
  std::lock_guard<std::mutex> lock(streams_mutex);
  return std::vector<cudaStream_t>(asked.begin() + static_cast<std::ptrdiff_t>(from), asked.end());
}

/// Runs one product and the gradients of another under a StreamGuard on `user`, and checks the
/// values and that every allocation in the scope was made for `user`.
void products_on(cudaStream_t user) {
  const int64_t n = 257;
  const sg::TensorOptions o = sg::TensorOptions().dtype(sg::kFloat64).device(sg::kCUDA);
  sg::Tensor want_c, want_da;
  sg::Tensor a = sg::randn({n, n}, o), b = sg::randn({n, n}, o), g = sg::randn({n, n}, o);
  {
    // References on the library stream, and synchronised, before the guarded work.
    want_c = sg::matmul(sg::triu(a), sg::triu(b));
    want_da = sg::sym(sg::matmul(g, sg::transpose(b)));
    sg::cuda::synchronize();
  }
  const size_t from = streams_since(0).size();
  sg::Tensor out, da, db;
  {
    sg::cuda::StreamGuard guard(user, 0);
    out = sg::Tensor::empty({n, n}, o);
    da = sg::Tensor::empty({n, n}, o);
    db = sg::Tensor::empty({n, n}, o);
    out.fill_(std::numeric_limits<double>::quiet_NaN());
    da.fill_(std::numeric_limits<double>::quiet_NaN());
    sg::matmul_out(out, a, sg::Structure::UpperTriangular, b, sg::Structure::UpperTriangular);
    sg::matmul_backward_out(g, a, sg::Structure::Symmetric, b, sg::Structure::Dense, da, db);
  }
  ASSERT_EQ(cudaStreamSynchronize(user), cudaSuccess);
  const std::vector<cudaStream_t> streams = streams_since(from);
  ASSERT_GE(streams.size(), 4u);  // three outputs and the symmetric gradient's temporary
  for (cudaStream_t s : streams) EXPECT_EQ(s, user);
  EXPECT_TRUE(sgtest::all_close(out.to_vector(), want_c.to_vector(), 1e-12, 1e-12));
  EXPECT_TRUE(sgtest::all_close(da.to_vector(), want_da.to_vector(), 1e-12, 1e-12));
  EXPECT_EQ(sg::cuda::allocator_stats(0).num_cache_hits, 0u);  // nothing from structgrad's own cache
  out = da = db = sg::Tensor();
  EXPECT_GT(frees.load(), 0);
}

TEST(ExternalAllocator, ProductsRunOnTheGuardedStreamWithItsMemory) {
  SKIP_WITHOUT_GPU();
  sg::cuda::use_external_allocator({&stream_ordered_allocate, &stream_ordered_free});
  cudaStream_t user = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), cudaSuccess);
  products_on(user);
  ASSERT_EQ(cudaStreamDestroy(user), cudaSuccess);
}

TEST(ExternalAllocator, RecordStreamIsTheOtherAllocatorsRule) {
  SKIP_WITHOUT_GPU();
  sg::cuda::use_external_allocator({&stream_ordered_allocate, &stream_ordered_free});
  const sg::Tensor t = sg::zeros({4}, sg::kCUDA);
  EXPECT_EQ(sgtest::message_of([&] { sg::cuda::record_stream(t, nullptr); }),
            "cuda::record_stream: device memory comes from the external allocator, whose own stream rules apply (in "
            "PyTorch, Tensor.record_stream)");
}

TEST(ExternalAllocator, TheNullStreamIsAStreamToo) {
  SKIP_WITHOUT_GPU();
  sg::cuda::use_external_allocator({&stream_ordered_allocate, &stream_ordered_free});
  products_on(nullptr);  // PyTorch's default stream is the legacy one, null
}

#endif  // SG_WITH_CUDA

}  // namespace
