// CPU benchmark of structgrad against Eigen, side by side in one process, float32: every
// {dense, upper, sym}² matmul forward and forward+backward (through sg::matmul + backward), gram,
// and one training step of each example. Each case times structgrad and its peers interleaved
// (median of R rounds) after checking that structgrad's results match the Eigen peer's.
// Forward cases also time the blocked structured kernel (ops/cpu/blocked_gemm.cpp) called
// directly, to show what the kernel does apart from whatever path sg::matmul takes.
// Usage: bench_cpu_gemm [--n 128,256,512,1024,2048] [--csv FILE] [--md FILE] [--reps R]
//                       [--budget SECONDS] [--only matmul|train]
#include <Eigen/Dense>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <structgrad/structgrad.h>

#include "bench/bench_util.h"
#include "examples/triangular_flow_model.h"
#include "ops/cpu/cpu_gemm.h"

namespace {

using sg::Structure;
using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowVector = Eigen::Matrix<float, 1, Eigen::Dynamic>;
using ConstMap = Eigen::Map<const Matrix>;

// ---- timing: interleaved medians -------------------------------------------------------------

/// A timed implementation: its name and the call that runs it once.
struct Candidate {
  std::string name;
  std::function<void()> run;
  double median_ms = 0;
};

/// One benchmark case: structgrad first, then its peers. `check` (optional) runs after the
/// warm-up and throws when structgrad's result disagrees with the peer's.
struct Case {
  int64_t n = 0;
  std::string workload;
  double useful_flops = 0;  // the flops the structure requires (2 per useful multiply-add); 0: not counted
  std::vector<Candidate> candidates;
  std::function<void()> check;
};

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  const size_t mid = xs.size() / 2;
  return xs.size() % 2 ? xs[mid] : 0.5 * (xs[mid - 1] + xs[mid]);
}

double elapsed_ms(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(stop - start).count();
}

/// Runs every candidate once as warm-up (and the check), then R rounds in which each candidate
/// runs once (interleaved, so background load hits all of them alike); keeps each one's median.
/// R = `reps` when given, else as many rounds as fit in `budget_s` (between 3 and 21).
void time_case(Case& c, int reps, double budget_s) {
  double round_ms = 0;
  for (Candidate& cand : c.candidates) round_ms += elapsed_ms(cand.run);
  if (c.check) c.check();
  const int rounds = reps > 0 ? reps : std::clamp(static_cast<int>(budget_s * 1e3 / std::max(round_ms, 1e-3)), 3, 21);
  std::vector<std::vector<double>> times(c.candidates.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < c.candidates.size(); ++i) times[i].push_back(elapsed_ms(c.candidates[i].run));
  for (size_t i = 0; i < c.candidates.size(); ++i) c.candidates[i].median_ms = median(times[i]);
}

// ---- checks -----------------------------------------------------------------------------------

ConstMap view(const sg::Tensor& t) { return ConstMap(t.data<float>(), t.size(0), t.size(1)); }

/// Throws unless ‖ours − ref‖_F ≤ 1e-4·‖ref‖_F (float32 products of length ≤ 2048).
void expect_close(const char* what, const std::string& workload, const Matrix& ours, const Matrix& ref) {
  const double err = (ours - ref).norm() / std::max(static_cast<double>(ref.norm()), 1e-30);
  if (!(err <= 1e-4))
    throw std::runtime_error(workload + ": structgrad's " + what + " differs from Eigen's (relative error " +
                             std::to_string(err) + ")");
}

// ---- matmul workloads -------------------------------------------------------------------------

enum class Kind { Dense, Upper, Sym };
const char* kind_name(Kind k) { return k == Kind::Dense ? "dense" : k == Kind::Upper ? "upper" : "sym"; }

sg::Tensor random_input(Kind kind, int64_t n) {
  switch (kind) {
    case Kind::Upper: return sg::UpperTriangular::randn(n);
    case Kind::Sym: return sg::Symmetric::randn(n);
    default: return sg::randn({n, n});
  }
}

/// The gradient projection of a structure (docs/semantics.md), on Eigen matrices.
Matrix project(const Matrix& g, Kind kind) {
  if (kind == Kind::Upper) return g.triangularView<Eigen::Upper>();
  if (kind == Kind::Sym) return 0.5f * (g + g.transpose());
  return g;
}

/// Useful multiply-adds per N³ of the forward product and of the two gradient products.
/// A triangular factor halves the k-range, two of them leave a sixth (Upper·Upper); an Upper
/// output or gradient needs only i <= j; a symmetric gradient sym(M) needs a full rank-2k
/// update, as many multiply-adds as M itself. Symmetric operands save reads, not arithmetic.
struct UsefulMacs {
  double forward, backward;
};
UsefulMacs useful_macs(Kind a, Kind b) {
  const bool ua = a == Kind::Upper, ub = b == Kind::Upper;
  if (ua && ub) return {1.0 / 6, 1.0 / 6 + 1.0 / 6};  // C = A·B, dA = triu(G·Bᵀ), dB = triu(Aᵀ·G)
  if (ua || ub) return {0.5, 0.5 + 0.5};              // one triangular factor in every product
  return {1.0, 2.0};
}

/// Eigen's best structured product for the pair, when Eigen has one (triangularView for a
/// triangular operand, which halves the work; selfadjointView otherwise).
std::function<void()> eigen_structured(Kind a, Kind b, const ConstMap& x, const ConstMap& y, Matrix& c,
                                        std::string& name) {
  if (a == Kind::Upper) {
    name = "eigen triangularView";
    return [x, y, &c] { c.noalias() = x.triangularView<Eigen::Upper>() * y; };
  }
  if (b == Kind::Upper) {
    name = "eigen triangularView";
    return [x, y, &c] { c.noalias() = x * y.triangularView<Eigen::Upper>(); };
  }
  if (a == Kind::Sym) {
    name = "eigen selfadjointView";
    return [x, y, &c] { c.noalias() = x.selfadjointView<Eigen::Upper>() * y; };
  }
  if (b == Kind::Sym) {
    name = "eigen selfadjointView";
    return [x, y, &c] { c.noalias() = x * y.selfadjointView<Eigen::Upper>(); };
  }
  return nullptr;
}

/// The tensors and Eigen buffers of one matmul workload; lives as long as its cases.
struct MatmulInputs {
  Kind ka, kb;
  sg::Tensor a, b, g, a_leaf, b_leaf, last;
  Matrix c, da, db, gs, kernel_out;
  MatmulInputs(Kind ka_, Kind kb_, int64_t n)
      : ka(ka_), kb(kb_), a(random_input(ka_, n)), b(random_input(kb_, n)), g(sg::randn({n, n})), c(n, n),
        da(n, n), db(n, n), gs(n, n), kernel_out(n, n) {
    a_leaf = a.detach().requires_grad_();
    b_leaf = b.detach().requires_grad_();
  }
};

sg::Structure operand_kind(Kind k) {
  return k == Kind::Upper ? Structure::UpperTriangular : k == Kind::Sym ? Structure::Symmetric : Structure::Dense;
}

/// The blocked structured kernel called directly: C = op(A)·op(B) into in.kernel_out.
Candidate blocked_kernel(MatmulInputs& in, int64_t n, sg::Structure a, sg::Structure b,
                         sg::Structure mask, bool trans_b) {
  sg::detail::GemmProblem p;
  p.m = p.n = p.k = n;
  p.a = {a, false};
  p.b = {b, trans_b};
  p.mask = mask;
  p.a_data = in.a.data_ptr();
  p.b_data = trans_b ? in.a.data_ptr() : in.b.data_ptr();
  p.c_data = in.kernel_out.data();
  p.lda = p.ldb = p.ldc = n;
  return {"blocked kernel", [p] { sg::detail::cpu::blocked_gemm(p, sg::DType::Float32); }};
}

void add_matmul_cases(std::vector<Case>& cases, MatmulInputs& in, int64_t n) {
  const double n3 = double(n) * n * n;
  const UsefulMacs macs = useful_macs(in.ka, in.kb);
  const std::string pair = std::string(kind_name(in.ka)) + "·" + kind_name(in.kb);
  const ConstMap x = view(in.a), y = view(in.b), g = view(in.g);
  MatmulInputs* p = &in;

  Case fwd{n, pair + " fwd", 2 * macs.forward * n3, {}, {}};
  fwd.candidates.push_back({"structgrad", [p] {
                              sg::NoGradGuard no_grad;
                              p->last = sg::matmul(p->a, p->b);
                            }});
  fwd.candidates.push_back({"eigen dense", [x, y, p] { p->c.noalias() = x * y; }});
  std::string peer;
  if (auto run = eigen_structured(in.ka, in.kb, x, y, in.c, peer)) fwd.candidates.push_back({peer, run});
  const bool structured = in.ka != Kind::Dense || in.kb != Kind::Dense;
  const bool upper_out = in.ka == Kind::Upper && in.kb == Kind::Upper;
  if (structured)
    fwd.candidates.push_back(blocked_kernel(in, n, operand_kind(in.ka), operand_kind(in.kb),
                                            upper_out ? Structure::UpperTriangular : Structure::Dense,
                                            false));
  fwd.check = [p, structured, name = fwd.workload] {
    expect_close("product", name, view(p->last), p->c);  // c: the Eigen peer's last result
    if (structured) expect_close("blocked kernel's product", name, p->kernel_out, p->c);
    p->last = sg::Tensor();
  };
  cases.push_back(std::move(fwd));

  // Forward + backward: structgrad's autograd against the three dense products a dense
  // framework runs (C = A·B, dA = G·Bᵀ, dB = Aᵀ·G).
  Case both{n, pair + " fwd+bwd", 2 * (macs.forward + macs.backward) * n3, {}, {}};
  both.candidates.push_back({"structgrad", [p] {
                               sg::matmul(p->a_leaf, p->b_leaf).backward(p->g);
                               p->a_leaf.zero_grad();
                               p->b_leaf.zero_grad();
                             }});
  both.candidates.push_back({"eigen dense", [x, y, g, p] {
                               p->c.noalias() = x * y;
                               p->da.noalias() = g * y.transpose();
                               p->db.noalias() = x.transpose() * g;
                             }});
  both.check = [p, x, y, g, name = both.workload] {
    sg::Tensor out = sg::matmul(p->a_leaf, p->b_leaf);
    out.backward(p->g);
    const bool upper_out = p->ka == Kind::Upper && p->kb == Kind::Upper;
    const Matrix gp = project(g, upper_out ? Kind::Upper : Kind::Dense);  // G has C's structure
    expect_close("product", name, view(out), x * y);
    expect_close("dA", name, view(p->a_leaf.grad()), project(gp * y.transpose(), p->ka));
    expect_close("dB", name, view(p->b_leaf.grad()), project(x.transpose() * gp, p->kb));
    p->a_leaf.zero_grad();
    p->b_leaf.zero_grad();
  };
  cases.push_back(std::move(both));
}

void add_gram_cases(std::vector<Case>& cases, MatmulInputs& in, int64_t n) {
  const double n3 = double(n) * n * n;
  const ConstMap x = view(in.a), g = view(in.g);
  MatmulInputs* p = &in;
  // One triangle of A·Aᵀ: N³/2 multiply-adds; backward dA = 2·sym(G)·A: N³.
  Case fwd{n, "gram a·aᵀ", n3, {}, {}};
  fwd.candidates.push_back({"structgrad", [p] {
                              sg::NoGradGuard no_grad;
                              p->last = sg::gram(p->a);
                            }});
  fwd.candidates.push_back({"eigen dense", [x, p] { p->c.noalias() = x * x.transpose(); }});
  fwd.candidates.push_back({"eigen rankUpdate", [x, p] {
                              p->da.setZero();
                              p->da.selfadjointView<Eigen::Upper>().rankUpdate(x);
                            }});
  fwd.candidates.push_back(blocked_kernel(in, n, Structure::Dense, Structure::Dense,
                                          Structure::Symmetric, true));
  fwd.check = [p, name = fwd.workload] {
    expect_close("product", name, view(p->last), p->c);
    expect_close("blocked kernel's product", name, p->kernel_out, p->c);
    p->last = sg::Tensor();
  };
  cases.push_back(std::move(fwd));

  Case both{n, "gram a·aᵀ fwd+bwd", 3 * n3, {}, {}};
  both.candidates.push_back({"structgrad", [p] {
                               sg::gram(p->a_leaf).backward(p->g);
                               p->a_leaf.zero_grad();
                             }});
  both.candidates.push_back({"eigen dense", [x, g, p] {
                               p->c.noalias() = x * x.transpose();
                               p->gs = g + g.transpose();
                               p->da.noalias() = p->gs * x;
                             }});
  both.check = [p, x, g, name = both.workload] {
    sg::gram(p->a_leaf).backward(p->g);
    expect_close("dA", name, view(p->a_leaf.grad()), (g + g.transpose()) * x);
    p->a_leaf.zero_grad();
  };
  cases.push_back(std::move(both));
}

// ---- training steps ---------------------------------------------------------------------------
// A step = zero_grad + forward + backward + optimizer step, written as the examples write it.
// Where a fair peer exists, the same step hand-written in Eigen (manual gradients, the same
// Adam update): the least a framework-free implementation does.

/// Adam with PyTorch's defaults, on Eigen arrays (the formula of ops/optim_math.h).
struct EigenAdam {
  float lr;
  int64_t t = 0;
  template <typename P, typename G, typename M>
  void update(P& param, const G& grad, M& m, M& v) const {
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    m = b1 * m + (1 - b1) * grad;
    v = b2 * v + (1 - b2) * grad.cwiseAbs2();
    const float c1 = 1 - std::pow(b1, float(t)), c2 = 1 - std::pow(b2, float(t));
    param.array() -= lr * (m.array() / c1) / ((v.array() / c2).sqrt() + eps);
  }
};

/// gaussian_precision: NLL = ½·mean‖U(x − μ)‖² − Σ Wᵢᵢ, U = W with diagonal exp(diag W).
struct GaussianStep {
  int64_t d, batch;
  sg::Tensor x, mu;
  sg::UpperTriangular w;
  std::unique_ptr<sg::optim::Adam> opt;
  // Eigen peer.
  Matrix ex, ew, eu, ed, ez, egu, egw, emw, evw;
  RowVector emu, egmu, emmu, evmu;
  EigenAdam eadam{0.05f};

  GaussianStep(int64_t d_, int64_t batch_) : d(d_), batch(batch_) {
    x = sg::randn({batch, d});
    mu = sg::zeros({d}, sg::TensorOptions().requires_grad());
    w = sg::UpperTriangular::zeros(d).requires_grad_();
    opt = std::make_unique<sg::optim::Adam>(std::vector<sg::Tensor>{mu, w}, sg::optim::AdamOptions{.lr = 0.05});
    ex = view(x);
    ew = Matrix::Zero(d, d);
    emw = evw = Matrix::Zero(d, d);
    emu = emmu = evmu = RowVector::Zero(d);
  }
  void structgrad_step(bool dense_u) {
    opt->zero_grad();
    sg::Tensor u = sg::with_diagonal(w, sg::exp(sg::diagonal(w)));
    auto z = sg::linear(x - mu, dense_u ? u.dense() : u);
    auto nll = 0.5 * sg::mean(sg::sum(sg::square(z), 1)) - sg::sum(sg::diagonal(w));
    nll.backward();
    opt->step();
  }
  void eigen_step() {
    eu = ew;
    eu.diagonal() = ew.diagonal().array().exp().matrix();
    ed = ex.rowwise() - emu;                                              // D = X − μ   [B, d]
    ez.noalias() = ed * eu.triangularView<Eigen::Upper>().transpose();   // Z = D·Uᵀ    [B, d]
    const float inv_batch = 1.0f / float(batch);                          // dZ = Z / B
    egu.setZero(d, d);
    egu.triangularView<Eigen::Upper>() = inv_batch * (ez.transpose() * ed);  // dU = triu(dZᵀ·D)
    egw = egu;
    egw.diagonal() = (egu.diagonal().array() * eu.diagonal().array() - 1).matrix();
    egmu = -inv_batch * (ez * eu.triangularView<Eigen::Upper>()).colwise().sum();  // dμ = −Σ dZ·U
    ++eadam.t;
    eadam.update(ew, egw, emw, evw);
    eadam.update(emu, egmu, emmu, evmu);
  }
};

/// quadratic_form: q_b = x_bᵀ S x_b (SymmetricBilinear), loss = mse(q, y).
struct QuadraticStep {
  int64_t n, batch;
  sg::Tensor x, y;
  sg::nn::SymmetricBilinear model;
  std::unique_ptr<sg::optim::Adam> opt;
  Matrix ex, es, ep, egs, ems, evs, eweighted;
  Eigen::VectorXf ey, eq;
  EigenAdam eadam{0.05f};

  QuadraticStep(int64_t n_, int64_t batch_) : n(n_), batch(batch_), model(n_) {
    x = sg::randn({batch, n});
    y = sg::randn({batch});
    opt = std::make_unique<sg::optim::Adam>(model.parameters(), sg::optim::AdamOptions{.lr = 0.05});
    ex = view(x);
    ey = Eigen::Map<const Eigen::VectorXf>(y.data<float>(), batch);
    es = ems = evs = Matrix::Zero(n, n);
  }
  void structgrad_step() {
    opt->zero_grad();
    auto loss = sg::mse_loss(model.forward(x), y);
    loss.backward();
    opt->step();
  }
  void eigen_step() {
    ep.noalias() = ex * es;                                   // P = X·S (Eigen's dense GEMM: its fastest)
    eq = (ep.array() * ex.array()).rowwise().sum().matrix();  // q = Σ_j P ⊙ X
    const Eigen::VectorXf dq = (2.0f / float(batch)) * (eq - ey);
    eweighted = (ex.array().colwise() * dq.array()).matrix();  // dq ⊙ X
    egs.noalias() = ex.transpose() * eweighted;               // dS = Xᵀ·(dq ⊙ X), symmetric
    ++eadam.t;
    eadam.update(es, egs, ems, evs);
  }
};

/// triangular_flow: K layers z = leaky_relu(U·x + b), exact-likelihood loss (no Eigen peer:
/// time alone).
struct FlowStep {
  int64_t d, layers = 6, batch = 4096;
  double slope = 0.7;
  sg::Tensor x;
  sg::nn::Module model;
  std::vector<std::shared_ptr<sg::nn::UpperLinear>> flow;
  std::unique_ptr<sg::optim::Adam> opt;

  explicit FlowStep(int64_t d_) : d(d_) {
    x = sg::randn({batch, d});
    for (int64_t k = 0; k < layers; ++k)
      flow.push_back(model.register_module("layer" + std::to_string(k), std::make_shared<sg::nn::UpperLinear>(d)));
    opt = std::make_unique<sg::optim::Adam>(model.parameters(), sg::optim::AdamOptions{.lr = 0.005});
  }
  void structgrad_step() {
    opt->zero_grad();
    auto loss = examples::flow_nll(flow, x, slope);
    loss.backward();
    opt->step();
  }
};

// ---- output -----------------------------------------------------------------------------------

std::string format(const char* fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a);
  return buf;
}

struct Report {
  std::ofstream csv, md;
  std::vector<Case> done;

  void line(const std::string& s) {
    std::printf("%s\n", s.c_str());
    std::fflush(stdout);
    if (md.is_open()) md << s << "\n";
  }
  void add(const Case& c) {
    const Candidate& ours = c.candidates[0];
    std::string row = "| " + std::to_string(c.n) + " | " + c.workload + " | " + format("%.3f", ours.median_ms) + " | " +
                      (c.useful_flops > 0 ? format("%.1f", c.useful_flops / (ours.median_ms * 1e6)) : "—") + " |";
    for (size_t i = 1; i < 4; ++i) {
      if (i < c.candidates.size()) {
        const Candidate& peer = c.candidates[i];
        row += " " + peer.name + ": " + format("%.3f ms", peer.median_ms) + " (" +
               format("%.2f×", peer.median_ms / ours.median_ms) + ") |";
      } else {
        row += " — |";
      }
    }
    line(row);
    if (csv.is_open())
      for (const Candidate& cand : c.candidates) {
        csv << c.n << ",\"" << c.workload << "\",\"" << cand.name << "\"," << cand.median_ms << ",";
        if (c.useful_flops > 0) csv << c.useful_flops / (cand.median_ms * 1e6);
        csv << "\n";
      }
    csv.flush();
    done.push_back(c);
  }
  /// Speed-ups over Eigen's dense product at the largest N: sg::matmul forward and
  /// forward+backward, and the blocked kernel's forward.
  void headline() {
    int64_t n_max = 0;
    for (const Case& c : done)
      if (c.workload.rfind("train", 0) != 0) n_max = std::max(n_max, c.n);
    if (n_max == 0) return;
    line("");
    line("Speed-up over Eigen's dense product at N = " + std::to_string(n_max) +
         " (Eigen dense time / our time; > 1: faster than dense):");
    line("");
    line("| product | sg::matmul forward | sg::matmul forward+backward | blocked kernel forward |");
    line("|---|---|---|---|");
    struct Row {
      std::string forward = "—", both = "—", kernel = "—";
    };
    std::map<std::string, Row> rows;
    std::vector<std::string> order;
    for (const Case& c : done) {
      if (c.n != n_max || c.candidates.size() < 2 || c.candidates[1].name != "eigen dense") continue;
      const double dense_ms = c.candidates[1].median_ms;
      const bool both = c.workload.size() > 8 && c.workload.substr(c.workload.size() - 8) == " fwd+bwd";
      std::string product = both ? c.workload.substr(0, c.workload.size() - 8) : c.workload;
      if (!both && product.size() > 4 && product.substr(product.size() - 4) == " fwd")
        product = product.substr(0, product.size() - 4);
      if (!rows.count(product)) order.push_back(product);
      Row& row = rows[product];
      (both ? row.both : row.forward) = format("%.2f×", dense_ms / c.candidates[0].median_ms);
      for (const Candidate& cand : c.candidates)
        if (cand.name == "blocked kernel") row.kernel = format("%.2f×", dense_ms / cand.median_ms);
    }
    for (const std::string& p : order)
      line("| " + p + " | " + rows[p].forward + " | " + rows[p].both + " | " + rows[p].kernel + " |");
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes = {128, 256, 512, 1024, 2048};
  std::string csv_path, md_path, only;
  int reps = 0;
  double budget_s = 2.0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--n" && i + 1 < argc) sizes = bench::split_sizes(argv[++i]);
    else if (arg == "--csv" && i + 1 < argc) csv_path = argv[++i];
    else if (arg == "--md" && i + 1 < argc) md_path = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (arg == "--budget" && i + 1 < argc) budget_s = std::atof(argv[++i]);
    else if (arg == "--only" && i + 1 < argc) only = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: %s [--n 128,256,...] [--csv FILE] [--md FILE] [--reps R] [--budget SECONDS] "
                   "[--only matmul|train]\n",
                   argv[0]);
      return 2;
    }
  }
  int omp_threads = 1;
#ifdef _OPENMP
  omp_threads = omp_get_max_threads();
#endif
  Report report;
  if (!csv_path.empty()) {
    report.csv.open(csv_path);
    report.csv << "n,workload,implementation,ms,useful_gflops\n";
  }
  if (!md_path.empty()) report.md.open(md_path);
  report.line("bench_cpu_gemm: float32; median of interleaved rounds after a warm-up and a correctness check; "
              "OpenMP threads " + std::to_string(omp_threads) + ", Eigen threads " + std::to_string(Eigen::nbThreads()) +
              ". Speed-up = peer time / structgrad time (> 1: structgrad is faster). Eigen peers write into "
              "preallocated outputs; structgrad allocates its results, as user code does.");
  report.line("");
  report.line("| N | workload | structgrad ms | useful GFLOP/s | peer 1 (speed-up) | peer 2 (speed-up) | peer 3 (speed-up) |");
  report.line("|---|---|---|---|---|---|---|");
  sg::manual_seed(20240611);
  try {
    if (only.empty() || only == "matmul") {
      const Kind kinds[] = {Kind::Dense, Kind::Upper, Kind::Sym};
      for (int64_t n : sizes) {
        std::vector<std::unique_ptr<MatmulInputs>> inputs;
        std::vector<Case> cases;
        for (Kind ka : kinds)
          for (Kind kb : kinds) {
            inputs.push_back(std::make_unique<MatmulInputs>(ka, kb, n));
            add_matmul_cases(cases, *inputs.back(), n);
          }
        inputs.push_back(std::make_unique<MatmulInputs>(Kind::Dense, Kind::Dense, n));
        add_gram_cases(cases, *inputs.back(), n);
        for (Case& c : cases) {
          time_case(c, reps, budget_s);
          report.add(c);
        }
      }
    }
    if (only.empty() || only == "train") {
      for (int64_t d : {16, 256}) {
        GaussianStep s(d, 1024);
        Case c{d, "train gaussian_precision (batch 1024, Adam)", 0, {}, {}};
        c.candidates.push_back({"structgrad", [&s] { s.structgrad_step(false); }});
        c.candidates.push_back({"eigen hand-written", [&s] { s.eigen_step(); }});
        c.candidates.push_back({"structgrad, U as dense", [&s] { s.structgrad_step(true); }});
        time_case(c, reps, budget_s);
        report.add(c);
      }
      for (int64_t n : {8, 256}) {
        QuadraticStep s(n, 4096);
        Case c{n, "train quadratic_form (batch 4096, Adam)", 0, {}, {}};
        c.candidates.push_back({"structgrad", [&s] { s.structgrad_step(); }});
        c.candidates.push_back({"eigen hand-written", [&s] { s.eigen_step(); }});
        time_case(c, reps, budget_s);
        report.add(c);
      }
      for (int64_t d : {2, 64}) {
        FlowStep s(d);
        Case c{d, "train triangular_flow (6 layers, batch 4096, Adam)", 0, {}, {}};
        c.candidates.push_back({"structgrad", [&s] { s.structgrad_step(); }});
        time_case(c, reps, budget_s);
        report.add(c);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cpu_gemm: %s\n", e.what());
    return 1;
  }
  report.headline();
  return 0;
}
