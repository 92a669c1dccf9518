// Compiled instead of everything in cuda/ when structgrad is built without CUDA: the CUDA
// API answers "not available", and every call that needs a device throws one clear sg::Error
// ("cuda::synchronize: structgrad was built without CUDA") instead of failing to link.
#include <string>

#include <structgrad/core/cuda_graph.h>
#include <structgrad/core/cuda_runtime_api.h>
#include <structgrad/core/error.h>
#include <structgrad/core/storage.h>
#include "core/capture.h"
#include "ops/backend.h"

namespace {
[[noreturn]] void fail_without_cuda(const std::string& what) {
  SG_FAIL(what, ": structgrad was built without CUDA");
}
}  // namespace

namespace sg::detail::cuda {
struct GraphState {};
}  // namespace sg::detail::cuda

namespace sg::cuda {

bool is_available() { return false; }
int device_count() { return 0; }
bool built_with_cuda() { return false; }
void synchronize(int) { fail_without_cuda("cuda::synchronize"); }
AllocatorStats allocator_stats(int) { fail_without_cuda("cuda::allocator_stats"); }
TransferStats transfer_stats(int) { fail_without_cuda("cuda::transfer_stats"); }
void empty_cache() {}  // there is no cache to empty
std::string device_name(int) { fail_without_cuda("cuda::device_name"); }
StreamGuard::StreamGuard(CUstream_st*, int) { fail_without_cuda("cuda::StreamGuard"); }
StreamGuard::~StreamGuard() = default;
void use_external_allocator(const ExternalAllocator&) { fail_without_cuda("cuda::use_external_allocator"); }
void record_stream(const Tensor&, CUstream_st*) { fail_without_cuda("cuda::record_stream"); }

Graph::Graph(int) { fail_without_cuda("cuda::Graph"); }
Graph::~Graph() = default;
void Graph::capture(const std::function<void()>&, int) { fail_without_cuda("cuda::Graph::capture"); }
void Graph::capture_begin() { fail_without_cuda("cuda::Graph::capture_begin"); }
void Graph::capture_end() { fail_without_cuda("cuda::Graph::capture_end"); }
void Graph::replay() { fail_without_cuda("cuda::Graph::replay"); }
void Graph::check_errors() { fail_without_cuda("cuda::Graph::check_errors"); }
void Graph::reset() { fail_without_cuda("cuda::Graph::reset"); }
bool Graph::has_graph() const { return false; }
CUstream_st* Graph::stream() const { return nullptr; }
int Graph::device() const { return 0; }
bool is_capturing(int) { return false; }

}  // namespace sg::cuda

namespace sg::detail {

void* device_allocate(Device device, size_t) { fail_without_cuda("allocating on " + device.str()); }
void device_free(Device device, void*, size_t) { fail_without_cuda("freeing on " + device.str()); }
void record_stream_use(Device, void*, CUstream_st*) {}
uintptr_t current_stream_id(Device device) { fail_without_cuda("a stream of " + device.str()); }
Backend& cuda_backend(int device) { fail_without_cuda("cuda:" + std::to_string(device)); }
bool capturing(Device) { return false; }
void refuse_under_capture(const char*, Device, const char*) {}
void defer_check(Device device, std::function<void()>) { fail_without_cuda("a captured check on " + device.str()); }
void check_before_replay(Device device, std::function<void()>) {
  fail_without_cuda("a captured check on " + device.str());
}

}  // namespace sg::detail
