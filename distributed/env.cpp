// sg::distributed's options: parsing RANK, WORLD_SIZE, LOCAL_RANK, SG_DIST_ID_FILE and
// SG_DIST_TIMEOUT from the environment, and validating them. Pure host code, built with and
// without NCCL, so that bad launches are reported (and tested) before any CUDA call.
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <string>

#include <structgrad/core/error.h>
#include <structgrad/distributed/distributed.h>

namespace sg::distributed {

namespace {

constexpr const char* kLaunchHint =
    " (launch with scripts/launch.sh N PROGRAM, or set RANK, WORLD_SIZE and SG_DIST_ID_FILE)";

/// The value of environment variable `name`, or nullptr when it is unset or empty.
const char* env_value(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' ? value : nullptr;
}

/// The integer in `text` (all of it, within int range); throws naming the variable otherwise.
int parse_int(const char* name, const char* text) {
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  SG_CHECK(end != text && *end == '\0' && errno == 0 && value >= INT_MIN && value <= INT_MAX,
           "distributed::init: environment variable ", name, "='", text, "' is not an integer");
  return static_cast<int>(value);
}

int required_int(const char* name) {
  const char* text = env_value(name);
  SG_CHECK(text != nullptr, "distributed::init: environment variable ", name, " is not set", kLaunchHint);
  return parse_int(name, text);
}

}  // namespace

namespace detail {

void validate_options(const char* op, const Options& o) {
  SG_CHECK(o.world_size >= 1, op, ": WORLD_SIZE must be at least 1, got ", o.world_size);
  SG_CHECK(o.rank >= 0 && o.rank < o.world_size, op, ": RANK must be in [0, WORLD_SIZE) = [0, ", o.world_size,
           "), got ", o.rank);
  SG_CHECK(o.local_rank >= 0, op, ": LOCAL_RANK must be at least 0, got ", o.local_rank);
  SG_CHECK(o.world_size == 1 || !o.id_file.empty(), op, ": SG_DIST_ID_FILE (the rendezvous file) is needed when ",
           "WORLD_SIZE is ", o.world_size, kLaunchHint);
  SG_CHECK(std::isfinite(o.timeout_seconds) && o.timeout_seconds > 0, op,
           ": the rendezvous timeout must be a positive number of seconds, got ", o.timeout_seconds);
}

}  // namespace detail

Options options_from_env() {
  Options o;
  o.rank = required_int("RANK");
  o.world_size = required_int("WORLD_SIZE");
  const char* local = env_value("LOCAL_RANK");
  o.local_rank = local != nullptr ? parse_int("LOCAL_RANK", local) : o.rank;
  if (const char* file = env_value("SG_DIST_ID_FILE")) o.id_file = file;
  if (const char* timeout = env_value("SG_DIST_TIMEOUT")) {
    char* end = nullptr;
    o.timeout_seconds = std::strtod(timeout, &end);
    SG_CHECK(end != timeout && *end == '\0', "distributed::init: environment variable SG_DIST_TIMEOUT='", timeout,
             "' is not a number of seconds");
  }
  detail::validate_options("distributed::init", o);
  return o;
}

}  // namespace sg::distributed
