// Command-line helpers the benchmarks share: splitting a flag's comma-separated value into items
// or sizes, reading argv as `--flag value` pairs, and the --n, --reps and --csv flags of the CUDA op
// benchmarks. Plain C++, for CPU and CUDA benchmarks alike; bench_cuda.h adds the CUDA timing.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace bench {

/// The comma-separated items of a flag's value: split("float32,float64") is {"float32", "float64"}.
inline std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) items.push_back(item);
  return items;
}

/// The comma-separated sizes of a flag's value: split_sizes("1024,4096") is {1024, 4096}.
inline std::vector<int64_t> split_sizes(const std::string& text) {
  std::vector<int64_t> sizes;
  for (const std::string& item : split(text)) sizes.push_back(std::stoll(item));
  return sizes;
}

/// Hands each `--flag value` pair of argv to take(flag, value), in order (a last flag without a
/// value is ignored). Where take returns false, the flag is unknown: prints `usage` to stderr and
/// exits with status 2.
inline void for_each_flag(int argc, char** argv, const std::string& usage,
                          const std::function<bool(const std::string& flag, const std::string& value)>& take) {
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!take(argv[i], argv[i + 1])) {
      std::fprintf(stderr, "%s", usage.c_str());
      std::exit(2);
    }
  }
}

/// The flags of the CUDA op benchmarks, with their defaults: --n 1024,4096 --reps 15 --csv FILE.
struct CommonFlags {
  std::vector<int64_t> sizes = {1024, 4096};
  int reps = 15;
  std::string csv;  // empty: no CSV
  /// Takes --n, --reps or --csv; false for any other flag.
  bool take(const std::string& flag, const std::string& value) {
    if (flag == "--n") sizes = split_sizes(value);
    else if (flag == "--reps") reps = std::stoi(value);
    else if (flag == "--csv") csv = value;
    else return false;
    return true;
  }
};

}  // namespace bench
