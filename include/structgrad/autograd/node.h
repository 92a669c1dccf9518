// The tape record. Each recorded op appends one Node to this thread's tape: its inputs'
// edges, the tensors its backward needs (saved, with their storage versions), and the
// backward closure. A record lives as long as a tensor can still reach it; backward()
// walks the records reachable from the loss in reverse creation order (autograd/engine.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <structgrad/core/tensor.h>

namespace sg::autograd {

struct Node;

/// Where the gradient of one input goes: the record that produced it (and which of its
/// outputs), or the leaf that accumulates it. Both empty: the input needs no gradient.
struct Edge {
  std::shared_ptr<Node> node;        ///< the producing record, when the input is not a leaf
  uint32_t output_nr = 0;            ///< which output of `node`
  std::shared_ptr<TensorImpl> leaf;  ///< the leaf, when the input is a parameter
  /// True when the gradient goes somewhere. Example: `if (node->next[0].active()) ...`
  bool active() const { return node != nullptr || leaf != nullptr; }
};

/// What backward must reproduce for each input and output (validated by the engine).
struct TensorMeta {
  Shape shape;          ///< shape of the tensor
  DType dtype;          ///< its dtype
  Device device;        ///< its device
  Structure structure;  ///< its structure tag
  /// The metadata of t. Example: `auto m = sg::autograd::TensorMeta::of(x);`
  static TensorMeta of(const Tensor& t) { return {t.shape(), t.dtype(), t.device(), t.structure()}; }
};

/// What a backward closure receives. grad_outputs[i] already has the structure of output i
/// (the engine projects it), so a backward can rely on G being upper for an Upper output —
/// unless the record reads its gradients through its outputs' structures itself
/// (Node::reads_gradients_through_structure).
struct BackwardContext {
  std::vector<Tensor> grad_outputs;   ///< one upstream gradient per output, projected onto its structure
  std::vector<Tensor> saved;          ///< the tensors record() saved, in order
  std::vector<bool> needs_input_grad;  ///< which inputs want a gradient
  /// True when input `input` wants a gradient (compute only those). Example: `if (ctx.needs(0)) ...`
  bool needs(size_t input) const { return input < needs_input_grad.size() && needs_input_grad[input]; }
};

/// Returns one gradient per input (undefined where not needed).
using BackwardFn = std::function<std::vector<Tensor>(BackwardContext&)>;

/// A tensor a backward needs, with the storage version it had when saved (an in-place write
/// before backward is detected and reported). Example: `node->saved[0].tensor`.
struct SavedTensor {
  Tensor tensor;  ///< detached: holds the storage, never the graph (no reference cycles)
  uint64_t version = 0;  ///< Storage::version at save time
};

struct TapeCounter;

/// One record of the tape: what an op needs to run its backward (see record()).
/// Example: `x.impl().grad_fn->name == "matmul"`.
struct Node {
  std::string name;                     ///< the op's name, used in error messages
  uint64_t sequence = 0;                ///< creation order on this thread's tape
  std::vector<Edge> next;               ///< where each input's gradient goes
  std::vector<TensorMeta> input_meta;   ///< what each input gradient must look like
  std::vector<TensorMeta> output_meta;  ///< what each output looked like
  std::vector<SavedTensor> saved;       ///< tensors the backward reads
  BackwardFn backward;                  ///< the op's backward closure
  bool consumed = false;                ///< set once backward ran without retain_graph
  /// The backward reads each upstream gradient only through its output's structure (matmul:
  /// as a GEMM operand whose descriptor ignores the zero triangle), which is the projection,
  /// so the engine passes the gradients unprojected and saves the copy.
  bool reads_gradients_through_structure = false;
  std::shared_ptr<TapeCounter> counter; ///< this thread's live-record counter (tape_size())

  Node();
  ~Node();  // releases predecessors iteratively: a long chain must not recurse
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
};

/// Number of live records created by this thread (the tape's size). A training loop whose
/// tensors die each step keeps this flat.
int64_t tape_size();

/// True when an op with these inputs must be recorded (grad mode on, some input requires grad).
bool needs_record(const std::vector<Tensor>& inputs);

/// Appends a record for an op: wires the outputs' grad_fn, saves `saved` (detached, with
/// versions) and stores `backward`; returns the record. Call only when needs_record(inputs).
Node& record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
             const std::vector<Tensor>& saved, BackwardFn backward);

/// The engine (autograd/engine.cpp): runs backward from `root` with upstream `gradient`.
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

/// Projects a gradient onto a structure's subspace (Frobenius): Dense → g, Upper → triu(g),
/// Symmetric → (g + gᵀ)/2. The result is tagged with `s`.
Tensor project_gradient(const Tensor& g, Structure s);

}  // namespace sg::autograd
