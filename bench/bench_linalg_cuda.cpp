// The CUDA linear algebra timed at two levels, beside its peers in one process: the backend's kernels
// (Backend::cholesky, solve_triangular with N and 1 right-hand sides, triangular_inverse) against
// cuSOLVER potrf and trtri and cuBLAS trsm on the same inputs, each result checked against the
// peer's first; and the public ops (sg::cholesky, sg::solve_triangular, sg::logdet, sg::inverse)
// forward and forward + backward, the workloads of bench/torch_linalg.py. CUDA events
// on the library's stream, three warm-ups, the median of --reps, inputs rotated through copies
// beyond the L2 cache (a peer's in-place input is refreshed before its start event). --variants 1
// also times the backend under the settings of cuda/linalg_tuning.h it does not use by default.
// Usage: bench_linalg_cuda [--n 1024,4096] [--dtype float32,float64] [--reps 15] [--variants 0|1] [--csv FILE]
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <structgrad/structgrad.h>

#include "bench/bench_cuda.h"
#include "cuda/linalg_tuning.h"
#include "cuda/runtime.h"
#include "ops/backend.h"

namespace {

namespace cu = sg::detail::cuda;
using bench::check;
using bench::median_ms;
using sg::Structure;

struct Options : bench::CommonFlags {
  std::vector<std::string> dtypes = {"float32", "float64"};
  bool variants = false;
};

Options parse(int argc, char** argv) {
  Options o;
  bench::for_each_flag(argc, argv,
                       "usage: bench_linalg_cuda [--n 1024,4096] [--dtype float32,float64] [--reps 15] "
                       "[--variants 0|1] [--csv FILE]\n",
                       [&](const std::string& flag, const std::string& value) {
                         if (flag == "--dtype") o.dtypes = bench::split(value);
                         else if (flag == "--variants") o.variants = value != "0";
                         else return o.take(flag, value);
                         return true;
                       });
  return o;
}

/// ‖x − y‖ / ‖y‖ over two tensors' values (read back as double).
double rel_diff(const sg::Tensor& x, const sg::Tensor& y) {
  const std::vector<double> a = x.to_vector_as<double>(), b = y.to_vector_as<double>();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::FILE* csv = nullptr;

/// One line of the table: structgrad's forward and forward + backward (negative: not timed), the
/// peer's time and the relative difference from it.
void report(const std::string& level, const std::string& workload, int64_t n, const std::string& dtype, double ours,
            double ours_fb, const std::string& peer, double peer_ms, double diff) {
  auto ms = [](double v) {
    char buf[32];
    if (v < 0) std::snprintf(buf, sizeof(buf), "%9s", "-");
    else std::snprintf(buf, sizeof(buf), "%9.3f", v);
    return std::string(buf);
  };
  char diff_text[32];
  if (diff < 0) std::snprintf(diff_text, sizeof(diff_text), "%8s", "-");
  else std::snprintf(diff_text, sizeof(diff_text), "%8.1e", diff);
  std::printf("| %-7s | %-34s | %5lld | %-7s | %s | %s | %-16s | %s | %s |\n", level.c_str(), workload.c_str(),
              static_cast<long long>(n), dtype.c_str(), ms(ours).c_str(), ms(ours_fb).c_str(), peer.c_str(),
              ms(peer_ms).c_str(), diff_text);
  std::fflush(stdout);
  if (csv)
    std::fprintf(csv, "%s,%s,%lld,%s,%.5f,%.5f,%s,%.5f,%.3g\n", level.c_str(), workload.c_str(),
                 static_cast<long long>(n), dtype.c_str(), ours, ours_fb, peer.c_str(), peer_ms, diff);
}

/// The peers' handles, bound to the library's stream.
struct Peers {
  cublasHandle_t blas = nullptr;
  cusolverDnHandle_t solver = nullptr;
  cusolverDnParams_t params = nullptr;
  Peers() {
    check(cublasCreate(&blas));
    check(cublasSetStream(blas, cu::stream(0)));
    check(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));
    check(cusolverDnCreate(&solver));
    check(cusolverDnSetStream(solver, cu::stream(0)));
    check(cusolverDnCreateParams(&params));
  }
  ~Peers() {
    cusolverDnDestroyParams(params);
    cusolverDnDestroy(solver);
    cublasDestroy(blas);
  }
};

/// cuSOLVER's Cholesky of a row-major SPD matrix in place, with its workspace: by default of its lower
/// triangle (cuSOLVER's upper, being column-major), the layout of ours; with CUBLAS_FILL_MODE_LOWER of
/// its upper triangle (the factor comes out transposed), the layout PyTorch hands cuSOLVER.
struct Potrf {
  Peers& peers;
  int64_t n;
  cudaDataType type;
  cublasFillMode_t fill;
  size_t device_bytes = 0, host_bytes = 0;
  void* device_work = nullptr;
  std::vector<char> host_work;
  int* info = nullptr;
  Potrf(Peers& p, int64_t order, cudaDataType t, void* a, cublasFillMode_t f = CUBLAS_FILL_MODE_UPPER)
      : peers(p), n(order), type(t), fill(f) {
    check(cusolverDnXpotrf_bufferSize(peers.solver, peers.params, fill, n, type, a, n, type, &device_bytes,
                                      &host_bytes));
    check(cudaMalloc(&device_work, std::max<size_t>(device_bytes, 1)));
    host_work.resize(std::max<size_t>(host_bytes, 1));
    check(cudaMalloc(&info, sizeof(int)));
  }
  ~Potrf() {
    cudaFree(device_work);
    cudaFree(info);
  }
  void operator()(void* a) {
    check(cusolverDnXpotrf(peers.solver, peers.params, fill, n, type, a, n, type, device_work, device_bytes,
                           host_work.data(), host_bytes, info));
  }
};

/// cuSOLVER's inverse of a row-major lower triangular matrix in place (column-major upper).
struct Trtri {
  Peers& peers;
  int64_t n;
  cudaDataType type;
  size_t device_bytes = 0, host_bytes = 0;
  void* device_work = nullptr;
  std::vector<char> host_work;
  int* info = nullptr;
  Trtri(Peers& p, int64_t order, cudaDataType t, void* a) : peers(p), n(order), type(t) {
    check(cusolverDnXtrtri_bufferSize(peers.solver, CUBLAS_FILL_MODE_UPPER, CUBLAS_DIAG_NON_UNIT, n, type, a, n,
                                      &device_bytes, &host_bytes));
    check(cudaMalloc(&device_work, std::max<size_t>(device_bytes, 1)));
    host_work.resize(std::max<size_t>(host_bytes, 1));
    check(cudaMalloc(&info, sizeof(int)));
  }
  ~Trtri() {
    cudaFree(device_work);
    cudaFree(info);
  }
  void operator()(void* a) {
    check(cusolverDnXtrtri(peers.solver, CUBLAS_FILL_MODE_UPPER, CUBLAS_DIAG_NON_UNIT, n, type, a, n, device_work,
                           device_bytes, host_work.data(), host_bytes, info));
  }
};

/// cuBLAS's U·X = B for a row-major upper U [n, n] and X [n, k] in place: column-major, X'·U' = B'
/// with U' = Uᵀ lower and X' = Xᵀ [k, n].
void trsm_upper_left(Peers& peers, const sg::Tensor& u, sg::Tensor& x) {
  const int n = static_cast<int>(u.size(0)), k = static_cast<int>(x.size(1));
  if (u.dtype() == sg::kFloat32) {
    const float one = 1.0f;
    check(cublasStrsm(peers.blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, k, n,
                      &one, static_cast<const float*>(u.data_ptr()), n, static_cast<float*>(x.data_ptr()), k));
  } else {
    const double one = 1.0;
    check(cublasDtrsm(peers.blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, k, n,
                      &one, static_cast<const double*>(u.data_ptr()), n, static_cast<double*>(x.data_ptr()), k));
  }
}

void copy_into(sg::Tensor& dst, const sg::Tensor& src) {
  check(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.nbytes(), cudaMemcpyDeviceToDevice, cu::stream(0)));
}

/// A row-major lower triangle of a factor with zeros above (cuSOLVER leaves A's other triangle).
sg::Tensor lower_part(const sg::Tensor& x) { return sg::Tensor(sg::tril(x)); }

void run_size(Peers& peers, int64_t n, const std::string& dtype_name, int reps, bool variants, int l2_bytes) {
  const sg::DType dtype = dtype_name == "float64" ? sg::kFloat64 : sg::kFloat32;
  const cudaDataType type = dtype == sg::kFloat64 ? CUDA_R_64F : CUDA_R_32F;
  const auto o = sg::TensorOptions().dtype(dtype).device(sg::kCUDA);
  const double bytes = double(n) * double(n) * double(sg::element_size(dtype));
  const int sets = static_cast<int>(std::min(4.0, std::max(2.0, std::ceil(3.0 * l2_bytes / (2.0 * bytes)))));
  sg::manual_seed(11);
  std::vector<sg::Tensor> spd, upper, lower, rhs, rhs1;
  for (int s = 0; s < sets; ++s) {
    const sg::Tensor a = sg::randn({n, n}, o);
    spd.push_back(sg::sym(sg::gram(a) / static_cast<double>(n) + sg::eye(n, o)));
    upper.push_back(sg::triu(sg::randn({n, n}, o) / std::sqrt(static_cast<double>(n)) + sg::eye(n, o) * 2.0));
    lower.push_back(sg::tril(sg::randn({n, n}, o) / std::sqrt(static_cast<double>(n)) + sg::eye(n, o) * 2.0));
    rhs.push_back(sg::randn({n, n}, o));
    rhs1.push_back(sg::randn({n, 1}, o));
  }
  const sg::Tensor upstream = sg::randn({n, n}, o), upstream1 = sg::randn({n, 1}, o);
  sg::detail::Backend& backend = sg::detail::cuda_backend(0);
  sg::Tensor work = sg::Tensor::empty({n, n}, o), out = sg::Tensor::empty({n, n}, o);
  sg::Tensor info = sg::Tensor::empty({}, sg::TensorOptions().dtype(sg::kInt64).device(sg::kCUDA));
  sg::Tensor x = sg::Tensor::empty({n, n}, o), x1 = sg::Tensor::empty({n, 1}, o);
  const char* name = dtype_name.c_str();

  // ---- backend level against cuSOLVER / cuBLAS ----
  Potrf potrf(peers, n, type, work.data_ptr());
  Trtri trtri(peers, n, type, work.data_ptr());
  auto backend_cholesky = [&](int r) { backend.cholesky(spd[r % sets], out, info); };
  {
    copy_into(work, spd[0]);
    potrf(work.data_ptr());
    backend_cholesky(0);
    const double diff = rel_diff(out, lower_part(work));
    const double ours = median_ms(reps, backend_cholesky);
    const double peer =
        median_ms(reps, [&](int) { potrf(work.data_ptr()); }, [&](int r) { copy_into(work, spd[r % sets]); });
    report("backend", "cholesky", n, name, ours, -1, "cusolver potrf", peer, diff);
    Potrf potrf_lower(peers, n, type, work.data_ptr(), CUBLAS_FILL_MODE_LOWER);
    copy_into(work, spd[0]);
    potrf_lower(work.data_ptr());
    backend_cholesky(0);  // the timing left another input's factor in `out`
    const double diff_lower = rel_diff(sg::transpose(out), sg::Tensor(sg::triu(work)));
    const double peer_lower = median_ms(reps, [&](int) { potrf_lower(work.data_ptr()); },
                                        [&](int r) { copy_into(work, spd[r % sets]); });
    report("backend", "cholesky", n, name, ours, -1, "cusolver potrf (L)", peer_lower, diff_lower);
  }
  for (const bool one : {false, true}) {
    std::vector<sg::Tensor>& b = one ? rhs1 : rhs;
    sg::Tensor& xx = one ? x1 : x;
    sg::Tensor peer_x = sg::Tensor::empty(xx.shape(), o);
    copy_into(xx, b[0]);
    backend.solve_triangular(upper[0], Structure::UpperTriangular, false, false, true, xx, xx);
    copy_into(peer_x, b[0]);
    trsm_upper_left(peers, upper[0], peer_x);
    const double diff = rel_diff(xx, peer_x);
    const double ours = median_ms(
        reps, [&](int r) { backend.solve_triangular(upper[r % sets], Structure::UpperTriangular, false, false, true, xx, xx); },
        [&](int r) { copy_into(xx, b[r % sets]); });
    const double peer = median_ms(
        reps, [&](int r) { trsm_upper_left(peers, upper[r % sets], peer_x); },
        [&](int r) { copy_into(peer_x, b[r % sets]); });
    report("backend", one ? "solve_triangular U x = b, 1 rhs" : "solve_triangular U X = B, N rhs", n, name, ours, -1,
           "cublas trsm", peer, diff);
  }
  {
    backend.triangular_inverse(lower[0], Structure::LowerTriangular, false, out);
    copy_into(work, lower[0]);
    trtri(work.data_ptr());
    const double diff = rel_diff(out, lower_part(work));
    const double ours =
        median_ms(reps, [&](int r) { backend.triangular_inverse(lower[r % sets], Structure::LowerTriangular, false, out); });
    const double peer =
        median_ms(reps, [&](int) { trtri(work.data_ptr()); }, [&](int r) { copy_into(work, lower[r % sets]); });
    report("backend", "triangular_inverse (Lower)", n, name, ours, -1, "cusolver trtri", peer, diff);
  }

  if (variants) {
    // The settings the library does not use by default, on the same inputs (no peer).
    auto variant = [&](const std::string& label, const std::function<void(cu::LinalgTuning&)>& edit,
                       const std::function<void(int)>& body, const std::function<void(int)>& prepare) {
      cu::LinalgTuningGuard guard(edit);
      report("variant", label, n, name, median_ms(reps, body, prepare), -1, "", -1, -1);
    };
    auto solve_k = [&](int64_t k) {
      sg::Tensor bk = sg::randn({n, k}, o), xk = sg::Tensor::empty({n, k}, o);
      return std::make_pair(bk, xk);
    };
    auto own = [](int64_t up_to) {
      return [up_to](cu::LinalgTuning& v) { v.own_products_up_to_f32 = v.own_products_up_to_f64 = up_to; };
    };
    auto flip_dense = [](cu::LinalgTuning& v) {
      v.dense_triangles_f32 = !v.dense_triangles_f32;
      v.dense_triangles_f64 = !v.dense_triangles_f64;
    };
    auto inverse_body = [&](int r) { backend.triangular_inverse(lower[r % sets], Structure::LowerTriangular, false, out); };
    variant("cholesky, every product on the GEMM", own(0), backend_cholesky, {});
    variant("cholesky, own products up to 128", own(128), backend_cholesky, {});
    variant("cholesky, own products up to 256", own(256), backend_cholesky, {});
    variant("cholesky, own products up to 512", own(512), backend_cholesky, {});
    const cu::LinalgTuning defaults;
    const int64_t leaf = dtype == sg::kFloat32 ? defaults.cholesky_leaf_f32 : defaults.cholesky_leaf_f64;
    variant("cholesky, leaves of " + std::to_string(192 - leaf), [](cu::LinalgTuning& v) {
      v.cholesky_leaf_f32 = 192 - v.cholesky_leaf_f32;
      v.cholesky_leaf_f64 = 192 - v.cholesky_leaf_f64;
    }, backend_cholesky, {});
    variant("cholesky, no split update", [](cu::LinalgTuning& v) { v.split_update_from = int64_t{1} << 40; },
            backend_cholesky, {});
    variant("cholesky, dense triangles flipped", flip_dense, backend_cholesky, {});
    variant("inverse, every product on the GEMM", own(0), inverse_body, {});
    variant("inverse, own products up to 256", own(256), inverse_body, {});
    variant("inverse, own products up to 512", own(512), inverse_body, {});
    variant("inverse, dense triangles flipped", flip_dense, inverse_body, {});
    variant("solve N rhs, structured leaves", [](cu::LinalgTuning& v) { v.dense_solve_leaves = false; },
            [&](int r) { backend.solve_triangular(upper[r % sets], Structure::UpperTriangular, false, false, true, x, x); },
            [&](int r) { copy_into(x, rhs[r % sets]); });
    for (const int64_t k : {int64_t{1}, int64_t{16}, int64_t{64}, int64_t{128}}) {
      auto [bk, xk] = solve_k(k);
      for (const bool few : {true, false}) {
        variant("solve " + std::to_string(k) + " rhs, " + (few ? "one launch" : "blocked"),
                [&](cu::LinalgTuning& v) { v.few_columns = few ? k : 0; },
                [&](int r) { backend.solve_triangular(upper[r % sets], Structure::UpperTriangular, false, false, true, xk, xk); },
                [&](int) { copy_into(xk, bk); });
      }
    }
    {  // the transposed and right-hand 1-rhs cases (the backward's solve reads T transposed)
      sg::Tensor xr = sg::Tensor::empty({1, n}, o);
      const sg::Tensor br = sg::randn({1, n}, o);
      variant("solve 1 rhs, trans", [](cu::LinalgTuning&) {},
              [&](int r) { backend.solve_triangular(upper[r % sets], Structure::LowerTriangular, true, false, true, x1, x1); },
              [&](int r) { copy_into(x1, rhs1[r % sets]); });
      variant("solve 1 rhs, right", [](cu::LinalgTuning&) {},
              [&](int r) { backend.solve_triangular(upper[r % sets], Structure::UpperTriangular, false, false, false, xr, xr); },
              [&](int) { copy_into(xr, br); });
    }
    for (const int64_t m : {int64_t{128}, int64_t{256}, int64_t{512}}) {  // small orders: the leaves' cost
      const sg::Tensor a = sg::randn({m, m}, o);
      const sg::Tensor sm = sg::sym(sg::gram(a) / static_cast<double>(m) + sg::eye(m, o));
      sg::Tensor wm = sg::Tensor::empty({m, m}, o), om = sg::Tensor::empty({m, m}, o);
      Potrf small(peers, m, type, wm.data_ptr());
      const double ours = median_ms(reps, [&](int) { backend.cholesky(sm, om, info); });
      const double peer = median_ms(reps, [&](int) { small(wm.data_ptr()); }, [&](int) { copy_into(wm, sm); });
      report("backend", "cholesky (small order)", m, name, ours, -1, "cusolver potrf", peer, -1);
    }
  }

  // ---- the public ops, forward and forward + backward ----
  std::vector<sg::Tensor> spd_leaves, upper_leaves, lower_leaves, rhs_leaves, rhs1_leaves;
  for (int s = 0; s < sets; ++s) {
    spd_leaves.push_back(spd[s].detach().requires_grad_());
    upper_leaves.push_back(upper[s].detach().requires_grad_());
    lower_leaves.push_back(lower[s].detach().requires_grad_());
    rhs_leaves.push_back(rhs[s].detach().requires_grad_());
    rhs1_leaves.push_back(rhs1[s].detach().requires_grad_());
  }
  {
    const double fwd = median_ms(reps, [&](int r) {
      sg::NoGradGuard no_grad;
      (void)sg::cholesky(spd[r % sets]);
    });
    const double fb = median_ms(reps, [&](int r) {
      sg::Tensor& s = spd_leaves[r % sets];
      sg::Tensor(sg::cholesky(s)).backward(upstream);
      s.zero_grad();
    });
    report("op", "cholesky", n, name, fwd, fb, "", -1, -1);
  }
  {
    const double fwd = median_ms(reps, [&](int r) {
      sg::NoGradGuard no_grad;
      (void)sg::logdet(spd[r % sets]);
    });
    const double fb = median_ms(reps, [&](int r) {
      sg::Tensor& s = spd_leaves[r % sets];
      sg::logdet(s).backward();
      s.zero_grad();
    });
    report("op", "logdet (Symmetric)", n, name, fwd, fb, "", -1, -1);
  }
  for (const bool one : {false, true}) {
    std::vector<sg::Tensor>& b = one ? rhs1 : rhs;
    std::vector<sg::Tensor>& b_leaves = one ? rhs1_leaves : rhs_leaves;
    const double fwd = median_ms(reps, [&](int r) {
      sg::NoGradGuard no_grad;
      (void)sg::solve_triangular(upper[r % sets], b[r % sets]);
    });
    const double fb = median_ms(reps, [&](int r) {
      sg::Tensor& u = upper_leaves[r % sets];
      sg::Tensor& bb = b_leaves[r % sets];
      sg::solve_triangular(u, bb).backward(one ? upstream1 : upstream);
      u.zero_grad();
      bb.zero_grad();
    });
    report("op", one ? "solve_triangular U x = b, 1 rhs" : "solve_triangular U X = B, N rhs", n, name, fwd, fb, "",
           -1, -1);
  }
  {
    const double fwd = median_ms(reps, [&](int r) {
      sg::NoGradGuard no_grad;
      (void)sg::inverse(lower[r % sets]);
    });
    const double fb = median_ms(reps, [&](int r) {
      sg::Tensor& l = lower_leaves[r % sets];
      sg::inverse(l).backward(upstream);
      l.zero_grad();
    });
    report("op", "inverse (Lower)", n, name, fwd, fb, "", -1, -1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::program = "bench_linalg_cuda";
  const Options options = parse(argc, argv);
  if (!sg::cuda::is_available()) {
    std::fprintf(stderr, "bench_linalg_cuda: no CUDA device\n");
    return 1;
  }
  int l2 = 0;
  check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  csv = options.csv.empty() ? nullptr : std::fopen(options.csv.c_str(), "w");
  if (csv)
    std::fprintf(csv, "level,workload,n,dtype,forward_ms,forward_backward_ms,peer,peer_ms,relative_difference\n");
  std::printf("bench_linalg_cuda on %s, median of %d (ms)\n", sg::cuda::device_name().c_str(), options.reps);
  std::printf("| %-7s | %-34s | %5s | %-7s | %9s | %9s | %-16s | %9s | %8s |\n", "level", "workload", "n", "dtype",
              "fwd", "fwd+bwd", "peer", "peer", "rel.diff");
  Peers peers;
  for (const std::string& dtype : options.dtypes)
    for (const int64_t n : options.sizes) run_size(peers, n, dtype, options.reps, options.variants, l2);
  if (csv) std::fclose(csv);
  return 0;
}
