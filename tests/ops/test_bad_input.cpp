// Bad input to every public op and constructor, table-driven over devices:
//  - kBadCalls: wrong shapes and ranks, non-square or invariant-breaking input to the
//    structured types, mixed dtypes and devices, undefined tensors, autograd misuse, bad
//    factory arguments. Each row must throw sg::Error with one exact message (the same on
//    every device but for the devices' names) and leave every input as it was: values bit
//    for bit, storage version, structure tag, graph and gradient.
//  - kEmptyCases: 0×0, 0×n and n×0 tensors through every op that supports them give results
//    of the right shape, structure and values (an empty sum is 0).
//  - Non-finite values: NaN and ±Inf propagate through elementwise ops and reductions as IEEE
//    arithmetic says, and never break a structure's invariant (entries a structure ignores stay
//    exact zeros). Through the products and their backward: test_matmul.cpp.
// The CUDA instances skip where no GPU exists; they run on the GPU machine.
#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <sstream>

// The host out-of-memory test asks for 4 PiB; under AddressSanitizer malloc must then return
// null (as glibc does) instead of aborting the process.
#if defined(__SANITIZE_ADDRESS__)
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif

namespace {

using S = sg::Structure;
using sgtest::same_ieee;
using sgtest::structured_values;
using sgtest::tagged;
using Inputs = std::vector<sg::Tensor>;
using Make = std::function<sg::Tensor(const sg::Device&)>;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

sg::Device other_device(const sg::Device& d) { return d.is_cpu() ? sg::kCUDA : sg::kCPU; }
sg::TensorOptions on(const sg::Device& d, sg::DType t = sg::kFloat32) { return sg::TensorOptions().dtype(t).device(d); }

std::string with_devices(std::string message, const sg::Device& dev) {
  for (const auto& [key, value] : {std::pair<std::string, std::string>{"{dev}", dev.str()},
                                   std::pair<std::string, std::string>{"{other}", other_device(dev).str()}}) {
    for (size_t at = message.find(key); at != std::string::npos; at = message.find(key, at + value.size()))
      message.replace(at, key.size(), value);
  }
  return message;
}

// ---- what "unchanged" means: everything a caller can observe ---------------------------

std::vector<uint64_t> bits_of(const sg::Tensor& t) {
  std::vector<uint64_t> out;
  for (double v : t.to_vector()) {
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    out.push_back(b);
  }
  return out;
}

std::string snapshot(const sg::Tensor& t) {
  if (!t.defined()) return "undefined";
  std::ostringstream s;
  s << sg::shape_str(t.shape()) << " " << t.dtype() << " " << t.device() << " " << t.structure() << ", version "
    << t.impl().storage->version.load() << ", data " << t.data_ptr() << (t.requires_grad() ? ", requires grad" : "");
  if (!t.is_leaf()) s << ", made by '" << t.impl().grad_fn->name << "' " << t.impl().grad_fn.get();
  s << ", values" << std::hex;
  for (uint64_t b : bits_of(t)) s << " " << b;
  s << std::dec;
  const sg::Tensor g = t.grad();
  if (g.defined()) s << ", grad {" << snapshot(g) << "}";
  return s.str();
}

// ---- inputs ----------------------------------------------------------------------------

Make randn_(sg::Shape shape, sg::DType dtype = sg::kFloat32) {
  return [=](const sg::Device& d) { return sg::randn(shape, on(d, dtype)); };
}
Make values(std::vector<std::vector<double>> rows, sg::DType dtype = sg::kFloat32) {
  return [=](const sg::Device& d) {
    std::vector<double> flat;
    for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
    const int64_t cols = rows.empty() ? 0 : static_cast<int64_t>(rows[0].size());
    return sg::from_vector(flat, {static_cast<int64_t>(rows.size()), cols}, on(d, dtype));
  };
}
Make upper(int64_t n, sg::DType dtype = sg::kFloat32) {
  return [=](const sg::Device& d) -> sg::Tensor { return sg::UpperTriangular::randn(n, on(d, dtype)); };
}
Make symmetric(int64_t n, sg::DType dtype = sg::kFloat32) {
  return [=](const sg::Device& d) -> sg::Tensor { return sg::Symmetric::randn(n, on(d, dtype)); };
}
Make leaf(Make m) {
  return [=](const sg::Device& d) { return m(d).requires_grad_(); };
}
Make on_other(Make m) {
  return [=](const sg::Device& d) { return m(other_device(d)); };
}
Make undefined() {
  return [](const sg::Device&) { return sg::Tensor(); };
}
Make scalar0d() {  // a 0-d tensor
  return [](const sg::Device& d) { return sg::sum(sg::ones({2}, on(d))); };
}
std::function<Inputs(const sg::Device&)> make(std::vector<Make> makes) {
  return [=](const sg::Device& d) {
    Inputs out;
    for (const Make& m : makes) out.push_back(m(d));
    return out;
  };
}

// ---- the bad calls ---------------------------------------------------------------------

struct BadCall {
  std::string name;                                // test-name suffix
  std::function<Inputs(const sg::Device&)> inputs;
  std::function<void(Inputs&)> call;               // must throw sg::Error
  std::string message;                             // exact; {dev} and {other} name the devices
  bool two_devices = false;                        // needs a GPU beside the CPU
};

using Unary = std::function<sg::Tensor(const sg::Tensor&)>;
using Binary = std::function<sg::Tensor(const sg::Tensor&, const sg::Tensor&)>;

std::vector<std::pair<std::string, Unary>> unary_ops() {
  return {
      {"neg", [](const sg::Tensor& x) { return sg::neg(x); }},
      {"exp", [](const sg::Tensor& x) { return sg::exp(x); }},
      {"log", [](const sg::Tensor& x) { return sg::log(x); }},
      {"sqrt", [](const sg::Tensor& x) { return sg::sqrt(x); }},
      {"square", [](const sg::Tensor& x) { return sg::square(x); }},
      {"abs", [](const sg::Tensor& x) { return sg::abs(x); }},
      {"tanh", [](const sg::Tensor& x) { return sg::tanh(x); }},
      {"sigmoid", [](const sg::Tensor& x) { return sg::sigmoid(x); }},
      {"relu", [](const sg::Tensor& x) { return sg::relu(x); }},
      {"leaky_relu", [](const sg::Tensor& x) { return sg::leaky_relu(x, 0.1); }},
      {"softplus", [](const sg::Tensor& x) { return sg::softplus(x); }},
      {"step", [](const sg::Tensor& x) { return sg::step(x); }},
      {"pow", [](const sg::Tensor& x) { return sg::pow(x, 3.0); }},
  };
}

std::vector<std::pair<std::string, Binary>> binary_ops() {
  return {
      {"add", [](const sg::Tensor& a, const sg::Tensor& b) { return a + b; }},
      {"sub", [](const sg::Tensor& a, const sg::Tensor& b) { return a - b; }},
      {"mul", [](const sg::Tensor& a, const sg::Tensor& b) { return a * b; }},
      {"div", [](const sg::Tensor& a, const sg::Tensor& b) { return a / b; }},
      {"matmul", [](const sg::Tensor& a, const sg::Tensor& b) { return sg::matmul(a, b); }},
      {"linear", [](const sg::Tensor& a, const sg::Tensor& b) { return sg::linear(a, b); }},
      {"mse_loss", [](const sg::Tensor& a, const sg::Tensor& b) { return sg::mse_loss(a, b); }},
  };
}

std::vector<BadCall> bad_calls() {
  std::vector<BadCall> rows;
  auto add = [&](BadCall row) { rows.push_back(std::move(row)); };
  const std::string dtypes = "float32 and float64";

  // Every unary op and scalar operator: an undefined operand.
  for (const auto& [name, f] : unary_ops())
    add({name + "_undefined", make({undefined()}), [f = f](Inputs& in) { f(in[0]); },
         name + ": got an undefined tensor"});
  add({"scalar_add_undefined", make({undefined()}), [](Inputs& in) { in[0] + 1.0; }, "add: got an undefined tensor"});
  add({"scalar_rsub_undefined", make({undefined()}), [](Inputs& in) { 1.0 - in[0]; }, "sub: got an undefined tensor"});
  add({"scalar_mul_undefined", make({undefined()}), [](Inputs& in) { 2.0 * in[0]; }, "mul: got an undefined tensor"});
  add({"scalar_rdiv_undefined", make({undefined()}), [](Inputs& in) { 1.0 / in[0]; }, "div: got an undefined tensor"});
  add({"unary_minus_undefined", make({undefined()}), [](Inputs& in) { -in[0]; }, "neg: got an undefined tensor"});

  // Every two-operand op: undefined operands, mixed dtypes, mixed devices.
  for (const auto& [name, f] : binary_ops()) {
    add({name + "_first_undefined", make({undefined(), randn_({2, 2})}), [f = f](Inputs& in) { f(in[0], in[1]); },
         name + ": the first operand is undefined"});
    add({name + "_second_undefined", make({randn_({2, 2}), undefined()}), [f = f](Inputs& in) { f(in[0], in[1]); },
         name + ": the second operand is undefined"});
    add({name + "_mixed_dtypes", make({randn_({2, 2}), randn_({2, 2}, sg::kFloat64)}),
         [f = f](Inputs& in) { f(in[0], in[1]); }, name + ": expected both operands of one dtype, got " + dtypes});
    add({name + "_mixed_devices", make({randn_({2, 2}), on_other(randn_({2, 2}))}),
         [f = f](Inputs& in) { f(in[0], in[1]); }, name + ": expected both operands on one device, got {dev} and {other}",
         true});
  }
  // Elementwise shapes that do not broadcast (also with leaves that require grad).
  for (const auto& [name_, f] : binary_ops()) {
    if (name_ == "matmul" || name_ == "linear" || name_ == "mse_loss") continue;
    const std::string name = name_;
    add({std::string(name) + "_shapes", make({leaf(randn_({2, 5})), randn_({3, 7})}),
         [f](Inputs& in) { f(in[0], in[1]); }, std::string(name) + ": shapes [2, 5] and [3, 7] cannot be broadcast"});
    add({std::string(name) + "_rank3", make({randn_({2, 2, 2}), randn_({3})}), [f](Inputs& in) { f(in[0], in[1]); },
         std::string(name) + ": shapes [2, 2, 2] and [3] cannot be broadcast"});
    add({std::string(name) + "_vectors", make({randn_({3}), randn_({4})}), [f](Inputs& in) { f(in[0], in[1]); },
         std::string(name) + ": shapes [3] and [4] cannot be broadcast"});
    add({std::string(name) + "_empty_vs_3", make({randn_({0}), randn_({3})}), [f](Inputs& in) { f(in[0], in[1]); },
         std::string(name) + ": shapes [0] and [3] cannot be broadcast"});
  }

  // matmul and linear: shapes and ranks.
  auto mm = [](Inputs& in) { sg::matmul(in[0], in[1]); };
  add({"matmul_shapes", make({leaf(randn_({2, 5})), randn_({3, 7})}), mm,
       "matmul: shapes [2, 5] and [3, 7] cannot be multiplied"});
  add({"matmul_batch_shapes", make({randn_({2, 2, 2}), randn_({3, 2, 2})}), mm,
       "matmul: the batch shapes [2] and [3] of shapes [2, 2, 2] and [3, 2, 2] cannot be broadcast"});
  add({"matmul_0d", make({scalar0d(), randn_({2, 2})}), mm,
       "matmul: shapes [] and [2, 2] cannot be multiplied (expected vectors, matrices or batches of matrices)"});
  add({"matmul_vectors", make({randn_({3}), randn_({4})}), mm, "matmul: shapes [3] and [4] cannot be multiplied"});
  add({"matmul_upper_symmetric_sizes", make({upper(3), symmetric(4)}), mm,
       "matmul: shapes [3, 3] and [4, 4] cannot be multiplied"});
  add({"matmul_typed_upper_sizes", make({upper(3), upper(4)}),
       [](Inputs& in) { sg::matmul(sg::UpperTriangular(in[0]), sg::UpperTriangular(in[1])); },
       "matmul: shapes [3, 3] and [4, 4] cannot be multiplied"});
  add({"matmul_empty_inner_mismatch", make({randn_({0, 3}), randn_({0, 3})}), mm,
       "matmul: shapes [0, 3] and [0, 3] cannot be multiplied"});
  add({"linear_shapes", make({randn_({2, 5}), leaf(randn_({3, 4}))}), [](Inputs& in) { sg::linear(in[0], in[1]); },
       "linear: input of shape [2, 5] does not fit weight of shape [3, 4] (expected input [batch, 4])"});
  add({"linear_vector_input", make({randn_({4}), randn_({3, 4})}), [](Inputs& in) { sg::linear(in[0], in[1]); },
       "linear: expected the input to be a matrix or a batch of matrices, got shape [4]"});
  add({"linear_vector_weight", make({randn_({2, 4}), randn_({4})}), [](Inputs& in) { sg::linear(in[0], in[1]); },
       "linear: expected the weight to be a matrix or a batch of matrices, got shape [4]"});
  add({"linear_bias_shape", make({randn_({2, 4}), leaf(upper(4)), leaf(randn_({3}))}),
       [](Inputs& in) { sg::linear(in[0], in[1], in[2]); }, "linear: bias of shape [3] does not fit weight of shape [4, 4]"});
  add({"linear_bias_rank", make({randn_({2, 4}), randn_({3, 4}), randn_({1, 3})}),
       [](Inputs& in) { sg::linear(in[0], in[1], in[2]); }, "linear: bias of shape [1, 3] does not fit weight of shape [3, 4]"});
  add({"linear_bias_dtype", make({randn_({2, 4}), randn_({3, 4}), randn_({3}, sg::kFloat64)}),
       [](Inputs& in) { sg::linear(in[0], in[1], in[2]); }, "linear: bias of dtype float64 but input of dtype float32"});
  add({"linear_bias_device", make({randn_({2, 4}), randn_({3, 4}), on_other(randn_({3}))}),
       [](Inputs& in) { sg::linear(in[0], in[1], in[2]); }, "linear: bias on {other} but input on {dev}", true});
  add({"gram_vector", make({randn_({3})}), [](Inputs& in) { sg::gram(in[0]); },
       "gram: expected the operand to be a matrix or a batch of matrices, got shape [3]"});
  add({"gram_undefined", make({undefined()}), [](Inputs& in) { sg::gram(in[0]); }, "gram: got an undefined tensor"});
  add({"mse_loss_shapes", make({leaf(randn_({2, 5})), randn_({3, 7})}), [](Inputs& in) { sg::mse_loss(in[0], in[1]); },
       "mse_loss: prediction of shape [2, 5] and target of shape [3, 7] differ"});
  add({"mse_loss_empty", make({randn_({0, 3}), randn_({0, 3})}), [](Inputs& in) { sg::mse_loss(in[0], in[1]); },
       "mse_loss: got empty tensors"});

  // Reductions.
  add({"sum_undefined", make({undefined()}), [](Inputs& in) { sg::sum(in[0]); }, "sum: got an undefined tensor"});
  add({"sum_dim_undefined", make({undefined()}), [](Inputs& in) { sg::sum(in[0], 0); }, "sum: got an undefined tensor"});
  add({"sum_dim_out_of_range", make({randn_({2, 3})}), [](Inputs& in) { sg::sum(in[0], 2); },
       "sum: dimension 2 out of range for shape [2, 3]"});
  add({"sum_dim_negative_out_of_range", make({randn_({2, 3})}), [](Inputs& in) { sg::sum(in[0], -3); },
       "sum: dimension -3 out of range for shape [2, 3]"});
  add({"sum_dim_rank3", make({randn_({2, 2, 2})}), [](Inputs& in) { sg::sum(in[0], 3); },
       "sum: dimension 3 out of range for shape [2, 2, 2]"});
  add({"sum_dim_0d", make({scalar0d()}), [](Inputs& in) { sg::sum(in[0], 0); },
       "sum: reducing along a dimension needs a tensor of rank 1 or more, got shape []"});
  add({"mean_undefined", make({undefined()}), [](Inputs& in) { sg::mean(in[0]); }, "mean: got an undefined tensor"});
  add({"mean_dim_undefined", make({undefined()}), [](Inputs& in) { sg::mean(in[0], 1); },
       "mean: got an undefined tensor"});
  add({"mean_empty", make({randn_({0, 3})}), [](Inputs& in) { sg::mean(in[0]); },
       "mean: got an empty tensor of shape [0, 3]"});
  add({"mean_dim_empty", make({randn_({3, 0})}), [](Inputs& in) { sg::mean(in[0], 1); },
       "mean: dimension 1 of shape [3, 0] is empty"});
  add({"mean_dim_out_of_range", make({randn_({2, 3})}), [](Inputs& in) { sg::mean(in[0], 2); },
       "mean: dimension 2 out of range for shape [2, 3]"});
  add({"mean_dim_rank3", make({randn_({2, 2, 2})}), [](Inputs& in) { sg::mean(in[0], -4); },
       "mean: dimension -4 out of range for shape [2, 2, 2]"});

  // Shape ops.
  add({"transpose_undefined", make({undefined()}), [](Inputs& in) { sg::transpose(in[0]); },
       "transpose: got an undefined tensor"});
  add({"reshape_numel", make({leaf(randn_({2, 5}))}), [](Inputs& in) { sg::reshape(in[0], {3, 3}); },
       "reshape: shape [3, 3] is invalid for input of shape [2, 5]"});
  add({"reshape_two_inferred", make({randn_({2, 6})}), [](Inputs& in) { sg::reshape(in[0], {-1, -1}); },
       "reshape: only one dimension can be -1 in [-1, -1]"});
  add({"reshape_negative", make({randn_({2, 6})}), [](Inputs& in) { sg::reshape(in[0], {-2, -6}); },
       "reshape: bad shape [-2, -6]"});
  add({"reshape_inferred_misfit", make({randn_({2, 5})}), [](Inputs& in) { sg::reshape(in[0], {3, -1}); },
       "reshape: shape [3, -1] is invalid for 10 elements"});
  add({"reshape_overflow", make({randn_({0})}), [](Inputs& in) { sg::reshape(in[0], {int64_t{1} << 32, int64_t{1} << 32}); },
       "reshape: shape [4294967296, 4294967296] has too many elements"});
  add({"reshape_undefined", make({undefined()}), [](Inputs& in) { sg::reshape(in[0], {1}); },
       "reshape: got an undefined tensor"});
  add({"diagonal_non_square", make({randn_({2, 3})}), [](Inputs& in) { sg::diagonal(in[0]); },
       "diagonal: expected a square matrix or a batch of them, got shape [2, 3]"});
  add({"diagonal_vector", make({randn_({3})}), [](Inputs& in) { sg::diagonal(in[0]); },
       "diagonal: expected a matrix or a batch of matrices, got shape [3]"});
  add({"diagonal_undefined", make({undefined()}), [](Inputs& in) { sg::diagonal(in[0]); },
       "diagonal: got an undefined tensor"});
  add({"with_diagonal_non_square", make({randn_({2, 3}), randn_({2})}),
       [](Inputs& in) { sg::with_diagonal(in[0], in[1]); }, "with_diagonal: expected a square matrix or a batch of them, got shape [2, 3]"});
  add({"with_diagonal_length", make({leaf(upper(3)), randn_({2})}), [](Inputs& in) { sg::with_diagonal(in[0], in[1]); },
       "with_diagonal: diagonal of shape [2] does not fit a matrix of shape [3, 3]"});
  add({"with_diagonal_matrix_diagonal", make({upper(3), randn_({3, 1})}),
       [](Inputs& in) { sg::with_diagonal(in[0], in[1]); },
       "with_diagonal: diagonal of shape [3, 1] does not fit a matrix of shape [3, 3]"});
  add({"with_diagonal_undefined_matrix", make({undefined(), randn_({3})}),
       [](Inputs& in) { sg::with_diagonal(in[0], in[1]); }, "with_diagonal: got an undefined tensor"});
  add({"with_diagonal_undefined_diagonal", make({upper(3), undefined()}),
       [](Inputs& in) { sg::with_diagonal(in[0], in[1]); }, "with_diagonal: the second operand is undefined"});
  add({"with_diagonal_mixed_dtypes", make({upper(3), randn_({3}, sg::kFloat64)}),
       [](Inputs& in) { sg::with_diagonal(in[0], in[1]); },
       "with_diagonal: expected both operands of one dtype, got " + dtypes});
  add({"with_diagonal_mixed_devices", make({upper(3), on_other(randn_({3}))}),
       [](Inputs& in) { sg::with_diagonal(in[0], in[1]); },
       "with_diagonal: expected both operands on one device, got {dev} and {other}", true});

  // Entering a structure: non-square input, and invariant violations for the checked ones.
  const std::vector<std::pair<std::string, Unary>> enter = {
      {"triu", [](const sg::Tensor& x) -> sg::Tensor { return sg::triu(x); }},
      {"sym", [](const sg::Tensor& x) -> sg::Tensor { return sg::sym(x); }},
      {"as_upper", [](const sg::Tensor& x) -> sg::Tensor { return sg::as_upper(x); }},
      {"as_symmetric", [](const sg::Tensor& x) -> sg::Tensor { return sg::as_symmetric(x); }},
  };
  for (const auto& [name, f] : enter) {
    for (const sg::Shape& shape : {sg::Shape{2, 3}, sg::Shape{0, 3}, sg::Shape{3}, sg::Shape{2, 2, 3}, sg::Shape{}}) {
      std::string suffix = "_shape";
      for (int64_t d : shape) suffix += "_" + std::to_string(d);
      const std::string expected =
          shape.size() < 2 ? ": expected a matrix or a batch of matrices, got shape " + sg::shape_str(shape)
                           : ": expected a square matrix or a batch of them, got shape " + sg::shape_str(shape);
      add({name + suffix, make({leaf(randn_(shape))}), [f = f](Inputs& in) { f(in[0]); }, name + expected});
    }
    add({name + "_undefined", make({undefined()}), [f = f](Inputs& in) { f(in[0]); }, name + ": got an undefined tensor"});
  }
  add({"triu_negative_diagonal", make({randn_({3, 3})}), [](Inputs& in) { sg::triu(in[0], -1); },
       "triu: diagonal must be >= 0 for an UpperTriangular result, got -1"});
  auto as_upper = [](Inputs& in) { sg::as_upper(in[0]); };
  auto as_symmetric = [](Inputs& in) { sg::as_symmetric(in[0]); };
  add({"as_upper_violation", make({leaf(values({{1, 2, 3}, {0, 4, 5}, {0, 0.5, 6}}))}), as_upper,
       "as_upper: entry (2, 1) = 0.5 is below the diagonal and not zero; use sg::triu to project"});
  add({"as_upper_nan_below", make({values({{1, 2}, {kNaN, 4}})}), as_upper,
       "as_upper: entry (1, 0) = nan is below the diagonal and not zero; use sg::triu to project"});
  add({"as_upper_inf_below", make({values({{1, 2, 3}, {0, 4, 5}, {-kInf, 0, 6}}, sg::kFloat64)}), as_upper,
       "as_upper: entry (2, 0) = -inf is below the diagonal and not zero; use sg::triu to project"});
  add({"as_symmetric_violation", make({values({{1, 2}, {0, 4}})}), as_symmetric,
       "as_symmetric: entry (0, 1) = 2 differs from entry (1, 0) = 0; use sg::sym to project"});
  add({"as_symmetric_signed_zero", make({values({{1, -0.0}, {0, 4}}, sg::kFloat64)}), as_symmetric,
       "as_symmetric: entry (0, 1) = -0 differs from entry (1, 0) = 0; use sg::sym to project"});
  add({"as_symmetric_nan_vs_number", make({values({{1, 1, kNaN}, {1, 2, 3}, {7, 3, 4}})}), as_symmetric,
       "as_symmetric: entry (0, 2) = nan differs from entry (2, 0) = 7; use sg::sym to project"});
  add({"as_symmetric_of_upper", make({values({{1, 2}, {0, 4}})}),
       [](Inputs& in) { sg::as_symmetric(sg::as_upper(in[0])); },
       "as_symmetric: entry (0, 1) = 2 differs from entry (1, 0) = 0; use sg::sym to project"});

  // The typed handles only wrap tensors already carrying their tag.
  add({"UpperTriangular_from_dense", make({randn_({3, 3})}), [](Inputs& in) { sg::UpperTriangular u(in[0]); },
       "UpperTriangular: the tensor is not tagged UpperTriangular (got Dense); use sg::triu or sg::as_upper"});
  add({"UpperTriangular_from_symmetric", make({symmetric(3)}), [](Inputs& in) { sg::UpperTriangular u(in[0]); },
       "UpperTriangular: the tensor is not tagged UpperTriangular (got Symmetric); use sg::triu or sg::as_upper"});
  add({"UpperTriangular_from_undefined", make({undefined()}), [](Inputs& in) { sg::UpperTriangular u(in[0]); },
       "UpperTriangular: the tensor is not tagged UpperTriangular (got undefined); use sg::triu or sg::as_upper"});
  add({"Symmetric_from_dense", make({randn_({3, 3})}), [](Inputs& in) { sg::Symmetric s(in[0]); },
       "Symmetric: the tensor is not tagged Symmetric (got Dense); use sg::sym or sg::as_symmetric"});
  add({"Symmetric_from_upper", make({upper(3)}), [](Inputs& in) { sg::Symmetric s(in[0]); },
       "Symmetric: the tensor is not tagged Symmetric (got UpperTriangular); use sg::sym or sg::as_symmetric"});
  add({"Symmetric_from_transposed_upper", make({upper(3)}), [](Inputs& in) { sg::Symmetric s(sg::transpose(in[0])); },
       "Symmetric: the tensor is not tagged Symmetric (got LowerTriangular); use sg::sym or sg::as_symmetric"});
  add({"Upper_from_transposed_upper", make({upper(3)}), [](Inputs& in) { sg::UpperTriangular u(sg::transpose(in[0])); },
       "UpperTriangular: the tensor is not tagged UpperTriangular (got LowerTriangular); use sg::triu or sg::as_upper"});

  // Factories and typed factories. Their one input is an empty tensor that carries the
  // test's device to the call.
  const auto none = make({});
  auto factory = [&](const std::string& name, std::function<void(const sg::Device&)> f, const std::string& message) {
    add({name, make({randn_({0})}), [f](Inputs& in) { f(in[0].device()); }, message});
  };
  const sg::Shape negative = {2, -1}, huge = {int64_t{1} << 40, int64_t{1} << 40};
  factory("zeros_negative", [=](auto d) { sg::zeros(negative, on(d)); }, "zeros: negative dimension in shape [2, -1]");
  factory("ones_negative", [=](auto d) { sg::ones(negative, on(d)); }, "ones: negative dimension in shape [2, -1]");
  factory("full_negative", [=](auto d) { sg::full(negative, 1.0, on(d)); }, "full: negative dimension in shape [2, -1]");
  factory("rand_negative", [=](auto d) { sg::rand(negative, on(d)); }, "rand: negative dimension in shape [2, -1]");
  factory("randn_negative", [=](auto d) { sg::randn(negative, on(d)); }, "randn: negative dimension in shape [2, -1]");
  factory("empty_negative", [=](auto d) { sg::Tensor::empty(negative, on(d)); },
          "empty: negative dimension in shape [2, -1]");
  factory("zeros_overflow", [=](auto d) { sg::zeros(huge, on(d)); },
          "zeros: shape [1099511627776, 1099511627776] has too many elements");
  factory("randn_overflow_bytes", [=](auto d) { sg::randn({int64_t{1} << 61}, on(d, sg::kFloat64)); },
          "randn: shape [2305843009213693952] has too many elements");
  factory("eye_negative", [](auto d) { sg::eye(-1, on(d)); }, "eye: negative size -1");
  factory("eye_overflow", [](auto d) { sg::eye(int64_t{1} << 40, on(d)); },
          "eye: shape [1099511627776, 1099511627776] has too many elements");
  factory("arange_zero_step", [](auto d) { sg::arange(0.0, 1.0, 0.0, on(d)); }, "arange: step must be non-zero");
  factory("arange_infinite_end", [](auto d) { sg::arange(0.0, kInf, 1.0, on(d)); },
          "arange: start, end and step must be finite, got 0, inf and 1");
  factory("arange_nan_step", [](auto d) { sg::arange(0.0, 1.0, kNaN, on(d)); },
          "arange: start, end and step must be finite, got 0, 1 and nan");
  factory("arange_too_many", [](auto d) { sg::arange(0.0, 1e300, 1e-10, on(d)); },
          "arange: [0, 1e+300) in steps of 1e-10 has too many elements");
  factory("tensor_ragged", [](auto d) { sg::tensor({{1.0, 2.0}, {3.0}}, on(d)); },
          "tensor: rows of unequal length (1 vs 2)");
  factory("from_vector_count", [](auto d) { sg::from_vector(std::vector<double>{1, 2, 3}, {2, 2}, on(d)); },
          "from_vector: 3 values do not fill shape [2, 2]");
  factory("from_vector_negative", [](auto d) { sg::from_vector(std::vector<double>{1, 2}, {-1, -2}, on(d)); },
          "from_vector: negative dimension in shape [-1, -2]");
  const std::vector<std::pair<std::string, std::function<void(int64_t, sg::TensorOptions)>>> typed = {
      {"UpperTriangular::randn", [](int64_t n, sg::TensorOptions o) { sg::UpperTriangular::randn(n, o); }},
      {"UpperTriangular::zeros", [](int64_t n, sg::TensorOptions o) { sg::UpperTriangular::zeros(n, o); }},
      {"UpperTriangular::eye", [](int64_t n, sg::TensorOptions o) { sg::UpperTriangular::eye(n, o); }},
      {"Symmetric::randn", [](int64_t n, sg::TensorOptions o) { sg::Symmetric::randn(n, o); }},
      {"Symmetric::zeros", [](int64_t n, sg::TensorOptions o) { sg::Symmetric::zeros(n, o); }},
      {"Symmetric::eye", [](int64_t n, sg::TensorOptions o) { sg::Symmetric::eye(n, o); }},
  };
  for (const auto& [name, f] : typed) {
    std::string row = name;
    row.replace(row.find("::"), 2, "_");
    factory(row + "_negative", [f = f](auto d) { f(-3, on(d)); }, name + ": negative size -3");
    factory(row + "_overflow", [f = f](auto d) { f(int64_t{1} << 40, on(d)); },
            name + ": shape [1099511627776, 1099511627776] has too many elements");
  }
  factory("zeros_like_undefined", [](auto) { sg::zeros_like(sg::Tensor()); }, "zeros_like: got an undefined tensor");
  factory("ones_like_undefined", [](auto) { sg::ones_like(sg::Tensor()); }, "ones_like: got an undefined tensor");
  factory("device_name", [](auto) { sg::Device("gpu"); }, "device: expected \"cpu\", \"cuda\" or \"cuda:N\", got \"gpu\"");
  factory("device_index", [](auto) { sg::Device("cuda:x"); }, "device: bad device index in \"cuda:x\"");
  factory("device_empty_index", [](auto) { sg::Device("cuda:"); },
          "device: expected \"cpu\", \"cuda\" or \"cuda:N\", got \"cuda:\"");

  // Tensor members.
  add({"item_non_scalar", make({randn_({2, 5})}), [](Inputs& in) { in[0].item(); },
       "item: expected a tensor with one element, got shape [2, 5]"});
  add({"item_empty", make({randn_({0})}), [](Inputs& in) { in[0].item(); },
       "item: expected a tensor with one element, got shape [0]"});
  add({"item_undefined", make({undefined()}), [](Inputs& in) { in[0].item(); }, "item: the tensor is undefined"});
  add({"to_vector_undefined", make({undefined()}), [](Inputs& in) { in[0].to_vector(); },
       "to_vector: the tensor is undefined"});
  add({"to_device_undefined", make({undefined()}), [](Inputs& in) { in[0].to(sg::kCPU); }, "to: the tensor is undefined"});
  add({"to_dtype_undefined", make({undefined()}), [](Inputs& in) { in[0].to(sg::kFloat64); }, "to: the tensor is undefined"});
  add({"clone_undefined", make({undefined()}), [](Inputs& in) { in[0].clone(); }, "clone: the tensor is undefined"});
  add({"dense_undefined", make({undefined()}), [](Inputs& in) { in[0].dense(); }, "dense: the tensor is undefined"});
  add({"detach_undefined", make({undefined()}), [](Inputs& in) { in[0].detach(); }, "detach: the tensor is undefined"});
  add({"fill_undefined", make({undefined()}), [](Inputs& in) { in[0].fill_(1.0); }, "fill_: the tensor is undefined"});
  add({"copy_into_undefined", make({undefined(), randn_({2})}), [](Inputs& in) { in[0].copy_(in[1]); },
       "copy_: the destination is undefined"});
  add({"copy_from_undefined", make({randn_({2}), undefined()}), [](Inputs& in) { in[0].copy_(in[1]); },
       "copy_: the source is undefined"});
  add({"copy_shapes", make({randn_({2, 2}), randn_({3})}), [](Inputs& in) { in[0].copy_(in[1]); },
       "copy_: source of shape [3] does not fit destination of shape [2, 2]"});
  add({"copy_mixed_dtypes", make({randn_({2, 2}), randn_({2, 2}, sg::kFloat64)}), [](Inputs& in) { in[0].copy_(in[1]); },
       "copy_: expected both operands of one dtype, got " + dtypes});
  add({"copy_mixed_devices", make({randn_({2, 2}), on_other(randn_({2, 2}))}), [](Inputs& in) { in[0].copy_(in[1]); },
       "copy_: expected both operands on one device, got {dev} and {other}", true});
  add({"copy_into_leaf_requiring_grad", make({leaf(upper(2)), randn_({2, 2})}), [](Inputs& in) { in[0].copy_(in[1]); },
       "copy_: a leaf that requires grad is being written in place; use sg::NoGradGuard"});
  add({"fill_leaf_requiring_grad", make({leaf(randn_({2, 2}))}), [](Inputs& in) { in[0].fill_(0.0); },
       "fill_: a leaf that requires grad is being written in place; use sg::NoGradGuard"});
  add({"size_out_of_range", make({randn_({2, 3})}), [](Inputs& in) { in[0].size(2); },
       "size: dimension 2 out of range for a tensor of shape [2, 3]"});
  add({"data_wrong_type", make({randn_({2, 3})}), [](Inputs& in) { in[0].data<double>(); },
       "data<T>: tensor has dtype float32, requested float64"});
  add({"to_eigen_rank3", make({randn_({2, 2, 2})}), [](Inputs& in) { sg::to_eigen<double>(in[0]); },
       "to_eigen: expected a 1-D or 2-D tensor, got shape [2, 2, 2]"});
  add({"to_eigen_undefined", make({undefined()}), [](Inputs& in) { sg::to_eigen<double>(in[0]); },
       "to_eigen: the tensor is undefined"});

  // Autograd misuse.
  using Build = std::function<Inputs(const sg::Device&)>;
  auto with_graph = [](Build build) { return build; };  // inputs that depend on each other
  add({"backward_non_scalar", with_graph([](const sg::Device& d) {
         auto x = sg::randn({2, 2}, on(d)).requires_grad_();
         return Inputs{x, x * 2.0};
       }),
       [](Inputs& in) { in[1].backward(); },
       "backward: expected a scalar loss, got shape [2, 2]; pass an explicit gradient of that shape for a non-scalar "
       "tensor"});
  add({"backward_twice", with_graph([](const sg::Device& d) {
         auto x = sg::randn({2, 2}, on(d)).requires_grad_();
         auto y = sg::sum(x * x);
         y.backward();
         return Inputs{x, y};
       }),
       [](Inputs& in) { in[1].backward(); },
       "backward: the record of 'sum' was consumed by an earlier backward(); call backward(retain_graph=true) the "
       "first time to run backward through the same graph twice"});
  add({"backward_without_grad", with_graph([](const sg::Device& d) {
         auto a = sg::randn({2, 2}, on(d));
         return Inputs{a, sg::sum(a * 2.0)};
       }),
       [](Inputs& in) { in[1].backward(); },
       "backward: the tensor does not require grad (no input of the ops that produced it requires grad)"});
  add({"backward_undefined", make({undefined()}), [](Inputs& in) { in[0].backward(); },
       "backward: called on an undefined tensor"});
  add({"backward_undefined_gradient", with_graph([](const sg::Device& d) {
         auto x = sg::randn({2, 2}, on(d)).requires_grad_();
         return Inputs{x, x * 2.0};
       }),
       [](Inputs& in) { in[1].backward(sg::Tensor()); }, "backward: the explicit gradient is undefined"});
  add({"backward_gradient_shape", with_graph([](const sg::Device& d) {
         auto x = sg::randn({2, 2}, on(d)).requires_grad_();
         return Inputs{x, x * 2.0, sg::ones({3}, on(d))};
       }),
       [](Inputs& in) { in[1].backward(in[2]); }, "backward: the explicit gradient has shape [3], expected [2, 2]"});
  add({"backward_gradient_dtype", with_graph([](const sg::Device& d) {
         auto x = sg::randn({2, 2}, on(d)).requires_grad_();
         return Inputs{x, x * 2.0, sg::ones({2, 2}, on(d, sg::kFloat64))};
       }),
       [](Inputs& in) { in[1].backward(in[2]); },
       "backward: the explicit gradient has dtype float64, expected float32"});
  add({"backward_gradient_device", with_graph([](const sg::Device& d) {
         auto x = sg::randn({2, 2}, on(d)).requires_grad_();
         return Inputs{x, x * 2.0, sg::ones({2, 2}, on(other_device(d)))};
       }),
       [](Inputs& in) { in[1].backward(in[2]); }, "backward: the explicit gradient is on {other}, expected {dev}", true});
  add({"backward_saved_tensor_modified", with_graph([](const sg::Device& d) {
         auto x = sg::randn({2, 2}, on(d)).requires_grad_();
         auto w = sg::randn({2, 2}, on(d));
         auto y = sg::sum(x * w);  // saves w
         w.fill_(0.0);
         return Inputs{x, w, y};
       }),
       [](Inputs& in) { in[2].backward(); },
       "backward of 'mul': a tensor saved for the gradient was modified in place after the op ran"});
  // The failing record is reached after another leaf's gradient was computed: that leaf's
  // .grad() must stay as it was too (gradients are written only when backward succeeds).
  add({"backward_fails_after_other_leaf", with_graph([](const sg::Device& d) {
         auto a = sg::randn({2, 2}, on(d)).requires_grad_();
         auto b = sg::randn({2, 2}, on(d)).requires_grad_();
         auto c = sg::randn({2, 2}, on(d));
         sg::sum(a * 3.0).backward();  // a has a gradient before
         auto first = sg::sum(b * c);
         auto second = sg::sum(a * 2.0);  // recorded later, so walked first: a is reached before b·c
         auto loss = first + second;
         c.fill_(1.0);
         return Inputs{a, b, c, loss};
       }),
       [](Inputs& in) { in[3].backward(); },
       "backward of 'mul': a tensor saved for the gradient was modified in place after the op ran"});
  add({"requires_grad_on_non_leaf", with_graph([](const sg::Device& d) {
         auto x = sg::randn({2, 2}, on(d)).requires_grad_();
         return Inputs{x, x * 2.0};
       }),
       [](Inputs& in) { in[1].requires_grad_(); },
       "requires_grad_: can only be set on a leaf tensor (this one was produced by 'mul'); use detach() first"});
  add({"requires_grad_undefined", make({undefined()}), [](Inputs& in) { in[0].requires_grad_(); },
       "requires_grad_: the tensor is undefined"});
  add({"grad_undefined", make({undefined()}), [](Inputs& in) { in[0].grad(); }, "grad: the tensor is undefined"});
  add({"zero_grad_undefined", make({undefined()}), [](Inputs& in) { in[0].zero_grad(); },
       "zero_grad: the tensor is undefined"});
  // grad() of a tensor that does not require grad is undefined (as in libtorch): using it
  // is an error naming the op that got it.
  add({"using_grad_of_tensor_without_grad", make({randn_({2, 2})}),
       [](Inputs& in) { in[0].copy_(in[0] - in[0].grad() * 0.1); }, "mul: got an undefined tensor"});
  add({"set_grad_shape", make({leaf(upper(2)), randn_({3})}), [](Inputs& in) { in[0].set_grad(in[1]); },
       "set_grad: gradient [3] float32 on {dev} does not match tensor [2, 2] float32 on {dev}"});
  add({"set_grad_dtype", make({leaf(randn_({2, 2})), randn_({2, 2}, sg::kFloat64)}),
       [](Inputs& in) { in[0].set_grad(in[1]); },
       "set_grad: gradient [2, 2] float64 on {dev} does not match tensor [2, 2] float32 on {dev}"});
  add({"set_grad_device", make({leaf(randn_({2, 2})), on_other(randn_({2, 2}))}),
       [](Inputs& in) { in[0].set_grad(in[1]); },
       "set_grad: gradient [2, 2] float32 on {other} does not match tensor [2, 2] float32 on {dev}", true});
  add({"set_grad_undefined", make({undefined(), randn_({2})}), [](Inputs& in) { in[0].set_grad(in[1]); },
       "set_grad: the tensor is undefined"});
  add({"gradcheck_float32", make({leaf(randn_({2, 2}))}),
       [](Inputs& in) { sg::gradcheck([](const Inputs& x) { return x[0] * 2.0; }, in); },
       "gradcheck: input 0 (Dense [2, 2]) must be float64, got float32"});
  add({"gradcheck_undefined", make({leaf(randn_({2, 2}, sg::kFloat64)), undefined()}),
       [](Inputs& in) { sg::gradcheck([](const Inputs& x) { return x[0] * 2.0; }, in); },
       "gradcheck: input 1 is undefined"});
  add({"gradcheck_output_without_grad", make({leaf(randn_({2, 2}, sg::kFloat64))}),
       [](Inputs& in) { sg::gradcheck([](const Inputs& x) { return x[0].detach() * 2.0; }, in); },
       "gradcheck: the function's output does not require grad"});

  // Optimizers and modules.
  add({"optimizer_undefined_parameter", make({leaf(randn_({2})), undefined()}),
       [](Inputs& in) { sg::optim::SGD opt(in, {}); }, "optimizer: parameter 1 is undefined"});
  add({"optimizer_parameter_without_grad", make({randn_({2})}), [](Inputs& in) { sg::optim::Adam opt(in, {}); },
       "optimizer: parameter 0 must be a leaf that requires grad"});
  add({"optimizer_non_leaf_parameter", with_graph([](const sg::Device& d) {
         auto x = sg::randn({2}, on(d)).requires_grad_();
         return Inputs{x, x * 2.0};
       }),
       [](Inputs& in) { sg::optim::SGD opt({in[1]}, {}); }, "optimizer: parameter 0 must be a leaf that requires grad"});
  add({"sgd_negative_lr", make({leaf(randn_({2}))}), [](Inputs& in) { sg::optim::SGD opt(in, {.lr = -1}); },
       "SGD: negative hyper-parameter"});
  add({"sgd_nesterov_without_momentum", make({leaf(randn_({2}))}),
       [](Inputs& in) { sg::optim::SGD opt(in, {.lr = 0.1, .nesterov = true}); },
       "SGD: nesterov needs momentum > 0 and no dampening"});
  add({"adam_beta", make({leaf(randn_({2}))}), [](Inputs& in) { sg::optim::Adam opt(in, {.beta1 = 1.0}); },
       "Adam: betas must be in [0, 1)"});
  add({"adam_negative_eps", make({leaf(randn_({2}))}), [](Inputs& in) { sg::optim::Adam opt(in, {.eps = -1}); },
       "Adam: negative hyper-parameter"});
  // A module moved to another dtype after its optimizer was made: the optimizer's state no
  // longer fits (reading it would reinterpret float32 buffers as float64).
  for (const char* opt_name : {"Adam", "SGD"}) {
    const bool adam = std::string(opt_name) == "Adam";
    add({std::string(opt_name) + "_state_after_module_to_dtype", make({randn_({5, 3}, sg::kFloat64)}),
         [adam](Inputs& in) {
           sg::nn::UpperLinear layer(3, true, on(in[0].device()));
           std::unique_ptr<sg::optim::Optimizer> opt;
           if (adam) opt = std::make_unique<sg::optim::Adam>(layer.parameters(), sg::optim::AdamOptions{});
           else opt = std::make_unique<sg::optim::SGD>(layer.parameters(), sg::optim::SGDOptions{.momentum = 0.9});
           if (!adam) {  // SGD makes its momentum buffer on the first step
             sg::sum(layer.forward(in[0].to(sg::kFloat32))).backward();
             opt->step();
           }
           layer.to(sg::kFloat64);
           sg::sum(layer.forward(in[0])).backward();
           opt->step();
         },
         std::string(opt_name) +
             ": state of parameter 0 ([3, 3] float32 on {dev}) does not match the parameter ([3, 3] float64 on "
             "{dev}); make the optimizer after moving the parameters"});
  }
  add({"Linear_zero_size", none, [](Inputs&) { sg::nn::Linear layer(0, 3); },
       "Linear: sizes must be positive, got 0 and 3"});
  add({"UpperLinear_zero_size", none, [](Inputs&) { sg::nn::UpperLinear layer(0); },
       "UpperLinear: size must be positive, got 0"});
  add({"SymmetricBilinear_negative_size", none, [](Inputs&) { sg::nn::SymmetricBilinear q(-1); },
       "SymmetricBilinear: size must be positive, got -1"});
  add({"Linear_forward_shape", make({randn_({2, 5})}),
       [](Inputs& in) { sg::nn::Linear(4, 3, true, on(in[0].device())).forward(in[0]); },
       "linear: input of shape [2, 5] does not fit weight of shape [3, 4] (expected input [batch, 4])"});
  add({"Linear_forward_dtype", make({randn_({2, 4}, sg::kFloat64)}),
       [](Inputs& in) { sg::nn::Linear(4, 3, true, on(in[0].device())).forward(in[0]); },
       "linear: expected both operands of one dtype, got float64 and float32"});
  add({"SymmetricBilinear_forward_shape", make({randn_({2, 5})}),
       [](Inputs& in) { sg::nn::SymmetricBilinear(4, on(in[0].device())).forward(in[0]); },
       "SymmetricBilinear: input of shape [2, 5] does not fit a form of size 4"});
  add({"SymmetricBilinear_forward_dtype", make({randn_({2, 4}, sg::kFloat64)}),
       [](Inputs& in) { sg::nn::SymmetricBilinear(4, on(in[0].device())).forward(in[0]); },
       "SymmetricBilinear: input of dtype float64 but weight of dtype float32"});
  add({"SymmetricBilinear_forward_device", make({on_other(randn_({2, 4}))}),
       [](Inputs& in) { sg::nn::SymmetricBilinear(4, on(other_device(in[0].device()))).forward(in[0]); },
       "SymmetricBilinear: input on {other} but weight on {dev}", true});
  add({"SymmetricBilinear_forward_undefined", make({undefined()}),
       [](Inputs&) { sg::nn::SymmetricBilinear(4).forward(sg::Tensor()); }, "SymmetricBilinear: the input is undefined"});
  add({"register_parameter_twice", none,
       [](Inputs&) {
         sg::nn::Module m;
         m.register_parameter("w", sg::zeros({2}));
         m.register_parameter("w", sg::zeros({2}));
       },
       "register_parameter: 'w' is already registered"});
  add({"register_parameter_undefined", none,
       [](Inputs&) { sg::nn::Module().register_parameter("w", sg::Tensor()); },
       "register_parameter: parameter 'w' is undefined"});
  return rows;
}

void PrintTo(const BadCall& row, std::ostream* out) { *out << row.name; }

class BadInput : public ::testing::TestWithParam<std::tuple<sg::Device, BadCall>> {};

TEST_P(BadInput, ThrowsOneNamedErrorAndLeavesInputsUnchanged) {
  const auto& [dev, row] = GetParam();
  SG_SKIP_IF_UNAVAILABLE(dev);
  if (row.two_devices) SG_SKIP_IF_UNAVAILABLE(sg::kCUDA);
  sg::manual_seed(11);
  Inputs in = row.inputs(dev);
  std::vector<std::string> before;
  for (const sg::Tensor& t : in) before.push_back(snapshot(t));
  const int64_t tape = sg::autograd::tape_size();

  std::string got = "(no error)";
  try {
    row.call(in);
  } catch (const sg::Error& e) {
    got = e.what();
  } catch (const std::exception& e) {
    got = std::string("(not an sg::Error) ") + e.what();
  }
  EXPECT_EQ(got, with_devices(row.message, dev));
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(snapshot(in[i]), before[i]) << "input " << i << " changed";
  EXPECT_EQ(sg::autograd::tape_size(), tape) << "the failed call left records on the tape";
}

std::string bad_call_name(const testing::TestParamInfo<std::tuple<sg::Device, BadCall>>& info) {
  return std::string(std::get<0>(info.param).is_cpu() ? "cpu_" : "cuda_") + std::get<1>(info.param).name;
}

INSTANTIATE_TEST_SUITE_P(Rows, BadInput,
                         ::testing::Combine(::testing::ValuesIn(sgtest::test_devices()), ::testing::ValuesIn(bad_calls())),
                         bad_call_name);

// The rows are a table, not a sample: every public op family has its row.
TEST(BadInputTable, CoversEveryOpFamily) {
  std::set<std::string> names;
  for (const BadCall& row : bad_calls()) {
    EXPECT_TRUE(names.insert(row.name).second) << "duplicate row " << row.name;
    EXPECT_FALSE(row.message.empty()) << row.name;
  }
  for (const char* prefix :
       {"neg_", "exp_", "log_", "sqrt_", "square_", "abs_", "tanh_", "sigmoid_", "relu_", "leaky_relu_", "softplus_",
        "step_", "pow_", "add_", "sub_", "mul_", "div_", "matmul_", "linear_", "gram_", "mse_loss_", "sum_", "mean_",
        "transpose_", "reshape_", "diagonal_", "with_diagonal_", "triu_", "sym_", "as_upper_", "as_symmetric_",
        "UpperTriangular_", "Symmetric_", "zeros_", "ones_", "full_", "rand_", "randn_", "empty_", "eye_", "arange_",
        "tensor_", "from_vector_", "device_", "item_", "to_", "clone_", "dense_", "detach_", "copy_", "fill_", "size_",
        "data_", "backward_", "requires_grad_", "grad_", "set_grad_", "gradcheck_", "optimizer_", "sgd_", "adam_",
        "Linear_", "UpperLinear_", "SymmetricBilinear_", "register_parameter_"}) {
    const bool found = std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n.rfind(prefix, 0) == 0; });
    EXPECT_TRUE(found) << "no row for " << prefix;
  }
}

// ---- empty tensors ---------------------------------------------------------------------

struct EmptyCase {
  std::string name;
  std::function<sg::Tensor(const sg::Device&)> run;
  sg::Shape shape;
  S structure;
  std::vector<double> values;  // expected, row-major (empty for an empty result)
};

std::vector<EmptyCase> empty_cases() {
  auto z = [](sg::Shape s) { return [=](const sg::Device& d) { return sg::randn(s, on(d)); }; };
  auto zeros = [](int64_t n) { return std::vector<double>(static_cast<size_t>(n), 0.0); };
  using T = sg::Tensor;
  using D = const sg::Device&;
  return {
      {"exp_0x0", [=](D d) { return sg::exp(z({0, 0})(d)); }, {0, 0}, S::Dense, {}},
      {"sigmoid_0x5", [=](D d) { return sg::sigmoid(z({0, 5})(d)); }, {0, 5}, S::Dense, {}},
      {"neg_upper_0x0", [](D d) -> T { return -sg::UpperTriangular::randn(0, on(d)); }, {0, 0}, S::UpperTriangular, {}},
      {"tanh_symmetric_0x0", [](D d) { return sg::tanh(sg::Symmetric::randn(0, on(d))); }, {0, 0}, S::Symmetric, {}},
      {"add_0x3_0x3", [=](D d) { return z({0, 3})(d) + z({0, 3})(d); }, {0, 3}, S::Dense, {}},
      {"add_0x3_row", [=](D d) { return z({0, 3})(d) + z({3})(d); }, {0, 3}, S::Dense, {}},
      {"add_row_0x3", [=](D d) { return z({3})(d) + z({0, 3})(d); }, {0, 3}, S::Dense, {}},
      {"sub_0x3_1x3", [=](D d) { return z({0, 3})(d) - z({1, 3})(d); }, {0, 3}, S::Dense, {}},
      {"mul_2x0_2x1", [=](D d) { return z({2, 0})(d) * z({2, 1})(d); }, {2, 0}, S::Dense, {}},
      {"div_1x0_3x1", [=](D d) { return z({1, 0})(d) / z({3, 1})(d); }, {3, 0}, S::Dense, {}},
      {"add_0x3_scalar", [=](D d) { return z({0, 3})(d) + z({1})(d); }, {0, 3}, S::Dense, {}},
      {"add_0d_0", [=](D d) { return sg::sum(z({2})(d)) + z({0})(d); }, {0}, S::Dense, {}},
      {"mul_upper_0x0", [](D d) -> T { return sg::UpperTriangular::randn(0, on(d)) * sg::UpperTriangular::randn(0, on(d)); },
       {0, 0}, S::UpperTriangular, {}},
      {"sum_0x3", [=](D d) { return sg::sum(z({0, 3})(d)); }, {}, S::Dense, {0}},
      {"sum_0x3_dim0", [=](D d) { return sg::sum(z({0, 3})(d), 0); }, {3}, S::Dense, zeros(3)},
      {"sum_0x3_dim1", [=](D d) { return sg::sum(z({0, 3})(d), 1); }, {0}, S::Dense, {}},
      {"sum_3x0_dim1", [=](D d) { return sg::sum(z({3, 0})(d), 1); }, {3}, S::Dense, zeros(3)},
      {"sum_0x3_dim0_keepdim", [=](D d) { return sg::sum(z({0, 3})(d), 0, true); }, {1, 3}, S::Dense, zeros(3)},
      {"sum_0", [=](D d) { return sg::sum(z({0})(d), 0); }, {}, S::Dense, {0}},
      {"mean_3x0_dim0", [=](D d) { return sg::mean(z({3, 0})(d), 0); }, {0}, S::Dense, {}},
      {"matmul_0x3_3x4", [=](D d) { return sg::matmul(z({0, 3})(d), z({3, 4})(d)); }, {0, 4}, S::Dense, {}},
      {"matmul_3x0_0x4", [=](D d) { return sg::matmul(z({3, 0})(d), z({0, 4})(d)); }, {3, 4}, S::Dense, zeros(12)},
      {"matmul_3x4_4x0", [=](D d) { return sg::matmul(z({3, 4})(d), z({4, 0})(d)); }, {3, 0}, S::Dense, {}},
      {"matmul_upper_upper_0", [](D d) -> T { return sg::matmul(sg::UpperTriangular::randn(0, on(d)), sg::UpperTriangular::randn(0, on(d))); },
       {0, 0}, S::UpperTriangular, {}},
      {"matmul_symmetric_0x0_0x5", [=](D d) { return sg::matmul(sg::Symmetric::randn(0, on(d)), z({0, 5})(d)); },
       {0, 5}, S::Dense, {}},
      {"matmul_2x0_upper_0", [=](D d) { return sg::matmul(z({2, 0})(d), sg::UpperTriangular::randn(0, on(d))); },
       {2, 0}, S::Dense, {}},
      {"matmul_vectors_0", [=](D d) { return sg::matmul(z({0})(d), z({0})(d)); }, {1}, S::Dense, {0}},
      {"matmul_vector_0_0x4", [=](D d) { return sg::matmul(z({0})(d), z({0, 4})(d)); }, {4}, S::Dense, zeros(4)},
      {"linear_0x3", [=](D d) { return sg::linear(z({0, 3})(d), z({4, 3})(d)); }, {0, 4}, S::Dense, {}},
      {"linear_5x0_with_bias", [=](D d) { return sg::linear(z({5, 0})(d), z({2, 0})(d), sg::tensor({1.5, -2.0}, on(d))); },
       {5, 2}, S::Dense, {1.5, -2, 1.5, -2, 1.5, -2, 1.5, -2, 1.5, -2}},
      {"linear_5x0_upper_0", [=](D d) { return sg::linear(z({5, 0})(d), sg::UpperTriangular::randn(0, on(d))); },
       {5, 0}, S::Dense, {}},
      {"gram_0x3", [=](D d) -> T { return sg::gram(z({0, 3})(d)); }, {0, 0}, S::Symmetric, {}},
      {"gram_3x0", [=](D d) -> T { return sg::gram(z({3, 0})(d)); }, {3, 3}, S::Symmetric, zeros(9)},
      {"transpose_0x3", [=](D d) { return sg::transpose(z({0, 3})(d)); }, {3, 0}, S::Dense, {}},
      {"transpose_upper_0", [](D d) { return sg::transpose(sg::UpperTriangular::randn(0, on(d))); }, {0, 0}, S::LowerTriangular, {}},
      {"reshape_0x3_3x0", [=](D d) { return sg::reshape(z({0, 3})(d), {3, 0}); }, {3, 0}, S::Dense, {}},
      {"reshape_0x3_flat", [=](D d) { return sg::reshape(z({0, 3})(d), {-1}); }, {0}, S::Dense, {}},
      {"diagonal_0x0", [=](D d) { return sg::diagonal(z({0, 0})(d)); }, {0}, S::Dense, {}},
      {"with_diagonal_upper_0", [=](D d) { return sg::with_diagonal(sg::UpperTriangular::randn(0, on(d)), z({0})(d)); },
       {0, 0}, S::UpperTriangular, {}},
      {"triu_0x0", [=](D d) -> T { return sg::triu(z({0, 0})(d)); }, {0, 0}, S::UpperTriangular, {}},
      {"sym_0x0", [=](D d) -> T { return sg::sym(z({0, 0})(d)); }, {0, 0}, S::Symmetric, {}},
      {"as_upper_0x0", [=](D d) -> T { return sg::as_upper(z({0, 0})(d)); }, {0, 0}, S::UpperTriangular, {}},
      {"as_symmetric_0x0", [=](D d) -> T { return sg::as_symmetric(z({0, 0})(d)); }, {0, 0}, S::Symmetric, {}},
      {"dense_symmetric_0", [](D d) { return sg::Symmetric::eye(0, on(d)).dense(); }, {0, 0}, S::Dense, {}},
      {"zeros_0", [](D d) { return sg::zeros({0}, on(d)); }, {0}, S::Dense, {}},
      {"full_0x4", [](D d) { return sg::full({0, 4}, 2.0, on(d)); }, {0, 4}, S::Dense, {}},
      {"rand_4x0", [](D d) { return sg::rand({4, 0}, on(d)); }, {4, 0}, S::Dense, {}},
      {"eye_0", [](D d) { return sg::eye(0, on(d)); }, {0, 0}, S::Dense, {}},
      {"arange_0", [](D d) { return sg::arange(0, on(d)); }, {0}, S::Dense, {}},
      {"arange_backwards", [](D d) { return sg::arange(5.0, 0.0, 1.0, on(d)); }, {0}, S::Dense, {}},
      {"from_vector_0x2", [](D d) { return sg::from_vector(std::vector<double>{}, {0, 2}, on(d)); }, {0, 2}, S::Dense, {}},
      {"empty_0x0", [](D d) { return sg::Tensor::empty({0, 0}, on(d)); }, {0, 0}, S::Dense, {}},
      {"UpperTriangular_zeros_0", [](D d) -> T { return sg::UpperTriangular::zeros(0, on(d)); }, {0, 0}, S::UpperTriangular, {}},
      {"UpperTriangular_eye_0", [](D d) -> T { return sg::UpperTriangular::eye(0, on(d)); }, {0, 0}, S::UpperTriangular, {}},
      {"Symmetric_randn_0", [](D d) -> T { return sg::Symmetric::randn(0, on(d)); }, {0, 0}, S::Symmetric, {}},
      {"to_float64_0x3", [=](D d) { return z({0, 3})(d).to(sg::kFloat64); }, {0, 3}, S::Dense, {}},
      {"to_cpu_3x0", [=](D d) { return z({3, 0})(d).to(sg::kCPU); }, {3, 0}, S::Dense, {}},
      {"clone_upper_0", [](D d) { return sg::UpperTriangular::zeros(0, on(d)).clone(); }, {0, 0}, S::UpperTriangular, {}},
      {"copy_0x3", [=](D d) { auto t = z({0, 3})(d); return t.copy_(z({0, 3})(d)); }, {0, 3}, S::Dense, {}},
      {"fill_3x0", [=](D d) { auto t = z({3, 0})(d); return t.fill_(1.0); }, {3, 0}, S::Dense, {}},
      // Backward through empty tensors: gradients of the right shape (zero where numel > 0).
      {"grad_mul_sum_0x3", [=](D d) { auto x = z({0, 3})(d).requires_grad_(); sg::sum(x * 2.0).backward(); return x.grad(); },
       {0, 3}, S::Dense, {}},
      {"grad_matmul_3x0", [=](D d) {
         auto a = z({3, 0})(d).requires_grad_();
         auto b = z({0, 4})(d).requires_grad_();
         sg::sum(sg::matmul(a, b)).backward();
         EXPECT_EQ(b.grad().shape(), (sg::Shape{0, 4}));
         return a.grad();
       }, {3, 0}, S::Dense, {}},
      {"grad_row_broadcast_over_0_rows", [=](D d) {
         auto r = z({3})(d).requires_grad_();
         sg::sum(z({0, 3})(d) + r).backward();
         return r.grad();
       }, {3}, S::Dense, zeros(3)},
      {"grad_gram_3x0", [=](D d) { auto a = z({3, 0})(d).requires_grad_(); sg::sum(sg::gram(a)).backward(); return a.grad(); },
       {3, 0}, S::Dense, {}},
      {"grad_diagonal_upper_0", [](D d) {
         auto w = sg::UpperTriangular::randn(0, on(d)).requires_grad_();
         sg::sum(sg::diagonal(w)).backward();
         return w.grad();
       }, {0, 0}, S::UpperTriangular, {}},
      {"grad_with_diagonal_upper_0", [=](D d) {
         auto w = sg::UpperTriangular::randn(0, on(d)).requires_grad_();
         auto g = z({0})(d).requires_grad_();
         sg::sum(sg::with_diagonal(w, g)).backward();
         EXPECT_EQ(g.grad().shape(), (sg::Shape{0}));
         return w.grad();
       }, {0, 0}, S::UpperTriangular, {}},
      {"adam_step_on_0x3_parameter", [=](D d) {
         auto w = z({0, 3})(d).requires_grad_();
         sg::optim::Adam opt({w}, {.lr = 0.1});
         sg::sum(w * 2.0).backward();
         opt.step();
         return w;
       }, {0, 3}, S::Dense, {}},
      {"sgd_momentum_step_on_upper_0", [](D d) -> T {
         auto w = sg::UpperTriangular::randn(0, on(d)).requires_grad_();
         sg::optim::SGD opt({w}, {.lr = 0.1, .momentum = 0.9});
         for (int i = 0; i < 2; ++i) {
           sg::sum(sg::matmul(w, w)).backward();
           opt.step();
         }
         return w;
       }, {0, 0}, S::UpperTriangular, {}},
  };
}

void PrintTo(const EmptyCase& c, std::ostream* out) { *out << c.name; }

class EmptyTensors : public ::testing::TestWithParam<std::tuple<sg::Device, EmptyCase>> {};

TEST_P(EmptyTensors, GiveResultsOfTheRightShape) {
  const auto& [dev, c] = GetParam();
  SG_SKIP_IF_UNAVAILABLE(dev);
  const sg::Tensor r = c.run(dev);
  ASSERT_TRUE(r.defined());
  EXPECT_EQ(r.shape(), c.shape);
  EXPECT_EQ(r.structure(), c.structure);
  EXPECT_EQ(r.device(), dev.is_cpu() || c.name == "to_cpu_3x0" ? sg::kCPU : dev);
  EXPECT_EQ(r.numel(), sg::shape_numel(c.shape));
  EXPECT_EQ(r.to_vector(), c.values);
}

std::string empty_case_name(const testing::TestParamInfo<std::tuple<sg::Device, EmptyCase>>& info) {
  return std::string(std::get<0>(info.param).is_cpu() ? "cpu_" : "cuda_") + std::get<1>(info.param).name;
}

INSTANTIATE_TEST_SUITE_P(Cases, EmptyTensors,
                         ::testing::Combine(::testing::ValuesIn(sgtest::test_devices()), ::testing::ValuesIn(empty_cases())),
                         empty_case_name);

// Without a usable GPU even an empty CUDA tensor is refused (it would otherwise flow through
// every op that skips its kernel for numel() == 0 and surface far from its origin).
TEST(EmptyTensorsWithoutGpu, EmptyCudaTensorIsRefused) {
  if (sg::cuda::is_available()) GTEST_SKIP() << "a CUDA device exists here";
  std::string got = "(no error)";
  try {
    sg::zeros({0, 0}, sg::kCUDA);
  } catch (const sg::Error& e) {
    got = e.what();
  }
  EXPECT_EQ(got, sg::cuda::built_with_cuda() ? "cuda:0 is not available: no CUDA device found"
                                              : "allocating on cuda:0: structgrad was built without CUDA");
}

// ---- host memory -----------------------------------------------------------------------

TEST(HostMemory, RequestLargerThanTheMachineIsAClearErrorAndNothingLeaks) {
  const auto before = sg::host_memory_stats();
  std::string got = "(no error)";
  try {
    sg::zeros({int64_t{1} << 50});  // 4 PiB
  } catch (const sg::Error& e) {
    got = e.what();
  }
  EXPECT_EQ(got, "cpu allocator: out of memory allocating 4503599627370496 bytes");
  const auto after = sg::host_memory_stats();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(after.num_allocations, before.num_allocations);
  auto x = sg::ones({1000});  // and the process keeps working
  EXPECT_EQ(sg::sum(x).item(), 1000.0);
}

// ---- NaN and Inf -------------------------------------------------------------------------

class NonFinite : public ::testing::TestWithParam<sgtest::DeviceDtype> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam().device); }
  sg::TensorOptions opts() const { return on(GetParam().device, GetParam().dtype); }
  double rtol() const { return GetParam().dtype == sg::kFloat32 ? 1e-5 : 1e-12; }
};

// Inputs NaN, +inf, −inf, and 0.5 (which every op maps to a finite value).
TEST_P(NonFinite, UnaryOpsMapSpecialValuesAsIEEESays) {
  const auto x = sg::tensor({kNaN, kInf, -kInf, 0.5}, opts());
  const std::vector<std::pair<std::string, std::vector<double>>> expected = {
      {"neg", {kNaN, -kInf, kInf}},     {"exp", {kNaN, kInf, 0}},          {"log", {kNaN, kInf, kNaN}},
      {"sqrt", {kNaN, kInf, kNaN}},     {"square", {kNaN, kInf, kInf}},    {"abs", {kNaN, kInf, kInf}},
      {"tanh", {kNaN, 1, -1}},          {"sigmoid", {kNaN, 1, 0}},         {"relu", {kNaN, kInf, 0}},
      {"leaky_relu", {kNaN, kInf, -kInf}}, {"softplus", {kNaN, kInf, 0}},  {"step", {kNaN, 1, 0}},
      {"pow", {kNaN, kInf, -kInf}},
  };
  const auto ops = unary_ops();
  ASSERT_EQ(ops.size(), expected.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    ASSERT_EQ(ops[i].first, expected[i].first);
    const auto y = ops[i].second(x).to_vector();
    for (size_t k = 0; k < 3; ++k) EXPECT_TRUE(same_ieee(y[k], expected[i].second[k])) << ops[i].first << " of " << x.to_vector()[k];
    EXPECT_TRUE(std::isfinite(y[3])) << ops[i].first << "(0.5) = " << y[3];
  }
  const std::vector<std::pair<std::string, std::function<sg::Tensor(const sg::Tensor&)>>> scalar_ops = {
      {"x + 1", [](const sg::Tensor& t) { return t + 1.0; }}, {"1 - x", [](const sg::Tensor& t) { return 1.0 - t; }},
      {"x * 0", [](const sg::Tensor& t) { return t * 0.0; }}, {"1 / x", [](const sg::Tensor& t) { return 1.0 / t; }},
      {"x / 0", [](const sg::Tensor& t) { return t / 0.0; }},
  };
  const std::vector<std::vector<double>> scalar_expected = {
      {kNaN, kInf, -kInf, 1.5}, {kNaN, -kInf, kInf, 0.5}, {kNaN, kNaN, kNaN, 0}, {kNaN, 0, 0, 2}, {kNaN, kInf, -kInf, kInf}};
  for (size_t i = 0; i < scalar_ops.size(); ++i) {
    const auto y = scalar_ops[i].second(x).to_vector();
    for (size_t k = 0; k < 4; ++k) EXPECT_TRUE(same_ieee(y[k], scalar_expected[i][k])) << scalar_ops[i].first << ", element " << k;
  }
}

TEST_P(NonFinite, BinaryOpsAndBroadcastsPropagate) {
  const auto a = sg::tensor({kNaN, kInf, kInf, kInf, 0, 1, -1, 0, kInf, 2}, opts());
  const auto b = sg::tensor({1, -kInf, kInf, 0, 0, 0, 0, kNaN, kInf, 4}, opts());
  const std::vector<std::vector<double>> expected = {
      {kNaN, kNaN, kInf, kInf, 0, 1, -1, kNaN, kInf, 6},         // add
      {kNaN, kInf, kNaN, kInf, 0, 1, -1, kNaN, kNaN, -2},        // sub
      {kNaN, -kInf, kInf, kNaN, 0, 0, 0, kNaN, kInf, 8},         // mul
      {kNaN, kNaN, kNaN, kInf, kNaN, kInf, -kInf, kNaN, kNaN, 0.5},  // div
  };
  const auto ops = binary_ops();
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto y = ops[i].second(a, b).to_vector();
    for (size_t k = 0; k < y.size(); ++k) EXPECT_TRUE(same_ieee(y[k], expected[i][k])) << ops[i].first << ", element " << k;
  }
  // A NaN in a broadcast row reaches its whole column, and nothing else.
  const auto m = sg::tensor({{1, 2, 3}, {4, 5, 6}}, opts());
  const auto row = sg::tensor({0.5, kNaN, 2}, opts());
  const auto col = sg::from_vector(std::vector<double>{kInf, 1}, {2, 1}, opts());
  const auto r = (m * row).to_vector(), c = (m + col).to_vector();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      EXPECT_EQ(std::isnan(r[i * 3 + j]), j == 1) << "m * row at (" << i << ", " << j << ")";
      EXPECT_EQ(std::isinf(c[i * 3 + j]), i == 0) << "m + col at (" << i << ", " << j << ")";
    }
}

TEST_P(NonFinite, ReductionsAndLossPropagate) {
  EXPECT_TRUE(std::isnan(sg::sum(sg::tensor({1, kNaN, 2}, opts())).item()));
  EXPECT_EQ(sg::sum(sg::tensor({kInf, 1, 2}, opts())).item(), kInf);
  EXPECT_EQ(sg::mean(sg::tensor({-kInf, 1}, opts())).item(), -kInf);
  EXPECT_TRUE(std::isnan(sg::mean(sg::tensor({kInf, -kInf}, opts())).item()));
  const auto m = sg::tensor({{1, 2, 3}, {4, 5, kNaN}}, opts());
  const auto by_col = sg::sum(m, 0).to_vector(), by_row = sg::mean(m, 1).to_vector();
  EXPECT_EQ(by_col[0], 5);
  EXPECT_EQ(by_col[1], 7);
  EXPECT_TRUE(std::isnan(by_col[2]));
  EXPECT_EQ(by_row[0], 2);
  EXPECT_TRUE(std::isnan(by_row[1]));
  EXPECT_TRUE(std::isnan(sg::mse_loss(m, sg::zeros({2, 3}, opts())).item()));
  EXPECT_EQ(sg::mse_loss(sg::zeros({2}, opts()), sg::tensor({kInf, 1}, opts())).item(), kInf);
}

// Elementwise ops on structured tensors: non-finite values in entries a structure ignores (or
// a non-finite scalar, 0·inf = NaN) never break the invariant: the zeros stay exact zeros.
TEST_P(NonFinite, StructuredElementwiseKeepsStructuralZeros) {
  const int64_t n = 4;
  const auto u = tagged(structured_values(S::UpperTriangular, n, 0, 2, kNaN, 7), S::UpperTriangular, n, opts());
  std::vector<double> dv = structured_values(S::Dense, n, 1, 3, kInf, 8);
  dv[3 * n + 0] = kNaN;   // below the diagonal: ignored by an Upper product
  dv[2 * n + 1] = -kInf;  // below the diagonal
  const auto d = sg::from_vector(dv, {n, n}, opts());
  const std::vector<std::pair<std::string, sg::Tensor>> results = {
      {"U ⊙ D", u * d},
      {"D ⊙ U", d * u},
      {"U * inf", u * kInf},
      {"U / nan", u / kNaN},
      {"U ⊙ 0-d inf", u * sg::sum(sg::full({1}, kInf, opts()))},
      {"leaky_relu(U, inf)", sg::leaky_relu(u, kInf)},
      {"U * -inf (typed)", sg::UpperTriangular(u) * -kInf},
  };
  for (const auto& [name, r] : results) {
    ASSERT_EQ(r.structure(), S::UpperTriangular) << name;
    const auto v = r.to_vector();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < i; ++j) EXPECT_EQ(v[i * n + j], 0.0) << name << " at (" << i << ", " << j << ")";
    EXPECT_TRUE(std::isnan(v[0 * n + 2])) << name << ": the NaN of U at (0, 2) did not propagate";
  }
  EXPECT_TRUE(std::isinf((u * d).to_vector()[1 * n + 3])) << "the inf of D at (1, 3) did not propagate";
  // Symmetric stays bit-for-bit symmetric through NaN: as_symmetric accepts the result.
  const auto s = tagged(structured_values(S::Symmetric, n, 1, 2, kNaN, 9), S::Symmetric, n, opts());
  for (const sg::Tensor& r : {sg::Tensor(s * kNaN), sg::exp(s), s + s, sg::Tensor(s * s)}) {
    ASSERT_EQ(r.structure(), S::Symmetric);
    EXPECT_NO_THROW(sg::as_symmetric(r.dense()));
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, NonFinite, ::testing::ValuesIn(sgtest::test_devices_and_dtypes()),
                         sgtest::device_dtype_test_name);

}  // namespace
