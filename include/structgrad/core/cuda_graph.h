// CUDA graphs: a training step's device work recorded once and replayed with one launch, as
// at::cuda::CUDAGraph and torch.cuda.graph do. docs/graphs.md describes the rules.
#pragma once

#include <functional>
#include <memory>

#include <structgrad/core/types.h>

struct CUstream_st;

namespace sg::cuda {

/// A captured sequence of device work, replayed with one launch. Memory the captured work
/// allocates comes from the graph's own pool, so tensors made during capture (the loss, the
/// gradients) keep their addresses, and every replay writes them again. Inputs are static: copy new
/// data into the tensors the step read during capture, then replay.
/// Example:
///   sg::cuda::Graph graph;
///   graph.capture([&] { opt.zero_grad(); loss = model(x); loss.backward(); opt.step(); });
///   for (const auto& batch : loader) { x.copy_(batch[0]); graph.replay(); }
class Graph {
 public:
  /// An empty graph for work on `device`.
  explicit Graph(int device = 0);
  /// Waits for the graph's last replay, then frees it.
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// Runs `step` `warmup` times on the graph's stream (so that every plan, handle and pool of the
  /// step exists), then captures one more call. What `step` does in the captured call is not run
  /// until replay(). Example: `graph.capture(step);`
  void capture(const std::function<void()>& step, int warmup = 3);
  /// The low-level pair of at::cuda::CUDAGraph: this thread's work on the device between the two
  /// calls is captured, on the graph's stream. Warm up under
  /// `sg::cuda::StreamGuard guard(graph.stream(), device)` first. Example: `g.capture_begin(); step(); g.capture_end();`
  void capture_begin();
  void capture_end();
  /// Launches the captured work on this thread's current stream (the library stream, or a
  /// StreamGuard's). Refused when something the captured work depends on has changed since capture
  /// (an optimizer's learning rate, say). Example: `graph.replay();`
  void replay();
  /// Waits for the last replay, then throws the first failed check of the captured ops (a Cholesky
  /// pivot that is not positive, a zero on a solve's diagonal), as the eager op would have.
  /// Example: `graph.replay(); if (step % 100 == 0) graph.check_errors();`
  void check_errors();
  /// Frees the captured work; the graph can capture again.
  void reset();
  /// True once capture has ended and until reset().
  bool has_graph() const;
  /// The stream the graph captures on (and warms up on).
  CUstream_st* stream() const;
  /// The device the graph records work of.
  int device() const;

  struct State;  ///< internal

 private:
  std::unique_ptr<State> state_;
};

/// True while this thread captures work on `device` into a Graph.
bool is_capturing(int device = 0);

}  // namespace sg::cuda

namespace sg::detail {
/// True while this thread captures work on `device` (a CUDA device) into a sg::cuda::Graph.
bool capturing(Device device);
/// Throws, naming `op`, while this thread captures work on `device`: `op` does something a graph
/// cannot replay (reads device memory back to the host, draws host-seeded random numbers, ...).
void refuse_under_capture(const char* op, Device device, const char* reason);
/// Under capture: runs `check` (an op's check of its own results, which reads them back) when the
/// graph's user calls Graph::check_errors(), after the replays, instead of now.
void defer_check(Device device, std::function<void()> check);
/// Under capture: runs `check` before each replay; it throws when a host-side value the captured
/// work was recorded with has changed since.
void check_before_replay(Device device, std::function<void()> check);
}  // namespace sg::detail
