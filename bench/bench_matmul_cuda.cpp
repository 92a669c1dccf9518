// The matmul op family timed through the public API only — every structure pair of
// {Dense, Upper, Symmetric, Lower} and gram, forward and forward + backward — so that one source times any
// build of the library, and two builds can be compared in one run on one GPU (scripts/ab_table.py).
// CUDA events on the library's stream, three warm-ups, the median of --reps, inputs rotated through
// enough copies to exceed the L2 cache. Prints one line per workload and writes a CSV with --csv.
// Usage: bench_matmul_cuda [--n 1024,4096] [--precision float32,tf32,float64] [--reps 15] [--csv FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <structgrad/structgrad.h>

#include "bench/bench_cuda.h"

namespace {

using bench::check;
using bench::median_ms;

struct Options : bench::CommonFlags {
  std::vector<std::string> precisions = {"float32", "tf32", "float64"};
};

Options parse(int argc, char** argv) {
  Options o;
  bench::for_each_flag(argc, argv,
                       "usage: bench_matmul_cuda [--n 1024,4096] [--precision float32,tf32,float64] [--reps 15] "
                       "[--csv FILE]\n",
                       [&](const std::string& flag, const std::string& value) {
                         if (flag == "--precision") o.precisions = bench::split(value);
                         else return o.take(flag, value);
                         return true;
                       });
  return o;
}

enum Kind { kDense, kUpper, kSym, kLower, kKinds };
const char* const kNames[] = {"dense", "upper", "sym", "lower"};

sg::Tensor random_of(Kind kind, int64_t n, sg::TensorOptions options) {
  switch (kind) {
    case kUpper: return sg::UpperTriangular::randn(n, options);
    case kSym: return sg::Symmetric::randn(n, options);
    case kLower: return sg::LowerTriangular::randn(n, options);
    default: return sg::randn({n, n}, options);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::program = "bench_matmul_cuda";
  const Options options = parse(argc, argv);
  if (!sg::cuda::is_available()) {
    std::fprintf(stderr, "bench_matmul_cuda: no CUDA device\n");
    return 1;
  }
  int l2 = 0;
  check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  std::FILE* csv = options.csv.empty() ? nullptr : std::fopen(options.csv.c_str(), "w");
  if (csv) std::fprintf(csv, "precision,n,workload,forward_ms,forward_backward_ms\n");
  std::printf("bench_matmul_cuda on %s, median of %d\n", sg::cuda::device_name().c_str(), options.reps);
  std::printf("%-8s %5s %-14s %12s %16s\n", "precision", "n", "workload", "forward ms", "fwd + bwd ms");
  for (const std::string& precision : options.precisions) {
    const sg::DType dtype = precision == "float64" ? sg::kFloat64 : sg::kFloat32;
    sg::set_matmul_precision(precision == "tf32" ? sg::Precision::TF32 : sg::Precision::Float32);
    for (const int64_t n : options.sizes) {
      const auto on_gpu = sg::TensorOptions().dtype(dtype).device(sg::kCUDA);
      const double bytes = double(n) * double(n) * double(sg::element_size(dtype));
      const int sets = static_cast<int>(std::min(8.0, std::max(1.0, std::ceil(3.0 * l2 / (2.0 * bytes)))));
      sg::manual_seed(7);
      std::vector<sg::Tensor> inputs[kKinds][2];
      for (int kind = 0; kind < kKinds; ++kind)
        for (int side = 0; side < 2; ++side)
          for (int s = 0; s < sets; ++s) inputs[kind][side].push_back(random_of(Kind(kind), n, on_gpu));
      const sg::Tensor upstream = sg::randn({n, n}, on_gpu);
      auto report = [&](const std::string& workload, double fwd, double fwd_bwd) {
        std::printf("%-8s %5lld %-14s %12.4f %16.4f\n", precision.c_str(), static_cast<long long>(n),
                    workload.c_str(), fwd, fwd_bwd);
        if (csv)
          std::fprintf(csv, "%s,%lld,%s,%.5f,%.5f\n", precision.c_str(), static_cast<long long>(n), workload.c_str(),
                       fwd, fwd_bwd);
        std::fflush(stdout);
      };
      for (int a = 0; a < kKinds; ++a) {
        for (int b = 0; b < kKinds; ++b) {
          std::vector<sg::Tensor>& xs = inputs[a][0];
          std::vector<sg::Tensor>& ys = inputs[b][1];
          const double fwd = median_ms(options.reps, [&](int r) {
            sg::NoGradGuard no_grad;
            (void)sg::matmul(xs[r % sets], ys[r % sets]);
          });
          std::vector<sg::Tensor> x_leaves, y_leaves;
          for (int s = 0; s < sets; ++s) {
            x_leaves.push_back(xs[s].detach().requires_grad_());
            y_leaves.push_back(ys[s].detach().requires_grad_());
          }
          const double fwd_bwd = median_ms(options.reps, [&](int r) {
            sg::Tensor& x = x_leaves[r % sets];
            sg::Tensor& y = y_leaves[r % sets];
            sg::matmul(x, y).backward(upstream);
            x.zero_grad();
            y.zero_grad();
          });
          report(std::string(kNames[a]) + "·" + kNames[b], fwd, fwd_bwd);
        }
      }
      std::vector<sg::Tensor>& xs = inputs[kDense][0];
      const double fwd = median_ms(options.reps, [&](int r) {
        sg::NoGradGuard no_grad;
        (void)sg::gram(xs[r % sets]);
      });
      std::vector<sg::Tensor> leaves;
      for (int s = 0; s < sets; ++s) leaves.push_back(xs[s].detach().requires_grad_());
      const double fwd_bwd = median_ms(options.reps, [&](int r) {
        sg::Tensor& x = leaves[r % sets];
        sg::Tensor(sg::gram(x)).backward(upstream);
        x.zero_grad();
      });
      report("gram", fwd, fwd_bwd);
    }
  }
  if (csv) std::fclose(csv);
  return 0;
}
