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

#include "../core/tensor.h"

namespace sg::autograd {

struct Node;

/// Where the gradient of one input goes: the record that produced it (and which of its
/// outputs), or the leaf that accumulates it. Both empty: the input needs no gradient.
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t output_nr = 0;
  std::shared_ptr<TensorImpl> leaf;
  bool active() const { return node != nullptr || leaf != nullptr; }
};

/// What backward must reproduce for each input and output (validated by the engine).
struct TensorMeta {
  Shape shape;
  DType dtype;
  Device device;
  Structure structure;
  static TensorMeta of(const Tensor& t) { return {t.shape(), t.dtype(), t.device(), t.structure()}; }
};

/// What a backward closure receives. grad_outputs[i] already has the structure of output i
/// (the engine projects it), so a backward can rely on G being upper for an Upper output.
struct BackwardContext {
  std::vector<Tensor> grad_outputs;
  std::vector<Tensor> saved;
  std::vector<bool> needs_input_grad;
  bool needs(size_t input) const { return input < needs_input_grad.size() && needs_input_grad[input]; }
};

/// Returns one gradient per input (undefined where not needed).
using BackwardFn = std::function<std::vector<Tensor>(BackwardContext&)>;

struct SavedTensor {
  Tensor tensor;  // detached: holds the storage, never the graph (no reference cycles)
  uint64_t version = 0;
};

struct TapeCounter;

struct Node {
  std::string name;
  uint64_t sequence = 0;  // creation order on this thread's tape
  std::vector<Edge> next;
  std::vector<TensorMeta> input_meta;
  std::vector<TensorMeta> output_meta;
  std::vector<SavedTensor> saved;
  BackwardFn backward;
  bool consumed = false;
  std::shared_ptr<TapeCounter> counter;

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
/// versions) and stores `backward`. Call only when needs_record(inputs).
void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            const std::vector<Tensor>& saved, BackwardFn backward);

/// The engine (autograd/engine.cpp): runs backward from `root` with upstream `gradient`.
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

/// Projects a gradient onto a structure's subspace (Frobenius): Dense → g, Upper → triu(g),
/// Symmetric → (g + gᵀ)/2. The result is tagged with `s`.
Tensor project_gradient(const Tensor& g, Structure s);

}  // namespace sg::autograd
