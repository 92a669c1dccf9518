// Device → backend: the CPU backend always, the CUDA backend of cuda:N when built with CUDA
// (cuda/no_cuda/ throws a clear error otherwise).
#include "ops/backend.h"

namespace sg::detail {

Backend& backend_for(Device device) {
  if (device.is_cpu()) return cpu_backend();
  return cuda_backend(device.index);
}

}  // namespace sg::detail
