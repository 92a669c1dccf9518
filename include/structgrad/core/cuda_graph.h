// CUDA graphs: a training step's device work recorded once and replayed with one launch, as
// at::cuda::CUDAGraph and torch.cuda.graph do. docs/graphs.md describes the rules.
#pragma once

#include <functional>
#include <memory>

#include <structgrad/core/types.h>

struct CUstream_st;

namespace sg::detail::cuda {
struct GraphState;
}

namespace sg::cuda {

/// A captured sequence of device work, replayed with one launch; inputs are static (copy new data
/// into the tensors the step read, then replay). docs/graphs.md has the rules. Example:
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
  /// Waits for the last replay, then runs the captured ops' checks on its results (a Cholesky pivot
  /// that is not positive, a zero on a solve's diagonal), throwing as the eager op would have.
  /// Example: `graph.replay(); graph.check_errors();`
  void check_errors();
  /// Frees the captured work; the graph can capture again.
  void reset();
  /// True once capture has ended and until reset().
  bool has_graph() const;
  /// The stream the graph captures on (and warms up on).
  CUstream_st* stream() const;
  /// The device the graph records work of.
  int device() const;

 private:
  /// Ends a capture that an error cut short, dropping what it recorded.
  void abort_capture();

  std::unique_ptr<detail::cuda::GraphState> state_;
};

/// True while this thread captures work on `device` into a Graph.
bool is_capturing(int device = 0);

}  // namespace sg::cuda
