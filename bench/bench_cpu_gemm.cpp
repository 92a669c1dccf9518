// Benchmark of the CPU structured GEMM (ops/cpu/blocked_gemm.cpp) against Eigen's dense,
// triangularView and selfadjointView products, side by side in one process, float32.
// Usage: bench_cpu_gemm [--n 128,256,512,1024,2048] [--csv FILE] [--reps R]
#include <Eigen/Dense>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "ops/cpu/cpu_gemm.h"

namespace {

using sg::detail::GemmProblem;
using sg::detail::OperandKind;
using sg::detail::OutputMask;
using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// A timed candidate: a name and the call that runs it once.
struct Candidate {
  std::string name;
  std::function<void()> run;
  double median_ms = 0;
};

/// One benchmark case: our blocked path first, then the Eigen peers.
struct Case {
  std::string name;
  double useful_flops;  // the flops the structure requires (2 per useful multiply-add)
  std::vector<Candidate> candidates;
};

Matrix random_normal(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  Matrix x(n, n);
  for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
  return x;
}

GemmProblem square_problem(int64_t n, OperandKind a, OperandKind b, OutputMask mask, const Matrix& a_data,
                           const Matrix& b_data, Matrix& c, bool trans_b = false) {
  GemmProblem p;
  p.m = p.n = p.k = n;
  p.a = {a, false};
  p.b = {b, trans_b};
  p.mask = mask;
  p.a_data = a_data.data();
  p.b_data = b_data.data();
  p.c_data = c.data();
  p.lda = p.ldb = p.ldc = n;
  return p;
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  const size_t mid = xs.size() / 2;
  return xs.size() % 2 ? xs[mid] : 0.5 * (xs[mid - 1] + xs[mid]);
}

/// Runs every candidate once as warm-up, then `reps` rounds in which each candidate runs once
/// (interleaved, so background load hits all of them alike); keeps each one's median.
void time_case(Case& c, int reps) {
  for (Candidate& cand : c.candidates) cand.run();
  std::vector<std::vector<double>> times(c.candidates.size());
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < c.candidates.size(); ++i) {
      const auto start = std::chrono::steady_clock::now();
      c.candidates[i].run();
      const auto stop = std::chrono::steady_clock::now();
      times[i].push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    }
  }
  for (size_t i = 0; i < c.candidates.size(); ++i) c.candidates[i].median_ms = median(times[i]);
}

std::vector<int64_t> parse_sizes(const std::string& list) {
  std::vector<int64_t> sizes;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) sizes.push_back(std::stoll(item));
  return sizes;
}

/// All five cases at size n, with matrices that live as long as the cases.
struct Inputs {
  Matrix upper_a, upper_b, sym_a, sym_b, dense_a, dense_b, c;
  explicit Inputs(int64_t n, std::mt19937& rng)
      : upper_a(random_normal(n, rng)), upper_b(random_normal(n, rng)), sym_a(random_normal(n, rng)),
        sym_b(random_normal(n, rng)), dense_a(random_normal(n, rng)), dense_b(random_normal(n, rng)), c(n, n) {
    upper_a = Matrix(upper_a.triangularView<Eigen::Upper>());
    upper_b = Matrix(upper_b.triangularView<Eigen::Upper>());
    sym_a = Matrix(sym_a.selfadjointView<Eigen::Upper>());
    sym_b = Matrix(sym_b.selfadjointView<Eigen::Upper>());
  }
};

std::vector<Case> make_cases(int64_t n, Inputs& in) {
  using sg::detail::cpu::blocked_gemm;
  const double n3 = double(n) * n * n;
  Matrix& c = in.c;
  auto ours = [&](OperandKind a, OperandKind b, OutputMask mask, const Matrix& x, const Matrix& y, bool trans_b) {
    const GemmProblem p = square_problem(n, a, b, mask, x, y, c, trans_b);
    return Candidate{"blocked", [p] { blocked_gemm(p, sg::DType::Float32); }};
  };
  auto dense = [&](const Matrix& x, const Matrix& y) {
    return Candidate{"eigen dense", [&c, &x, &y] { c.noalias() = x * y; }};
  };
  std::vector<Case> cases;
  cases.push_back({"Upper·Upper", n3 / 3,
                   {ours(OperandKind::Upper, OperandKind::Upper, OutputMask::Upper, in.upper_a, in.upper_b, false),
                    dense(in.upper_a, in.upper_b),
                    {"eigen triangularView", [&] { c.noalias() = in.upper_a.triangularView<Eigen::Upper>() * in.upper_b; }}}});
  cases.push_back({"Upper·Dense", n3,
                   {ours(OperandKind::Upper, OperandKind::Dense, OutputMask::Full, in.upper_a, in.dense_b, false),
                    dense(in.upper_a, in.dense_b),
                    {"eigen triangularView", [&] { c.noalias() = in.upper_a.triangularView<Eigen::Upper>() * in.dense_b; }}}});
  cases.push_back({"Sym·Dense", 2 * n3,
                   {ours(OperandKind::Symmetric, OperandKind::Dense, OutputMask::Full, in.sym_a, in.dense_b, false),
                    dense(in.sym_a, in.dense_b),
                    {"eigen selfadjointView", [&] { c.noalias() = in.sym_a.selfadjointView<Eigen::Upper>() * in.dense_b; }}}});
  cases.push_back({"Sym·Sym", 2 * n3,
                   {ours(OperandKind::Symmetric, OperandKind::Symmetric, OutputMask::Full, in.sym_a, in.sym_b, false),
                    dense(in.sym_a, in.sym_b),
                    {"eigen selfadjointView", [&] { c.noalias() = in.sym_a.selfadjointView<Eigen::Upper>() * in.sym_b; }}}});
  cases.push_back({"gram A·Aᵀ", n3,
                   {ours(OperandKind::Dense, OperandKind::Dense, OutputMask::Symmetric, in.dense_a, in.dense_a, true),
                    {"eigen dense", [&] { c.noalias() = in.dense_a * in.dense_a.transpose(); }},
                    {"eigen rankUpdate", [&] {
                       c.setZero();
                       c.selfadjointView<Eigen::Upper>().rankUpdate(in.dense_a);
                     }}}});
  return cases;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes = {128, 256, 512, 1024, 2048};
  std::string csv_path;
  int reps_override = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--n" && i + 1 < argc) sizes = parse_sizes(argv[++i]);
    else if (arg == "--csv" && i + 1 < argc) csv_path = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps_override = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--n 128,256,...] [--csv FILE] [--reps R]\n", argv[0]);
      return 2;
    }
  }
  int omp_threads = 1;
#ifdef _OPENMP
  omp_threads = omp_get_max_threads();
#endif
  std::printf("bench_cpu_gemm: float32, median of interleaved runs; OpenMP threads %d, Eigen::nbThreads() %d\n\n",
              omp_threads, Eigen::nbThreads());
  std::printf("| N | case | blocked ms | useful GFLOP/s | Eigen dense ms | speed-up vs dense | Eigen structured peer "
              "| peer ms | speed-up vs peer |\n|---|---|---|---|---|---|---|---|---|\n");
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    csv << "n,case,candidate,median_ms,useful_gflops\n";
  }
  std::mt19937 rng(20240611);
  for (int64_t n : sizes) {
    Inputs inputs(n, rng);
    std::vector<Case> cases = make_cases(n, inputs);
    const int reps = reps_override > 0 ? reps_override : n <= 512 ? 21 : n <= 1024 ? 9 : 5;
    for (Case& c : cases) {
      time_case(c, reps);
      const Candidate &ours = c.candidates[0], &dense = c.candidates[1], &peer = c.candidates[2];
      std::printf("| %lld | %s | %.3f | %.1f | %.3f | %.2f× | %s | %.3f | %.2f× |\n", static_cast<long long>(n),
                  c.name.c_str(), ours.median_ms, c.useful_flops / (ours.median_ms * 1e6), dense.median_ms,
                  dense.median_ms / ours.median_ms, peer.name.c_str(), peer.median_ms, peer.median_ms / ours.median_ms);
      std::fflush(stdout);
      if (csv.is_open())
        for (const Candidate& cand : c.candidates)
          csv << n << ",\"" << c.name << "\"," << cand.name << "," << cand.median_ms << ","
              << c.useful_flops / (cand.median_ms * 1e6) << "\n";
    }
  }
  return 0;
}
