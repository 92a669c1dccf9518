// docs/api.md, "Eigen interop and errors": copies to and from Eigen matrices, and the one
// exception type. Built and run by CTest; the guide shows it verbatim.
#include <structgrad/structgrad.h>

#include <iostream>
#include <string>

int main() {
  Eigen::MatrixXd m = Eigen::MatrixXd::Random(3, 3);
  sg::Tensor t = sg::from_eigen(m);                           // float64 [3, 3] (a copy)
  Eigen::MatrixXd back = sg::to_eigen<double>(t);
  Eigen::MatrixXf single = sg::to_eigen<float>(sg::randn({2, 2}));
  SG_CHECK(back == m && single.rows() == 2, "eigen round trip");

  std::string message;
  try {
    sg::matmul(sg::randn({2, 5}), sg::randn({3, 7}));
  } catch (const sg::Error& e) {                              // every failure is an sg::Error
    message = e.what();                                       // matmul: shapes [2, 5] and [3, 7] cannot be multiplied
  }
  std::cout << message << "\n";
  SG_CHECK(message.find("cannot be multiplied") != std::string::npos, "the error names the problem");
}
