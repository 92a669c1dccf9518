// Benchmark of the CUDA structured GEMM through the public ops (matmul, gram, backward),
// side by side with cuBLAS (SGEMM, STRMM, SSYMM, SSYRK) in one process on one stream, float32
// (and float64 for Upper·Upper). CUDA events around each call, warm-up, median of --reps,
// random inputs rotated among enough copies to exceed L2. Prints a Markdown table (useful
// TFLOP/s counts only the flops the structure needs) and writes a CSV with --csv.
// With --tf32, structgrad runs in sg::Precision::TF32 and cuBLAS in its TF32 tensor-op mode.
// Usage: bench_gemm_cuda [--n 1024,4096] [--reps 15] [--csv FILE] [--tf32 [ablation]] (--help lists them)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <structgrad/structgrad.h>

#include "bench/bench_cuda.h"
#include "cuda/check.h"
#include "cuda/runtime.h"
#include "cuda/gemm/plan_cache.h"
#include "cuda/gemm/tuning.h"
#include "cuda/structured_gemm.h"
#include "ops/output_pool.h"

namespace {

using sg::Structure;
using sg::detail::cuda::GemmSchedule;

struct Options {
  std::vector<int64_t> sizes = {1024, 4096};
  int reps = 15;
  std::string csv;
  bool tf32 = false;
  bool fma = false;       // exact float32 on the FFMA loop even where the FP64 tensor cores run (the ablation)
  bool mma_sync = false;  // TF32 on the mma.sync loop even where wgmma runs (the ablation)
  bool no_tma = false;    // TF32 on the wgmma loop with every tile staged through registers
  bool tma_outer_major = false;  // TF32 on the wgmma loop, TMA for outer-major operands only
  bool barrier_per_step = false;  // TF32 on the wgmma loop without the pipelined kernel
  std::string relayout = "auto";  // wgmma products: k-major/Symmetric operands copied outer-major first;
                                  // FP64 loop products: Symmetric/outer-major ones copied k-major first
  std::string wide = "auto";      // wgmma products of two outer-major Dense operands: the 128 × 256 kernel
  bool wide_scalar_stores = false;  // that kernel's tiles written by 4-byte stores, not TMA (the ablation)
  bool no_transposed_a = false;     // the backward copies op(A) for dB, not reading the forward's op(A)ᵀ (the ablation)
  bool no_dependent_launch = false; // the tall and wide kernels launched as ordinary launches (the ablation)
  bool no_zeros_reuse = false;      // Upper outputs write their zeros even in a block that holds them (the ablation)
  std::string wide_split = "auto";  // that kernel's last round of tiles cut in k
  std::string register_b = "auto";  // wgmma products with a k-major B: the register-B kernel
  std::string tall = "auto";        // those of them with stored zeros: the 256 × 128 persistent kernel
  GemmSchedule schedule = GemmSchedule::Balanced;  // the planner's schedule for every product of the run
  int pairs = 0;  // --head-to-head P: some products against cuBLAS SGEMM, P interleaved pairs (Bench::run_size)
};

struct Row {
  int64_t n;
  std::string workload, impl;
  double ms, useful_flops;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    // `arg` is `flag` and its value one of auto, never, always.
    auto mode_flag = [&](const char* flag) {
      if (arg != flag || i + 1 >= argc) return false;
      const std::string v = argv[i + 1];
      return v == "auto" || v == "never" || v == "always";
    };
    if (arg == "--n") o.sizes = bench::split_sizes(next());
    else if (arg == "--reps") o.reps = std::stoi(next());
    else if (arg == "--head-to-head") o.pairs = std::stoi(next());
    else if (arg == "--csv") o.csv = next();
    else if (arg == "--tf32") o.tf32 = true;
    else if (arg == "--fma") o.fma = true;
    else if (arg == "--mma-sync") o.mma_sync = true;
    else if (arg == "--no-tma") o.no_tma = true;
    else if (arg == "--tma-outer-major") o.tma_outer_major = true;
    else if (arg == "--barrier-per-step") o.barrier_per_step = true;
    else if (mode_flag("--relayout")) o.relayout = next();
    else if (mode_flag("--wide")) o.wide = next();
    else if (arg == "--wide-scalar-stores") o.wide_scalar_stores = true;
    else if (arg == "--no-transposed-a") o.no_transposed_a = true;
    else if (arg == "--no-zeros-reuse") o.no_zeros_reuse = true;
    else if (arg == "--no-dependent-launch") o.no_dependent_launch = true;
    else if (mode_flag("--wide-split")) o.wide_split = next();
    else if (mode_flag("--register-b")) o.register_b = next();
    else if (mode_flag("--tall")) o.tall = next();
    else if (arg == "--schedule" && i + 1 < argc && (std::string(argv[i + 1]) == "balanced" ||
                                                     std::string(argv[i + 1]) == "heaviest-first" ||
                                                     std::string(argv[i + 1]) == "raster")) {
      const std::string v = next();
      o.schedule = v == "balanced" ? GemmSchedule::Balanced
                   : v == "raster" ? GemmSchedule::Raster
                                   : GemmSchedule::HeaviestFirst;
    } else {
      std::fprintf(stderr,
                   "usage: bench_gemm_cuda [--n 1024,4096] [--reps 15] [--csv FILE] [--fma] [--relayout auto|never|always] "
                   "[--tf32 [--mma-sync | --no-tma | --tma-outer-major | --barrier-per-step] [--wide auto|never|always] [--wide-scalar-stores] [--wide-split auto|never|always] [--register-b auto|never|always] [--tall auto|never|always] [--no-transposed-a] [--no-dependent-launch] [--no-zeros-reuse]] "
                   "[--schedule balanced|heaviest-first|raster] [--head-to-head PAIRS]\n");
      std::exit(2);
    }
  }
  return o;
}

/// Two products timed in turn: `pairs` pairs, each call between its own events and waited for as
/// median_ms does, ours first in even pairs and the peer first in odd ones (after three warm-up
/// pairs). Both then run in the same seconds, at the same clocks and temperature, which timing one
/// after the other does not give: median_ms's rows time each peer once per size, before ours.
/// Back to back, the calls hold the GPU at its power limit (an H100 at 700 W lowers its clocks
/// from 1980 MHz to as little as 1410 within a second of TF32 GEMMs), so these times are those
/// of sustained work, and slower than the rows' short series (docs/performance.md).
struct HeadToHead {
  double ours_ms, peer_ms;  // the medians of each one's times
  double ratio;             // the median over pairs of ours / peer
  int ours_faster, pairs;   // the pairs in which ours took no longer than the peer
};
HeadToHead head_to_head(cudaStream_t stream, int pairs, const std::function<void(int)>& ours,
                        const std::function<void(int)>& peer) {
  bench::EventTimer timer(stream);
  for (int w = 0; w < 3; ++w) timer.ms(ours, w), timer.ms(peer, w);
  std::vector<double> mine, theirs, ratios;
  int faster = 0;
  for (int r = 0; r < pairs; ++r) {
    double a = 0, b = 0;
    if (r % 2 == 0) a = timer.ms(ours, r), b = timer.ms(peer, r);
    else b = timer.ms(peer, r), a = timer.ms(ours, r);
    mine.push_back(a);
    theirs.push_back(b);
    ratios.push_back(a / b);
    faster += a <= b;
  }
  return {bench::median(mine), bench::median(theirs), bench::median(ratios), faster, pairs};
}

/// The projections of docs/gradients.md in place on a row-major n × n float64 matrix, one
/// thread per pair (i, j), i > j: triu(X) zeroes X(i, j), sym(X) = (X + Xᵀ)/2 sets both to their mean.
__global__ void project_kernel(double* x, int64_t n, bool symmetric) {
  const int64_t i = blockIdx.y * int64_t(blockDim.y) + threadIdx.y, j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n || j >= i) return;
  if (symmetric) {
    const double mean = (x[i * n + j] + x[j * n + i]) / 2;
    x[i * n + j] = x[j * n + i] = mean;
  } else {
    x[i * n + j] = 0;
  }
}

/// Input sets to rotate through so that one pass reads more than three times the L2.
int input_sets(int64_t n, int operands, size_t element) {
  int l2 = 0;
  SG_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  const double set_bytes = double(n) * n * element * operands;
  return static_cast<int>(std::min(16.0, std::max(1.0, std::ceil(3.0 * l2 / set_bytes))));
}

class Bench {
 public:
  explicit Bench(const Options& o) : options_(o), stream_(sg::detail::cuda::stream(0)) {
    SG_CUBLAS_CHECK(cublasCreate(&cublas_));
    SG_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    SG_CUBLAS_CHECK(cublasSetMathMode(cublas_, o.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    suffix_ = o.tf32 ? " TF32" : "";
    tolerance_ = o.tf32 ? 2e-3 : 1e-5;
  }
  ~Bench() { cublasDestroy(cublas_); }

  void run_size(int64_t n);
  void print_table() const;
  void write_csv(const std::string& path) const;

 private:
  void add(int64_t n, const std::string& workload, const std::string& impl_name, double ms, double flops) {
    // float64 rows are never TF32.
    const std::string impl = workload.find("float64") == std::string::npos ? impl_name + suffix_ : impl_name;
    rows_.push_back({n, workload, impl, ms, flops});
    std::printf("  %-28s %-34s %9.3f ms  %7.2f useful TFLOP/s\n", workload.c_str(), impl.c_str(), ms,
                flops / (ms * 1e9));
    std::fflush(stdout);
  }
  double time(const std::function<void(int)>& body) { return bench::median_ms(options_.reps, body); }
  /// Row-major scale · op(X)·op(Y) in float64, by cuBLAS DGEMM on float64 copies of the stored
  /// operands (an UpperTriangular tensor stores its zeros, a Symmetric one its mirror).
  sg::Tensor reference(const sg::Tensor& x, bool x_transposed, const sg::Tensor& y, bool y_transposed,
                       double scale = 1) const;
  /// The projection of `structure` (docs/gradients.md) of a float64 n × n reference, in place.
  sg::Tensor project(sg::Tensor x, sg::Structure structure) const;
  /// Checks one result of ours against its float64 reference before it is timed: a bench of
  /// wrong results would measure nothing. Stops the program past `tolerance_`.
  void check_ours(const std::string& what, const sg::Tensor& ours, const sg::Tensor& reference) const;
  /// Runs `peer` (which writes `out`) and checks that it computed `ours`: relative Frobenius
  /// error within `tolerance` (float32 sums: 1e-5; TF32, both sides rounded: 4e-3), else the
  /// comparison would be meaningless and the program stops.
  void check_peer(const char* name, const sg::Tensor& ours, const std::function<void()>& peer, const sg::Tensor& out,
                  double tolerance) const;
  /// ‖x − reference‖ / ‖reference‖ in float64 on the device (an 8192² matrix is 0.5 GB on the host).
  double relative_error(const sg::Tensor& x, const sg::Tensor& reference) const;

  Options options_;
  cudaStream_t stream_;
  cublasHandle_t cublas_ = nullptr;
  std::string suffix_;
  // Our relative error against float64 that stops the bench: the issue-5 bound for TF32
  // (docs/performance.md records ~5e-4), and for exact float32 well above its ~1e-7.
  double tolerance_ = 1e-5;
  std::vector<Row> rows_;
  struct HeadToHeadRow {
    int64_t n;
    std::string product;
    HeadToHead result;
  };
  std::vector<HeadToHeadRow> head_to_head_;
};

sg::Tensor Bench::reference(const sg::Tensor& x, bool x_transposed, const sg::Tensor& y, bool y_transposed,
                            double scale) const {
  // Row-major Z = op(X)·op(Y) is column-major Zᵀ = op(Y)ᵀ·op(X)ᵀ, and the column-major view of a
  // row-major X is Xᵀ: so op(Y)ᵀ is Y's view untransposed exactly when op(Y) = Y.
  sg::NoGradGuard no_grad;  // x may be a leaf that requires grad
  const sg::Tensor x64 = x.to(sg::kFloat64), y64 = y.to(sg::kFloat64);
  const int64_t m = x_transposed ? x.size(1) : x.size(0), k = x_transposed ? x.size(0) : x.size(1);
  const int64_t n = y_transposed ? y.size(0) : y.size(1);
  sg::Tensor z = sg::zeros({m, n}, sg::TensorOptions().dtype(sg::kFloat64).device(sg::kCUDA));
  const double zero = 0;
  SG_CUBLAS_CHECK(cublasDgemm(cublas_, y_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, x_transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
                              static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &scale,
                              static_cast<const double*>(y64.data_ptr()), static_cast<int>(y.size(1)),
                              static_cast<const double*>(x64.data_ptr()), static_cast<int>(x.size(1)), &zero,
                              static_cast<double*>(z.data_ptr()), static_cast<int>(n)));
  return z;
}

sg::Tensor Bench::project(sg::Tensor x, sg::Structure structure) const {
  if (structure == sg::Structure::Dense) return x;
  const int64_t n = x.size(0);
  const dim3 block(32, 8), grid(static_cast<unsigned>((n + 31) / 32), static_cast<unsigned>((n + 7) / 8));
  project_kernel<<<grid, block, 0, stream_>>>(static_cast<double*>(x.data_ptr()), n,
                                               structure == sg::Structure::Symmetric);
  SG_CUDA_CHECK(cudaGetLastError());
  return x;
}

double Bench::relative_error(const sg::Tensor& x, const sg::Tensor& reference) const {
  const sg::Tensor difference = x.dtype() == sg::kFloat64 ? x.clone() : x.to(sg::kFloat64);
  const sg::Tensor reference64 = reference.to(sg::kFloat64);
  const int count = static_cast<int>(reference.numel());
  const double minus_one = -1;
  double num = 0, den = 0;
  SG_CUBLAS_CHECK(cublasDaxpy(cublas_, count, &minus_one, static_cast<const double*>(reference64.data_ptr()), 1,
                              static_cast<double*>(difference.data_ptr()), 1));
  SG_CUBLAS_CHECK(cublasDnrm2(cublas_, count, static_cast<const double*>(difference.data_ptr()), 1, &num));
  SG_CUBLAS_CHECK(cublasDnrm2(cublas_, count, static_cast<const double*>(reference64.data_ptr()), 1, &den));
  return num / den;
}

void Bench::check_peer(const char* name, const sg::Tensor& ours, const std::function<void()>& peer,
                       const sg::Tensor& out, double tolerance) const {
  peer();
  const double rel = relative_error(out, ours);
  std::printf("  peer check: cuBLAS %-22s relative error %.1e against structgrad\n", name, rel);
  if (!(rel <= tolerance)) {
    std::fprintf(stderr, "bench_gemm_cuda: cuBLAS %s does not compute structgrad's product (relative error %.3g)\n",
                 name, rel);
    std::exit(1);
  }
}

void Bench::check_ours(const std::string& what, const sg::Tensor& ours, const sg::Tensor& reference) const {
  const double rel = relative_error(ours, reference);
  std::printf("  check: structgrad %-40s relative error %.1e against float64\n", what.c_str(), rel);
  if (!(rel <= tolerance_)) {
    std::fprintf(stderr, "bench_gemm_cuda: structgrad's %s is wrong at N = %lld (relative error %.3g against float64, "
                 "bound %.1g)\n", what.c_str(), static_cast<long long>(ours.size(0)), rel, tolerance_);
    std::exit(1);
  }
}

void Bench::run_size(int64_t n) {
  const double n3 = double(n) * n * n;
  const auto f32 = sg::TensorOptions().device(sg::kCUDA);
  const int sets = input_sets(n, 2, sizeof(float));
  std::printf("N = %lld (%d input sets)\n", static_cast<long long>(n), sets);
  std::vector<sg::Tensor> upper_a, upper_b, sym_a, sym_b, dense_a, dense_b;
  for (int s = 0; s < sets; ++s) {
    upper_a.push_back(sg::UpperTriangular::randn(n, f32));
    upper_b.push_back(sg::UpperTriangular::randn(n, f32));
    sym_a.push_back(sg::Symmetric::randn(n, f32));
    sym_b.push_back(sg::Symmetric::randn(n, f32));
    dense_a.push_back(sg::randn({n, n}, f32));
    dense_b.push_back(sg::randn({n, n}, f32));
  }
  sg::Tensor out = sg::randn({n, n}, f32);
  sg::Tensor grad_out = sg::randn({n, n}, f32);
  auto ptr = [](const sg::Tensor& t) { return static_cast<float*>(t.data_ptr()); };
  const int ld = static_cast<int>(n), ni = static_cast<int>(n);
  const float one = 1.f, zero = 0.f;

  // ---- cuBLAS peers (column-major; the shapes are square, so only the work matters) ----
  const double sgemm = time([&](int r) {
    SG_CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, ptr(dense_a[r % sets]), ld,
                                ptr(dense_b[r % sets]), ld, &zero, ptr(out), ld));
  });
  add(n, "dense·dense", "cuBLAS SGEMM", sgemm, 2 * n3);
  // STRMM and SSYMM compute our products. Row-major C = X·Y is column-major Cᵀ = Yᵀ·Xᵀ, and the
  // column-major view of a row-major Upper matrix is lower triangular. So C = U·V (both Upper)
  // is STRMM with U as the triangular operand on the right, or with V on the left: both are
  // timed and checked, and the faster is the peer. C = U·D is the first form, C = S·D SSYMM
  // with S on the right. (STRMM and SSYMM on the left with the upper triangle do the same
  // amount of work but not our product, and cuBLAS's time depends on the side.)
  auto strmm_right = [&](const sg::Tensor& u, const sg::Tensor& y) {
    SG_CUBLAS_CHECK(cublasStrmm(cublas_, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT,
                                ni, ni, &one, ptr(u), ld, ptr(y), ld, ptr(out), ld));
  };
  auto strmm_left = [&](const sg::Tensor& u, const sg::Tensor& v) {
    SG_CUBLAS_CHECK(cublasStrmm(cublas_, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT,
                                ni, ni, &one, ptr(v), ld, ptr(u), ld, ptr(out), ld));
  };
  auto ssymm_right = [&](const sg::Tensor& s, const sg::Tensor& d) {
    SG_CUBLAS_CHECK(cublasSsymm(cublas_, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, ni, ni, &one, ptr(s), ld, ptr(d), ld,
                                &zero, ptr(out), ld));
  };
  {
    sg::NoGradGuard no_grad;
    const double tolerance = options_.tf32 ? 4e-3 : 1e-5;
    const sg::Tensor upper_upper = sg::matmul(sg::UpperTriangular(upper_a[0]), sg::UpperTriangular(upper_b[0]));
    check_peer("STRMM, U on the right", upper_upper, [&] { strmm_right(upper_a[0], upper_b[0]); }, out, tolerance);
    check_peer("STRMM, V on the left", upper_upper, [&] { strmm_left(upper_a[0], upper_b[0]); }, out, tolerance);
    check_peer("STRMM, U·D", sg::matmul(sg::UpperTriangular(upper_a[0]), dense_b[0]),
               [&] { strmm_right(upper_a[0], dense_b[0]); }, out, tolerance);
    check_peer("SSYMM", sg::matmul(sg::Symmetric(sym_a[0]), dense_b[0]), [&] { ssymm_right(sym_a[0], dense_b[0]); },
               out, tolerance);
  }
  const double strmm_u_right = time([&](int r) { strmm_right(upper_a[r % sets], upper_b[r % sets]); });
  const double strmm_v_left = time([&](int r) { strmm_left(upper_a[r % sets], upper_b[r % sets]); });
  const double strmm = std::min(strmm_u_right, strmm_v_left);
  const double strmm_dense = time([&](int r) { strmm_right(upper_a[r % sets], dense_b[r % sets]); });
  const double ssymm = time([&](int r) { ssymm_right(sym_a[r % sets], dense_b[r % sets]); });
  const double ssyrk = time([&](int r) {
    SG_CUBLAS_CHECK(cublasSsyrk(cublas_, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_T, ni, ni, &one, ptr(dense_a[r % sets]), ld,
                                &zero, ptr(out), ld));
  });

  // ---- ours, forward (no recording); each product checked once against float64 first -------
  auto forward = [&](const std::string& workload, double flops, const std::function<sg::Tensor(int)>& f,
                     const sg::Tensor& expected, const std::string& impl = "structgrad") {
    sg::NoGradGuard no_grad;
    check_ours(workload + (impl == "structgrad" ? "" : impl.substr(10)), f(0), expected);
    const double ms = time([&](int r) { f(r); });
    add(n, workload, impl, ms, flops);
    return ms;
  };
  const sg::Tensor upper_upper = reference(upper_a[0], false, upper_b[0], false);
  forward("upper·upper fwd", n3 / 3, [&](int r) {
    return sg::matmul(sg::UpperTriangular(upper_a[r % sets]), sg::UpperTriangular(upper_b[r % sets]));
  }, upper_upper);
  add(n, "upper·upper fwd", "cuBLAS STRMM", strmm, n3 / 3);  // the faster of the two forms below
  add(n, "upper·upper fwd", "cuBLAS STRMM, U on the right", strmm_u_right, n3 / 3);
  add(n, "upper·upper fwd", "cuBLAS STRMM, V on the left", strmm_v_left, n3 / 3);
  add(n, "upper·upper fwd", "cuBLAS SGEMM", sgemm, n3 / 3);
  for (auto [schedule, name] : {std::pair{GemmSchedule::HeaviestFirst, "structgrad, heaviest-first, no split"},
                                std::pair{GemmSchedule::Raster, "structgrad, raster order, no split"}}) {
    const GemmSchedule order = schedule;
    sg::detail::cuda::GemmTuningGuard guard([order](sg::detail::cuda::GemmTuning& o) { o.schedule = order; });
    forward("upper·upper fwd", n3 / 3, [&](int r) { return sg::matmul(upper_a[r % sets], upper_b[r % sets]); },
            upper_upper, name);
  }
  // Every other structure pair, forward; the useful multiply-adds of op(A)·op(B) are n³ times
  // the fraction each structure keeps (Upper ½, Dense and Symmetric 1; Upper·Upper ⅙).
  const char* names[3] = {"dense", "upper", "sym"};
  std::vector<sg::Tensor>* lhs[3] = {&dense_a, &upper_a, &sym_a};
  std::vector<sg::Tensor>* rhs[3] = {&dense_b, &upper_b, &sym_b};
  auto mac_fraction = [](int a, int b) { return a == 1 && b == 1 ? 1.0 / 6 : (a == 1 ? 0.5 : 1.0) * (b == 1 ? 0.5 : 1.0); };
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 3; ++b) {
      if (a == 1 && b == 1) continue;  // above, with its schedule ablation
      const std::string workload = std::string(names[a]) + "·" + names[b] + " fwd";
      const double flops = 2 * n3 * mac_fraction(a, b);
      forward(workload, flops, [&](int r) { return sg::matmul((*lhs[a])[r % sets], (*rhs[b])[r % sets]); },
              reference((*lhs[a])[0], false, (*rhs[b])[0], false));
      add(n, workload, "cuBLAS SGEMM", sgemm, flops);
      if (a == 1 && b == 0) add(n, workload, "cuBLAS STRMM", strmm_dense, flops);
      if (a == 2 && b == 0) add(n, workload, "cuBLAS SSYMM", ssymm, flops);
    }
  }
  // Head to head with SGEMM (--head-to-head): Sym·Sym (whose target is to be no slower than SGEMM),
  // Upper·Upper, Dense·Upper, Upper·Dense and Sym·Dense (whose ratio to SGEMM, timed in turn, is a
  // measure that the clocks of the moment do not move) and, as the control, Dense·Dense, which structgrad runs on
  // cuBLAS SGEMM itself (its ratio shows how near 1 two equal products come out).
  const struct {
    const char* product;
    std::vector<sg::Tensor>*x, *y;
  } contests[] = {{"sym·sym fwd", &sym_a, &sym_b},
                  {"upper·upper fwd", &upper_a, &upper_b},
                  {"dense·upper fwd", &dense_a, &upper_b},
                  {"upper·dense fwd", &upper_a, &dense_b},
                  {"sym·dense fwd", &sym_a, &dense_b},
                  {"dense·dense fwd (control: cuBLAS under both)", &dense_a, &dense_b}};
  for (const auto& contest : contests) {
    if (options_.pairs == 0) break;  // (no --head-to-head)
    std::vector<sg::Tensor>& x = *contest.x;
    std::vector<sg::Tensor>& y = *contest.y;
    sg::NoGradGuard no_grad;
    const HeadToHead h = head_to_head(
        stream_, options_.pairs, [&](int r) { sg::matmul(x[r % sets], y[r % sets]); },
        [&](int r) {
          SG_CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, ptr(dense_a[r % sets]), ld,
                                      ptr(dense_b[r % sets]), ld, &zero, ptr(out), ld));
        });
    std::printf("  head to head, %s: structgrad %.3f ms, cuBLAS SGEMM%s %.3f ms, median of ours/SGEMM %.3f, ours no "
                "slower in %d of %d pairs\n",
                contest.product, h.ours_ms, suffix_.c_str(), h.peer_ms, h.ratio, h.ours_faster, h.pairs);
    head_to_head_.push_back({n, contest.product, h});
  }
  forward("gram a·aᵀ", n3, [&](int r) { return sg::gram(dense_a[r % sets]); },
          reference(dense_a[0], false, dense_a[0], true));
  add(n, "gram a·aᵀ", "cuBLAS SSYRK", ssyrk, n3);
  add(n, "gram a·aᵀ", "cuBLAS SGEMM", sgemm, n3);

  // ---- ours, forward + backward through autograd ----------------------------------------
  // Useful flops: the forward's, once more for dA and once more for dB (each gradient product
  // keeps the structure of its input: triu(G·Bᵀ) for Upper A, and so on).
  // The gradients are checked once first (docs/gradients.md: G read through C's structure, each
  // gradient projected onto its input's structure; gram's G projected onto Symmetric).
  auto check_gradients = [&](const std::string& workload, sg::Tensor a, sg::Tensor* b) {
    const sg::Structure structure_a = a.structure();
    if (b) {
      sg::matmul(a, *b).backward(grad_out);
      const bool upper_out = structure_a == sg::Structure::UpperTriangular &&
                             b->structure() == sg::Structure::UpperTriangular;
      const sg::Tensor g = project(grad_out.to(sg::kFloat64),
                                   upper_out ? sg::Structure::UpperTriangular : sg::Structure::Dense);
      check_ours(workload + " dA", a.grad(), project(reference(g, false, *b, true), structure_a));
      check_ours(workload + " dB", b->grad(), project(reference(a, true, g, false), b->structure()));
      b->zero_grad();
    } else {
      sg::Tensor(sg::gram(a)).backward(grad_out);
      const sg::Tensor g = project(grad_out.to(sg::kFloat64), sg::Structure::Symmetric);
      check_ours(workload + " dA", a.grad(), project(reference(g, false, a, false, 2), structure_a));
    }
    a.zero_grad();
  };
  auto forward_backward = [&](const std::string& workload, double flops, std::vector<sg::Tensor>& as,
                              std::vector<sg::Tensor>* bs) {
    std::vector<sg::Tensor> a_leaves, b_leaves;
    for (int s = 0; s < sets; ++s) {
      a_leaves.push_back(as[s].detach().requires_grad_());
      if (bs) b_leaves.push_back((*bs)[s].detach().requires_grad_());
    }
    check_gradients(workload, a_leaves[0], bs ? &b_leaves[0] : nullptr);
    const double ms = time([&](int r) {
      sg::Tensor& a = a_leaves[r % sets];
      if (bs) {
        sg::Tensor& b = b_leaves[r % sets];
        sg::matmul(a, b).backward(grad_out);
        b.zero_grad();
      } else {
        sg::Tensor(sg::gram(a)).backward(grad_out);
      }
      a.zero_grad();
    });
    add(n, workload, "structgrad", ms, flops);
    return ms;
  };
  const double dense_fwd_bwd = time([&](int r) {  // what a dense framework runs: three SGEMMs
    for (int g = 0; g < 3; ++g)
      SG_CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, g == 1 ? CUBLAS_OP_T : CUBLAS_OP_N, ni, ni, ni, &one,
                                  ptr(dense_a[r % sets]), ld, ptr(dense_b[r % sets]), ld, &zero, ptr(out), ld));
  });
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 3; ++b) {
      const std::string workload = std::string(names[a]) + "·" + names[b] + " fwd+bwd";
      const double flops = 3 * 2 * n3 * mac_fraction(a, b);
      forward_backward(workload, flops, *lhs[a], rhs[b]);
      add(n, workload, "cuBLAS 3×SGEMM", dense_fwd_bwd, flops);
    }
  }
  // Upper·Upper's two gradient products alone, as the backward launches them (where its
  // fwd+bwd time goes): dA = triu(G·Bᵀ), both operands outer-major in memory; dB = triu(Aᵀ·G),
  // both k-major.
  for (bool grad_b : {false, true}) {
    sg::detail::GemmProblem g;
    g.m = g.n = g.k = n;
    // The saved operand is an UpperTriangular tensor (zeros stored), G is read through C's structure.
    g.a = {grad_b ? Structure::LowerTriangular : Structure::UpperTriangular, grad_b, grad_b};
    g.b = {grad_b ? Structure::UpperTriangular : Structure::LowerTriangular, !grad_b, !grad_b};
    g.mask = Structure::UpperTriangular;
    g.lda = g.ldb = g.ldc = n;
    g.tf32 = options_.tf32;
    g.c_data = ptr(out);
    const char* workload = grad_b ? "upper·upper bwd dB=triu(Aᵀ·G)" : "upper·upper bwd dA=triu(G·Bᵀ)";
    add(n, workload, "structgrad", time([&](int r) {
          g.a_data = grad_b ? ptr(upper_a[r % sets]) : ptr(grad_out);
          g.b_data = grad_b ? ptr(grad_out) : ptr(upper_b[r % sets]);
          sg::detail::cuda::launch_structured_gemm(g, sg::kFloat32, 0);
        }),
        n3 / 3);
  }

  // gram: forward n³ useful flops (one triangle), backward dA = 2·G·a with G symmetric: 2n³.
  forward_backward("gram a·aᵀ fwd+bwd", 3 * n3, dense_a, nullptr);
  const double dense_gram_fwd_bwd = time([&](int r) {  // a·aᵀ and G·a as two SGEMMs
    for (int g = 0; g < 2; ++g)
      SG_CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, g == 0 ? CUBLAS_OP_T : CUBLAS_OP_N, ni, ni, ni, &one,
                                  ptr(dense_a[r % sets]), ld, ptr(dense_a[r % sets]), ld, &zero, ptr(out), ld));
  });
  add(n, "gram a·aᵀ fwd+bwd", "cuBLAS 2×SGEMM", dense_gram_fwd_bwd, 3 * n3);

  // ---- float64 Upper·Upper (the gradcheck precision) against cuBLAS DGEMM ---------------
  {
    const auto f64 = f32.dtype(sg::kFloat64);
    sg::Tensor a = sg::UpperTriangular::randn(n, f64), b = sg::UpperTriangular::randn(n, f64);
    sg::Tensor c = sg::randn({n, n}, f64);
    const double done = 1.0, dzero = 0.0;
    sg::NoGradGuard no_grad;
    check_ours("upper·upper fwd float64", sg::matmul(a, b), reference(a, false, b, false));
    add(n, "upper·upper fwd float64", "structgrad", time([&](int) { sg::matmul(a, b); }), n3 / 3);
    add(n, "upper·upper fwd float64", "cuBLAS DGEMM", time([&](int) {
          SG_CUBLAS_CHECK(cublasDgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &done,
                                      static_cast<const double*>(a.data_ptr()), ld,
                                      static_cast<const double*>(b.data_ptr()), ld, &dzero,
                                      static_cast<double*>(c.data_ptr()), ld));
        }),
        n3 / 3);
  }

  // The plan the Upper·Upper forward ran with.
  sg::detail::GemmProblem p;
  p.m = p.n = p.k = n;
  p.a = {Structure::UpperTriangular, false};
  p.b = {Structure::UpperTriangular, false};
  p.mask = Structure::UpperTriangular;
  p.lda = p.ldb = p.ldc = n;
  p.tf32 = options_.tf32;
  std::printf("  plan of upper·upper: %s\n", sg::detail::cuda::structured_gemm_plan(p, sg::kFloat32, 0).summary().c_str());
}

void Bench::print_table() const {
  std::printf("\n| N | workload | implementation | ms | useful TFLOP/s | time / structgrad's |\n|---|---|---|---|---|---|\n");
  for (const Row& row : rows_) {
    double ours = 0;
    for (const Row& other : rows_)
      if (other.n == row.n && other.workload == row.workload && other.impl.rfind("structgrad", 0) == 0 &&
          other.impl.find(',') == std::string::npos)
        ours = other.ms;
    std::printf("| %lld | %s | %s | %.3f | %.2f | %s |\n", static_cast<long long>(row.n), row.workload.c_str(),
                row.impl.c_str(), row.ms, row.useful_flops / (row.ms * 1e9),
                ours > 0 ? (std::to_string(row.ms / ours).substr(0, 5) + "×").c_str() : "");
  }
  if (head_to_head_.empty()) return;
  std::printf("\nHead to head with cuBLAS SGEMM%s (interleaved pairs, each call timed alone):\n\n"
              "| N | product | structgrad ms | SGEMM ms | median of ours / SGEMM | pairs ours no slower |\n"
              "|---|---|---|---|---|---|\n", suffix_.c_str());
  for (const HeadToHeadRow& row : head_to_head_)
    std::printf("| %lld | %s | %.3f | %.3f | %.3f | %d of %d |\n", static_cast<long long>(row.n), row.product.c_str(),
                row.result.ours_ms, row.result.peer_ms, row.result.ratio, row.result.ours_faster, row.result.pairs);
}

void Bench::write_csv(const std::string& path) const {
  std::ofstream out(path);
  out << "n,workload,implementation,ms,useful_tflops\n";
  // Names with commas (the schedule ablations) are quoted, as CSV readers expect.
  auto field = [](const std::string& s) { return s.find(',') == std::string::npos ? s : '"' + s + '"'; };
  for (const Row& row : rows_)
    out << row.n << "," << field(row.workload) << "," << field(row.impl) << "," << row.ms << ","
        << row.useful_flops / (row.ms * 1e9) << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  bench::program = "bench_gemm_cuda";
  const Options options = parse(argc, argv);
  if (!sg::cuda::is_available()) {
    std::fprintf(stderr, "bench_gemm_cuda: no CUDA device\n");
    return 1;
  }
  try {
    if (options.tf32) sg::set_matmul_precision(sg::Precision::TF32);
    namespace cu = sg::detail::cuda;
    auto choice = [](const std::string& mode) {
      return mode == "never" ? cu::Choice::Never : mode == "always" ? cu::Choice::Always : cu::Choice::Auto;
    };
    cu::GemmTuning gemm;
    if (options.fma) gemm.fp32_loop = cu::Fp32Loop::Fma;
    if (options.mma_sync) gemm.tf32_loop = cu::Tf32Loop::MmaSync;
    if (options.no_tma) gemm.tf32_loop = cu::Tf32Loop::WgmmaStaged;
    if (options.tma_outer_major) gemm.tf32_loop = cu::Tf32Loop::WgmmaTmaOuterMajor;
    if (options.barrier_per_step) gemm.tf32_loop = cu::Tf32Loop::WgmmaBarrierPerStep;
    gemm.relayout = choice(options.relayout);
    gemm.schedule = options.schedule;
    gemm.wide_tiles = choice(options.wide);
    gemm.wide_tma_store = !options.wide_scalar_stores;
    gemm.transposed_a_output = !options.no_transposed_a;
    gemm.dependent_launch = !options.no_dependent_launch;
    gemm.wide_split = choice(options.wide_split);
    gemm.register_b = choice(options.register_b);
    gemm.tall_tiles = choice(options.tall);
    cu::set_gemm_tuning(gemm);
    if (options.no_zeros_reuse) sg::detail::set_upper_output_reuse(false);
    std::printf("bench_gemm_cuda on %s, float32 %s (relayout %s, wide tiles %s%s, split %s, register B %s, tall tiles %s%s%s%s, schedule %s), median of %d\n",
                sg::cuda::device_name().c_str(),
                !options.tf32 && options.fma ? "exact (FFMA loop forced)"
                : !options.tf32        ? "exact (FP64 tensor cores where they run at full rate, else FFMA)"
                : options.mma_sync     ? "TF32 (tensor cores, mma.sync loop)"
                : options.no_tma       ? "TF32 (tensor cores, register-staged tiles)"
                : options.tma_outer_major ? "TF32 (tensor cores, TMA for outer-major operands only)"
                : options.barrier_per_step ? "TF32 (tensor cores, no pipelined kernel: one barrier per k-step)"
                                       : "TF32 (tensor cores)",
                options.relayout.c_str(), options.wide.c_str(),
                options.wide_scalar_stores ? " with 4-byte stores" : "", options.wide_split.c_str(),
                options.register_b.c_str(), options.tall.c_str(),
                options.no_transposed_a ? ", dB's op(A)ᵀ not written by the forward" : "",
                options.no_dependent_launch ? ", ordinary launches" : "",
                options.no_zeros_reuse ? ", Upper outputs write their zeros always" : "",
                options.schedule == GemmSchedule::Balanced ? "balanced"
                : options.schedule == GemmSchedule::Raster ? "raster"
                                                           : "heaviest-first",
                options.reps);
    Bench bench(options);
    for (int64_t n : options.sizes) bench.run_size(n);
    bench.print_table();
    if (!options.csv.empty()) bench.write_csv(options.csv);
  } catch (const sg::Error& e) {
    std::fprintf(stderr, "bench_gemm_cuda: %s\n", e.what());
    return 1;
  }
  return 0;
}
