// sg::cuda::Graph: stream capture into a CUDA graph and its replay.
//
// Each graph captures on a stream of its own, and that stream is its private memory pool: the
// caching allocator keys free lists by (stream, size), and nothing but the graph allocates on its
// stream. So blocks the captured work frees are handed out again only later in the same capture, in
// capture order, and blocks alive after capture (the loss, the gradients) keep their addresses for
// every replay. Graph streams are never destroyed: a finished graph's stream, with its cached blocks,
// goes to the next graph of the device (empty_cache() returns the blocks to the driver).
//
// Capture runs in cudaStreamCaptureModeThreadLocal, so other threads may keep working on other
// streams. The allocator calls cudaMalloc in relaxed mode while this thread captures and leaves
// events and the driver alone (cuda/allocator.cpp), and keeps a live graph's pool from empty_cache.
// Ops that would read back to the host refuse to run (refuse_under_capture), and the capture can
// then not end with a graph; ops whose check of their results reads back defer the check to
// Graph::check_errors (defer_check); host-side values that captured kernels received by value are
// checked before each replay (check_before_replay).
#include <structgrad/core/cuda_graph.h>

#include <cuda_runtime.h>

#include <array>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include <structgrad/core/cuda_runtime_api.h>
#include <structgrad/core/error.h>
#include "core/capture.h"
#include "cuda/allocator.h"
#include "cuda/check.h"
#include "cuda/runtime.h"

namespace sg::detail::cuda {

struct GraphState {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t ordered = nullptr;   // orders the graph's stream against the stream it was entered from
  cudaEvent_t replayed = nullptr;  // recorded after each replay
  bool replayed_once = false;
  bool capturing = false;
  std::string refused;  // the first refused op's message: the capture cannot end with a graph
  std::unique_ptr<sg::cuda::StreamGuard> guard;  // the graph's stream made current while capturing
  cudaStream_t outer = nullptr;                  // the stream that was current before
  std::vector<std::function<void()>> deferred_checks;
  std::vector<std::function<void()>> replay_checks;
};

namespace {

/// The graph this thread is capturing into, per device (null when none).
thread_local std::array<GraphState*, kMaxDevices> active_capture{};

/// Streams of finished graphs, per device, for the next graph (never destroyed: see the top).
struct IdleStreams {
  std::mutex mutex;
  std::array<std::vector<cudaStream_t>, kMaxDevices> streams;
};
IdleStreams& idle_streams() {
  static auto* idle = new IdleStreams();
  return *idle;
}

cudaStream_t take_graph_stream(int device) {
  IdleStreams& idle = idle_streams();
  {
    std::lock_guard<std::mutex> lock(idle.mutex);
    auto& list = idle.streams[static_cast<size_t>(device)];
    if (!list.empty()) {
      const cudaStream_t s = list.back();
      list.pop_back();
      return s;
    }
  }
  DeviceGuard guard(device);
  cudaStream_t s = nullptr;
  SG_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

void give_back_graph_stream(int device, cudaStream_t s) {
  IdleStreams& idle = idle_streams();
  std::lock_guard<std::mutex> lock(idle.mutex);
  idle.streams[static_cast<size_t>(device)].push_back(s);
}

GraphState* capture_of(Device device) {
  if (!device.is_cuda() || device.index < 0 || device.index >= kMaxDevices) return nullptr;
  return active_capture[static_cast<size_t>(device.index)];
}

}  // namespace

bool capturing(int device) {
  return device >= 0 && device < kMaxDevices && active_capture[static_cast<size_t>(device)] != nullptr;
}

}  // namespace sg::detail::cuda

namespace sg::detail {

bool capturing(Device device) { return cuda::capture_of(device) != nullptr; }

void refuse_under_capture(const char* op, Device device, const char* reason) {
  cuda::GraphState* state = cuda::capture_of(device);
  if (state == nullptr) return;
  const std::string message = detail::concat(op, ": cannot run while a CUDA graph captures work on ", device,
                                             ": it ", reason, "; do it outside the captured step");
  if (state->refused.empty()) state->refused = message;
  SG_FAIL(message);
}

void defer_check(Device device, std::function<void()> check) {
  cuda::GraphState* state = cuda::capture_of(device);
  SG_CHECK(state != nullptr, "defer_check: no capture in progress on ", device);
  state->deferred_checks.push_back(std::move(check));
}

void check_before_replay(Device device, std::function<void()> check) {
  cuda::GraphState* state = cuda::capture_of(device);
  SG_CHECK(state != nullptr, "check_before_replay: no capture in progress on ", device);
  state->replay_checks.push_back(std::move(check));
}

}  // namespace sg::detail

namespace sg::cuda {

using detail::cuda::DeviceGuard;

namespace {

/// Makes `to` wait for the work queued on `from` so far.
void order_after(cudaStream_t to, cudaStream_t from, cudaEvent_t event) {
  if (to == from) return;
  SG_CUDA_CHECK(cudaEventRecord(event, from));
  SG_CUDA_CHECK(cudaStreamWaitEvent(to, event, 0));
}

}  // namespace

Graph::Graph(int device) : state_(std::make_unique<detail::cuda::GraphState>()) {
  detail::cuda::check_device(device);
  state_->device = device;
  DeviceGuard guard(device);
  state_->stream = detail::cuda::take_graph_stream(device);
  SG_CUDA_CHECK(cudaEventCreateWithFlags(&state_->ordered, cudaEventDisableTiming));
  SG_CUDA_CHECK(cudaEventCreateWithFlags(&state_->replayed, cudaEventDisableTiming));
  detail::cuda::set_graph_stream(device, state_->stream, true);
}

Graph::~Graph() {
  if (!state_) return;
  try {
    if (state_->capturing) abort_capture();
    reset();
    DeviceGuard guard(state_->device);
    SG_CUDA_CHECK(cudaStreamSynchronize(state_->stream));
    SG_CUDA_CHECK(cudaEventDestroy(state_->ordered));
    SG_CUDA_CHECK(cudaEventDestroy(state_->replayed));
    detail::cuda::set_graph_stream(state_->device, state_->stream, false);
  } catch (const std::exception& e) {  // a destructor must not throw
    std::fprintf(stderr, "structgrad: cuda::Graph: %s\n", e.what());
  }
  detail::cuda::give_back_graph_stream(state_->device, state_->stream);
}

bool Graph::has_graph() const { return state_->exec != nullptr; }
CUstream_st* Graph::stream() const { return state_->stream; }
int Graph::device() const { return state_->device; }
bool is_capturing(int device) { return detail::cuda::capturing(device); }

void Graph::abort_capture() {
  cudaGraph_t partial = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(state_->stream, &partial);
  if (partial) (void)cudaGraphDestroy(partial);
  if (ended != cudaSuccess) (void)cudaGetLastError();  // the capture's own error, reported by the caller
  detail::cuda::active_capture[static_cast<size_t>(state_->device)] = nullptr;
  state_->capturing = false;
  state_->refused.clear();
  state_->guard.reset();
  state_->deferred_checks.clear();
  state_->replay_checks.clear();
}

void Graph::capture(const std::function<void()>& step, int warmup) {
  SG_CHECK(warmup >= 0, "Graph::capture: warmup must be >= 0, got ", warmup);
  SG_CHECK(!state_->capturing && !has_graph(), "Graph::capture: the graph already holds captured work; reset() it first");
  if (warmup > 0) {
    DeviceGuard device_guard(state_->device);
    const cudaStream_t outer = detail::cuda::stream(state_->device);
    order_after(state_->stream, outer, state_->ordered);
    try {
      StreamGuard on_graph_stream(state_->stream, state_->device);
      for (int i = 0; i < warmup; ++i) step();
    } catch (...) {
      order_after(outer, state_->stream, state_->ordered);
      throw;
    }
    order_after(outer, state_->stream, state_->ordered);
  }
  capture_begin();
  try {
    step();
  } catch (...) {
    abort_capture();  // so that the stream and this thread are usable again
    throw;
  }
  capture_end();
}

void Graph::capture_begin() {
  SG_CHECK(!state_->capturing && !has_graph(),
           "Graph::capture_begin: the graph already holds captured work; reset() it first");
  SG_CHECK(!is_capturing(state_->device), "Graph::capture_begin: this thread already captures work on cuda:",
           state_->device, " into another graph");
  DeviceGuard device_guard(state_->device);
  state_->outer = detail::cuda::stream(state_->device);
  order_after(state_->stream, state_->outer, state_->ordered);
  state_->guard = std::make_unique<StreamGuard>(state_->stream, state_->device);
  const cudaError_t begun = cudaStreamBeginCapture(state_->stream, cudaStreamCaptureModeThreadLocal);
  if (begun != cudaSuccess) {
    state_->guard.reset();
    SG_CUDA_CHECK(begun);
  }
  state_->capturing = true;
  detail::cuda::active_capture[static_cast<size_t>(state_->device)] = state_.get();
}

void Graph::capture_end() {
  SG_CHECK(state_->capturing, "Graph::capture_end: no capture in progress (call capture_begin first)");
  SG_CHECK(detail::cuda::active_capture[static_cast<size_t>(state_->device)] == state_.get(),
           "Graph::capture_end: the capture was begun on another thread");
  DeviceGuard device_guard(state_->device);
  if (!state_->refused.empty()) {
    const std::string refused = state_->refused;
    abort_capture();
    SG_FAIL("Graph::capture_end: the capture recorded no graph, because an op refused to run in it: ", refused);
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(state_->stream, &graph);
  if (ended != cudaSuccess || graph == nullptr) {
    if (graph) (void)cudaGraphDestroy(graph);
    abort_capture();
    SG_FAIL("Graph::capture_end: the capture failed with ", cudaGetErrorName(ended), " (", cudaGetErrorString(ended),
            "); a call that cannot be captured ran while capturing");
  }
  detail::cuda::active_capture[static_cast<size_t>(state_->device)] = nullptr;
  state_->capturing = false;
  state_->guard.reset();
  state_->graph = graph;
  SG_CUDA_CHECK(cudaGraphInstantiate(&state_->exec, graph, 0));
  order_after(state_->outer, state_->stream, state_->ordered);
}

void Graph::replay() {
  SG_CHECK(has_graph(), "Graph::replay: nothing has been captured");
  SG_CHECK(!is_capturing(state_->device), "Graph::replay: cannot replay a graph while capturing another on cuda:",
           state_->device);
  for (const auto& check : state_->replay_checks) check();
  DeviceGuard device_guard(state_->device);
  const cudaStream_t s = detail::cuda::stream(state_->device);
  SG_CUDA_CHECK(cudaGraphLaunch(state_->exec, s));
  SG_CUDA_CHECK(cudaEventRecord(state_->replayed, s));
  state_->replayed_once = true;
}

void Graph::check_errors() {
  SG_CHECK(!is_capturing(state_->device), "Graph::check_errors: cannot check while capturing on cuda:",
           state_->device);
  if (!state_->replayed_once) return;
  {
    DeviceGuard device_guard(state_->device);
    SG_CUDA_CHECK(cudaEventSynchronize(state_->replayed));
  }
  for (const auto& check : state_->deferred_checks) check();
}

void Graph::reset() {
  SG_CHECK(!state_->capturing, "Graph::reset: a capture is in progress");
  DeviceGuard device_guard(state_->device);
  if (state_->replayed_once) SG_CUDA_CHECK(cudaEventSynchronize(state_->replayed));
  state_->replayed_once = false;
  state_->deferred_checks.clear();
  state_->replay_checks.clear();
  if (state_->exec) SG_CUDA_CHECK(cudaGraphExecDestroy(state_->exec));
  state_->exec = nullptr;
  if (state_->graph) SG_CUDA_CHECK(cudaGraphDestroy(state_->graph));
  state_->graph = nullptr;
}

}  // namespace sg::cuda
