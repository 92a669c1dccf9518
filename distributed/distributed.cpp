// sg::distributed over NCCL: this process's communicator (one process per GPU), the file
// rendezvous that hands rank 0's NCCL unique id to the other ranks, in-place all_reduce and
// broadcast on the library stream, and DataParallel's bucketed gradient averaging.
//
// Streams. Every NCCL call is queued on the library stream of this process's device, the
// stream every kernel and copy of structgrad uses, so collectives are ordered after the work
// that produced their inputs and before the work that reads their results, and the caching
// allocator's stream-ordered reuse (cuda/allocator.cpp) stays valid. Nothing here waits on
// the host except barrier() and finalize().
#include <structgrad/distributed/distributed.h>

#include <cuda_runtime.h>
#include <fcntl.h>
#include <nccl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <structgrad/autograd/grad_mode.h>
#include <structgrad/core/error.h>
#include "cuda/check.h"
#include "cuda/runtime.h"
#include <structgrad/nn/module.h>
#include "ops/backend.h"
#include <structgrad/ops/factories.h>

/// Throws sg::Error naming the NCCL call, ncclGetErrorString, NCCL's last-error detail, the
/// file and the line when `call` does not return ncclSuccess.
#define SG_NCCL_CHECK(call)                                                                     \
  do {                                                                                          \
    const ncclResult_t sg_nccl_result_ = (call);                                                \
    if (sg_nccl_result_ != ncclSuccess)                                                         \
      throw ::sg::Error(::sg::distributed::nccl_error_message(sg_nccl_result_, #call, __FILE__, __LINE__)); \
  } while (0)

namespace sg::distributed {

namespace {

std::string nccl_error_message(ncclResult_t result, const char* call, const char* file, int line) {
  std::string message = std::string("NCCL error: ") + call + " failed with " + ncclGetErrorString(result);
  const char* detail = ncclGetLastError(nullptr);
  if (detail != nullptr && detail[0] != '\0') message += std::string(" (") + detail + ")";
  return message + " at " + file + ":" + std::to_string(line);
}

// ---- this process's place in the job -------------------------------------------------------

struct State {
  std::mutex mutex;  // serialises init() and finalize()
  bool initialized = false;
  ncclComm_t comm = nullptr;
  int rank = 0, world_size = 1, local_rank = 0;
};

/// Leaked on purpose: the exit handler reads it after static destructors may have run.
State& state() {
  static auto* s = new State();
  return *s;
}

const State& initialized_state(const char* op) {
  const State& s = state();
  SG_CHECK(s.initialized, "distributed::", op,
           ": not initialized; call sg::distributed::init() first (processes started by scripts/launch.sh)");
  return s;
}

/// At exit, a communicator the program did not finalize() is aborted: unlike ncclCommDestroy,
/// ncclCommAbort cannot wait forever on a peer that already exited or crashed. Registered after
/// the first CUDA call, so it runs before the CUDA runtime's own teardown.
void abort_at_exit() {
  State& s = state();
  if (!s.initialized) return;
  s.initialized = false;
  (void)ncclCommAbort(s.comm);  // nothing can report an error at exit
  s.comm = nullptr;
}

// ---- the rendezvous: rank 0's ncclUniqueId through a file ----------------------------------

std::string errno_text() { return std::strerror(errno); }

/// Writes `bytes` to `path` so that a reader sees either no file or the whole of it: the bytes
/// go to a temporary file in the same directory, which is then renamed over `path`.
void write_file_atomically(const std::string& path, const void* bytes, size_t size) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  SG_CHECK(fd >= 0, "distributed::init: cannot create '", tmp, "': ", errno_text());
  const ssize_t written = ::write(fd, bytes, size);
  const int write_errno = errno;
  const bool synced = written == static_cast<ssize_t>(size) && ::fsync(fd) == 0;
  ::close(fd);
  if (!synced) {
    ::unlink(tmp.c_str());
    SG_FAIL("distributed::init: cannot write the NCCL id to '", tmp, "': ",
            written < 0 ? std::strerror(write_errno) : "short write or fsync failure");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = errno_text();
    ::unlink(tmp.c_str());
    SG_FAIL("distributed::init: cannot rename '", tmp, "' to '", path, "': ", reason);
  }
}

/// Reads up to `capacity` bytes of `path`; returns the count, or −1 when the file does not exist.
ssize_t read_file(const std::string& path, void* buffer, size_t capacity) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    SG_CHECK(errno == ENOENT, "distributed::init: cannot open the rendezvous file '", path, "': ", errno_text());
    return -1;
  }
  ssize_t total = 0;
  while (static_cast<size_t>(total) < capacity) {
    const ssize_t got = ::read(fd, static_cast<char*>(buffer) + total, capacity - static_cast<size_t>(total));
    if (got <= 0) break;
    total += got;
  }
  ::close(fd);
  return total;
}

/// Rank 0 makes the id and publishes it; the other ranks poll the file until it is complete.
ncclUniqueId exchange_unique_id(const Options& o) {
  ncclUniqueId id;
  if (o.id_file.empty()) {  // one rank (validate_options): nobody to tell
    SG_NCCL_CHECK(ncclGetUniqueId(&id));
    return id;
  }
  if (o.rank == 0) {
    SG_CHECK(::access(o.id_file.c_str(), F_OK) != 0, "distributed::init: the rendezvous file '", o.id_file,
             "' already exists; every run needs a fresh SG_DIST_ID_FILE path (scripts/launch.sh makes one)");
    SG_NCCL_CHECK(ncclGetUniqueId(&id));
    write_file_atomically(o.id_file, &id, sizeof(id));
    return id;
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(o.timeout_seconds);
  ssize_t last_size = -1;
  char buffer[sizeof(ncclUniqueId) + 1];
  while (true) {
    last_size = read_file(o.id_file, buffer, sizeof(buffer));
    if (last_size == static_cast<ssize_t>(sizeof(id))) {
      std::memcpy(&id, buffer, sizeof(id));
      return id;
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  SG_CHECK(last_size < 0, "distributed::init: the rendezvous file '", o.id_file, "' holds ", last_size,
           " bytes, expected an NCCL unique id of ", sizeof(id), " bytes (a file of another run?)");
  SG_FAIL("distributed::init: rank ", o.rank, " waited ", o.timeout_seconds, " s for the rendezvous file '",
          o.id_file, "' that rank 0 writes; is rank 0 running with the same SG_DIST_ID_FILE? (SG_DIST_TIMEOUT "
          "sets the wait)");
}

// ---- collectives ------------------------------------------------------------------------------

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int64: return ncclInt64;
  }
  SG_FAIL("distributed: unsupported dtype ", dtype);
}

/// The checks every in-place collective makes on its tensor; `op` names the caller.
void check_collective_tensor(const char* op, const State& s, const Tensor& t) {
  SG_CHECK(t.defined(), "distributed::", op, ": the tensor is undefined");
  const Device expected(DeviceType::CUDA, s.local_rank);
  SG_CHECK(t.device() == expected, "distributed::", op, ": expected a tensor on ", expected,
           " (this process's device), got one on ", t.device());
  (void)nccl_dtype(t.dtype());
  // structgrad tensors have no strides: a tensor is contiguous when its storage holds it.
  SG_CHECK(t.numel() == 0 || t.nbytes() <= t.impl().storage->nbytes, "distributed::", op, ": the tensor of shape ",
           t.shape(), " is not contiguous in its storage");
  SG_CHECK(!(autograd::grad_mode_enabled() && t.requires_grad() && t.is_leaf()), "distributed::", op,
           ": a leaf that requires grad is being written in place; use sg::NoGradGuard");
}

/// Scales the reduced sum into the mean, in place, on the library stream. Structure-neutral.
void divide_by_world(Tensor& t, int world_size) {
  if (world_size == 1 || t.numel() == 0) return;
  sg::detail::backend_for(t.device()).unary(sg::detail::UnaryOp::MulScalar, t, t, 1.0 / world_size);
}

/// With more than two ranks NCCL may sum entry (i, j) and entry (j, i) in different orders;
/// (x + xᵀ)/2 makes a Symmetric result mirrored bit for bit again (in place, on the stream).
void remirror_if_needed(Tensor& t, int world_size) {
  if (world_size > 2 && t.structure() == Structure::Symmetric && t.numel() > 0)
    sg::detail::backend_for(t.device()).symmetrize(t, t);
}

}  // namespace

bool built_with_nccl() { return true; }

void init() { init(options_from_env()); }

void init(const Options& options) {
  detail::validate_options("distributed::init", options);  // before any CUDA call
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  SG_CHECK(!s.initialized, "distributed::init: already initialized (rank ", s.rank, " of ", s.world_size,
           "); call finalize() first");
  sg::detail::cuda::check_device(options.local_rank);
  SG_CUDA_CHECK(cudaSetDevice(options.local_rank));
  (void)sg::detail::cuda::stream(options.local_rank);
  ::setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);  // NVLink multicast off unless asked for

  const ncclUniqueId id = exchange_unique_id(options);
  ncclComm_t comm = nullptr;
  SG_NCCL_CHECK(ncclCommInitRank(&comm, options.world_size, id, options.rank));
  // ncclCommInitRank returns once every rank has joined, i.e. has read the file.
  if (options.rank == 0 && !options.id_file.empty()) (void)std::remove(options.id_file.c_str());

  s.comm = comm;
  s.rank = options.rank;
  s.world_size = options.world_size;
  s.local_rank = options.local_rank;
  s.initialized = true;
  static std::once_flag exit_handler;
  std::call_once(exit_handler, [] { std::atexit(abort_at_exit); });
}

bool is_initialized() { return state().initialized; }
int rank() { return initialized_state("rank").rank; }
int world_size() { return initialized_state("world_size").world_size; }
int local_rank() { return initialized_state("local_rank").local_rank; }
Device device() { return Device(DeviceType::CUDA, initialized_state("device").local_rank); }

void finalize() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.initialized) return;
  const ncclComm_t comm = s.comm;
  s.initialized = false;
  s.comm = nullptr;
  try {
    SG_CUDA_CHECK(cudaStreamSynchronize(sg::detail::cuda::stream(s.local_rank)));
  } catch (...) {
    (void)ncclCommAbort(comm);  // the stream failed: do not wait on peers
    throw;
  }
  SG_NCCL_CHECK(ncclCommDestroy(comm));
}

void all_reduce(Tensor& t, ReduceOp op) {
  const State& s = initialized_state("all_reduce");
  check_collective_tensor("all_reduce", s, t);
  if (t.numel() == 0) return;
  sg::detail::cuda::DeviceGuard guard(s.local_rank);
  SG_NCCL_CHECK(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_dtype(t.dtype()),
                              ncclSum, s.comm, sg::detail::cuda::stream(s.local_rank)));
  if (op == ReduceOp::Mean) divide_by_world(t, s.world_size);
  remirror_if_needed(t, s.world_size);
  t.impl().storage->version++;
}

void broadcast(Tensor& t, int root) {
  const State& s = initialized_state("broadcast");
  SG_CHECK(root >= 0 && root < s.world_size, "distributed::broadcast: root ", root, " is not a rank of this job (",
           s.world_size, " ranks)");
  check_collective_tensor("broadcast", s, t);
  if (t.numel() == 0) return;
  sg::detail::cuda::DeviceGuard guard(s.local_rank);
  SG_NCCL_CHECK(ncclBroadcast(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_dtype(t.dtype()), root,
                              s.comm, sg::detail::cuda::stream(s.local_rank)));
  t.impl().storage->version++;
}

void barrier() {
  const State& s = initialized_state("barrier");
  Tensor token = zeros({1}, TensorOptions().device(Device(DeviceType::CUDA, s.local_rank)));
  all_reduce(token, ReduceOp::Sum);
  SG_CUDA_CHECK(cudaStreamSynchronize(sg::detail::cuda::stream(s.local_rank)));
}

// ---- DataParallel ----------------------------------------------------------------------------

DataParallel::DataParallel(const nn::Module& module, DataParallelOptions options)
    : DataParallel(module.parameters(), options) {}

DataParallel::DataParallel(std::vector<Tensor> params, DataParallelOptions options) : params_(std::move(params)) {
  const State& s = initialized_state("DataParallel");
  SG_CHECK(options.bucket_bytes > 0, "distributed::DataParallel: bucket_bytes must be positive");
  const Device device(DeviceType::CUDA, s.local_rank);
  for (size_t i = 0; i < params_.size(); ++i) {
    SG_CHECK(params_[i].defined(), "distributed::DataParallel: parameter ", i, " is undefined");
    SG_CHECK(params_[i].device() == device, "distributed::DataParallel: parameter ", i, " is on ",
             params_[i].device(), ", expected ", device, " (this process's device); move the model there first");
  }
  {
    NoGradGuard no_grad;  // parameters are leaves that require grad
    for (Tensor& p : params_) broadcast(p, 0);
  }
  // Buckets: parameters in order, one dtype per bucket, closed when the next would overflow.
  std::map<DType, size_t> open_bucket;
  for (size_t i = 0; i < params_.size(); ++i) {
    const DType dtype = params_[i].dtype();
    const int64_t numel = params_[i].numel();
    auto found = open_bucket.find(dtype);
    const bool full = found != open_bucket.end() && buckets_[found->second].numel > 0 &&
                      static_cast<size_t>(buckets_[found->second].numel + numel) * element_size(dtype) >
                          options.bucket_bytes;
    if (found == open_bucket.end() || full) {
      buckets_.emplace_back();
      buckets_.back().dtype = dtype;
      open_bucket[dtype] = buckets_.size() - 1;
    }
    Bucket& bucket = buckets_[open_bucket[dtype]];
    bucket.params.push_back(i);
    bucket.offsets.push_back(bucket.numel);
    bucket.numel += numel;
  }
  for (Bucket& bucket : buckets_)
    bucket.buffer = Tensor::empty({bucket.numel}, TensorOptions().dtype(bucket.dtype).device(device));
}

void DataParallel::synchronize_gradients() {
  const State& s = initialized_state("DataParallel::synchronize_gradients");
  NoGradGuard no_grad;
  sg::detail::cuda::DeviceGuard guard(s.local_rank);
  const cudaStream_t stream = sg::detail::cuda::stream(s.local_rank);
  for (Bucket& bucket : buckets_) {
    if (bucket.numel == 0) continue;
    const size_t element = element_size(bucket.dtype);
    char* base = static_cast<char*>(bucket.buffer.data_ptr());
    // Gradients into the bucket; zeros for a parameter without one, so every rank sends the same layout.
    for (size_t k = 0; k < bucket.params.size(); ++k) {
      const Tensor& p = params_[bucket.params[k]];
      const size_t bytes = static_cast<size_t>(p.numel()) * element;
      if (bytes == 0) continue;
      char* slot = base + static_cast<size_t>(bucket.offsets[k]) * element;
      const Tensor g = p.grad();
      if (g.defined()) {
        SG_CHECK(g.shape() == p.shape() && g.dtype() == p.dtype() && g.device() == p.device(),
                 "distributed::DataParallel: the gradient of parameter ", bucket.params[k], " (", g.shape(), " ",
                 g.dtype(), " on ", g.device(), ") does not match it (", p.shape(), " ", p.dtype(), " on ",
                 p.device(), ")");
        SG_CUDA_CHECK(cudaMemcpyAsync(slot, g.data_ptr(), bytes, cudaMemcpyDeviceToDevice, stream));
      } else {
        SG_CUDA_CHECK(cudaMemsetAsync(slot, 0, bytes, stream));
      }
    }
    SG_NCCL_CHECK(ncclAllReduce(base, base, static_cast<size_t>(bucket.numel), nccl_dtype(bucket.dtype), ncclSum,
                                s.comm, stream));
    divide_by_world(bucket.buffer, s.world_size);
    // Back out into fresh gradient tensors with the parameter's structure: the old gradient may
    // share storage with other tensors (autograd hands one gradient to several leaves), so it
    // is replaced, never written. The caching allocator makes these allocations cheap.
    for (size_t k = 0; k < bucket.params.size(); ++k) {
      Tensor& p = params_[bucket.params[k]];
      Tensor mean = sg::detail::make_tensor(p.shape(), p.dtype(), p.device(), p.structure());
      const size_t bytes = static_cast<size_t>(p.numel()) * element;
      if (bytes > 0) {
        const char* slot = base + static_cast<size_t>(bucket.offsets[k]) * element;
        SG_CUDA_CHECK(cudaMemcpyAsync(mean.data_ptr(), slot, bytes, cudaMemcpyDeviceToDevice, stream));
      }
      remirror_if_needed(mean, s.world_size);
      p.set_grad(mean);  // same structure: set_grad keeps the tensor as it is
    }
  }
}

}  // namespace sg::distributed
