// Names and parsing for DType, Device, Structure and Shape.
#include <structgrad/core/types.h>

#include <structgrad/core/error.h>
#include "core/structures.h"

namespace sg {

size_t element_size(DType dtype) { return dtype == DType::Float32 ? 4 : 8; }

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
  }
  return "?";
}

bool is_floating_point(DType dtype) { return dtype != DType::Int64; }

Device::Device(const std::string& spec) {
  if (spec == "cpu") {
    type = DeviceType::CPU;
    index = 0;
    return;
  }
  if (spec == "cuda") {
    type = DeviceType::CUDA;
    index = 0;
    return;
  }
  const std::string prefix = "cuda:";
  SG_CHECK(spec.rfind(prefix, 0) == 0 && spec.size() > prefix.size(),
           "device: expected \"cpu\", \"cuda\" or \"cuda:N\", got \"", spec, "\"");
  const std::string digits = spec.substr(prefix.size());
  for (char c : digits) SG_CHECK(c >= '0' && c <= '9', "device: bad device index in \"", spec, "\"");
  SG_CHECK(digits.size() <= 4, "device: bad device index in \"", spec, "\"");
  type = DeviceType::CUDA;
  index = std::stoi(digits);
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

const char* structure_name(Structure s) { return detail::traits(s).name; }

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::ostream& operator<<(std::ostream& out, DType d) { return out << dtype_name(d); }
std::ostream& operator<<(std::ostream& out, const Device& d) { return out << d.str(); }
std::ostream& operator<<(std::ostream& out, Structure s) { return out << structure_name(s); }

}  // namespace sg
