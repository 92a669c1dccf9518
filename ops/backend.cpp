// Device → backend: the CPU backend always, the CUDA backend of cuda:N when built with CUDA
// (cuda/no_cuda/ throws a clear error otherwise).
#include "ops/backend.h"

namespace sg::detail {

void Backend::adam_step_many(const std::vector<AdamSlot>&, const AdamParams&, Tensor& counter) {
  SG_FAIL("adam_step_many: no multi-tensor update on ", counter.device());
}

void Backend::sgd_step_many(const std::vector<SgdSlot>& slots, const SgdParams&) {
  SG_FAIL("sgd_step_many: no multi-tensor update on ", slots.empty() ? Device() : slots[0].param->device());
}

Backend& backend_for(Device device) {
  if (device.is_cpu()) return cpu_backend();
  return cuda_backend(device.index);
}

}  // namespace sg::detail
