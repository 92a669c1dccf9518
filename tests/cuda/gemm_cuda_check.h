// Helpers of the CUDA structured-GEMM tests (test_structured_gemm.cpp, test_gemm_kernels.cpp,
// test_gemm_operands.cpp): the tuning a test switches and puts back, which loops device 0 runs, and
// the checks several kernels' tests share.
#pragma once

#include "test_util.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "gemm_check.h"
#include "ops/backend.h"
#include "ops/output_pool.h"
#include "ops/cpu/cpu_gemm.h"
#if defined(SG_WITH_CUDA)
#include <cuda_runtime.h>

#include "cuda/gemm/plan_cache.h"
#include "cuda/gemm/tuning.h"
#include "cuda/structured_gemm.h"
#endif

namespace sgtest::gemm {

#if defined(SG_WITH_CUDA)
namespace cu = sg::detail::cuda;

/// Changes the options of every later product (each test puts the defaults back as it goes).
template <class Edit>
void set_option(Edit edit) {
  cu::GemmTuning options = cu::gemm_tuning();
  edit(options);
  cu::set_gemm_tuning(options);
}
#endif

using sg::Structure;
using sg::detail::GemmProblem;

inline const sg::Device kCuda0{sg::DeviceType::CUDA, 0};

/// The loop of exact float32 and float64 (cu::Fp32Loop, cu::Fp64Loop in a CUDA build; the CPU-only
/// build has none): Fma is FFMA or DFMA.
enum class ExactLoop { Auto, Fma, Dmma };

#if defined(SG_WITH_CUDA)
/// Sets the loops of exact float32 and of float64 as `loop` says.
inline void apply(ExactLoop loop, cu::GemmTuning& o) {
  o.fp32_loop = loop == ExactLoop::Fma ? cu::Fp32Loop::Fma : loop == ExactLoop::Dmma ? cu::Fp32Loop::Dmma
                                                                                    : cu::Fp32Loop::Auto;
  o.fp64_loop = loop == ExactLoop::Fma ? cu::Fp64Loop::Dfma : loop == ExactLoop::Dmma ? cu::Fp64Loop::Dmma
                                                                                     : cu::Fp64Loop::Auto;
}
#endif

#if defined(SG_WITH_CUDA)
/// Exact products for the scope of one test: float32 precision, problems built without TF32 (g_tf32),
/// the default options; the same again at its end, an early GTEST_SKIP's included.
class ScopedExact {
 public:
  ScopedExact() { reset(); }
  ~ScopedExact() { reset(); }
  ScopedExact(const ScopedExact&) = delete;
  ScopedExact& operator=(const ScopedExact&) = delete;

 private:
  static void reset() {
    g_tf32 = false;
    sg::set_matmul_precision(sg::Precision::Float32);
    cu::set_gemm_tuning(cu::GemmTuning{});
  }
};

/// TF32 mode on `loop` with relayout `relayout` for the scope of one test; everything back to
/// the exact defaults at its end (ScopedExact).
class ScopedTf32 : ScopedExact {
 public:
  explicit ScopedTf32(cu::Tf32Loop loop = cu::Tf32Loop::Auto, cu::Choice relayout = cu::Choice::Auto) {
    g_tf32 = true;
    sg::set_matmul_precision(sg::Precision::TF32);
    set_option([&](cu::GemmTuning& o) {
      o.tf32_loop = loop;
      o.relayout = relayout;
      o.poison_copies = true;  // a product reading what a copy does not hold fails
    });
  }
};

/// Whether TF32 products of device 0 run on the wgmma loop (an sm_90a build on compute
/// capability 9.0).
inline bool wgmma_loop_runs() {
  GemmProblem probe = square(300, {Structure::UpperTriangular, false}, {Structure::UpperTriangular, false}, Structure::UpperTriangular);
  probe.tf32 = true;
  probe.lda = probe.ldb = probe.ldc = probe.n;
  return cu::structured_gemm_plan(probe, sg::kFloat32, 0).config == cu::GemmTileConfig::Float32Tf32Wgmma;
}

/// Whether device 0 runs this build's sm_90a code (compute capability 9.0 and an sm_90a build):
/// the wgmma loops and the FP64 MMA loop live there.
bool sm90a_code_runs() {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess)
    return false;
#if defined(SG_CUDA_SM90A)
  return major == 9 && minor == 0;
#else
  return false;
#endif
}

/// Whether device 0 runs the FP64 tensor-core loops: sm_90a code and full-rate float64.
bool fp64_tensor_cores_run() {
  int ratio = 0;
  return sm90a_code_runs() &&
         cudaDeviceGetAttribute(&ratio, cudaDevAttrSingleToDoublePrecisionPerfRatio, 0) == cudaSuccess && ratio <= 2;
}

/// `p` with its triangular operands vouched to hold their structural zeros (zeros_stored), as
/// matmul vouches for UpperTriangular tensors, and its Symmetric ones not vouched.
inline GemmProblem with_stored_zeros(GemmProblem p) {
  p = vouched(p);
  p.a.mirror_stored = p.b.mirror_stored = false;
  return p;
}

/// Runs `p` (float32; A and B packed row-major, random values with the operands' invariants)
/// `launches` times on the same inputs, C poisoned with NaN before each launch, and expects no NaN
/// and the same bits each time: tiles split in two chunks meet in C as fl(P0 + P1) whichever chunk
/// ends first (split_tile_arrive), so the order the chunks end in must not show.
inline void expect_the_same_bits_each_launch(GemmProblem p, std::mt19937_64& rng, int launches, const std::string& what) {
  std::vector<double> a_values = random_values(p.m * p.k, rng), b_values = random_values(p.k * p.n, rng);
  fill_outside_structure(p.a, p.m, p.k, p.k, a_values);
  fill_outside_structure(p.b, p.k, p.n, p.n, b_values);
  const auto opts = sg::TensorOptions().dtype(sg::kFloat32);
  sg::Tensor a = sg::from_vector(a_values, {p.m, p.k}, opts).to(kCuda0);
  sg::Tensor b = sg::from_vector(b_values, {p.k, p.n}, opts).to(kCuda0);
  sg::Tensor out = sg::Tensor::empty({p.m, p.n}, opts.device(kCuda0));
  p.a_data = a.data_ptr();
  p.b_data = b.data_ptr();
  p.c_data = out.data_ptr();
  p.lda = p.k;
  p.ldb = p.n;
  p.ldc = p.n;
  std::vector<double> first;  // float32 values, exactly
  for (int run = 0; run < launches; ++run) {
    out.fill_(std::nan(""));
    sg::detail::backend_for(kCuda0).gemm(p, sg::kFloat32);
    const std::vector<double> values = out.to_vector();
    if (run == 0) {
      first = values;
      EXPECT_TRUE(std::none_of(first.begin(), first.end(), [](double x) { return std::isnan(x); })) << what;
    } else {
      ASSERT_EQ(values.size(), first.size());
      EXPECT_EQ(std::memcmp(values.data(), first.data(), values.size() * sizeof(double)), 0)
          << what << ": launch " << run << " differs from the first";
    }
  }
}

/// A precision and loop the stored-zeros and stored-mirrors tests run every product in.
struct LoopMode {
  const char* name;
  sg::DType dtype;
  bool tf32;
  cu::Fp32Loop loop;
  cu::Fp64Loop fp64 = cu::Fp64Loop::Auto;
};

/// The modes device 0 runs: TF32 on the wgmma loop and exact float32 and float64 on the FP64 tensor
/// cores where this build and device have them, exact float32 on FFMA and float64 on DFMA everywhere.
inline std::vector<LoopMode> loop_modes() {
  const bool fp64_cores = fp64_tensor_cores_run();
  std::vector<LoopMode> modes;
  if (wgmma_loop_runs()) modes.push_back({"TF32 (wgmma)", sg::kFloat32, true, cu::Fp32Loop::Auto});
  if (fp64_cores)
    modes.push_back({"float32 on the FP64 tensor cores", sg::kFloat32, false, cu::Fp32Loop::Dmma});
  modes.push_back({"float32 on FFMA", sg::kFloat32, false, cu::Fp32Loop::Fma});
  if (fp64_cores)
    modes.push_back({"float64 on the FP64 tensor cores", sg::kFloat64, false, cu::Fp32Loop::Auto, cu::Fp64Loop::Dmma});
  modes.push_back({"float64 on DFMA", sg::kFloat64, false, cu::Fp32Loop::Auto, cu::Fp64Loop::Dfma});
  return modes;
}

/// Sets the matmul precision and exact float32 loop of `mode` (ScopedTf32 restores the defaults).
inline void use(const LoopMode& mode) {
  g_tf32 = mode.tf32;
  sg::set_matmul_precision(mode.tf32 ? sg::Precision::TF32 : sg::Precision::Float32);
  set_option([&](cu::GemmTuning& o) {
    o.fp32_loop = mode.loop;
    o.fp64_loop = mode.fp64;
  });
}

#endif

}  // namespace sgtest::gemm
