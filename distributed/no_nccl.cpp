// Compiled instead of distributed/distributed.cpp when structgrad is built without NCCL: the
// same sg::distributed API, in which every call that needs a communicator throws one clear
// sg::Error ("distributed: structgrad was built without NCCL"). env.cpp still parses options.
#include <string>
#include <utility>

#include <structgrad/core/error.h>
#include <structgrad/distributed/distributed.h>
#include <structgrad/nn/module.h>

namespace sg::distributed {

namespace {
[[noreturn]] void fail_without_nccl(const char* what) {
  SG_FAIL("distributed: structgrad was built without NCCL (", what,
          "); rebuild with CUDA and NCCL found, or -DSG_NCCL=ON to require it");
}
}  // namespace

bool built_with_nccl() { return false; }
void init() { fail_without_nccl("init"); }
void init(const Options&) { fail_without_nccl("init"); }
bool is_initialized() { return false; }
int rank() { fail_without_nccl("rank"); }
int world_size() { fail_without_nccl("world_size"); }
int local_rank() { fail_without_nccl("local_rank"); }
Device device() { fail_without_nccl("device"); }
void finalize() {}  // nothing was initialised
void all_reduce(Tensor&, ReduceOp) { fail_without_nccl("all_reduce"); }
void broadcast(Tensor&, int) { fail_without_nccl("broadcast"); }
void barrier() { fail_without_nccl("barrier"); }

DataParallel::DataParallel(std::vector<Tensor>, DataParallelOptions) { fail_without_nccl("DataParallel"); }
DataParallel::DataParallel(const nn::Module&, DataParallelOptions) { fail_without_nccl("DataParallel"); }
void DataParallel::synchronize_gradients() { fail_without_nccl("DataParallel::synchronize_gradients"); }

}  // namespace sg::distributed
