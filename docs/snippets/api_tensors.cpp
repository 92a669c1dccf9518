// docs/api.md, "Tensors and factories": making, inspecting, converting and copying tensors.
// Built and run by CTest (tests/snippets.cmake); the guide shows this file verbatim.
#include <structgrad/structgrad.h>

#include <iostream>

int main() {
  sg::manual_seed(42);                                        // same numbers on CPU and CUDA
  auto x = sg::randn({1024, 16});                             // standard normal, float32, cpu
  auto u = sg::rand({3, 3});                                  // uniform in [0, 1)
  auto z = sg::zeros({2, 3}, sg::TensorOptions().dtype(sg::kFloat64));
  auto o = sg::ones({4}, sg::kFloat64);                       // a DType or a Device converts to options
  auto h = sg::full({2, 2}, 0.5);
  auto i = sg::eye(3);
  auto r = sg::arange(5);                                     // 0, 1, 2, 3, 4
  auto q = sg::arange(0.0, 1.0, 0.25);                        // 0, 0.25, 0.5, 0.75
  auto v = sg::tensor({1.0, 2.0, 3.0});
  auto m = sg::tensor({{1.0, 2.0}, {3.0, 4.0}});
  auto f = sg::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  auto zl = sg::zeros_like(x), ol = sg::ones_like(m);
  auto w = sg::randn({16, 16}, sg::TensorOptions().requires_grad());  // a parameter

  // Inspecting.
  std::cout << sg::shape_str(x.shape()) << " " << x.dtype() << " " << x.device() << " " << x.structure() << "\n";
  const int64_t rows = x.size(0), cols = x.size(-1), count = x.numel(), dims = x.dim();
  const double total = sg::sum(m).item();                    // the value of a one-element tensor
  const std::vector<double> values = v.to_vector();           // row-major, synchronises on a GPU
  const float* raw = x.data<float>();                         // typed pointer; throws on a dtype mismatch
  std::cout << m << "\n";                                     // shape, dtype, device, structure, values

  // Converting and copying.
  auto x64 = x.to(sg::kFloat64);                              // differentiable, like libtorch's .to()
  auto same = x.to(sg::kCPU);                                 // returns x when already there
  auto copy = m.clone();
  copy.fill_(0.0);                                            // in place, not recorded
  copy.copy_(m);

  SG_CHECK(rows == 1024 && cols == 16 && count == 16384 && dims == 2 && total == 10.0, "tensors");
  SG_CHECK(values[2] == 3.0 && raw == x.data_ptr() && x64.dtype() == sg::kFloat64 && same.is_same(x), "tensors");
  SG_CHECK(u.numel() + z.numel() + o.numel() + h.numel() + i.numel() + r.numel() + q.numel() == 41, "tensors");
  SG_CHECK(f.size(1) == 3 && zl.numel() == x.numel() && ol.numel() == 4 && w.requires_grad(), "tensors");
  SG_CHECK(sg::sum(copy).item() == 10.0, "tensors");
}
