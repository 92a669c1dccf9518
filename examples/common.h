// Command-line flags shared by the examples: --device cpu|cuda, --steps, --seed, --n,
// --quiet, plus example-specific ones read with get().
#pragma once

#include <cstdlib>
#include <iostream>
#include <map>
#include <string>

#include <structgrad/structgrad.h>

namespace examples {

struct Args {
  std::map<std::string, std::string> values;
  bool quiet = false;

  Args(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--quiet") {
        quiet = true;
        continue;
      }
      if (a.rfind("--", 0) != 0 || i + 1 >= argc) {
        std::cerr << "bad argument '" << a << "' (flags are --name value, or --quiet)\n";
        std::exit(2);
      }
      values[a.substr(2)] = argv[++i];
    }
  }
  std::string get(const std::string& k, const std::string& fallback) const {
    auto it = values.find(k);
    return it == values.end() ? fallback : it->second;
  }
  long long get_int(const std::string& k, long long fallback) const { return std::stoll(get(k, std::to_string(fallback))); }
  double get_double(const std::string& k, double fallback) const { return std::stod(get(k, std::to_string(fallback))); }
  sg::Device device() const { return sg::Device(get("device", "cpu")); }
};

}  // namespace examples
