// docs/api.md, "Indexing, slicing and joining": selecting rows by index, slices and blocks,
// gather and scatter_add, and a gradient through them. Built and run by CTest; the guide shows the
// body of main() before its checks.
#include <structgrad/structgrad.h>

#include <vector>

int main() {
  auto x = sg::reshape(sg::arange(12, sg::kFloat64), {4, 3}).requires_grad_();  // 0, 1, ..., 11 as [4, 3]
  auto idx = sg::from_vector(std::vector<int64_t>{3, 0, 3});

  auto picked = sg::index_select(x, 0, idx);                  // rows 3, 0, 3: [3, 3]
  auto even = sg::slice(x, 0, 0, 4, 2);                       // rows 0, 2 (start, end, step)
  auto U = sg::UpperTriangular::randn(6);
  sg::UpperTriangular leading(sg::block(U, 0, 0, 3, 3));      // a diagonal block keeps the structure

  auto labels = sg::from_vector(std::vector<int64_t>{2, 0, 1, 2}, {4, 1});
  auto chosen = sg::gather(x, 1, labels);                     // x[i][labels[i]]: [4, 1]
  auto counts = sg::scatter_add(sg::zeros({1, 3}, sg::kFloat64), 1, sg::reshape(labels, {1, 4}),
                                sg::ones({1, 4}, sg::kFloat64));  // 1, 1, 2: repeated positions add

  sg::sum(picked).backward();                                 // each row's gradient goes back where it came from
  const std::vector<double> dx = x.grad().to_vector();        // row 3 picked twice: 2, row 0 once: 1

  SG_CHECK(picked.to_vector()[0] == 9.0 && even.size(0) == 2 && leading.n() == 3, "selection");
  SG_CHECK(sg::slice(x, 1, -1, 3).size(1) == 1, "the last column, as in x[:, -1:]");
  SG_CHECK(chosen.to_vector() == std::vector<double>({2, 3, 7, 11}), "gather");
  SG_CHECK(counts.to_vector() == std::vector<double>({1, 1, 2}), "scatter_add");
  SG_CHECK(sg::cat({x, picked}, 0).size(0) == 7 && dx[9] == 2.0 && dx[0] == 1.0 && dx[3] == 0.0, "cat, gradient");
}
