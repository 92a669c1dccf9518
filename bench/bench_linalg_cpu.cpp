// CPU benchmark of the structured linear algebra against Eigen, side by side in one process:
// cholesky against Eigen's LLT, solve_triangular (N and 1 right-hand sides) against
// triangularView().solve, and inverse of a triangular matrix against a solve with the identity.
// Each case checks that both give the same result, then times them interleaved (median of R
// rounds). structgrad's forward+backward is timed too (Eigen has no backward to compare).
// Usage: bench_linalg_cpu [--n 256,512,1024] [--dtype float32,float64] [--reps R]
#include <Eigen/Dense>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <structgrad/structgrad.h>

#include "bench/bench_util.h"

namespace {

template <typename T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

double elapsed_ms(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

/// Medians of `runs` timed interleaved over `reps` rounds, after one warm-up each.
std::vector<double> time_interleaved(const std::vector<std::function<void()>>& runs, int reps) {
  for (const auto& f : runs) f();
  std::vector<std::vector<double>> times(runs.size());
  for (int r = 0; r < reps; ++r)
    for (size_t i = 0; i < runs.size(); ++i) times[i].push_back(elapsed_ms(runs[i]));
  std::vector<double> medians;
  for (auto& t : times) medians.push_back(median(t));
  return medians;
}

/// A tensor's values as an Eigen matrix (row-major, same dtype).
template <typename T>
Matrix<T> as_matrix(const sg::Tensor& t) {
  const std::vector<T> v = t.to_vector_as<T>();
  return Eigen::Map<const Matrix<T>>(v.data(), t.size(0), t.size(1));
}

template <typename T>
void check_close(const char* what, const Matrix<T>& ours, const Matrix<T>& eigen) {
  const double err = static_cast<double>((ours - eigen).norm() / eigen.norm());
  const double tol = sizeof(T) == 4 ? 1e-3 : 1e-10;
  if (!(err <= tol)) {
    std::fprintf(stderr, "%s: structgrad and Eigen differ by %.3g (relative)\n", what, err);
    std::exit(1);
  }
}

void row(const char* workload, int64_t n, const char* dtype, double ours, double eigen, double ours_fb) {
  std::printf("| %-28s | %5lld | %-7s | %9.3f | %9.3f | %5.2f× | %9.3f |\n", workload, static_cast<long long>(n), dtype,
              ours, eigen, eigen / ours, ours_fb);
}

template <typename T>
void run_size(int64_t n, int reps) {
  const sg::DType dtype = sizeof(T) == 4 ? sg::kFloat32 : sg::kFloat64;
  const char* name = sizeof(T) == 4 ? "float32" : "float64";
  const auto o = sg::TensorOptions().dtype(dtype);
  sg::manual_seed(7);
  const sg::Tensor a = sg::randn({n, n}, o);
  const sg::Symmetric s = sg::sym(sg::gram(a) / static_cast<double>(n) + sg::eye(n, o));
  const sg::LowerTriangular l = sg::tril(sg::randn({n, n}, o) / std::sqrt(static_cast<double>(n)) + sg::eye(n, o) * 2.0);
  const Matrix<T> s_e = as_matrix<T>(s), l_e = as_matrix<T>(l);

  {  // cholesky
    sg::Tensor s_grad = sg::Tensor(s).detach().requires_grad_();
    check_close<T>("cholesky", as_matrix<T>(sg::cholesky(s)), Matrix<T>(Eigen::LLT<Matrix<T>>(s_e).matrixL()));
    const auto t = time_interleaved({[&] { sg::cholesky(s); }, [&] { Eigen::LLT<Matrix<T>> llt(s_e); },
                                     [&] { sg::sum(sg::cholesky(s_grad)).backward(); }},
                                    reps);
    row("cholesky", n, name, t[0], t[1], t[2]);
  }
  for (const int64_t k : {n, int64_t{1}}) {  // solve_triangular, L·X = B
    const sg::Tensor b = sg::randn({n, k}, o);
    const Matrix<T> b_e = as_matrix<T>(b);
    sg::Tensor l_grad = sg::Tensor(l).detach().requires_grad_();
    check_close<T>("solve_triangular", as_matrix<T>(sg::solve_triangular(l, b)),
                   Matrix<T>(l_e.template triangularView<Eigen::Lower>().solve(b_e)));
    const auto t = time_interleaved({[&] { sg::solve_triangular(l, b); },
                                     [&] { Matrix<T> x = l_e.template triangularView<Eigen::Lower>().solve(b_e); },
                                     [&] { sg::sum(sg::solve_triangular(l_grad, b)).backward(); }},
                                    reps);
    row(k == 1 ? "solve_triangular, 1 rhs" : "solve_triangular, n rhs", n, name, t[0], t[1], t[2]);
  }
  {  // inverse of a triangular matrix
    sg::Tensor l_grad = sg::Tensor(l).detach().requires_grad_();
    const Matrix<T> eye = Matrix<T>::Identity(n, n);
    check_close<T>("inverse", as_matrix<T>(sg::inverse(l)), Matrix<T>(l_e.template triangularView<Eigen::Lower>().solve(eye)));
    const auto t = time_interleaved({[&] { sg::inverse(l); },
                                     [&] { Matrix<T> x = l_e.template triangularView<Eigen::Lower>().solve(eye); },
                                     [&] { sg::sum(sg::inverse(l_grad)).backward(); }},
                                    reps);
    row("inverse (Lower)", n, name, t[0], t[1], t[2]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string sizes = "256,512,1024", dtypes = "float32,float64";
  int reps = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--n") sizes = argv[i + 1];
    else if (flag == "--dtype") dtypes = argv[i + 1];
    else if (flag == "--reps") reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--n 256,512,1024] [--dtype float32,float64] [--reps R]\n", argv[0]);
      return 2;
    }
  }
  std::printf("| workload | n | dtype | structgrad ms | Eigen ms | Eigen / structgrad | structgrad fwd+bwd ms |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const std::string& d : bench::split(dtypes))
    for (const std::string& n : bench::split(sizes)) {
      if (d == "float32") run_size<float>(std::stoll(n), reps);
      else run_size<double>(std::stoll(n), reps);
    }
  return 0;
}
