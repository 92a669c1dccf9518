// The tape and its reverse walk. Records are appended by ops through record(); backward
// collects the records reachable from the loss, runs them in reverse creation order
// (a max-heap on the sequence number: a record's inputs always predate it), sums the
// gradients reaching each record, projects them onto each tensor's structure, validates
// every returned gradient, and accumulates leaf gradients. Iterative throughout.
#include <algorithm>
#include <atomic>
#include <queue>
#include <unordered_map>

#include <structgrad/autograd/grad_mode.h>
#include <structgrad/autograd/node.h>

#include "autograd/gradient_math.h"

namespace sg::autograd {

// ---- grad mode --------------------------------------------------------------------------

namespace {
thread_local bool tls_grad_mode = true;
}

bool grad_mode_enabled() { return tls_grad_mode; }
void set_grad_mode(bool enabled) { tls_grad_mode = enabled; }
NoGradGuard::NoGradGuard() : previous_(tls_grad_mode) { tls_grad_mode = false; }
NoGradGuard::~NoGradGuard() { tls_grad_mode = previous_; }

// ---- the tape ---------------------------------------------------------------------------

struct TapeCounter {
  std::atomic<int64_t> live{0};
};

namespace {
struct ThreadTape {
  std::shared_ptr<TapeCounter> counter = std::make_shared<TapeCounter>();
  uint64_t next_sequence = 1;
};
thread_local ThreadTape tls_tape;

// Predecessors whose last owner was a dying Node are released here, one at a time, so
// that destroying a chain of a million records does not recurse a million frames deep.
thread_local std::vector<std::shared_ptr<Node>> tls_release_queue;
thread_local bool tls_releasing = false;
}  // namespace

int64_t tape_size() { return tls_tape.counter->live.load(); }

Node::Node() : sequence(tls_tape.next_sequence++), counter(tls_tape.counter) { counter->live++; }

Node::~Node() {
  counter->live--;
  for (Edge& e : next)
    if (e.node) tls_release_queue.push_back(std::move(e.node));
  saved.clear();
  backward = nullptr;
  if (tls_releasing) return;
  tls_releasing = true;
  while (!tls_release_queue.empty()) {
    std::shared_ptr<Node> n = std::move(tls_release_queue.back());
    tls_release_queue.pop_back();
    n.reset();  // may push more predecessors; the loop takes them
  }
  tls_releasing = false;
}

bool needs_record(const std::vector<Tensor>& inputs) {
  if (!grad_mode_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Node& record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
             const std::vector<Tensor>& saved, BackwardFn backward) {
  auto node = std::make_shared<Node>();
  node->name = name;
  node->next.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    Edge e;
    if (in.defined() && in.requires_grad()) {
      if (in.impl().grad_fn) {
        e.node = in.impl().grad_fn;
        e.output_nr = in.impl().output_nr;
      } else {
        e.leaf = in.impl_ptr();
      }
    }
    node->next.push_back(std::move(e));
    node->input_meta.push_back(in.defined() ? TensorMeta::of(in) : TensorMeta{});
  }
  for (const Tensor& s : saved)
    node->saved.push_back({s.defined() ? s.detach() : Tensor(), s.defined() ? s.impl().storage->version.load() : 0});
  node->backward = std::move(backward);
  for (size_t i = 0; i < outputs.size(); ++i) {
    node->output_meta.push_back(TensorMeta::of(outputs[i]));
    outputs[i].impl().grad_fn = node;
    outputs[i].impl().output_nr = static_cast<uint32_t>(i);
  }
  return *node;
}

Tensor project_gradient(const Tensor& g, Structure s) {
  if (g.structure() == s) return g;
  return gradient_math().project(g, s);
}

namespace {

void check_gradient(const std::string& op, const char* what, size_t index, const Tensor& g, const TensorMeta& m) {
  SG_CHECK(g.defined(), "backward of '", op, "': gradient for ", what, " ", index, " is missing");
  SG_CHECK(g.shape() == m.shape, "backward of '", op, "': gradient for ", what, " ", index, " has shape ",
           g.shape(), ", expected ", m.shape);
  SG_CHECK(g.dtype() == m.dtype, "backward of '", op, "': gradient for ", what, " ", index, " has dtype ",
           g.dtype(), ", expected ", m.dtype);
  SG_CHECK(g.device() == m.device, "backward of '", op, "': gradient for ", what, " ", index, " is on ",
           g.device(), ", expected ", m.device);
}

/// The gradient of a leaf of structure `s` after adding g to `current` (undefined: none yet).
Tensor accumulated(Structure s, const Tensor& current, const Tensor& g) {
  Tensor projected = project_gradient(g, s);
  if (!current.defined()) return projected;
  return project_gradient(gradient_math().add(current, projected), s);
}

void accumulate_leaf(TensorImpl& leaf, const Tensor& g) {
  leaf.grad = accumulated(leaf.structure, leaf.grad ? Tensor(leaf.grad) : Tensor(), g).impl_ptr();
}

/// Leaf gradients of one backward, summed in arrival order but written into the leaves only
/// once the whole walk has succeeded: a backward that throws leaves every .grad() as it was.
class PendingLeafGrads {
 public:
  void add(const std::shared_ptr<TensorImpl>& leaf, const Tensor& g) {
    auto [it, fresh] = index_.emplace(leaf.get(), grads_.size());
    if (fresh) grads_.emplace_back(leaf, leaf->grad ? Tensor(leaf->grad) : Tensor());
    Tensor& current = grads_[it->second].second;
    current = accumulated(leaf->structure, current, g);
  }
  void commit() {
    for (auto& [leaf, g] : grads_) leaf->grad = g.impl_ptr();
  }

 private:
  std::unordered_map<TensorImpl*, size_t> index_;
  std::vector<std::pair<std::shared_ptr<TensorImpl>, Tensor>> grads_;
};

struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence < b->sequence; }
};

}  // namespace

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  SG_CHECK(root.defined(), "backward: called on an undefined tensor");
  SG_CHECK(root.requires_grad(),
           "backward: the tensor does not require grad (no input of the ops that produced it requires grad)");
  Tensor seed = gradient;
  if (!seed.defined()) {
    SG_CHECK(root.numel() == 1, "backward: expected a scalar loss, got shape ", root.shape(),
             "; pass an explicit gradient of that shape for a non-scalar tensor");
    seed = Tensor::empty(root.shape(), TensorOptions().dtype(root.dtype()).device(root.device()));
    seed.fill_(1.0);
  } else {
    SG_CHECK(seed.shape() == root.shape(), "backward: the explicit gradient has shape ", seed.shape(), ", expected ",
             root.shape());
    SG_CHECK(seed.dtype() == root.dtype(), "backward: the explicit gradient has dtype ", seed.dtype(), ", expected ",
             root.dtype());
    SG_CHECK(seed.device() == root.device(), "backward: the explicit gradient is on ", seed.device(), ", expected ",
             root.device());
  }
  NoGradGuard no_grad;
  if (!root.impl().grad_fn) {
    accumulate_leaf(root.impl(), seed);
    return;
  }

  std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
  std::unordered_map<Node*, std::vector<Tensor>> pending;
  std::vector<std::shared_ptr<Node>> keep_alive;  // records stay valid while we walk them
  PendingLeafGrads leaf_grads;

  auto deliver = [&](const std::shared_ptr<Node>& node, uint32_t slot, const Tensor& g) {
    auto it = pending.find(node.get());
    if (it == pending.end()) {
      it = pending.emplace(node.get(), std::vector<Tensor>(node->output_meta.size())).first;
      keep_alive.push_back(node);
      ready.push(node.get());
    }
    Tensor& acc = it->second.at(slot);
    acc = acc.defined() ? gradient_math().add(acc, g) : g;
  };
  deliver(root.impl().grad_fn, root.impl().output_nr, seed);

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    SG_CHECK(!node->consumed, "backward: the record of '", node->name,
             "' was consumed by an earlier backward(); call backward(retain_graph=true) the first time "
             "to run backward through the same graph twice");
    BackwardContext ctx;
    std::vector<Tensor> grads = std::move(pending[node]);
    pending.erase(node);
    for (size_t i = 0; i < grads.size(); ++i) {
      const TensorMeta& m = node->output_meta[i];
      if (!grads[i].defined()) {
        grads[i] = Tensor::empty(m.shape, TensorOptions().dtype(m.dtype).device(m.device));
        grads[i].fill_(0.0);
      }
      if (!node->reads_gradients_through_structure) grads[i] = project_gradient(grads[i], m.structure);
    }
    ctx.grad_outputs = std::move(grads);
    for (const SavedTensor& s : node->saved) {
      if (s.tensor.defined())
        SG_CHECK(s.tensor.impl().storage->version.load() == s.version, "backward of '", node->name,
                 "': a tensor saved for the gradient was modified in place after the op ran");
      ctx.saved.push_back(s.tensor);
    }
    for (const Edge& e : node->next) ctx.needs_input_grad.push_back(e.active());

    std::vector<Tensor> input_grads = node->backward(ctx);
    SG_CHECK(input_grads.size() == node->next.size(), "backward of '", node->name, "' returned ",
             input_grads.size(), " gradients for ", node->next.size(), " inputs");
    for (size_t i = 0; i < node->next.size(); ++i) {
      const Edge& e = node->next[i];
      if (!e.active()) continue;
      check_gradient(node->name, "input", i, input_grads[i], node->input_meta[i]);
      if (e.leaf) leaf_grads.add(e.leaf, input_grads[i]);
      else deliver(e.node, e.output_nr, input_grads[i]);
    }
    if (!retain_graph) {
      node->backward = nullptr;
      node->saved.clear();
      node->consumed = true;
    }
  }
  leaf_grads.commit();
}

}  // namespace sg::autograd
