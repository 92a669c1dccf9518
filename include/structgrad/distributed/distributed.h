// sg::distributed: data-parallel training on several GPUs over NCCL, one process per GPU
// (libtorch DDP's model): init() from environment variables, in-place all_reduce / broadcast
// on the library stream, and DataParallel, which averages gradients in a few large buckets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <structgrad/core/tensor.h>

namespace sg::nn {
class Module;
}

namespace sg::distributed {

/// How all_reduce combines the ranks' tensors: their sum, or their mean (the sum times
/// 1/world_size). Example: `sg::distributed::all_reduce(t, sg::distributed::ReduceOp::Mean);`
enum class ReduceOp { Sum, Mean };

/// Where this process sits in the job. options_from_env() fills it from the variables that
/// scripts/launch.sh sets. Example:
/// `auto o = sg::distributed::options_from_env(); o.timeout_seconds = 600; sg::distributed::init(o);`
struct Options {
  int rank = 0;        ///< this process, 0 ≤ rank < world_size (env RANK)
  int world_size = 1;  ///< number of processes (env WORLD_SIZE)
  int local_rank = 0;  ///< the GPU of this process: cuda:local_rank (env LOCAL_RANK, default RANK)
  /// A path on a filesystem every rank sees, fresh for each run (env SG_DIST_ID_FILE): rank 0
  /// writes the NCCL unique id there, the others wait for it. May be empty when world_size is 1.
  std::string id_file;
  /// How long ranks other than 0 wait for id_file, in seconds (env SG_DIST_TIMEOUT).
  double timeout_seconds = 300;
};

/// Reads RANK, WORLD_SIZE, LOCAL_RANK (default: RANK), SG_DIST_ID_FILE and SG_DIST_TIMEOUT,
/// and validates them without touching CUDA: throws sg::Error when RANK or WORLD_SIZE is
/// missing or not an integer, WORLD_SIZE < 1, RANK outside [0, WORLD_SIZE), LOCAL_RANK < 0,
/// or SG_DIST_ID_FILE is missing while WORLD_SIZE > 1. Works in every build.
/// Example: `sg::distributed::Options o = sg::distributed::options_from_env();`
Options options_from_env();

/// init(options_from_env()). Example: `sg::distributed::init();  // under scripts/launch.sh`
void init();
/// Joins the job: validates `options` (before any CUDA call), makes cuda:local_rank the
/// current device, exchanges the NCCL unique id through options.id_file (rank 0 writes it
/// atomically, the others poll for it up to timeout_seconds) and creates the communicator
/// with ncclCommInitRank. Sets NCCL_NVLS_ENABLE=0 when that variable is unset (NVLink
/// multicast stays off unless asked for). Throws sg::Error when already initialised, on
/// bad options, a missing device, a rendezvous timeout or an NCCL failure.
/// Example: `sg::distributed::init({.rank = 0, .world_size = 1});`
void init(const Options& options);
/// True between a successful init() and finalize(). Example: `if (!sg::distributed::is_initialized()) sg::distributed::init();`
bool is_initialized();
/// This process's rank; throws sg::Error before init(). Example: `if (sg::distributed::rank() == 0) std::puts("hi");`
int rank();
/// The number of processes; throws sg::Error before init(). Example: `int n = sg::distributed::world_size();`
int world_size();
/// This process's GPU index; throws sg::Error before init(). Example: `int gpu = sg::distributed::local_rank();`
int local_rank();
/// This process's device, cuda:local_rank(); throws sg::Error before init().
/// Example: `auto x = sg::randn({8, 4}, sg::distributed::device());`
Device device();
/// Waits for this device's queued work, then destroys the communicator (ncclCommDestroy).
/// A no-op when not initialised. A job still initialised at exit is torn down with
/// ncclCommAbort, which cannot block on a peer that is gone. Example: `sg::distributed::finalize();`
void finalize();
/// True when this build contains the NCCL implementation (otherwise every call but
/// options_from_env, is_initialized and finalize throws "distributed: structgrad was built
/// without NCCL"). Example: `if (sg::distributed::built_with_nccl()) sg::distributed::init();`
bool built_with_nccl();

/// Reduces `t` across all ranks in place (every rank gets the result), queued on the library
/// stream of t's device, without host synchronisation. `t` must be a float32 or float64 CUDA
/// tensor on this process's device (structgrad tensors are always contiguous), and the same
/// shape and dtype on every rank. The structure tag is kept: the sum or mean of matrices of
/// one structure (upper triangular, symmetric) has that structure; Symmetric results are
/// re-mirrored when world_size > 2, where NCCL's summation order may differ between (i, j)
/// and (j, i). Writing a leaf that requires grad needs sg::NoGradGuard, as for copy_.
/// Example: `sg::distributed::all_reduce(loss_sum, sg::distributed::ReduceOp::Sum);`
void all_reduce(Tensor& t, ReduceOp op = ReduceOp::Sum);
/// Copies rank `root`'s `t` into `t` on every rank, in place, on the library stream; same
/// requirements as all_reduce. Example: `sg::distributed::broadcast(weights, 0);`
void broadcast(Tensor& t, int root = 0);
/// Returns once every rank has called barrier() (a one-element all-reduce, then a wait for
/// this device's stream). Example: `sg::distributed::barrier();  // before starting a timer`
void barrier();

/// DataParallel settings. Example: `sg::distributed::DataParallel dp(params, {.bucket_bytes = 4 << 20});`
struct DataParallelOptions {
  /// Largest bucket in bytes (a parameter larger than this gets a bucket of its own).
  size_t bucket_bytes = size_t{25} << 20;
};

/// Data-parallel training, like libtorch's DistributedDataParallel without the module
/// wrapper: construction broadcasts every parameter from rank 0, and
/// synchronize_gradients(), called after backward() and before the optimizer step, replaces
/// every parameter's .grad() by its mean over the ranks. Gradients travel in buckets of at
/// most bucket_bytes (one dtype per bucket, parameters in the order given): each bucket is
/// one device buffer that the gradients are copied into, one ncclAllReduce, and copies back,
/// all on the library stream. It runs after backward, not overlapped with it.
/// Example:
/// `sg::distributed::DataParallel dp(model);  loss.backward();  dp.synchronize_gradients();  opt.step();`
class DataParallel {
 public:
  /// Takes the parameters (defined, float32/float64, on this process's device) and
  /// broadcasts their values from rank 0. Throws sg::Error before init().
  /// Example: `sg::distributed::DataParallel dp({mu, U});`
  explicit DataParallel(std::vector<Tensor> params, DataParallelOptions options = {});
  /// Takes module.parameters(). Example: `sg::distributed::DataParallel dp(model);`
  explicit DataParallel(const nn::Module& module, DataParallelOptions options = {});

  /// Averages every parameter's gradient over the ranks, in place. A parameter without a
  /// gradient on this rank contributes zeros and then gets the mean as its gradient, so all
  /// ranks agree (one that no rank gave a gradient ends with a zero gradient). A structured
  /// gradient stays structured: the mean of projections onto a structure is the projection
  /// of the mean. Example: `loss.backward(); dp.synchronize_gradients(); opt.step();`
  void synchronize_gradients();

  /// The parameters, in the order given. Example: `sg::optim::Adam opt(dp.parameters(), {});`
  const std::vector<Tensor>& parameters() const { return params_; }
  /// Number of buckets (one all-reduce each per synchronize_gradients()). Example: `dp.num_buckets()`.
  size_t num_buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    DType dtype = DType::Float32;
    std::vector<size_t> params;    // indices into params_
    std::vector<int64_t> offsets;  // element offset of each parameter in buffer
    int64_t numel = 0;
    Tensor buffer;                 // [numel] on the device
  };
  std::vector<Tensor> params_;
  std::vector<Bucket> buckets_;
};

namespace detail {
/// Throws sg::Error naming `op` unless `options` describe a valid place in a job.
void validate_options(const char* op, const Options& options);
}  // namespace detail

}  // namespace sg::distributed
