// Compiled instead of cuda/ when structgrad is built without CUDA: the CUDA API answers
// "not available", and anything that needs a device throws a clear sg::Error.
#include "core/cuda_runtime_api.h"
#include "core/error.h"
#include "cuda/cuda_backend.h"

namespace sg {
namespace {
[[noreturn]] void no_cuda(const char* what) { SG_FAIL(what, ": structgrad was built without CUDA"); }
}  // namespace

namespace cuda {
bool is_available() { return false; }
int device_count() { return 0; }
bool built_with_cuda() { return false; }
void synchronize(int) { no_cuda("cuda::synchronize"); }
AllocatorStats allocator_stats(int) { no_cuda("cuda::allocator_stats"); }
void empty_cache() {}
std::string device_name(int) { no_cuda("cuda::device_name"); }
}  // namespace cuda

namespace detail {
void* device_allocate(Device device, size_t) { no_cuda(("allocating on " + device.str()).c_str()); }
void device_free(Device, void*, size_t) {}
Backend& cuda_backend(int device) { no_cuda(("cuda:" + std::to_string(device)).c_str()); }
}  // namespace detail
}  // namespace sg
