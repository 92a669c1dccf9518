// Shared test helpers: the device (and device × dtype) lists for parameterised tests, a clean
// skip where no GPU exists, the |x − ref| ≤ atol + rtol·|ref| comparison against a float64
// reference, random structured matrices (also with a NaN or inf inside), their invariant's check.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <structgrad/structgrad.h>

namespace sgtest {

/// Devices every device-parameterised test runs on: cpu always, cuda:0 always listed so
/// that its tests show up as skipped (with the reason) where no GPU exists.
inline std::vector<sg::Device> test_devices() { return {sg::kCPU, sg::kCUDA}; }

inline std::string device_test_name(const testing::TestParamInfo<sg::Device>& info) {
  return info.param.is_cpu() ? "cpu" : "cuda";
}

/// A device and a dtype, for tests parameterised over both.
struct DeviceDtype {
  sg::Device device;
  sg::DType dtype;
};

inline void PrintTo(const DeviceDtype& c, std::ostream* out) { *out << c.device << " " << c.dtype; }

/// Every test device with float32 and float64: cpu_float32, cpu_float64, cuda_float32, cuda_float64.
inline std::vector<DeviceDtype> test_devices_and_dtypes() {
  std::vector<DeviceDtype> out;
  for (const sg::Device& d : test_devices())
    for (sg::DType t : {sg::kFloat32, sg::kFloat64}) out.push_back({d, t});
  return out;
}

inline std::string device_dtype_test_name(const testing::TestParamInfo<DeviceDtype>& info) {
  return std::string(info.param.device.is_cpu() ? "cpu_" : "cuda_") + sg::dtype_name(info.param.dtype);
}

/// Skips the current test unless `device` is usable.
#define SG_SKIP_IF_UNAVAILABLE(device)                                                    \
  do {                                                                                     \
    if ((device).is_cuda() && !sg::cuda::is_available())                                   \
      GTEST_SKIP() << (sg::cuda::built_with_cuda() ? "no CUDA device on this machine"     \
                                                   : "structgrad was built without CUDA"); \
  } while (0)

/// The sg::Error message `f` throws, or "(no sg::Error thrown)" when it throws none.
inline std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const sg::Error& e) {
    return e.what();
  }
  return "(no sg::Error thrown)";
}

/// True when `text` contains `part`.
inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// Relative Frobenius error ‖x − ref‖ / ‖ref‖ (absolute when ref is all zeros).
inline double rel_error(const std::vector<double>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = x[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  if (std::isnan(num)) return INFINITY;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

/// Asserts |x − ref| ≤ atol + rtol·|ref| elementwise (NaN fails), naming the first bad index.
inline ::testing::AssertionResult all_close(const std::vector<double>& x, const std::vector<double>& ref,
                                            double rtol, double atol) {
  if (x.size() != ref.size())
    return ::testing::AssertionFailure() << "size " << x.size() << " vs " << ref.size();
  for (size_t i = 0; i < x.size(); ++i) {
    const double tol = atol + rtol * std::abs(ref[i]);
    if (!(std::abs(x[i] - ref[i]) <= tol))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs reference " << ref[i]
                                           << " (tolerance " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

/// `got` equals `want` as IEEE values: both NaN, or equal (infinities with their sign).
inline ::testing::AssertionResult same_ieee(double got, double want) {
  if (std::isnan(want) ? std::isnan(got) : got == want) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", expected " << want;
}

/// A random n×n tensor of structure `s` (the typed factories for UpperTriangular and Symmetric).
inline sg::Tensor random_structured(sg::Structure s, int64_t n, sg::TensorOptions o) {
  switch (s) {
    case sg::Structure::UpperTriangular: return sg::UpperTriangular::randn(n, o);
    case sg::Structure::LowerTriangular: return sg::LowerTriangular::randn(n, o);
    case sg::Structure::Symmetric: return sg::Symmetric::randn(n, o);
    default: return sg::randn({n, n}, o);
  }
}

/// Checks the tag's invariant on the values of each matrix of t [..., n, n] (not trusting the tag):
/// exact zeros below an UpperTriangular diagonal and above a LowerTriangular one, mirrored entries of
/// a Symmetric.
inline ::testing::AssertionResult holds_invariant(const sg::Tensor& t) {
  if (t.structure() == sg::Structure::Dense) return ::testing::AssertionSuccess();
  const auto all = t.to_vector();
  const int64_t n = t.size(-1), count = n ? t.numel() / (n * n) : 0;
  for (int64_t m = 0; m < count; ++m) {
    const double* v = all.data() + m * n * n;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < i; ++j) {
        if (t.structure() == sg::Structure::UpperTriangular && v[i * n + j] != 0.0)
          return ::testing::AssertionFailure() << "matrix " << m << ", entry (" << i << ", " << j << ") = " << v[i * n + j];
        if (t.structure() == sg::Structure::LowerTriangular && v[j * n + i] != 0.0)
          return ::testing::AssertionFailure() << "matrix " << m << ", entry (" << j << ", " << i << ") = " << v[j * n + i];
        if (t.structure() == sg::Structure::Symmetric && !(v[i * n + j] == v[j * n + i]) &&
            !(std::isnan(v[i * n + j]) && std::isnan(v[j * n + i])))
          return ::testing::AssertionFailure() << "matrix " << m << ", entries (" << i << ", " << j << ") and (" << j
                                               << ", " << i << ")";
      }
  }
  return ::testing::AssertionSuccess();
}

/// Row-major n×n values of a random matrix of structure s (exact zeros below an Upper
/// diagonal, mirrored for Symmetric), with `special` written at (i, j) (and (j, i) for
/// Symmetric); i <= j, inside every structure.
inline std::vector<double> structured_values(sg::Structure s, int64_t n, int64_t i, int64_t j, double special,
                                             uint64_t seed) {
  sg::manual_seed(seed);
  std::vector<double> v = sg::randn({n, n}, sg::kFloat64).to_vector();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < r; ++c) {
      if (s == sg::Structure::UpperTriangular) v[r * n + c] = 0;
      if (s == sg::Structure::Symmetric) v[r * n + c] = v[c * n + r];
    }
  v[i * n + j] = special;
  if (s == sg::Structure::Symmetric) v[j * n + i] = special;
  return v;
}

/// `v` as an n×n tensor tagged with structure `s` through the checked entries (as_upper, as_symmetric).
inline sg::Tensor tagged(const std::vector<double>& v, sg::Structure s, int64_t n, sg::TensorOptions o) {
  auto t = sg::from_vector(v, {n, n}, o);
  if (s == sg::Structure::UpperTriangular) return sg::as_upper(t);
  if (s == sg::Structure::Symmetric) return sg::as_symmetric(t);
  return t;
}

}  // namespace sgtest
