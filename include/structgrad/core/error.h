// Errors: every failure the library reports is an sg::Error thrown through SG_CHECK,
// whose message names the op and the operands ("matmul: shapes [2, 5] and [3, 7] ...").
#pragma once

#include <cstdint>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace sg {

/// Shapes print as [2, 5] (declared here so error messages can stream them).
std::string shape_str(const std::vector<int64_t>& shape);
/// Streams a shape as [2, 5]. Example: `std::cout << t.shape();`
inline std::ostream& operator<<(std::ostream& out, const std::vector<int64_t>& shape) {
  return out << shape_str(shape);
}

/// The one exception type structgrad throws for bad input and failed device calls.
/// Example: `try { sg::matmul(a, b); } catch (const sg::Error& e) { std::cerr << e.what(); }`
class Error : public std::runtime_error {
 public:
  /// An error with this message (SG_CHECK builds it). Example: `throw sg::Error("io: bad file");`
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

}  // namespace sg

/// Throws sg::Error with the streamed message when `cond` is false.
/// Example: SG_CHECK(a.dim() == 2, "matmul: expected a matrix, got ", a.shape());
#define SG_CHECK(cond, ...)                                  \
  do {                                                       \
    if (!(cond)) throw ::sg::Error(::sg::detail::concat(__VA_ARGS__)); \
  } while (0)

/// Throws sg::Error unconditionally.
#define SG_FAIL(...) throw ::sg::Error(::sg::detail::concat(__VA_ARGS__))
