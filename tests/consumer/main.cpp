// Consumer of the installed package: one structured product and its gradient.
#include <structgrad/structgrad.h>

#include <cstdio>

int main() {
  auto u = sg::UpperTriangular::randn(8).requires_grad_();
  sg::UpperTriangular c = sg::matmul(u, u);
  sg::sum(c).backward();
  const bool ok = u.grad().structure() == sg::Structure::UpperTriangular;
  std::printf("consumer: %s\n", ok ? "ok" : "wrong gradient structure");
  return ok ? 0 : 1;
}
