// docs/api.md, "Tensors and factories": making, inspecting, reading and converting tensors,
// and copies to and from Eigen. Built and run by CTest (tests/snippets.cmake); the guide shows the body
// of main() before its checks.
#include <structgrad/structgrad.h>

#include <iostream>

int main() {
  sg::manual_seed(42);                                        // same numbers on CPU and CUDA
  auto x = sg::randn({1024, 16});                             // standard normal, float32, cpu
  auto o = sg::ones({4}, sg::kFloat64);                       // a DType or a Device converts to options
  auto m = sg::tensor({{1.0, 2.0}, {3.0, 4.0}});
  auto f = sg::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  auto w = sg::randn({16, 16}, sg::TensorOptions().requires_grad());  // a parameter

  std::cout << sg::shape_str(x.shape()) << " " << x.dtype() << " " << x.device() << " " << x.structure() << "\n";
  std::cout << m << "\n";                                     // the header, then one row per line
  const double total = sg::sum(m).item();                     // the value of a one-element tensor
  const std::vector<double> values = f.to_vector();           // row-major; synchronises on a GPU
  const float* raw = x.data<float>();                         // typed pointer; throws on a dtype mismatch

  auto x64 = x.to(sg::kFloat64);                              // differentiable, like libtorch's .to()
  Eigen::MatrixXd e = sg::to_eigen<double>(f);                // copies, both ways
  auto from_e = sg::from_eigen(e);                            // float64 [2, 3]

  SG_CHECK(x.size(0) == 1024 && x.size(-1) == 16 && x.numel() == 16384 && x.dim() == 2, "shape");
  SG_CHECK(total == 10.0 && values[5] == 6.0 && raw == x.data_ptr() && x64.dtype() == sg::kFloat64, "values");
  SG_CHECK(o.numel() == 4 && w.requires_grad(), "factories");
  SG_CHECK(e(1, 2) == 6.0 && sg::sum(sg::square(from_e - f)).item() == 0.0, "eigen round trip");
}
