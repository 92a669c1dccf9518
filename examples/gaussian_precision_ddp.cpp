// gaussian_precision trained data-parallel with sg::distributed, one process per GPU started by
// scripts/launch.sh: every rank takes its contiguous slice of one global batch, so the mean of
// the ranks' gradients is the full-batch gradient. --check compares with a single-GPU run of the
// same global batch on rank 0; --bench times training steps (--single-too: also on one GPU).
//   scripts/launch.sh 2 build/examples/gaussian_precision_ddp --check --dtype float64
//   scripts/launch.sh 2 build/examples/gaussian_precision_ddp --bench --single-too
#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "common.h"

namespace {

namespace dist = sg::distributed;

/// The mean μ and W (upper); U = W with exp on its diagonal, precision Λ = UᵀU.
struct Model {
  sg::Tensor mu;
  sg::UpperTriangular w;
  std::vector<sg::Tensor> params() const { return {mu, w}; }
};

/// NLL of the rows of x: ½·mean‖U(x − μ)‖² − Σ log Uᵢᵢ (log Uᵢᵢ = Wᵢᵢ).
sg::Tensor nll(const Model& m, const sg::Tensor& x) {
  auto u = sg::with_diagonal(m.w, sg::exp(sg::diagonal(m.w)));
  auto z = sg::linear(x - m.mu, u);  // [rows, d]
  return 0.5 * sg::mean(sg::sum(sg::square(z), 1)) - sg::sum(sg::diagonal(m.w));
}

/// Adam on one batch from μ = 0, W = 0; with data_parallel, gradients are averaged over the
/// ranks (DataParallel) between backward and the optimizer step.
class Trainer {
 public:
  Trainer(sg::Tensor x, int64_t d, sg::TensorOptions opts, double lr, bool data_parallel)
      : x_(std::move(x)),
        model_{sg::zeros({d}, opts.requires_grad()), sg::UpperTriangular::zeros(d, opts).requires_grad_()},
        opt_(model_.params(), {.lr = lr}) {
    if (data_parallel) dp_.emplace(model_.params());
  }
  /// One training step; returns the loss of this process's batch (not synchronised).
  sg::Tensor step() {
    opt_.zero_grad();
    sg::Tensor loss = nll(model_, x_);
    loss.backward();
    if (dp_) dp_->synchronize_gradients();
    opt_.step();
    return loss;
  }
  void synchronize_gradients() { dp_->synchronize_gradients(); }
  const Model& model() const { return model_; }
  size_t num_buckets() const { return dp_ ? dp_->num_buckets() : 0; }

 private:
  sg::Tensor x_;
  Model model_;
  std::optional<dist::DataParallel> dp_;
  sg::optim::Adam opt_;
};

/// Every element of the tensors, concatenated (copies to the host).
std::vector<double> flatten(const std::vector<sg::Tensor>& tensors) {
  std::vector<double> all;
  for (const sg::Tensor& t : tensors) {
    const std::vector<double> v = t.to_vector();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

std::vector<sg::Tensor> grads_of(const Model& m) { return {m.mu.grad(), m.w.grad()}; }

/// ‖a − b‖ / ‖b‖.
double relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::isnan(diff) ? INFINITY : std::sqrt(diff / std::max(norm, 1e-300));
}

/// Rows [begin, begin + count) of the matrix x, as a new tensor on x's device (through the host:
/// done once, before training).
template <typename T>
sg::Tensor rows(const sg::Tensor& x, int64_t begin, int64_t count) {
  const int64_t cols = x.size(1);
  const std::vector<T> all = x.to_vector_as<T>();
  const std::vector<T> part(all.begin() + begin * cols, all.begin() + (begin + count) * cols);
  return sg::from_vector(part, {count, cols}, sg::TensorOptions().dtype(x.dtype()).device(x.device()));
}

/// Mean wall time of one call of `step` over `count` calls, after `warmup` calls, in ms; the
/// device is synchronised before the clock starts and before it stops.
template <typename F>
double mean_step_ms(F&& step, int64_t warmup, int64_t count, int device, bool data_parallel) {
  for (int64_t i = 0; i < warmup; ++i) step();
  sg::cuda::synchronize(device);
  if (data_parallel) dist::barrier();  // all ranks start together
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < count; ++i) step();
  sg::cuda::synchronize(device);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
         static_cast<double>(count);
}

int run(int argc, char** argv) {
  // Flags without a value, taken out before the shared --name value parser sees them.
  bool check = false, bench = false, single_too = false;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--check") check = true;
    else if (a == "--bench") bench = true;
    else if (a == "--single-too") single_too = true;
    else rest.push_back(argv[i]);
  }
  examples::Args args(static_cast<int>(rest.size()), rest.data());
  const sg::DType dtype = args.dtype();
  const int64_t d = args.get_int("n", bench ? 1024 : 64);
  const int64_t batch = args.get_int("batch", bench ? 65536 : 4096);
  const int64_t steps = args.get_int("steps", 100);
  const int64_t warmup = args.get_int("warmup", 5);
  const double lr = args.get_double("lr", 0.05);

  dist::init();  // RANK, WORLD_SIZE, LOCAL_RANK, SG_DIST_ID_FILE from scripts/launch.sh
  const int rank = dist::rank(), world = dist::world_size();
  const sg::Device device = dist::device();
  SG_CHECK(batch % world == 0, "gaussian_precision_ddp: the global batch ", batch, " is not divisible by the ",
           world, " ranks");
  SG_CHECK(steps >= 1, "gaussian_precision_ddp: --steps must be at least 1, got ", steps);
  SG_CHECK(!bench || steps >= 50, "gaussian_precision_ddp: --bench times at least 50 steps, got --steps ", steps);
  const int64_t local_batch = batch / world;
  auto opts = sg::TensorOptions().dtype(dtype).device(device);

  // One global batch from a known Gaussian (as in gaussian_precision), the same on every rank:
  // made from the seed, then broadcast from rank 0 so that no rank depends on the generator.
  sg::manual_seed(static_cast<uint64_t>(args.get_int("seed", 0)));
  Eigen::MatrixXd a = sg::to_eigen<double>(sg::randn({d, d}, sg::kFloat64));
  Eigen::MatrixXd sigma = a * a.transpose() / static_cast<double>(d) + 0.5 * Eigen::MatrixXd::Identity(d, d);
  Eigen::MatrixXd chol = sigma.llt().matrixL();
  sg::Tensor x = sg::linear(sg::randn({batch, d}, opts), sg::from_eigen(chol, device).to(dtype)) +
                 sg::randn({d}, opts);
  dist::broadcast(x, 0);
  // This rank's contiguous slice: with equal slices, the mean of the ranks' mean-losses is the
  // full batch's mean-loss, and so is the mean of their gradients.
  const sg::Tensor local = world == 1 ? x
                           : dtype == sg::kFloat32 ? rows<float>(x, rank * local_batch, local_batch)
                                                   : rows<double>(x, rank * local_batch, local_batch);
  if (rank == 0)
    std::printf("gaussian_precision_ddp: d=%lld global batch=%lld (%lld per rank) ranks=%d dtype=%s %s\n",
                static_cast<long long>(d), static_cast<long long>(batch), static_cast<long long>(local_batch), world,
                sg::dtype_name(dtype), sg::cuda::device_name(device.index).c_str());

  int status = 0;
  if (!bench) {
    Trainer ddp(local, d, opts, lr, /*data_parallel=*/true);
    std::vector<double> ddp_first_grads;
    sg::Tensor loss;
    for (int64_t step = 1; step <= steps; ++step) {
      loss = ddp.step();
      if (step == 1) ddp_first_grads = flatten(grads_of(ddp.model()));
    }
    sg::Tensor global_loss = loss.detach().clone();
    dist::all_reduce(global_loss, dist::ReduceOp::Mean);  // equal slices: the full batch's NLL
    // Replicas must agree bit for bit: every rank compares its parameters with rank 0's.
    double replica_diff = 0;
    for (const sg::Tensor& p : ddp.model().params()) {
      sg::Tensor from_root = p.detach().clone();
      dist::broadcast(from_root, 0);
      const std::vector<double> mine = p.to_vector(), root = from_root.to_vector();
      for (size_t i = 0; i < mine.size(); ++i) replica_diff = std::max(replica_diff, std::abs(mine[i] - root[i]));
    }
    if (replica_diff != 0) {
      std::printf("[rank %d] FAIL: parameters differ from rank 0's by up to %.3e\n", rank, replica_diff);
      status = 1;
    }
    if (rank == 0) {
      std::printf("data-parallel: %lld steps, %zu bucket(s), full-batch NLL %.6f, replicas identical: %s\n",
                  static_cast<long long>(steps), ddp.num_buckets(), global_loss.item(), replica_diff == 0 ? "yes" : "no");
    }
    if (check && rank == 0) {
      // The reference: one GPU, the whole global batch, the same initialisation and steps.
      Trainer single(x, d, opts, lr, /*data_parallel=*/false);
      std::vector<double> single_first_grads;
      for (int64_t step = 1; step <= steps; ++step) {
        single.step();
        if (step == 1) single_first_grads = flatten(grads_of(single.model()));
      }
      const double grad_diff = relative_difference(ddp_first_grads, single_first_grads);
      const double param_diff =
          relative_difference(flatten(ddp.model().params()), flatten(single.model().params()));
      // float64: only summation order differs (≈1e-16 per step). float32: the same orders at
      // unit roundoff 6e-8 give ≈1e-7 here (measured on the CPU); 1e-5 leaves two orders of
      // magnitude for the GPU's other orders, while a wrong slice or a missing 1/N moves the
      // first-step gradient by O(1).
      const double grad_tol = dtype == sg::kFloat64 ? 1e-12 : 1e-5;
      const double param_tol = dtype == sg::kFloat64 ? 1e-10 : 1e-5;
      const bool pass = grad_diff <= grad_tol && param_diff <= param_tol;
      std::printf("check against 1 GPU on the full batch: step-1 gradient rel. diff %.3e (tolerance %.0e), "
                  "parameters after %lld steps rel. diff %.3e (tolerance %.0e): %s\n",
                  grad_diff, grad_tol, static_cast<long long>(steps), param_diff, param_tol, pass ? "PASS" : "FAIL");
      if (!pass) status = 1;
    }
  } else {
    Trainer ddp(local, d, opts, lr, /*data_parallel=*/true);
    const double t_ddp = mean_step_ms([&] { ddp.step(); }, warmup, steps, device.index, true);
    const double t_sync = mean_step_ms([&] { ddp.synchronize_gradients(); }, 2, 20, device.index, true);
    if (rank == 0) {
      std::printf("step time on %d GPU(s), data-parallel: %.3f ms (mean of %lld steps after %lld warm-up)\n", world,
                  t_ddp, static_cast<long long>(steps), static_cast<long long>(warmup));
      std::printf("  of which gradient all-reduce alone: %.3f ms (%zu bucket(s))\n", t_sync, ddp.num_buckets());
    }
    if (single_too && rank == 0) {
      Trainer single(x, d, opts, lr, /*data_parallel=*/false);
      const double t_single = mean_step_ms([&] { single.step(); }, warmup, steps, device.index, false);
      const double speedup = t_single / t_ddp;
      std::printf("step time on 1 GPU, same global batch: %.3f ms\n", t_single);
      std::printf("speed-up t1/t%d = %.3f, scaling efficiency = speed-up/%d = %.3f\n", world, speedup, world,
                  speedup / world);
      std::printf("| %s | d=%lld | batch %lld | %d GPUs %.3f ms | 1 GPU %.3f ms | all-reduce %.3f ms | speed-up %.2f | "
                  "efficiency %.2f |\n",
                  sg::dtype_name(dtype), static_cast<long long>(d), static_cast<long long>(batch), world, t_ddp,
                  t_single, t_sync, speedup, speedup / world);
    }
  }
  dist::finalize();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // sg::Error, or a bad number in a flag
    std::fprintf(stderr, "gaussian_precision_ddp (RANK=%s): %s\n", std::getenv("RANK") ? std::getenv("RANK") : "?",
                 e.what());
    return 1;
  }
}
