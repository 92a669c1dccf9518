// Work on several CUDA streams at once through sg::cuda::StreamGuard, on structgrad's own
// allocator: products, factorizations and their gradients queued on two streams with nothing
// ordering one after the other give the results one stream gives, bit for bit; four host threads
// with two streams each do too; and the allocator hands a block to another stream only once the
// work recorded on it is done (sg::cuda::record_stream).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <structgrad/structgrad.h>
#include "test_util.h"

#ifdef SG_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace {

TEST(RecordStream, WithoutCudaItIsAClearError) {
  if (sg::cuda::built_with_cuda()) GTEST_SKIP() << "this build has CUDA";
  EXPECT_EQ(sgtest::message_of([] { sg::cuda::record_stream(sg::zeros({2}), nullptr); }),
            "cuda::record_stream: structgrad was built without CUDA");
}

#ifdef SG_WITH_CUDA

#define SKIP_WITHOUT_GPU()                                                  \
  do {                                                                     \
    if (!sg::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine"; \
  } while (0)

/// A non-blocking stream, destroyed at the end of the scope.
class Stream {
 public:
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() {
    (void)cudaStreamSynchronize(s_);
    (void)cudaStreamDestroy(s_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  void synchronize() const { ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess); }

 private:
  cudaStream_t s_ = nullptr;
};

sg::TensorOptions on_gpu(sg::DType dtype) { return sg::TensorOptions().dtype(dtype).device(sg::kCUDA); }

/// X·Xᵀ/n + I per matrix, Symmetric positive definite.
sg::Tensor spd(sg::Shape batch, int64_t n, sg::TensorOptions o) {
  sg::Shape shape = batch;
  shape.push_back(n);
  shape.push_back(n);
  const sg::Tensor x = sg::randn(shape, o);
  return sg::sym(sg::matmul(x, sg::transpose(x)) / static_cast<double>(n) + sg::eye(n, o));
}

/// A workload: inputs made once on the library stream, and an op of them. run() queues the op and
/// the backward of Σ op(inputs)² on the current stream.
struct Workload {
  std::string name;
  std::vector<sg::Tensor> inputs;
  std::function<sg::Tensor(const std::vector<sg::Tensor>&)> op;
};

/// The op's output and its inputs' gradients, on fresh leaves over the inputs' values, so that runs
/// on two streams never accumulate into one gradient.
std::vector<sg::Tensor> run(const Workload& w) {
  std::vector<sg::Tensor> leaves;
  for (const sg::Tensor& x : w.inputs) leaves.push_back(x.detach().requires_grad_());
  const sg::Tensor out = w.op(leaves);
  sg::sum(sg::square(out)).backward();
  std::vector<sg::Tensor> results{out.detach()};
  for (const sg::Tensor& leaf : leaves) results.push_back(leaf.grad());
  return results;
}

using Inputs = const std::vector<sg::Tensor>&;

/// Products of one shape and of several (the structured GEMM's plans, split tiles among them, and
/// its pooled Upper outputs), cuBLAS (a Dense product), the large and the batched linear algebra,
/// forward and backward.
std::vector<Workload> workloads(sg::DType dtype) {
  const sg::TensorOptions o = on_gpu(dtype);
  sg::manual_seed(11);
  auto product = [](Inputs in) { return sg::matmul(in[0], in[1]); };
  auto cholesky = [](Inputs in) { return sg::Tensor(sg::cholesky(in[0])); };
  std::vector<Workload> w = {
      {"Upper·Upper 1024", {sg::triu(sg::randn({1024, 1024}, o)), sg::triu(sg::randn({1024, 1024}, o))}, product},
      {"Dense 96×16384 · 16384×96 (split k)", {sg::randn({96, 16384}, o), sg::randn({16384, 96}, o)}, product},
      {"Symmetric·Dense 700×700", {spd({}, 700, o), sg::randn({700, 300}, o)}, product},
      {"cholesky 1200", {spd({}, 1200, o)}, cholesky},
      {"solve_triangular 900, 256 rhs",
       {sg::with_diagonal(sg::tril(sg::randn({900, 900}, o) / 30.0), sg::rand({900}, o) + 1.0),
        sg::randn({900, 256}, o)},
       [](Inputs in) { return sg::solve_triangular(in[0], in[1]); }},
      {"logdet 600", {spd({}, 600, o)}, [](Inputs in) { return sg::logdet(in[0]); }},
      {"batched cholesky 512×32²", {spd({512}, 32, o)}, cholesky},
  };
  sg::cuda::synchronize();
  return w;
}

/// Each workload's results on the library stream, on the host.
std::vector<std::vector<std::vector<double>>> references(const std::vector<Workload>& w) {
  std::vector<std::vector<std::vector<double>>> ref;
  for (const Workload& x : w) {
    std::vector<std::vector<double>> values;
    for (const sg::Tensor& t : run(x)) values.push_back(t.to_vector());
    ref.push_back(values);
  }
  return ref;
}

void expect_bitwise(const std::vector<sg::Tensor>& got, const std::vector<std::vector<double>>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<double> g = got[i].to_vector();
    ASSERT_EQ(g.size(), want[i].size()) << what << " result " << i;
    size_t differ = 0;
    for (size_t k = 0; k < g.size(); ++k) differ += g[k] != want[i][k] && !(g[k] != g[k] && want[i][k] != want[i][k]);
    EXPECT_EQ(differ, 0u) << what << " result " << i << ": " << differ << " of " << g.size() << " values differ";
  }
}

/// Queues every workload `rounds` times on `a` and on `b` by turns, with nothing ordering the two
/// streams, freeing each round's results but the last as it goes (their memory is the next round's).
/// Returns the last round's results per stream and workload.
std::vector<std::vector<std::vector<sg::Tensor>>> interleave(const std::vector<Workload>& w, cudaStream_t a,
                                                              cudaStream_t b, int rounds) {
  std::vector<std::vector<std::vector<sg::Tensor>>> last(2, std::vector<std::vector<sg::Tensor>>(w.size()));
  for (int round = 0; round < rounds; ++round)
    for (size_t i = 0; i < w.size(); ++i)
      for (int side = 0; side < 2; ++side) {
        sg::cuda::StreamGuard guard(side == 0 ? a : b, 0);
        last[static_cast<size_t>(side)][i] = run(w[i]);
      }
  return last;
}

class TwoStreams : public testing::TestWithParam<sg::DType> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }
};

TEST_P(TwoStreams, InterleavedWorkGivesTheResultsOfOneStream) {
  const std::vector<Workload> w = workloads(GetParam());
  const auto ref = references(w);
  Stream a, b;
  const auto last = interleave(w, a.get(), b.get(), 3);
  a.synchronize();
  b.synchronize();
  for (size_t i = 0; i < w.size(); ++i)
    for (int side = 0; side < 2; ++side)
      expect_bitwise(last[static_cast<size_t>(side)][i], ref[i], w[i].name + (side == 0 ? " on stream a" : " on stream b"));
}

TEST_P(TwoStreams, FourThreadsWithTwoStreamsEach) {
  const std::vector<Workload> w = workloads(GetParam());
  const auto ref = references(w);
  constexpr int kThreads = 4;
  std::vector<std::vector<std::vector<std::vector<sg::Tensor>>>> last(kThreads);
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        Stream a, b;
        last[static_cast<size_t>(t)] = interleave(w, a.get(), b.get(), 2);
        a.synchronize();
        b.synchronize();
      } catch (const std::exception& e) {
        failures[static_cast<size_t>(t)] = e.what();
      }
    });
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(failures[static_cast<size_t>(t)], "") << "thread " << t;
    for (size_t i = 0; i < w.size(); ++i)
      for (int side = 0; side < 2; ++side)
        expect_bitwise(last[static_cast<size_t>(t)][static_cast<size_t>(side)][i], ref[i],
                       w[i].name + " in thread " + std::to_string(t) + (side == 0 ? " on stream a" : " on stream b"));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TwoStreams, testing::Values(sg::kFloat32, sg::kFloat64),
                         [](const testing::TestParamInfo<sg::DType>& info) { return sg::dtype_name(info.param); });

// ---- the allocator's stream order ------------------------------------------------------------

/// Holds `s` at a host function until release() (or 20 s, so that a failing test cannot hang).
class StreamGate {
 public:
  explicit StreamGate(cudaStream_t s) {
    EXPECT_EQ(cudaLaunchHostFunc(s, &StreamGate::wait, &open_), cudaSuccess);
  }
  void release() { open_.store(true); }

 private:
  static void wait(void* flag) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!static_cast<std::atomic<bool>*>(flag)->load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  std::atomic<bool> open_{false};
};

TEST(StreamOrderedAllocator, ABlockFreedOnOneStreamIsReusedOnThatStreamOnly) {
  SKIP_WITHOUT_GPU();
  Stream a, b;
  const sg::TensorOptions o = on_gpu(sg::kFloat32);
  void* freed = nullptr;
  {
    sg::cuda::StreamGuard guard(a.get(), 0);
    sg::Tensor x = sg::zeros({1000, 1000}, o);
    freed = x.data_ptr();
  }
  {
    sg::cuda::StreamGuard guard(b.get(), 0);
    const sg::Tensor y = sg::zeros({1000, 1000}, o);
    EXPECT_NE(y.data_ptr(), freed) << "stream b took a block that stream a freed";
  }
  {
    sg::cuda::StreamGuard guard(a.get(), 0);
    const sg::Tensor z = sg::zeros({1000, 1000}, o);
    EXPECT_EQ(z.data_ptr(), freed) << "stream a did not get its own block back";
  }
}

TEST(StreamOrderedAllocator, RecordStreamHoldsABlockUntilTheOtherStreamIsDone) {
  SKIP_WITHOUT_GPU();
  Stream a, b;
  const sg::TensorOptions o = on_gpu(sg::kFloat32);
  const sg::Tensor values = sg::randn({512, 512}, o);
  sg::cuda::synchronize();
  // Blocks of this size cached for both streams first, so that nothing below calls cudaMalloc
  // while stream b is held (a device allocation may order the streams).
  {
    sg::cuda::StreamGuard guard(a.get(), 0);
    const sg::Tensor for_x = sg::Tensor::empty({512, 512}, o), for_z = sg::Tensor::empty({512, 512}, o);
  }
  {
    sg::cuda::StreamGuard guard(b.get(), 0);
    const sg::Tensor for_y = sg::Tensor::empty({512, 512}, o);
  }
  sg::Tensor x, y;
  {
    sg::cuda::StreamGuard guard(a.get(), 0);
    x = values * 1.0;  // x's block belongs to stream a
  }
  a.synchronize();
  void* const x_block = x.data_ptr();
  StreamGate gate(b.get());  // stream b waits at the gate: y is not computed yet
  {
    sg::cuda::StreamGuard guard(b.get(), 0);
    y = x * 2.0;
  }
  sg::cuda::record_stream(x, b.get());
  x = sg::Tensor();  // freed while stream b has still to read it
  {
    sg::cuda::StreamGuard guard(a.get(), 0);
    sg::Tensor z = sg::full({512, 512}, 1e30, o);  // would overwrite x if it got x's block
    EXPECT_NE(z.data_ptr(), x_block) << "x's block was handed out before stream b read it";
    a.synchronize();
  }
  gate.release();
  b.synchronize();
  EXPECT_EQ(sg::sum(sg::abs(y - values * 2.0)).item(), 0.0);
  // Once stream b is past the event, the block is stream a's to reuse.
  {
    sg::cuda::StreamGuard guard(a.get(), 0);
    const sg::Tensor again = sg::zeros({512, 512}, o);
    EXPECT_EQ(again.data_ptr(), x_block);
  }
}

TEST(StreamOrderedAllocator, RecordStreamNamesItsErrors) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(sgtest::message_of([] { sg::cuda::record_stream(sg::Tensor(), nullptr); }),
            "cuda::record_stream: the tensor is undefined");
  EXPECT_EQ(sgtest::message_of([] { sg::cuda::record_stream(sg::zeros({2}), nullptr); }),
            "cuda::record_stream: expected a cuda tensor, got one on cpu");
}

#endif  // SG_WITH_CUDA

}  // namespace
