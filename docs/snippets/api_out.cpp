// docs/api.md, "Products into memory you own": products and their gradients written into memory
// another library owns, recording nothing. Built and run by CTest; the guide shows the body of
// main() before its checks.
#include <structgrad/structgrad.h>

#include <vector>

int main() {
  // Memory another library owns (a torch::Tensor's, a NumPy array's), viewed without a copy.
  std::vector<double> a_memory(9, 1.0), b_memory(9, 2.0), c_memory(9), g_memory(9, 1.0), da_memory(9);
  auto a = sg::from_blob(a_memory.data(), {3, 3}, sg::kFloat64);
  auto b = sg::from_blob(b_memory.data(), {3, 3}, sg::kFloat64);
  auto c = sg::from_blob(c_memory.data(), {3, 3}, sg::kFloat64);
  using S = sg::Structure;
  sg::matmul_out(c, a, S::UpperTriangular, b, S::UpperTriangular);  // c = triu(triu(a)·triu(b))
  auto g = sg::from_blob(g_memory.data(), {3, 3}, sg::kFloat64);
  auto da = sg::from_blob(da_memory.data(), {3, 3}, sg::kFloat64);
  sg::Tensor no_db;                                                 // undefined: not computed
  sg::matmul_backward_out(g, a, S::UpperTriangular, b, S::UpperTriangular, da, no_db);
  SG_CHECK(c_memory[0] == 2.0 && c_memory[2] == 6.0 && c_memory[3] == 0.0, "matmul_out");
  SG_CHECK(da_memory[3] == 0.0 && da_memory[0] == 6.0, "matmul_backward_out");  // upper triangular
}
