// The CUDA Cholesky's choice between our blocked factor and cuSOLVER's potrf (cuda/linalg_choice.h),
// checked on the host against the measurements it comes from (cuda/linalg_choice.csv): at every
// measured order and dtype the dispatcher picks the faster of the two. Needs no GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/linalg_choice.h"

namespace fs = std::filesystem;
namespace cu = sg::detail::cuda;

namespace {

struct Measurement {
  std::string dtype;
  int64_t n = 0;
  double blocked_ms = 0;
  double potrf_ms = 0;
};

fs::path source_dir() {
  const char* dir = std::getenv("SG_SOURCE_DIR");
  return dir ? fs::path(dir) : fs::path(__FILE__).parent_path().parent_path().parent_path();
}

/// The rows of cuda/linalg_choice.csv (comment lines start with #, then a header).
std::vector<Measurement> measurements() {
  std::ifstream in(source_dir() / "cuda" / "linalg_choice.csv");
  EXPECT_TRUE(in.good()) << "cuda/linalg_choice.csv is missing";
  std::vector<Measurement> rows;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      EXPECT_EQ(line, "dtype,n,blocked_ms,potrf_ms");
      header = false;
      continue;
    }
    std::stringstream fields(line);
    Measurement m;
    std::string n, blocked, potrf;
    std::getline(fields, m.dtype, ',');
    std::getline(fields, n, ',');
    std::getline(fields, blocked, ',');
    std::getline(fields, potrf, ',');
    m.n = std::stoll(n);
    m.blocked_ms = std::stod(blocked);
    m.potrf_ms = std::stod(potrf);
    rows.push_back(m);
  }
  return rows;
}

TEST(CholeskyChoice, PicksTheFasterAtEveryMeasuredOrder) {
  const std::vector<Measurement> rows = measurements();
  int per_dtype[2] = {0, 0};
  for (const Measurement& m : rows) {
    ASSERT_TRUE(m.dtype == "float32" || m.dtype == "float64") << m.dtype;
    const bool f64 = m.dtype == "float64";
    ++per_dtype[f64];
    const bool potrf = cu::cholesky_uses_potrf(f64, m.n);
    const double chosen = potrf ? m.potrf_ms : m.blocked_ms, other = potrf ? m.blocked_ms : m.potrf_ms;
    // Within 5% counts as a tie (the spread of repeated runs): either choice is right there.
    EXPECT_LE(chosen, 1.05 * other) << m.dtype << " n = " << m.n << ": " << (potrf ? "potrf" : "the blocked factor")
                                    << " takes " << chosen << " ms, the other " << other << " ms";
  }
  EXPECT_GE(per_dtype[0], 3) << "float32 needs measurements on both sides of its threshold";
  EXPECT_GE(per_dtype[1], 3) << "float64 needs measurements on both sides of its threshold";
}

TEST(CholeskyChoice, ThresholdsAreOrdersFromWhichPotrfRuns) {
  const cu::PotrfFrom from{1000, 0};
  EXPECT_FALSE(cu::cholesky_uses_potrf(false, 999, from));
  EXPECT_TRUE(cu::cholesky_uses_potrf(false, 1000, from));
  EXPECT_FALSE(cu::cholesky_uses_potrf(true, 1 << 20, from));  // 0: never
}

}  // namespace
