// docs/api.md, "Index tensors, dtypes and random integers": int64 tensors for indices, the dtype
// rules of from_vector, randint and randperm (counter-based, the same numbers on every device), and
// the error float ops give on int64. Built and run by CTest; the guide shows the body of main()
// before its checks.
#include <structgrad/structgrad.h>

#include <iostream>
#include <string>
#include <vector>

int main() {
  auto idx = sg::from_vector(std::vector<int64_t>{3, 0, 2});  // int64, 1-D: no shape needed

  const sg::Device device = sg::cuda::is_available() ? sg::kCUDA : sg::kCPU;
  sg::manual_seed(7);
  auto dice = sg::randint(1, 7, {1000});                      // int64, uniform in [1, 7)
  auto order = sg::randperm(10);                              // 0 … 9 in a random order
  sg::manual_seed(7);                                         // the same seed on another device
  auto dice_there = sg::randint(1, 7, {1000}, device);        // the same numbers

  std::string message;
  try {
    auto wrong = idx + idx;                                   // float ops take float32 or float64 only
  } catch (const sg::Error& e) {
    message = e.what();                                       // add: expected a floating-point tensor, got int64
  }

  SG_CHECK(idx.to_vector_as<int64_t>() == std::vector<int64_t>({3, 0, 2}), "int64");
  SG_CHECK(!sg::is_floating_point(sg::arange(4, sg::kInt64).dtype()), "arange as int64");
  SG_CHECK(sg::from_vector(std::vector<float>{1, 2}).dtype() == sg::kFloat32, "float32 from floats");
  SG_CHECK(order.dtype() == sg::kInt64, "randperm gives int64");
  SG_CHECK(dice_there.to_vector_as<int64_t>() == dice.to_vector_as<int64_t>(), "the same numbers on every device");
  SG_CHECK(message.find("add: expected a floating-point tensor, got int64") != std::string::npos, message);
}
