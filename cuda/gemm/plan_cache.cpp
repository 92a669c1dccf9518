// The plan cache (plan_cache.h): plans built with the tile scheduler for the slots the kernels'
// occupancy gives, uploaded into one device table per entry.
#include "cuda/gemm/plan_cache.h"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <cstdint>
#include <tuple>

#include <structgrad/core/error.h>
#include "cuda/check.h"
#include "cuda/gemm/kernels.h"
#include "cuda/gemm/tma_maps.h"
#include "cuda/runtime.h"

namespace sg::detail::cuda {

namespace {

/// Resident blocks per SM of `kernel`, its dynamic shared memory limit raised first where it has any.
template <class Fn>
int resident_blocks(const KernelInstance<Fn>& kernel) {
  const void* fn = reinterpret_cast<const void*>(kernel.fn);
  if (kernel.dynamic_smem > 0)
    SG_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, kernel.dynamic_smem));
  int blocks = 0;
  SG_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, static_cast<int>(kernel.threads),
                                                              static_cast<size_t>(kernel.dynamic_smem)));
  return blocks;
}

template <class Fn>
void allow_dynamic_smem(const KernelInstance<Fn>& kernel) {
  SG_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel.fn),
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, kernel.dynamic_smem));
}

/// The slots a plan of `config` is balanced for: the fewest resident blocks per SM of any kernel that
/// runs such plans. (Per device: a plan is built on its device before its first launch, which is
/// also where the kernels' shared-memory limits are raised.)
int blocks_per_sm(GemmTileConfig config) {
  int blocks = 0;
  auto take = [&blocks](int b) { blocks = blocks == 0 ? b : std::min(blocks, b); };
  switch (config) {
    case GemmTileConfig::Float32Large: take(resident_blocks(tiled_kernel<GemmTileConfig::Float32Large>())); break;
    case GemmTileConfig::Float32Small: take(resident_blocks(tiled_kernel<GemmTileConfig::Float32Small>())); break;
    case GemmTileConfig::Float32Tf32: take(resident_blocks(tiled_kernel<GemmTileConfig::Float32Tf32>())); break;
    case GemmTileConfig::Float32Dmma: take(resident_blocks(tiled_kernel<GemmTileConfig::Float32Dmma>())); break;
    case GemmTileConfig::Float64: take(resident_blocks(tiled_f64_kernel())); break;
    case GemmTileConfig::Float64Dmma: take(resident_blocks(tiled_f64_dmma_kernel())); break;
    case GemmTileConfig::Float32Tf32Wgmma:
      for (const KernelInstance<TmaKernel>& k :
           {tiled_tma_kernel<TmaVariant::A>(), tiled_tma_kernel<TmaVariant::B>(), tiled_tma_kernel<TmaVariant::AB>(),
            tiled_tma_kernel<TmaVariant::ABDeep>(), tiled_tma_kernel<TmaVariant::ABDiag>(),
            tiled_tma_kernel<TmaVariant::ABDeepDiag>(), tiled_tma_kernel<TmaVariant::ABSym>(), pipelined_kernel(),
            register_b_kernel()})
        take(resident_blocks(k));
      take(resident_blocks(tiled_kernel<GemmTileConfig::Float32Tf32Wgmma>()));
      // The persistent kernels run one block per SM from plans of their own.
      allow_dynamic_smem(wide_kernel());
      allow_dynamic_smem(tall_kernel<TransposedA::None>());
      allow_dynamic_smem(tall_kernel<TransposedA::Written>());
      break;
  }
  SG_CHECK(blocks > 0, "structured gemm: the kernel cannot be resident on this device");
  return blocks;
}

/// A plan's key: sizes, structures, transposition (the k-ranges), mask, dtype, device, and the family and
/// options that change plans; not pointers or alpha, so products of one shape share an entry. And the
/// stream: a plan's split-tile arrival counters are reset by the launch that used them, so two
/// launches may share them only when one stream orders them.
using PlanKey = std::tuple<int64_t, int64_t, int64_t, int, int, int, int, int, int, int, int, uintptr_t>;

/// A launch plan's key: the plan's, the operands' and C's leading dimensions, their 16-byte alignment and
/// vouched zeros, and the whole tuning.
using LaunchKey = std::tuple<PlanKey, int64_t, int64_t, int64_t, int, GemmTuning>;

struct PlanCache {
  std::mutex mutex;
  std::map<PlanKey, std::unique_ptr<CachedPlan>> plans;
  std::map<LaunchKey, LaunchPlan> launches;
};

PlanCache& plan_cache() {
  // Leaked on purpose: its device tables must not be freed during static destruction, after the
  // allocator and the CUDA runtime may be gone.
  static PlanCache* cache = new PlanCache;
  return *cache;
}

/// A new cache entry for `p`: its plans, uploaded into one device table.
std::unique_ptr<CachedPlan> build_cached_plan(const GemmProblem& p, DType dtype, int device, const GemmFamily& family,
                                              const GemmTuning& options) {
  // The table below is uploaded from host memory, which a graph would copy again on every replay.
  SG_CHECK(!capturing(device), "structured gemm: a product of a new shape (", p.m, "x", p.k, " by ", p.k, "x", p.n,
           ") is first seen while a CUDA graph captures; run the step once on the graph's stream first "
           "(sg::cuda::Graph::capture does)");
  const int sms = sm_count(device);
  auto entry = std::make_unique<CachedPlan>();
  static_cast<ProductPlans&>(*entry) =
      plan_product(p, tile_config_candidates(dtype, family, options), family.wgmma, sms, blocks_per_sm, options);
  const GemmWorkPlan& plan = entry->plan;

  // Upload once into one device table: the plan's items and counters (zeroed), then the other lists.
  // lay_out runs twice with the same calls: first to size the table (base null), then to fill it. The
  // host vectors stay in the entry, so they outlive the asynchronous copies.
  const cudaStream_t st = stream(device);
  char* base = nullptr;
  size_t used = 0;
  auto place = [&](const void* host, size_t bytes) -> void* {  // host null: zeros
    if (bytes == 0) return nullptr;
    const size_t at = used;
    used = (used + bytes + 15) / 16 * 16;
    if (base == nullptr) return nullptr;
    if (host == nullptr) SG_CUDA_CHECK(cudaMemsetAsync(base + at, 0, bytes, st));
    else {
      SG_CUDA_CHECK(cudaMemcpyAsync(base + at, host, bytes, cudaMemcpyHostToDevice, st));
      count_transfer(device, TransferDirection::HostToDevice, bytes);
    }
    return base + at;
  };
  auto items_of = [&](const std::vector<GemmWorkItem>& items) {
    return static_cast<const GemmWorkItem*>(place(items.data(), items.size() * sizeof(GemmWorkItem)));
  };
  auto counters_of = [&](int count) { return static_cast<int*>(place(nullptr, static_cast<size_t>(count) * sizeof(int))); };
  auto block_plan = [&](const BlockPlan& b) {
    DeviceBlockPlan on_device;
    on_device.items = items_of(b.items);
    on_device.offsets = static_cast<const int*>(place(b.offsets.data(), b.offsets.size() * sizeof(int32_t)));
    on_device.counters = counters_of(b.split_tiles);
    return on_device;
  };
  auto lay_out = [&] {
    entry->items = items_of(plan.items);
    entry->counters = counters_of(plan.split_tiles);
    entry->wide_split_on_device = block_plan(entry->wide_split);
    entry->wide_whole_on_device = block_plan(entry->wide_whole);
    entry->mirrored_items = items_of(entry->mirrored);
    entry->tall_on_device = block_plan(entry->tall);
    entry->tall_writing_on_device = block_plan(entry->tall_writing);
    entry->tall_writing_runs = static_cast<const KRange*>(place(
        entry->tall_writing.transposed_writes.data(), entry->tall_writing.transposed_writes.size() * sizeof(KRange)));
    entry->wide_structured_on_device = block_plan(entry->wide_structured);
  };
  lay_out();
  entry->device_table = std::make_unique<Storage>(used, Device(DeviceType::CUDA, device));
  base = static_cast<char*>(entry->device_table->data);
  used = 0;
  lay_out();
  return entry;
}

}  // namespace

namespace {

PlanKey plan_key(const GemmProblem& p, DType dtype, int device, const GemmFamily& family, const GemmTuning& options) {
  // Whether C holds its zeros changes the plans of an Upper mask only (their tiles of zeros).
  const bool zeros_matter = p.mask == Structure::UpperTriangular;
  return PlanKey{p.m, p.n, p.k, int(p.a.structure), int(p.b.structure), 2 * int(p.a.trans) + int(p.b.trans),
                 int(p.mask), int(dtype), device, int(options.schedule),
                 int(family.tf32) + int(family.wgmma) + 4 * int(family.dmma) +
                     8 * int(dtype == DType::Float64 ? options.fp64_loop == Fp64Loop::Dmma
                                                     : options.fp32_loop == Fp32Loop::Dmma) +
                     16 * int(options.wide_split) + 64 * int(zeros_matter && p.c_zeros_stored),
                 reinterpret_cast<uintptr_t>(stream(device))};
}

/// cached_plan with the cache's lock held.
const CachedPlan& cached_plan_locked(PlanCache& cache, const GemmProblem& p, DType dtype, int device,
                                     const GemmFamily& family, const GemmTuning& options) {
  auto found = cache.plans.find(plan_key(p, dtype, device, family, options));
  if (found != cache.plans.end()) return *found->second;
  if (p.mask == Structure::UpperTriangular) {
    // Both entries at once: a training loop's first step writes its outputs' zeros, its later steps
    // find them in the blocks they get (GemmProblem::c_zeros_stored); neither then allocates.
    GemmProblem other = p;
    other.c_zeros_stored = !p.c_zeros_stored;
    const PlanKey other_key = plan_key(other, dtype, device, family, options);
    if (cache.plans.find(other_key) == cache.plans.end())
      cache.plans.emplace(other_key, build_cached_plan(other, dtype, device, family, options));
  }
  return *cache.plans.emplace(plan_key(p, dtype, device, family, options),
                              build_cached_plan(p, dtype, device, family, options))
              .first->second;
}

bool aligned16(const void* data) { return reinterpret_cast<uintptr_t>(data) % 16 == 0; }

}  // namespace

const CachedPlan& cached_plan(const GemmProblem& p, DType dtype, int device, const GemmFamily& family,
                              const GemmTuning& options) {
  PlanCache& cache = plan_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cached_plan_locked(cache, p, dtype, device, family, options);
}

const LaunchPlan& cached_launch(const GemmProblem& p, DType dtype, int device, const GemmFamily& family,
                                const GemmTuning& options) {
  const int layout = int(aligned16(p.a_data)) + 2 * int(aligned16(p.b_data)) + 4 * int(aligned16(p.c_data)) +
                     8 * int(p.a.zeros_stored) + 16 * int(p.b.zeros_stored);
  const LaunchKey key{plan_key(p, dtype, device, family, options), p.lda, p.ldb, p.ldc, layout, options};
  PlanCache& cache = plan_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto found = cache.launches.find(key);
  if (found != cache.launches.end()) return found->second;
  const CachedPlan& plans = cached_plan_locked(cache, p, dtype, device, family, options);
  const PlanFactsOf facts_of = [&](const GemmProblem& q) {
    return cached_plan_locked(cache, q, dtype, device, family, options).facts();
  };
  return cache.launches.emplace(key, select_launch(p, plans.plan.config, facts_of, device_caps(device), options))
      .first->second;
}

const DeviceCaps& device_caps(int device) {
  static std::mutex mutex;
  static std::array<std::unique_ptr<DeviceCaps>, 64> caps;
  SG_CHECK(device >= 0 && device < static_cast<int>(caps.size()), "structured gemm: device ", device, " out of range");
  std::lock_guard<std::mutex> lock(mutex);
  if (caps[static_cast<size_t>(device)] == nullptr) {
    auto c = std::make_unique<DeviceCaps>();
    c->sms = sm_count(device);
    c->compute_capability = compute_capability(device);
#if defined(SG_CUDA_SM90A)
    c->sm90a_code = true;
#endif
    int ratio = 0;
    SG_CUDA_CHECK(cudaDeviceGetAttribute(&ratio, cudaDevAttrSingleToDoublePrecisionPerfRatio, device));
    c->full_rate_fp64 = ratio <= 2;
    c->tensor_maps = tensor_maps_available();
    caps[static_cast<size_t>(device)] = std::move(c);
  }
  return *caps[static_cast<size_t>(device)];
}

}  // namespace sg::detail::cuda
