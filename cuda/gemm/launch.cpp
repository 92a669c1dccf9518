// The structured GEMM's launcher (structured_gemm.h): checks a product, reads the options once,
// finds its cached plans, asks the selection which kernel runs it and which operands are copied
// first, encodes the TMA maps, and queues the copies and the kernel on the device's stream.
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

/// A copy of one operand made before the product (relayout_operand): the allocation and, for a
/// Symmetric operand's mirror copy, the operand's own storage, from which the k-steps wholly in its
/// stored triangle are read.
struct OperandCopy {
  std::unique_ptr<Storage> storage;
  const float* stored = nullptr;
  int64_t stored_ld = 0;
};

/// The view of W(o, k) = V(k, o): the same storage read the other way round (`k_extent`: V's k).
OperandView<float> transposed_view(OperandView<float> v, int64_t k_extent) {
  v.extent = static_cast<int32_t>(k_extent);
  v.layout = v.layout == Layout::OuterMajor ? Layout::KMajor : Layout::OuterMajor;
  if (v.pattern == Pattern::KAtLeastOuter) v.pattern = Pattern::KAtMostOuter;
  else if (v.pattern == Pattern::KAtMostOuter) v.pattern = Pattern::KAtLeastOuter;
  return v;  // (a Symmetric view is its own transpose)
}

/// Writes operand A (is_b false) or B of `p` outer-major (the wgmma loop's relayout) or, with
/// k_major, k-major (the FP64 loop's copies) into a new allocation on the device's stream, and
/// points `q`'s operand at it (a Symmetric operand becomes Dense). A Symmetric operand copied
/// outer-major whose storage takes direct TMA copies gets a mirror copy (mirror_copy_holds).
OperandCopy copy_operand(const GemmProblem& p, bool is_b, bool k_major, int device, const GemmOptions& options,
                         GemmProblem& q) {
  const GemmOperand d = is_b ? p.b : p.a;
  const int64_t extent = is_b ? p.n : p.m;
  const OperandView<float> v = operand_view<float>(is_b ? p.b_data : p.a_data, d, is_b, extent, is_b ? p.ldb : p.lda);
  // The copy's rows and columns: outer × k, or k × outer (the kernel writing the transposed view).
  const int64_t rows = k_major ? p.k : extent, cols = k_major ? extent : p.k;
  const int64_t ldo = (cols + 3) / 4 * 4;  // 16-byte rows: the vector and TMA paths take them
  const size_t bytes = static_cast<size_t>(rows * ldo) * sizeof(float);
  OperandCopy copy;
  copy.storage = std::make_unique<Storage>(bytes, Device(DeviceType::CUDA, device));
  float* const out = static_cast<float*>(copy.storage->data);
  const bool mirror_only = !k_major && v.pattern == Pattern::Symmetric && v.vector_ok;
  if (mirror_only) {
    copy.stored = v.data;
    copy.stored_ld = v.ld;
  }
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
  // Outer-major: A not transposed, B transposed; k-major the other way (operand_view). The kind
  // (op(X)'s structure) stays.
  (is_b ? q.b : q.a) = GemmOperand{d.structure == Structure::Symmetric ? Structure::Dense : d.structure, k_major != is_b};
  (is_b ? q.b_data : q.a_data) = out;
  (is_b ? q.ldb : q.lda) = ldo;
  return copy;
}

/// The view of a mirror copy's operand over its own storage: outer-major, as the copy.
OperandView<float> stored_view(OperandView<float> copy_view, const OperandCopy* copy) {
  copy_view.data = copy->stored;
  copy_view.ld = copy->stored_ld;
  return copy_view;
}

/// Encodes C's map for TMA stores (boxes of box_rows × 32), where C takes them.
bool encode_output_map(const GemmArgs<float>& args, CUtensorMap* map, uint32_t box_rows, bool tensor_maps) {
  if (!output_takes_tma_stores(args, tensor_maps)) return false;
  encode_store_map(map, args.c, args.m, args.n, args.ldc, box_rows, "output");
  return true;
}

/// Everything one launch needs besides its plans.
struct Launch {
  const GemmProblem& p;
  const CachedPlan& cached;
  int device;
  const DeviceCaps& caps;
  const GemmOptions& options;
};

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

/// The wgmma products: the kernel the selection picks, its maps encoded. Returns whether it also
/// wrote op(A)ᵀ into p.at.
bool launch_wgmma_kernel(const Launch& l, GemmArgs<float>& args, const OperandCopy* a_copy, const OperandCopy* b_copy) {
  const GemmProblem& p = l.p;
  const CachedPlan& cached = l.cached;
  const WgmmaChoice choice = select_wgmma_kernel(p, args, cached.facts(), l.caps, l.options);
  GemmCounters& counters = gemm_counters();
  TmaMaps maps{};
  maps.has = choice.maps;
  const bool tall = choice.kernel == WgmmaKernel::Tall;
  const bool wide = choice.kernel == WgmmaKernel::Wide || choice.kernel == WgmmaKernel::WideStructured;
  // The persistent kernels' tiles: the tall kernel's A and the wide kernel's B boxes have 256 rows.
  const uint32_t a_rows = tall ? kTallTile.rows : kWgmmaTile.rows;
  const uint32_t b_rows = wide ? kWideTile.cols : kWgmmaTile.rows;
  encode_tile_maps(args.a, p.k, choice.maps & 3u, &maps.a, &maps.a_raw, a_rows);
  encode_tile_maps(args.b, p.k, choice.maps >> 2 & 3u, &maps.b, &maps.b_raw, b_rows);
  // A mirror copy's stored triangle from the operand's storage.
  if (a_copy != nullptr && a_copy->stored != nullptr && (maps.has & kADirect)) {
    encode_tile_map(stored_view(args.a, a_copy), p.k, false, &maps.a_stored, a_rows);
    maps.stored |= 1;
  }
  if (b_copy != nullptr && b_copy->stored != nullptr && (maps.has & kBDirect)) {
    encode_tile_map(stored_view(args.b, b_copy), p.k, false, &maps.b_stored, b_rows);
    maps.stored |= 2;
  }
  const bool tensor_maps = l.caps.tensor_maps;
  // The tall kernel's tiles cut in two meet in C; the others' split tiles use the workspace.
  const Storage workspace = split_workspace(cached, l.device, tall ? 0 : sizeof(float));
  args.partials = static_cast<float*>(workspace.data);
  // The wide kernel from one of its plans (persistent: one block per entry of its offsets).
  auto launch_wide = [&](const DeviceBlockPlan& on_device, const BlockPlan& plan) {
    args.items = on_device.items;
    args.counters = on_device.counters;
    const auto kernel = wide_kernel();
    launch(kernel.fn, dim3(static_cast<unsigned>(plan.offsets.size() - 1)), dim3(kernel.threads), kernel.dynamic_smem,
           l.device, l.options.dependent_launch, kernel.name, args, maps, on_device.offsets);
    counters.wide_launches.fetch_add(1, std::memory_order_relaxed);
  };
  switch (choice.kernel) {
    case WgmmaKernel::WideStructured:
      SG_CHECK(encode_output_map(args, &maps.c, kWgmmaTile.rows, tensor_maps),
               "structured gemm: the wide kernel's output map");
      maps.has |= kCStore;
      launch_wide(cached.wide_structured_on_device, cached.wide_structured);
      counters.wide_structured_launches.fetch_add(1, std::memory_order_relaxed);
      return false;
    case WgmmaKernel::Wide: {
      if (l.options.wide_tma_store && encode_output_map(args, &maps.c, kWgmmaTile.rows, tensor_maps)) {
        maps.has |= kCStore;
        counters.wide_tma_store_launches.fetch_add(1, std::memory_order_relaxed);
      }
      // Split tiles meet in C by TMA stores and reductions; without those, the plan without.
      const bool split = cached.wide_split.split_tiles > 0, whole = split && !(maps.has & kCStore);
      if (split && !whole) counters.wide_split_launches.fetch_add(1, std::memory_order_relaxed);
      launch_wide(whole ? cached.wide_whole_on_device : cached.wide_split_on_device,
                  whole ? cached.wide_whole : cached.wide_split);
      return false;
    }
    case WgmmaKernel::Tall: {
      SG_CHECK(encode_output_map(args, &maps.c, kTallOutRows, tensor_maps), "structured gemm: the tall kernel's output map");
      TransposedOutput transposed{};
      if (tall_writes_transposed_a(p, args.a, l.options)) {
        SG_CHECK(reinterpret_cast<uintptr_t>(p.at) % 16 == 0, "structured gemm: the buffer for op(A)ᵀ is not 16-byte aligned");
        encode_store_map(&transposed.map, p.at, p.k, p.m, p.m, 32, "transposed A");
        transposed.writes = cached.tall_writing_runs;
        transposed.on = true;
        if (l.options.poison_copies)  // NaN where the kernel writes nothing: a product reading there fails
          SG_CUDA_CHECK(cudaMemsetAsync(p.at, 0xFF, static_cast<size_t>(p.k * p.m) * sizeof(float), stream(l.device)));
        counters.transposed_a_outputs.fetch_add(1, std::memory_order_relaxed);
      }
      maps.has |= kCStore;
      if (encode_raw_block_map(args.b, p.k, &maps.b_raw)) maps.has |= kBRawBlocks;
      const DeviceBlockPlan& on_device = transposed.on ? cached.tall_writing_on_device : cached.tall_on_device;
      args.items = on_device.items;
      args.counters = on_device.counters;
      const auto kernel = transposed.on ? tall_kernel<true>() : tall_kernel<false>();
      launch(kernel.fn, dim3(static_cast<unsigned>(cached.tall.offsets.size() - 1)), dim3(kernel.threads),
             kernel.dynamic_smem, l.device, l.options.dependent_launch, kernel.name, args, maps, on_device.offsets,
             transposed);
      counters.tall_launches.fetch_add(1, std::memory_order_relaxed);
      return transposed.on;
    }
    case WgmmaKernel::RegisterB: {
      // B's k-step as one 3-D box where its rows hold whole column blocks; C by TMA stores where it
      // takes them, and then the tiles below the diagonal stored by their mirror tiles' blocks.
      if (encode_raw_block_map(args.b, p.k, &maps.b_raw)) {
        maps.has |= kBRawBlocks;
        counters.raw_block_map_launches.fetch_add(1, std::memory_order_relaxed);
      }
      unsigned grid = static_cast<unsigned>(cached.plan.items.size());
      if (encode_output_map(args, &maps.c, kWgmmaTile.rows, tensor_maps)) {
        maps.has |= kCStore;
        counters.tma_store_launches.fetch_add(1, std::memory_order_relaxed);
        if (cached.mirrored_items != nullptr) {
          args.items = cached.mirrored_items;
          grid = static_cast<unsigned>(cached.mirrored.size());
          counters.mirror_zero_launches.fetch_add(1, std::memory_order_relaxed);
        }
      }
      const auto kernel = register_b_kernel();
      launch(kernel.fn, dim3(grid), dim3(kernel.threads), kernel.dynamic_smem, l.device, false, kernel.name, args, maps);
      counters.register_b_launches.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    case WgmmaKernel::Pipelined:
    case WgmmaKernel::Tma: {
      const KernelInstance<TmaKernel> kernel = [&] {
        if (choice.kernel == WgmmaKernel::Pipelined) return pipelined_kernel();
        switch (choice.variant) {
          case TmaVariant::A: return tiled_tma_kernel<TmaVariant::A>();
          case TmaVariant::B: return tiled_tma_kernel<TmaVariant::B>();
          case TmaVariant::AB: return tiled_tma_kernel<TmaVariant::AB>();
          case TmaVariant::ABDeep: return tiled_tma_kernel<TmaVariant::ABDeep>();
          case TmaVariant::ABDiag: return tiled_tma_kernel<TmaVariant::ABDiag>();
          case TmaVariant::ABDeepDiag: return tiled_tma_kernel<TmaVariant::ABDeepDiag>();
          case TmaVariant::ABSym: return tiled_tma_kernel<TmaVariant::ABSym>();
        }
        return tiled_tma_kernel<TmaVariant::AB>();
      }();
      launch(kernel.fn, dim3(static_cast<unsigned>(cached.plan.items.size())), dim3(kernel.threads),
             kernel.dynamic_smem, l.device, false, kernel.name, args, maps);
      if (choice.kernel == WgmmaKernel::Pipelined) counters.pipelined_launches.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    case WgmmaKernel::Staged: {
      const auto kernel = tiled_kernel<GemmTileConfig::Float32Tf32Wgmma>();
      launch(kernel.fn, dim3(static_cast<unsigned>(cached.plan.items.size())), dim3(kernel.threads),
             kernel.dynamic_smem, l.device, false, kernel.name, args);
      return false;
    }
  }
  return false;
}

/// The one-item-per-block kernel of the plan of `l` (T: its element type), or the wgmma kernel the
/// selection picks. a_copy, b_copy: the operand is a copy made first (null: it is not). Returns
/// whether the product also wrote op(A)ᵀ into p.at.
template <typename T>
bool launch_plan(const Launch& l, const OperandCopy* a_copy = nullptr, const OperandCopy* b_copy = nullptr) {
  const GemmProblem& p = l.p;
  const CachedPlan& cached = l.cached;
  const GemmTileConfig config = cached.plan.config;
  GemmArgs<T> args;
  args.a = operand_view<T>(p.a_data, p.a, false, p.m, p.lda);
  args.b = operand_view<T>(p.b_data, p.b, true, p.n, p.ldb);
  // A copy holds its zeros, and so does an operand whose caller vouches for them (an
  // UpperTriangular tensor: GemmOperand::zeros_stored); the kernels that copy whole tiles then
  // need not write them.
  args.a.zeros_stored = a_copy != nullptr || p.a.zeros_stored;
  args.b.zeros_stored = b_copy != nullptr || p.b.zeros_stored;
  args.c = static_cast<T*>(p.c_data);
  args.ldc = p.ldc;
  args.m = static_cast<int32_t>(p.m);
  args.n = static_cast<int32_t>(p.n);
  args.alpha = static_cast<T>(p.alpha);
  args.mask = p.mask;
  args.c_vector_ok = reinterpret_cast<uintptr_t>(p.c_data) % 16 == 0 && p.ldc % (16 / sizeof(T)) == 0;
  args.items = cached.items;
  args.counters = cached.counters;
  if constexpr (std::is_same<T, float>::value) {
    if (config == GemmTileConfig::Float32Tf32Wgmma) return launch_wgmma_kernel(l, args, a_copy, b_copy);
  }
  const Storage workspace = split_workspace(cached, l.device, sizeof(T));
  args.partials = static_cast<T*>(workspace.data);
  const unsigned blocks = static_cast<unsigned>(cached.plan.items.size());
  KernelInstance<TiledKernel<T>> kernel;
  if constexpr (std::is_same<T, double>::value) {
    kernel = config == GemmTileConfig::Float64Dmma ? tiled_f64_dmma_kernel() : tiled_f64_kernel();
  } else {
    switch (config) {
      case GemmTileConfig::Float32Large: kernel = tiled_kernel<GemmTileConfig::Float32Large>(); break;
      case GemmTileConfig::Float32Small: kernel = tiled_kernel<GemmTileConfig::Float32Small>(); break;
      case GemmTileConfig::Float32Tf32: kernel = tiled_kernel<GemmTileConfig::Float32Tf32>(); break;
      case GemmTileConfig::Float32Dmma: kernel = tiled_kernel<GemmTileConfig::Float32Dmma>(); break;
      default: SG_FAIL("structured gemm: no float32 tiled kernel for ", tile_config_name(config));
    }
  }
  launch(kernel.fn, dim3(blocks), dim3(kernel.threads), kernel.dynamic_smem, l.device, false, kernel.name, args);
  return false;
}

/// A wgmma product, on outer-major copies of its operands where relayout pays (B not where the
/// register-B or the tall kernel reads it as it lies). The copies go back to the caching allocator
/// at scope end, behind the product on the same stream.
/// Which operands of a wgmma product are copied outer-major first (relayout).
std::pair<bool, bool> wgmma_copies(const Launch& l) {
  const bool relayout_a = relayout_pays(l.p, false, l.caps, l.options);
  const bool relayout_b = relayout_pays(l.p, true, l.caps, l.options) &&
                          !register_b_replaces_copy(l.p, relayout_a, l.options) &&
                          !(!relayout_a && tall_replaces_copy(l.p, l.cached.facts(), l.caps, l.options));
  return {relayout_a, relayout_b};
}

bool launch_wgmma(const Launch& l, const GemmFamily& family) {
  const GemmProblem& p = l.p;
  const auto [relayout_a, relayout_b] = wgmma_copies(l);
  if (!relayout_a && !relayout_b) return launch_plan<float>(l);
  GemmProblem q = p;
  OperandCopy copy_a, copy_b;
  if (relayout_a) copy_a = copy_operand(p, false, false, l.device, l.options, q);
  if (relayout_b) copy_b = copy_operand(p, true, false, l.device, l.options, q);
  const Launch on_copies{q, cached_plan(q, DType::Float32, l.device, family, l.options), l.device, l.caps, l.options};
  return launch_plan<float>(on_copies, relayout_a ? &copy_a : nullptr, relayout_b ? &copy_b : nullptr);
}

/// An FP64-loop product, on k-major copies of its operands where they pay. The plan of `p` holds for
/// the copies (the same op(A), op(B)).
bool launch_dmma(const Launch& l) {
  const GemmProblem& p = l.p;
  const bool copy_a = k_major_copy_pays(p, false, l.options), copy_b = k_major_copy_pays(p, true, l.options);
  GemmProblem q = p;
  OperandCopy copy_of_a, copy_of_b;
  if (copy_a) copy_of_a = copy_operand(p, false, true, l.device, l.options, q);
  if (copy_b) copy_of_b = copy_operand(p, true, true, l.device, l.options, q);
  launch_plan<float>(Launch{q, l.cached, l.device, l.caps, l.options});
  gemm_counters().dmma_launches.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void check_problem(const GemmProblem& p) {
  SG_CHECK(p.batch == 1, "structured gemm: one product per launch, got a batch of ", p.batch,
           " (the backend runs a batch product by product)");
  constexpr int64_t kLimit = int64_t(1) << 28;  // int32 tile, k and byte-stride arithmetic stays exact
  SG_CHECK(p.m >= 0 && p.n >= 0 && p.k >= 0 && p.m < kLimit && p.n < kLimit && p.k < kLimit,
           "structured gemm: sizes m = ", p.m, ", n = ", p.n, ", k = ", p.k, " out of range");
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
GemmFamily family_of(const GemmProblem& p, DType dtype, int device, const DeviceCaps& caps, const GemmOptions& options) {
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

}  // namespace

const GemmWorkPlan& structured_gemm_plan(const GemmProblem& problem, DType dtype, int device) {
  check_problem(problem);
  DeviceGuard guard(device);
  const GemmOptions options = gemm_options();
  const DeviceCaps& caps = device_caps(device);
  const GemmFamily family = family_of(problem, dtype, device, caps, options);
  const GemmProblem p = with_stored_mirrors_as_dense(problem, family.tf32);
  return cached_plan(p, dtype, device, family, options).plan;
}

bool writes_transposed_a(const GemmProblem& problem, DType dtype, int device) {
  if (dtype != DType::Float32 || !problem.tf32 || problem.a.trans || problem.m == 0 || problem.n == 0) return false;
  check_problem(problem);
  DeviceGuard guard(device);
  const GemmOptions options = gemm_options();
  const DeviceCaps& caps = device_caps(device);
  const GemmFamily family = family_of(problem, dtype, device, caps, options);
  if (!family.wgmma) return false;
  GemmProblem p = with_stored_mirrors_as_dense(problem, family.tf32);
  const Launch l{p, cached_plan(p, dtype, device, family, options), device, caps, options};
  const auto [relayout_a, relayout_b] = wgmma_copies(l);
  if (relayout_a || relayout_b) return false;  // the tall kernel reads both operands as they lie
  GemmArgs<float> args;
  args.a = operand_view<float>(p.a_data, p.a, false, p.m, p.lda);
  args.b = operand_view<float>(p.b_data, p.b, true, p.n, p.ldb);
  args.a.zeros_stored = p.a.zeros_stored;
  args.b.zeros_stored = p.b.zeros_stored;
  args.c = static_cast<float*>(p.c_data);
  args.ldc = p.ldc;
  args.m = static_cast<int32_t>(p.m);
  args.n = static_cast<int32_t>(p.n);
  args.mask = p.mask;
  if (select_wgmma_kernel(p, args, l.cached.facts(), caps, options).kernel != WgmmaKernel::Tall) return false;
  p.at = reinterpret_cast<void*>(uintptr_t{16});  // a buffer stands in: the question is the kernel's
  return tall_writes_transposed_a(p, args.a, options);
}

bool launch_structured_gemm(const GemmProblem& problem, DType dtype, int device) {
  check_problem(problem);
  SG_CHECK(!problem.accumulate, "cuda gemm: accumulate is for Dense·Dense products only");
  if (problem.m == 0 || problem.n == 0) return false;
  DeviceGuard guard(device);
  const GemmOptions options = gemm_options();  // read once for the whole product
  const DeviceCaps& caps = device_caps(device);
  const GemmFamily family = family_of(problem, dtype, device, caps, options);
  const GemmProblem p = with_stored_mirrors_as_dense(problem, family.tf32);
  const Launch l{p, cached_plan(p, dtype, device, family, options), device, caps, options};
  switch (l.cached.plan.config) {
    case GemmTileConfig::Float64: return launch_plan<double>(l);
    case GemmTileConfig::Float64Dmma:
      gemm_counters().dmma_f64_launches.fetch_add(1, std::memory_order_relaxed);
      return launch_plan<double>(l);
    case GemmTileConfig::Float32Tf32Wgmma: return launch_wgmma(l, family);
    case GemmTileConfig::Float32Dmma: return launch_dmma(l);
    default: return launch_plan<float>(l);
  }
}

}  // namespace sg::detail::cuda
