// The structured GEMM's launcher (structured_gemm.h): checks a product, reads the tuning once, takes
// its launch plan (chosen once per cached shape: select_launch), and executes it: the operand copies,
// the TMA maps the plan names, and the kernel, queued on the device's stream.
#include "cuda/structured_gemm.h"

#include <cstdio>
#include <memory>
#include <mutex>
#include <utility>

#include <structgrad/core/error.h>
#include <structgrad/core/storage.h>
#include "cuda/check.h"
#include "cuda/gemm/kernels.h"
#include "cuda/gemm/plan_cache.h"
#include "cuda/gemm/relayout.h"
#include "cuda/gemm/selection.h"
#include "cuda/gemm/tma_maps.h"
#include "cuda/gemm/tuning.h"
#include "cuda/runtime.h"

namespace sg::detail::cuda {

namespace {

/// Launches `kernel` on the stream of `device`. With `after_previous` (the persistent kernels, which
/// wait for the grid ahead of them before they touch global memory: wait_for_previous_grid), by
/// programmatic stream serialization: the launch may begin once the kernel ahead of it has no
/// blocks left, before it completes.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, int shared_bytes, int device, bool after_previous,
            const char* name, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = static_cast<size_t>(shared_bytes);
  config.stream = stream(device);
  config.attrs = &attribute;
  config.numAttrs = after_previous ? 1 : 0;
  // A failed launch's error is also the last error, which the check reports with the kernel's name.
  (void)cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  SG_CUDA_CHECK_LAUNCH(name);
}

/// The view of W(o, k) = V(k, o): the same storage read the other way round (`k_extent`: V's k).
OperandView<float> transposed_view(OperandView<float> v, int64_t k_extent) {
  v.extent = static_cast<int32_t>(k_extent);
  v.layout = v.layout == Layout::OuterMajor ? Layout::KMajor : Layout::OuterMajor;
  if (v.pattern == Pattern::KAtLeastOuter) v.pattern = Pattern::KAtMostOuter;
  else if (v.pattern == Pattern::KAtMostOuter) v.pattern = Pattern::KAtLeastOuter;
  return v;  // (a Symmetric view is its own transpose)
}

/// The copies a launch makes before its kernel (LaunchPlan::copies), in allocations of the caching
/// allocator that go back at scope end, behind the product on the same stream.
struct OperandCopyBuffers {
  std::unique_ptr<Storage> a, b;
};

/// Writes operand A (is_b false) or B of `p` outer-major (the wgmma loop's relayout) or, with k_major,
/// k-major (the FP64 loop's copies) into a new allocation on the device's stream. A mirror copy
/// (mirror_copy) holds only what the product reads from it.
std::unique_ptr<Storage> copy_operand(const GemmProblem& p, bool is_b, bool k_major, int device,
                                      const GemmTuning& options) {
  const GemmOperand d = is_b ? p.b : p.a;
  const int64_t extent = is_b ? p.n : p.m;
  const OperandView<float> v = operand_view<float>(is_b ? p.b_data : p.a_data, d, is_b, extent, is_b ? p.ldb : p.lda);
  // The copy's rows and columns: outer × k, or k × outer (the kernel writing the transposed view).
  const int64_t rows = k_major ? p.k : extent, cols = k_major ? extent : p.k;
  const int64_t ldo = copy_ld(p, is_b, k_major);
  const size_t bytes = static_cast<size_t>(rows * ldo) * sizeof(float);
  auto storage = std::make_unique<Storage>(bytes, Device(DeviceType::CUDA, device));
  float* const out = static_cast<float*>(storage->data);
  const bool mirror_only = mirror_copy(p, is_b, k_major);
  if (options.poison_copies) SG_CUDA_CHECK(cudaMemsetAsync(out, 0xFF, bytes, stream(device)));  // NaN
  if (v.pattern == Pattern::Symmetric && !mirror_only) {
    // The whole matrix, k-major or outer-major alike.
    const auto kernel = symmetric_copy();
    const unsigned tiles = static_cast<unsigned>((extent + kSymCopyTile - 1) / kSymCopyTile);
    launch(kernel.fn, dim3(tiles, tiles), dim3(kernel.threads), 0, device, false, kernel.name, v.data, v.ld,
           static_cast<int32_t>(extent), v.vector_ok, out, ldo);
  } else {
    const auto kernel = relayout_copy();
    const dim3 grid(static_cast<unsigned>((cols + kRelayoutTile - 1) / kRelayoutTile),
                    static_cast<unsigned>((rows + kRelayoutTile - 1) / kRelayoutTile));
    launch(kernel.fn, grid, dim3(kRelayoutTile, kRelayoutRows), 0, device, false, kernel.name,
           k_major ? transposed_view(v, p.k) : v, static_cast<int32_t>(cols), out, ldo, mirror_only);
    if (mirror_only) gemm_counters().mirror_copies.fetch_add(1, std::memory_order_relaxed);
  }
  gemm_counters().operand_copies.fetch_add(1, std::memory_order_relaxed);
  return storage;
}

/// The copies of `plan` made, and `p` pointed at them.
GemmProblem make_copies(const GemmProblem& p, const LaunchPlan& plan, int device, const GemmTuning& options,
                        OperandCopyBuffers& buffers) {
  const OperandCopies& copies = plan.copies;
  if (copies.a) buffers.a = copy_operand(p, false, copies.k_major, device, options);
  if (copies.b) buffers.b = copy_operand(p, true, copies.k_major, device, options);
  return on_copies(p, copies, buffers.a ? buffers.a->data : nullptr, buffers.b ? buffers.b->data : nullptr);
}

/// The partial tiles of a plan's split tiles, from the caching allocator (in the accumulators' type:
/// float64 for the FP64 loop); freed at the caller's scope end, safely: the next user of the block is
/// queued behind the kernel on the same stream.
Storage split_workspace(const CachedPlan& cached, int device, size_t element_bytes) {
  const GemmTileConfig config = cached.plan.config;
  const size_t tile = static_cast<size_t>(tile_shape(config).rows);
  const bool fp64_loop = config == GemmTileConfig::Float32Dmma || config == GemmTileConfig::Float64Dmma;
  const size_t acc_bytes = fp64_loop ? sizeof(double) : element_bytes;
  return Storage(static_cast<size_t>(cached.plan.partial_tiles) * tile * tile * acc_bytes,
                 Device(DeviceType::CUDA, device));
}

/// What one launch executes: the product (on its copies where the plan makes them), its plans and
/// launch plan, and the tuning read for it.
struct Launch {
  const GemmProblem& p;          // on the copies
  const GemmProblem& original;   // before them (a mirror copy's stored triangle is read from here)
  const CachedPlan& cached;
  const LaunchPlan& plan;
  int device;
  const GemmTuning& options;
};

/// The TMA maps the plan names, encoded over the launch's operands and output.
TmaMaps encode_maps(const Launch& l, const GemmArgs<float>& args) {
  const GemmProblem& p = l.p;
  const LaunchPlan& plan = l.plan;
  TmaMaps maps{};
  maps.has = plan.maps;
  // The persistent kernels' tiles: the tall kernel's A and the wide kernel's B boxes have 256 rows.
  const bool tall = plan.kernel == GemmKernel::Tall;
  const bool wide = plan.kernel == GemmKernel::Wide || plan.kernel == GemmKernel::WideStructured;
  const uint32_t a_rows = tall ? kTallTile.rows : kWgmmaTile.rows;
  const uint32_t b_rows = wide ? kWideTile.cols : kWgmmaTile.rows;
  encode_tile_maps(args.a, p.k, plan.maps & 3u, &maps.a, &maps.a_raw, a_rows);
  encode_tile_maps(args.b, p.k, plan.maps >> 2 & 3u, &maps.b, &maps.b_raw, b_rows);
  // A mirror copy's stored triangle from the operand's own storage: the copy's view over it.
  const GemmProblem& o = l.original;
  auto over_storage = [](OperandView<float> copy_view, const void* data, int64_t ld) {
    copy_view.data = static_cast<const float*>(data);
    copy_view.ld = ld;
    return copy_view;
  };
  if (plan.stored_maps & 1) encode_tile_map(over_storage(args.a, o.a_data, o.lda), p.k, false, &maps.a_stored, a_rows);
  if (plan.stored_maps & 2) encode_tile_map(over_storage(args.b, o.b_data, o.ldb), p.k, false, &maps.b_stored, b_rows);
  maps.stored = plan.stored_maps;
  if (plan.maps & kBRawBlocks) SG_CHECK(encode_raw_block_map(args.b, p.k, &maps.b_raw), "structured gemm: B's column blocks");
  if (plan.maps & kCStore) {
    const uint32_t box_rows = tall ? static_cast<uint32_t>(kTallOutRows) : kWgmmaTile.rows;
    encode_store_map(&maps.c, args.c, args.m, args.n, args.ldc, box_rows, "output");
  }
  return maps;
}

/// The persistent kernels run one block per entry of their plan's offsets.
unsigned persistent_blocks(const BlockPlan& plan) { return static_cast<unsigned>(plan.offsets.size() - 1); }

/// The wgmma kernels of the plan. Returns whether the launch also wrote op(A)ᵀ into p.at.
bool launch_wgmma_kernel(const Launch& l, GemmArgs<float>& args) {
  const GemmProblem& p = l.p;
  const CachedPlan& cached = l.cached;
  const LaunchPlan& plan = l.plan;
  GemmCounters& counters = gemm_counters();
  const TmaMaps maps = encode_maps(l, args);
  // The tall kernel's tiles cut in two meet in C; the others' split tiles use the workspace.
  const Storage workspace = split_workspace(cached, l.device, plan.kernel == GemmKernel::Tall ? 0 : sizeof(float));
  args.partials = static_cast<float*>(workspace.data);
  const bool dependent = l.options.dependent_launch;
  auto launch_wide = [&](const DeviceBlockPlan& on_device, const BlockPlan& block_plan) {
    args.items = on_device.items;
    args.counters = on_device.counters;
    const auto kernel = wide_kernel();
    launch(kernel.fn, dim3(persistent_blocks(block_plan)), dim3(kernel.threads), kernel.dynamic_smem, l.device,
           dependent, kernel.name, args, maps, on_device.offsets);
    counters.wide_launches.fetch_add(1, std::memory_order_relaxed);
  };
  switch (plan.kernel) {
    case GemmKernel::WideStructured:
      launch_wide(cached.wide_structured_on_device, cached.wide_structured);
      counters.wide_structured_launches.fetch_add(1, std::memory_order_relaxed);
      return false;
    case GemmKernel::Wide:
      if (plan.maps & kCStore) counters.wide_tma_store_launches.fetch_add(1, std::memory_order_relaxed);
      if (cached.wide_split.split_tiles > 0 && !plan.whole_plan)
        counters.wide_split_launches.fetch_add(1, std::memory_order_relaxed);
      launch_wide(plan.whole_plan ? cached.wide_whole_on_device : cached.wide_split_on_device,
                  plan.whole_plan ? cached.wide_whole : cached.wide_split);
      return false;
    case GemmKernel::Tall: {
      TransposedOutput transposed{};
      if (plan.writes_at && p.at != nullptr) {
        SG_CHECK(reinterpret_cast<uintptr_t>(p.at) % 16 == 0, "structured gemm: the buffer for op(A)ᵀ is not 16-byte aligned");
        encode_store_map(&transposed.map, p.at, p.k, p.m, p.m, 32, "transposed A");
        transposed.writes = cached.tall_writing_runs;
        transposed.on = true;
        if (l.options.poison_copies)  // NaN where the kernel writes nothing: a product reading there fails
          SG_CUDA_CHECK(cudaMemsetAsync(p.at, 0xFF, static_cast<size_t>(p.k * p.m) * sizeof(float), stream(l.device)));
        counters.transposed_a_outputs.fetch_add(1, std::memory_order_relaxed);
      }
      const DeviceBlockPlan& on_device = transposed.on ? cached.tall_writing_on_device : cached.tall_on_device;
      args.items = on_device.items;
      args.counters = on_device.counters;
      const auto kernel = transposed.on ? tall_kernel<TransposedA::Written>() : tall_kernel<TransposedA::None>();
      launch(kernel.fn, dim3(persistent_blocks(cached.tall)), dim3(kernel.threads), kernel.dynamic_smem, l.device,
             dependent, kernel.name, args, maps, on_device.offsets, transposed);
      counters.tall_launches.fetch_add(1, std::memory_order_relaxed);
      return transposed.on;
    }
    case GemmKernel::RegisterB: {
      if (plan.maps & kBRawBlocks) counters.raw_block_map_launches.fetch_add(1, std::memory_order_relaxed);
      if (plan.maps & kCStore) counters.tma_store_launches.fetch_add(1, std::memory_order_relaxed);
      unsigned grid = static_cast<unsigned>(cached.plan.items.size());
      if (plan.mirrored_items) {
        args.items = cached.mirrored_items;
        grid = static_cast<unsigned>(cached.mirrored.size());
        counters.mirror_zero_launches.fetch_add(1, std::memory_order_relaxed);
      }
      const auto kernel = register_b_kernel();
      launch(kernel.fn, dim3(grid), dim3(kernel.threads), kernel.dynamic_smem, l.device, false, kernel.name, args, maps);
      counters.register_b_launches.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    case GemmKernel::Pipelined:
    case GemmKernel::Tma: {
      const KernelInstance<TmaKernel> kernel =
          plan.kernel == GemmKernel::Pipelined ? pipelined_kernel() : tiled_tma_kernel(plan.variant);
      launch(kernel.fn, dim3(static_cast<unsigned>(cached.plan.items.size())), dim3(kernel.threads),
             kernel.dynamic_smem, l.device, false, kernel.name, args, maps);
      if (plan.kernel == GemmKernel::Pipelined) counters.pipelined_launches.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    case GemmKernel::Tiled: break;
  }
  SG_FAIL("structured gemm: no wgmma kernel for the plan's ", gemm_kernel_name(plan.kernel), " kernel");
}

/// The one-item-per-block kernel of the plan's configuration (T: its element type), or the wgmma
/// kernel the plan names. Returns whether the product also wrote op(A)ᵀ into p.at.
template <typename T>
bool launch_kernel(const Launch& l) {
  const GemmProblem& p = l.p;
  const CachedPlan& cached = l.cached;
  const GemmTileConfig config = cached.plan.config;
  GemmArgs<T> args = gemm_args<T>(p, l.plan.copies);
  args.items = cached.items;
  args.counters = cached.counters;
  if constexpr (std::is_same<T, float>::value) {
    if (l.plan.kernel != GemmKernel::Tiled) return launch_wgmma_kernel(l, args);
  }
  const Storage workspace = split_workspace(cached, l.device, sizeof(T));
  args.partials = static_cast<T*>(workspace.data);
  const KernelInstance<TiledKernel<T>> kernel = tiled_kernel_of<T>(config);
  launch(kernel.fn, dim3(static_cast<unsigned>(cached.plan.items.size())), dim3(kernel.threads), kernel.dynamic_smem,
         l.device, false, kernel.name, args);
  return false;
}

void check_problem(const GemmProblem& p) {
  SG_CHECK(p.batch == 1, "structured gemm: one product per launch, got a batch of ", p.batch,
           " (the backend runs a batch product by product)");
  constexpr int64_t kLimit = int64_t(1) << 28;  // int32 tile, k and byte-stride arithmetic stays exact
  SG_CHECK(p.m >= 0 && p.n >= 0 && p.k >= 0 && p.m < kLimit && p.n < kLimit && p.k < kLimit,
           "structured gemm: sizes m = ", p.m, ", n = ", p.n, ", k = ", p.k, " out of range");
  SG_CHECK(is_output_mask(p.mask), "structured gemm: no kernel writes ", with_article(structure_name(p.mask)),
           " output (a LowerTriangular one is computed transposed)");
  if (p.mask != Structure::Dense)
    SG_CHECK(p.m == p.n, "structured gemm: a structured output mask needs a square result, got ", p.m, "x", p.n);
  if (p.a.structure == Structure::Symmetric) SG_CHECK(p.m == p.k, "structured gemm: symmetric A must be square");
  if (p.b.structure == Structure::Symmetric) SG_CHECK(p.k == p.n, "structured gemm: symmetric B must be square");
  const int64_t a_cols = p.a.structure == Structure::Symmetric ? p.k : (p.a.trans ? p.m : p.k);
  const int64_t b_cols = p.b.structure == Structure::Symmetric ? p.n : (p.b.trans ? p.k : p.n);
  SG_CHECK(p.lda >= a_cols && p.ldb >= b_cols && p.ldc >= p.n && p.lda < kLimit && p.ldb < kLimit,
           "structured gemm: leading dimensions lda = ", p.lda, ", ldb = ", p.ldb, ", ldc = ", p.ldc,
           " do not fit the operands");
}

/// The family of a product on `device`; TF32 asked of a device without TF32 tensor cores says so once.
GemmFamily family_of(const GemmProblem& p, DType dtype, int device, const DeviceCaps& caps, const GemmTuning& options) {
  const GemmFamily family = select_family(dtype, p.tf32, caps, options);
  if (dtype == DType::Float32 && p.tf32 && !family.tf32) {
    static std::once_flag logged;
    std::call_once(logged, [device] {
      std::fprintf(stderr, "structgrad: cuda:%d has no TF32 tensor cores (compute capability below 8.0); "
                           "float32 products run in exact float32\n", device);
    });
  }
  return family;
}

/// A product resolved for its device: its family, its stored mirrors read as Dense, its plans and its
/// launch plan.
struct Resolved {
  GemmFamily family;
  GemmProblem p;
  const CachedPlan* cached;
  const LaunchPlan* plan;
};

Resolved resolve(const GemmProblem& problem, DType dtype, int device, const GemmTuning& options) {
  Resolved r;
  r.family = family_of(problem, dtype, device, device_caps(device), options);
  r.p = with_stored_mirrors_as_dense(problem, r.family.tf32);
  r.cached = &cached_plan(r.p, dtype, device, r.family, options);
  r.plan = &cached_launch(r.p, dtype, device, r.family, options);
  return r;
}

}  // namespace

const GemmWorkPlan& structured_gemm_plan(const GemmProblem& problem, DType dtype, int device) {
  check_problem(problem);
  DeviceGuard guard(device);
  return resolve(problem, dtype, device, gemm_tuning()).cached->plan;
}

bool writes_transposed_a(const GemmProblem& problem, DType dtype, int device) {
  if (dtype != DType::Float32 || !problem.tf32 || problem.a.trans || problem.m == 0 || problem.n == 0) return false;
  check_problem(problem);
  DeviceGuard guard(device);
  return resolve(problem, dtype, device, gemm_tuning()).plan->writes_at;
}

bool launch_structured_gemm(const GemmProblem& problem, DType dtype, int device) {
  check_problem(problem);
  SG_CHECK(!problem.accumulate, "cuda gemm: accumulate is for Dense·Dense products only");
  if (problem.m == 0 || problem.n == 0) return false;
  DeviceGuard guard(device);
  const GemmTuning options = gemm_tuning();  // read once for the whole product
  const Resolved r = resolve(problem, dtype, device, options);
  const LaunchPlan& plan = *r.plan;
  OperandCopyBuffers buffers;
  const GemmProblem q = plan.copies.any() ? make_copies(r.p, plan, device, options, buffers) : r.p;
  // The wgmma loop's copies change the operands' layouts, so their plans are of their own; the FP64
  // loop's read the same op(A), op(B) through the plan of the product.
  const bool own_plans = plan.copies.any() && !plan.copies.k_major;
  const CachedPlan& cached = own_plans ? cached_plan(q, dtype, device, r.family, options) : *r.cached;
  const Launch l{q, r.p, cached, plan, device, options};
  switch (cached.plan.config) {
    case GemmTileConfig::Float64: return launch_kernel<double>(l);
    case GemmTileConfig::Float64Dmma:
      gemm_counters().dmma_f64_launches.fetch_add(1, std::memory_order_relaxed);
      return launch_kernel<double>(l);
    case GemmTileConfig::Float32Dmma:
      gemm_counters().dmma_launches.fetch_add(1, std::memory_order_relaxed);
      return launch_kernel<float>(l);
    default: return launch_kernel<float>(l);
  }
}

}  // namespace sg::detail::cuda
