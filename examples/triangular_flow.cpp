// A normalizing flow of K layers z = leaky_relu(U·x + b) (the last without activation),
// U upper triangular, trained by exact likelihood on a non-Gaussian 2-D "banana" (x₁ depends
// on x₂², which an upper-triangular map can undo):
//   −log p(x) = ½‖z‖² + (D/2)·log 2π − Σ_layers Σᵢ log|Uᵢᵢ| − log(α)·#{pre-activations < 0}.
// Prints the test NLL against the baseline of the best single Gaussian fit (the sample mean
// and covariance); exits non-zero unless the flow beats it by --margin nats. --graph (with
// --device cuda) trains by replaying one captured CUDA graph of the step.
#include <Eigen/Dense>
#include <cmath>
#include <cstdio>

#include "common.h"
#include "triangular_flow_model.h"

namespace {

// x₂ ~ N(0, 1), x₁ = 0.6·x₂² − 0.6 + 0.25·ε: rows are samples.
sg::Tensor banana(int64_t count, sg::TensorOptions o) {
  auto e = sg::randn({count, 2}, o);
  std::vector<double> v = e.to_vector(), out(v.size());
  for (int64_t i = 0; i < count; ++i) {
    const double x2 = v[2 * i + 1];
    out[2 * i] = 0.6 * x2 * x2 - 0.6 + 0.25 * v[2 * i];
    out[2 * i + 1] = x2;
  }
  return sg::from_vector(out, {count, 2}, o.dtype(e.dtype()));
}

double gaussian_baseline_nll(const sg::Tensor& train, const sg::Tensor& test) {
  Eigen::MatrixXd tr = sg::to_eigen<double>(train), te = sg::to_eigen<double>(test);
  Eigen::RowVectorXd mean = tr.colwise().mean();
  Eigen::MatrixXd c = tr.rowwise() - mean;
  Eigen::MatrixXd cov = c.transpose() * c / static_cast<double>(tr.rows());
  Eigen::LLT<Eigen::MatrixXd> llt(cov);
  const double d = static_cast<double>(tr.cols());
  const double logdet = 2 * llt.matrixL().toDenseMatrix().diagonal().array().log().sum();
  Eigen::MatrixXd ct = te.rowwise() - mean;
  Eigen::MatrixXd sol = llt.solve(ct.transpose());
  const double maha = (ct.transpose().array() * sol.array()).sum() / static_cast<double>(te.rows());
  return 0.5 * maha + 0.5 * logdet + 0.5 * d * std::log(2 * M_PI);
}

}  // namespace

int main(int argc, char** argv) {
  examples::Args args(argc, argv);
  const sg::Device device = args.device();
  if (args.cuda_missing("triangular_flow")) return examples::kSkipped;
  const int64_t layers = args.get_int("layers", 6), samples = args.get_int("samples", 4096);
  const int64_t steps = args.get_int("steps", 1500);
  const double slope = args.get_double("slope", 0.7), margin = args.get_double("margin", 0.3);
  sg::manual_seed(static_cast<uint64_t>(args.get_int("seed", 0)));
  auto opts = sg::TensorOptions().device(device);
  const int64_t d = 2;

  auto train = banana(samples, opts), test = banana(samples, opts);
  std::vector<std::shared_ptr<sg::nn::UpperLinear>> flow;
  sg::nn::Module model;
  for (int64_t k = 0; k < layers; ++k)
    flow.push_back(model.register_module("layer" + std::to_string(k), std::make_shared<sg::nn::UpperLinear>(d, true, opts)));
  {
    // Small random start so the layers break symmetry.
    sg::NoGradGuard g;
    for (auto& l : flow) l->bias.copy_(0.1 * sg::randn({d}, opts));
  }

  auto nll = [&](const sg::Tensor& x) { return examples::flow_nll(flow, x, slope) + 0.5 * d * std::log(2 * M_PI); };

  sg::optim::Adam opt(model.parameters(), {.lr = args.get_double("lr", 0.005)});
  const double baseline = gaussian_baseline_nll(train, test);
  std::printf("triangular_flow: %lld layers, %lld samples, steps=%lld device=%s\n", (long long)layers,
              (long long)samples, (long long)steps, device.str().c_str());
  std::printf("baseline (best single Gaussian) test NLL: %.4f\n", baseline);
  sg::nn::Progress progress(steps, std::max<int64_t>(steps / 6, 1), args.quiet);
  sg::Tensor loss;
  auto step = [&] {
    opt.zero_grad();
    loss = nll(train);
    loss.backward();
    opt.step();
  };
  examples::run_steps(args, steps, step, [&](int64_t s) {
    progress.update_lazy(s, [&] { return loss.item(); });
    return true;
  });
  sg::NoGradGuard guard;
  const double test_nll = nll(test).item();
  std::printf("flow train NLL: %.4f\n", nll(train).item());
  std::printf("flow test NLL: %.4f (baseline %.4f, improvement %.4f nats)\n", test_nll, baseline, baseline - test_nll);
  return test_nll < baseline - margin ? 0 : 1;
}
