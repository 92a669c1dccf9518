// docs/api.md, "Index tensors and dtypes": int64 tensors for indices, the dtype rules of
// from_vector, reading and printing integers, and the errors float ops give on int64. Built and
// run by CTest; the guide shows it verbatim.
#include <structgrad/structgrad.h>

#include <iostream>
#include <string>
#include <vector>

int main() {
  auto idx = sg::from_vector(std::vector<int64_t>{3, 0, 2});  // int64, 1-D: no shape needed
  auto r = sg::arange(4, sg::kInt64);                         // 0, 1, 2, 3 as int64
  auto d = sg::from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2});             // float64
  auto f = sg::from_vector(std::vector<float>{1, 2});                             // float32
  auto g = sg::from_vector(std::vector<double>{1, 2}, sg::kFloat32);              // the options decide
  const std::vector<int64_t> values = idx.to_vector_as<int64_t>();               // {3, 0, 2}
  std::cout << idx << "\n";                                   // one pair of brackets, integers
  std::cout << sg::sum(d) << "\n";                            // a 0-d tensor prints its value

  std::string message;
  try {
    auto wrong = idx + idx;                                   // float ops take float32 or float64 only
  } catch (const sg::Error& e) {
    message = e.what();                                       // add: expected a floating-point tensor, got int64
  }
  bool refused = false;
  try {
    r.requires_grad_();                                       // indices are never differentiable
  } catch (const sg::Error&) {
    refused = true;
  }

  SG_CHECK(idx.dtype() == sg::kInt64 && r.dtype() == sg::kInt64 && !sg::is_floating_point(idx.dtype()), "int64");
  SG_CHECK(d.dtype() == sg::kFloat64 && f.dtype() == sg::kFloat32 && g.dtype() == sg::kFloat32, "inferred dtypes");
  SG_CHECK(values == std::vector<int64_t>({3, 0, 2}) && r.to_vector_as<int64_t>()[3] == 3, "values");
  SG_CHECK(message.find("add: expected a floating-point tensor, got int64") != std::string::npos, message);
  SG_CHECK(refused && sg::element_size(sg::kInt64) == 8 && std::string(sg::dtype_name(sg::kInt64)) == "int64", "int64");
}
