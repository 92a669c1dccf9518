// Shared test helpers: the device list for parameterised tests, a clean skip where no GPU
// exists, and the |x − ref| ≤ atol + rtol·|ref| comparison against a float64 reference.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
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

}  // namespace sgtest
