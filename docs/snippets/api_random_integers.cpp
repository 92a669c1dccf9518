// docs/api.md, "Random integers and permutations": randint and randperm, counter-based like
// randn, so a seed gives the same numbers on every device. Built and run by CTest (on a machine
// without a GPU it compares the CPU with itself); the guide shows it verbatim.
#include <structgrad/structgrad.h>

#include <algorithm>
#include <vector>

int main() {
  const sg::Device device = sg::cuda::is_available() ? sg::kCUDA : sg::kCPU;
  sg::manual_seed(7);
  auto dice = sg::randint(1, 7, {1000});                      // int64 in [1, 7)
  auto order = sg::randperm(10);                              // 0 … 9 in a random order, int64
  auto as_float = sg::randint(0, 2, {4, 4}, sg::kFloat32);    // the options may name another dtype

  sg::manual_seed(7);                                         // the same seed on another device
  auto dice_there = sg::randint(1, 7, {1000}, device);
  auto order_there = sg::randperm(10, device);

  const std::vector<int64_t> rolls = dice.to_vector_as<int64_t>();
  std::vector<int64_t> sorted = order.to_vector_as<int64_t>();
  std::sort(sorted.begin(), sorted.end());
  SG_CHECK(*std::min_element(rolls.begin(), rolls.end()) == 1 && *std::max_element(rolls.begin(), rolls.end()) == 6,
           "randint covers [low, high)");
  SG_CHECK(sorted == sg::arange(10, sg::kInt64).to_vector_as<int64_t>(), "randperm is a permutation");
  SG_CHECK(dice_there.to_vector_as<int64_t>() == rolls, "the same numbers on every device");
  SG_CHECK(order_there.to_vector_as<int64_t>() == order.to_vector_as<int64_t>(), "the same permutation");
  SG_CHECK(as_float.dtype() == sg::kFloat32 && dice.dtype() == sg::kInt64, "dtypes");
}
