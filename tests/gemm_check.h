// Shared by the structured-GEMM tests of both backends (tests/ops/cpu/test_cpu_gemm.cpp,
// tests/cuda/test_structured_gemm.cpp):
// operand descriptors, random inputs that are never zero (also outside the structures, where
// a kernel must never read), NaN-poisoned outputs, and the comparison with the float64
// reference of ops/cpu/reference_gemm.cpp (Frobenius and elementwise bounds, exact zeros
// below the diagonal of an Upper mask, a bit-exact mirror for the Symmetric mask).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/backend.h"
#include "ops/cpu/cpu_gemm.h"
#include "test_util.h"

namespace sgtest::gemm {

using sg::detail::GemmOperand;
using sg::Structure;
using sg::detail::GemmProblem;

/// The precision of the float32 instances: exact float32, or TF32 tensor cores. Set by the
/// fixture for the whole test; square() copies it into each problem.
inline bool g_tf32 = false;

/// One operand descriptor: the structure of op(X) and whether X is stored transposed.
struct Variant {
  Structure structure;
  bool trans;
};
inline const Variant kVariants[] = {{Structure::Dense, false}, {Structure::Dense, true},  {Structure::UpperTriangular, false},
                             {Structure::UpperTriangular, true},  {Structure::LowerTriangular, false}, {Structure::LowerTriangular, true},
                             {Structure::Symmetric, false}};

inline const char* kind_name(Structure k) {
  switch (k) {
    case Structure::Dense: return "Dense";
    case Structure::UpperTriangular: return "Upper";
    case Structure::LowerTriangular: return "Lower";
    case Structure::Symmetric: return "Symmetric";
  }
  return "?";
}
inline const char* mask_name(Structure m) {
  return m == Structure::Dense ? "Full" : m == Structure::UpperTriangular ? "Upper" : "Symmetric";
}

inline std::string describe(const GemmProblem& p, sg::DType dtype) {
  return sg::detail::concat(sg::dtype_name(dtype), " m=", p.m, " n=", p.n, " k=", p.k, " A=", kind_name(p.a.structure),
                            p.a.trans ? "^T" : "", " B=", kind_name(p.b.structure), p.b.trans ? "^T" : "",
                            " mask=", mask_name(p.mask), " alpha=", p.alpha);
}

/// Random normal values (never zeros), fresh for every call.
inline std::vector<double> random_values(int64_t count, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(static_cast<size_t>(count));
  for (double& x : v) x = normal(rng);
  return v;
}

/// The result of one checked product: relative Frobenius error and whether every element
/// passed the elementwise bound, the mask's exact zeros and the bit-exact mirror.
struct Checked {
  double rel_error = 0;
  std::string failure;  // empty when everything held
  int64_t kept_below = 0;  // entries below the diagonal that kept kZerosSentinel (c_zeros_stored)
};

/// What run_and_compare writes below C's diagonal where the problem says C holds its zeros there.
constexpr double kZerosSentinel = 7.0;

/// Where operand `d` says its storage holds what its structure implies outside the part it
/// defines, writes that into `values` (rows × ld, the first `cols` columns of each row are the
/// operand's): the zeros of a triangular operand with zeros_stored (an UpperTriangular tensor's
/// invariant), the mirror of a Symmetric one's upper triangle with mirror_stored (a Symmetric
/// tensor's). Otherwise leaves the random values there.
inline void fill_outside_structure(GemmOperand d, int64_t rows, int64_t cols, int64_t ld, std::vector<double>& values) {
  const bool zeros = d.zeros_stored && sg::detail::is_triangular(d.structure);
  const bool mirror = d.mirror_stored && d.structure == Structure::Symmetric;
  for (int64_t i = 0; i < rows && (zeros || mirror); ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double& value = values[static_cast<size_t>(i * ld + j)];
      if (mirror) {
        if (j < i) value = values[static_cast<size_t>(j * ld + i)];
        continue;
      }
      const int64_t r = d.trans ? j : i, c = d.trans ? i : j;  // the entry's place in op(X)
      if (d.structure == Structure::UpperTriangular ? c < r : c > r) value = 0.0;
    }
}

/// Runs C = alpha·op(A)·op(B) through `device`'s backend with storages filled with random
/// values (also outside the structures, except where an operand has zeros_stored or
/// mirror_stored) and C
/// poisoned with NaN, and compares with the float64 reference. `pad`: extra (random) columns in
/// A's and B's storage rows, so the leading dimensions exceed the operands' widths. `c_pad`: extra
/// columns in C's rows, which must keep their poison. Where p.c_zeros_stored (an Upper mask whose C
/// holds its zeros below the diagonal already), the test lies to tell the kernels apart: C holds
/// kZerosSentinel there, which a product may leave as it is (Checked::kept_below counts them) or
/// overwrite with zeros; everything else must be as without it.
inline Checked run_and_compare(sg::Device device, GemmProblem p, sg::DType dtype, std::mt19937_64& rng,
                               int64_t pad = 0, int64_t c_pad = 0) {
  const int64_t a_rows = p.a.trans ? p.k : p.m, a_cols = p.a.trans ? p.m : p.k;
  const int64_t b_rows = p.b.trans ? p.n : p.k, b_cols = p.b.trans ? p.k : p.n;
  const auto opts = sg::TensorOptions().dtype(dtype);
  std::vector<double> a_values = random_values(a_rows * (a_cols + pad), rng);
  std::vector<double> b_values = random_values(b_rows * (b_cols + pad), rng);
  fill_outside_structure(p.a, a_rows, a_cols, a_cols + pad, a_values);
  fill_outside_structure(p.b, b_rows, b_cols, b_cols + pad, b_values);
  sg::Tensor a = sg::from_vector(a_values, {a_rows, a_cols + pad}, opts);
  sg::Tensor b = sg::from_vector(b_values, {b_rows, b_cols + pad}, opts);
  // The host reference reads the same (rounded) values the device gets.
  GemmProblem host = p;
  host.a_data = a.data_ptr();
  host.b_data = b.data_ptr();
  host.lda = a_cols + pad;
  host.ldb = b_cols + pad;
  host.ldc = p.n;
  std::vector<double> reference(static_cast<size_t>(p.m * p.n));
  sg::detail::cpu::reference_gemm_f64(host, dtype, reference.data());

  sg::Tensor a_dev = a.to(device).clone(), b_dev = b.to(device).clone();
  sg::Tensor c_dev = sg::Tensor::empty({p.m, p.n + c_pad}, opts.device(device));
  c_dev.fill_(std::nan(""));
  const bool sentinel = p.c_zeros_stored && p.mask == Structure::UpperTriangular;
  if (sentinel) {
    std::vector<double> poisoned(static_cast<size_t>(p.m * (p.n + c_pad)), std::nan(""));
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < std::min(i, p.n); ++j) poisoned[static_cast<size_t>(i * (p.n + c_pad) + j)] = kZerosSentinel;
    c_dev = sg::from_vector(poisoned, {p.m, p.n + c_pad}, opts).to(device).clone();
  }
  GemmProblem on_device = host;
  on_device.a_data = a_dev.data_ptr();
  on_device.b_data = b_dev.data_ptr();
  on_device.c_data = c_dev.data_ptr();
  on_device.ldc = p.n + c_pad;
  sg::detail::backend_for(device).gemm(on_device, dtype);
  const std::vector<double> c_rows = c_dev.to_vector();
  std::vector<double> c(static_cast<size_t>(p.m * p.n));
  Checked out;
  int64_t written = 0, last_row = -1;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n + c_pad; ++j) {
      const double x = c_rows[static_cast<size_t>(i * (p.n + c_pad) + j)];
      if (j < p.n) {
        c[static_cast<size_t>(i * p.n + j)] = x;
      } else if (!std::isnan(x)) {
        if (written++ == 0) out.failure = sg::detail::concat("element (", i, ", ", j, ") past C's ", p.n, " columns was written: ", x);
        last_row = i;
      }
    }
  if (written > 0) out.failure += sg::detail::concat(" (", written, " such elements, the last in row ", last_row, ")");

  // The sentinels a product left below the diagonal count, then stand for the zeros they stand in for.
  for (int64_t i = 0; i < p.m && sentinel; ++i)
    for (int64_t j = 0; j < std::min(i, p.n); ++j)
      if (c[static_cast<size_t>(i * p.n + j)] == kZerosSentinel) {
        ++out.kept_below;
        c[static_cast<size_t>(i * p.n + j)] = 0.0;
      }
  out.rel_error = sgtest::rel_error(c, reference);
  double sum_sq = 0;
  for (double r : reference) sum_sq += r * r;
  const double rms = std::sqrt(sum_sq / std::max<size_t>(1, reference.size()));
  // Elementwise: ten times the Frobenius bound, relative to the reference's rms, so a single
  // wrong or unwritten element fails even where the Frobenius norm would hide it.
  const double element_tol = (p.tf32 ? 2e-2 : dtype == sg::kFloat32 ? 1e-4 : 1e-11) * std::max(rms, 1e-30);
  // TF32 rounds every input to 11 significant bits, so an entry's error is bounded by about
  // 2·2⁻¹¹·Σₖ|aᵢₖ·bₖⱼ| (plus float32 accumulation), not by the rms of C: where C is nearly
  // all zeros (Lower·Lower under an Upper mask leaves only aᵢᵢ·bᵢᵢ) a single product can exceed
  // 2e-2·rms. The TF32 bound per entry is therefore 4e-3·(|op(A)|·|op(B)|)ᵢⱼ, a rigorous
  // bound (2·2⁻¹¹ + k·2⁻²⁴ < 4e-3 for k ≤ 4096), whichever of the two is larger.
  std::vector<double> magnitude;
  if (p.tf32) {
    auto absolute = [](const sg::Tensor& t) { return sg::abs(t); };
    sg::Tensor a_abs = absolute(a), b_abs = absolute(b);
    GemmProblem abs_problem = host;
    abs_problem.a_data = a_abs.data_ptr();
    abs_problem.b_data = b_abs.data_ptr();
    abs_problem.alpha = std::abs(p.alpha);
    magnitude.resize(reference.size());
    sg::detail::cpu::reference_gemm_f64(abs_problem, dtype, magnitude.data());
  }
  for (int64_t i = 0; i < p.m && out.failure.empty(); ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      const double x = c[i * p.n + j], r = reference[i * p.n + j];
      const double tol = p.tf32 ? std::max(element_tol, 4e-3 * magnitude[i * p.n + j]) : element_tol;
      if (!(std::abs(x - r) <= tol)) {
        out.failure = sg::detail::concat("element (", i, ", ", j, ") = ", x, ", reference ", r);
        break;
      }
      if (p.mask == Structure::UpperTriangular && i > j && (x != 0.0 || std::signbit(x))) {
        out.failure = sg::detail::concat("element (", i, ", ", j, ") below the diagonal is ", x, ", not +0");
        break;
      }
      if (p.mask == Structure::Symmetric && i > j) {
        const double mirror = c[j * p.n + i];
        if (std::memcmp(&x, &mirror, sizeof(double)) != 0) {
          out.failure = sg::detail::concat("element (", i, ", ", j, ") = ", x, " is not the bit-exact mirror ", mirror);
          break;
        }
      }
    }
  }
  return out;
}

inline GemmProblem square(int64_t n, Variant a, Variant b, Structure mask, double alpha = 1.0) {
  GemmProblem p;
  p.m = p.n = p.k = n;
  p.a = {a.structure, a.trans};
  p.b = {b.structure, b.trans};
  p.mask = mask;
  p.alpha = alpha;
  p.tf32 = g_tf32;
  return p;
}

/// `p` with its operands' invariants vouched for where `a` / `b` say so, as sg::matmul vouches for
/// its tensors': zeros_stored for an Upper or Lower operand (an UpperTriangular tensor's zeros),
/// mirror_stored for a Symmetric one (its mirror); nothing for a Dense one.
inline GemmProblem vouched(GemmProblem p, bool a = true, bool b = true) {
  for (auto [operand, vouch] : {std::pair{&p.a, a}, std::pair{&p.b, b}}) {
    operand->zeros_stored = vouch && sg::detail::is_triangular(operand->structure);
    operand->mirror_stored = vouch && operand->structure == Structure::Symmetric;
  }
  return p;
}

/// Relative Frobenius error bound: exact float32 1e-5, float64 1e-12, TF32 2e-3.
inline double tolerance(sg::DType dtype) { return dtype == sg::kFloat64 ? 1e-12 : g_tf32 ? 2e-3 : 1e-5; }

/// The largest relative error seen since the last reset (tests print it: the measured figure).
inline double g_max_rel_error = 0;

/// `pad` extra columns in A's and B's rows, `c_pad` in C's (run_and_compare).
#define SG_EXPECT_PRODUCT_PADDED_C(device, problem, dtype, rng, pad, c_pad)                           \
  do {                                                                                               \
    const Checked checked_ = run_and_compare((device), (problem), (dtype), (rng), (pad), (c_pad));   \
    ::sgtest::gemm::g_max_rel_error = std::max(::sgtest::gemm::g_max_rel_error, checked_.rel_error); \
    EXPECT_LE(checked_.rel_error, tolerance(dtype))                                                  \
        << describe((problem), (dtype)) << " pad=" << (pad) << " c_pad=" << (c_pad);                 \
    EXPECT_TRUE(checked_.failure.empty())                                                            \
        << describe((problem), (dtype)) << " pad=" << (pad) << " c_pad=" << (c_pad) << ": " << checked_.failure; \
  } while (0)
#define SG_EXPECT_PRODUCT_PADDED(device, problem, dtype, rng, pad) \
  SG_EXPECT_PRODUCT_PADDED_C(device, problem, dtype, rng, pad, 0)
#define SG_EXPECT_PRODUCT(device, problem, dtype, rng) SG_EXPECT_PRODUCT_PADDED(device, problem, dtype, rng, 0)

/// Every descriptor pair under the Full and Upper masks, and every A·Aᵀ-shaped pair (the
/// products whose result is symmetric) under the Symmetric mask, at size n.
inline void check_every_descriptor(sg::Device device, int64_t n, sg::DType dtype, std::mt19937_64& rng) {
  for (const Variant& a : kVariants) {
    for (const Variant& b : kVariants) {
      for (Structure mask : {Structure::Dense, Structure::UpperTriangular}) {
        // Dense·Dense with a Full mask is cuBLAS's, not the structured kernel's.
        if (a.structure == Structure::Dense && b.structure == Structure::Dense && mask == Structure::Dense) continue;
        SG_EXPECT_PRODUCT(device, square(n, a, b, mask), dtype, rng);
      }
    }
    // op(A)·op(A)ᵀ: the transpose of op(A) as B flips the trans flag and Upper <-> Lower.
    Variant b = a;
    if (a.structure != Structure::Symmetric) {
      b.trans = !a.trans;
      b.structure = a.structure == Structure::UpperTriangular ? Structure::LowerTriangular
               : a.structure == Structure::LowerTriangular ? Structure::UpperTriangular
                                              : Structure::Dense;
    }
    // The symmetric-mask product must read one buffer as both operands.
    GemmProblem p = square(n, a, b, Structure::Symmetric, 2.0);
    const int64_t rows = n, cols = n;
    const auto opts = sg::TensorOptions().dtype(dtype);
    sg::Tensor x = sg::from_vector(random_values(rows * cols, rng), {rows, cols}, opts);
    std::vector<double> reference(static_cast<size_t>(n * n));
    GemmProblem host = p;
    host.a_data = host.b_data = x.data_ptr();
    host.lda = host.ldb = host.ldc = n;
    sg::detail::cpu::reference_gemm_f64(host, dtype, reference.data());
    sg::Tensor x_dev = x.to(device).clone();
    sg::Tensor c_dev = sg::Tensor::empty({n, n}, opts.device(device));
    c_dev.fill_(std::nan(""));
    GemmProblem on_device = host;
    on_device.a_data = on_device.b_data = x_dev.data_ptr();
    on_device.c_data = c_dev.data_ptr();
    sg::detail::backend_for(device).gemm(on_device, dtype);
    const std::vector<double> c = c_dev.to_vector();
    EXPECT_LE(sgtest::rel_error(c, reference), tolerance(dtype)) << describe(p, dtype);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < i; ++j)
        ASSERT_EQ(std::memcmp(&c[i * n + j], &c[j * n + i], sizeof(double)), 0)
            << describe(p, dtype) << ": (" << i << ", " << j << ") is not the mirror";
  }
}


// The products matmul, linear and gram issue (forward and backward) at n = 1000,
// 1024 and 4096 (CUDA) or 1000 (CPU), each once.
inline std::vector<GemmProblem> matmul_table_products(int64_t n) {
  const Variant dense{Structure::Dense, false}, dense_t{Structure::Dense, true};
  const Variant upper{Structure::UpperTriangular, false}, lower_t{Structure::LowerTriangular, true};
  const Variant sym{Structure::Symmetric, false};
  return {
      square(n, upper, upper, Structure::UpperTriangular),      // Upper·Upper forward
      square(n, upper, lower_t, Structure::UpperTriangular),    // dA = triu(G·Bᵀ), G upper
      square(n, lower_t, upper, Structure::UpperTriangular),    // dB = triu(Aᵀ·G)
      square(n, upper, dense, Structure::Dense),       // Upper·Dense forward
      square(n, dense, dense_t, Structure::UpperTriangular),    // its dA = triu(G·Bᵀ)
      square(n, lower_t, dense, Structure::Dense),     // its dB = Aᵀ·G
      square(n, sym, dense, Structure::Dense),         // Sym·Dense forward and its dB = A·G
      square(n, dense, sym, Structure::Dense),         // Dense·Sym forward; Sym·Sym dA = G·B
      square(n, sym, sym, Structure::Dense),           // Sym·Sym forward
      square(n, dense, lower_t, Structure::Dense),     // linear(x, U) = x·Uᵀ
      square(n, dense_t, upper, Structure::UpperTriangular),    // Dense·Upper dB = triu(Aᵀ·G)
  };
}

// The products sg::matmul and sg::gram issue, with the invariants they vouch for: zeros_stored
// for every UpperTriangular tensor, mirror_stored for every Symmetric one, nothing for an
// upstream gradient read through C's structure. Beside them the mixed Symmetric·Upper pairs
// both vouched and not (an unvouched Sym·Upper at 2048 and up once gave the tall kernel wrong
// results, and no table held it).
inline std::vector<GemmProblem> matmul_issued_products(int64_t n) {
  const Variant dense{Structure::Dense, false}, dense_t{Structure::Dense, true};
  const Variant upper{Structure::UpperTriangular, false}, lower_t{Structure::LowerTriangular, true};
  const Variant sym{Structure::Symmetric, false};
  return {
      vouched(square(n, upper, upper, Structure::UpperTriangular), true, true),    // Upper·Upper forward
      vouched(square(n, upper, lower_t, Structure::UpperTriangular), false, true), // its dA = triu(G·Bᵀ)
      vouched(square(n, lower_t, upper, Structure::UpperTriangular), true, false), // its dB = triu(Aᵀ·G)
      vouched(square(n, upper, dense, Structure::Dense), true, false),    // Upper·Dense forward
      vouched(square(n, dense, upper, Structure::Dense), false, true),    // Dense·Upper forward
      vouched(square(n, sym, dense, Structure::Dense), true, false),      // Sym·Dense; gram's dA = 2·G·A
      vouched(square(n, dense, sym, Structure::Dense), false, true),      // Dense·Sym; Sym·Sym's dA = G·B
      vouched(square(n, sym, sym, Structure::Dense), true, true),         // Sym·Sym forward
      vouched(square(n, sym, upper, Structure::Dense), true, true),       // Sym·Upper forward
      vouched(square(n, upper, sym, Structure::Dense), true, true),       // Upper·Sym forward
      vouched(square(n, dense, lower_t, Structure::Dense), false, true),  // Sym·Upper's dA = sym(G·Bᵀ)
      square(n, sym, upper, Structure::Dense),                            // the same two unvouched
      square(n, upper, sym, Structure::Dense),
      square(n, dense, dense_t, Structure::UpperTriangular),                       // gram forward
  };
}

}  // namespace sgtest::gemm
