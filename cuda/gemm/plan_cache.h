// The plans of the structured GEMM, cached per product shape and device: the tile scheduler's plans
// (one-item-per-block, and the persistent kernels' where the product gets them), uploaded once into
// one device table, so a training loop's later steps plan and allocate nothing.
#pragma once

#include <memory>
#include <vector>

#include <structgrad/core/storage.h>
#include <structgrad/core/types.h>
#include "cuda/gemm/options.h"
#include "cuda/gemm/selection.h"
#include "cuda/gemm/tile_scheduler.h"

namespace sg::detail::cuda {

/// A BlockPlan in the device table: its items, offsets and arrival counters (zeroed, and 0 again after
/// each launch); null where the plan has none.
struct DeviceBlockPlan {
  const GemmWorkItem* items = nullptr;
  const int* offsets = nullptr;
  int* counters = nullptr;
};

/// The cached plans of one product shape on one device.
struct CachedPlan {
  GemmWorkPlan plan;                      ///< the one-item-per-block plan (its config: the product's)
  std::unique_ptr<Storage> device_table;  ///< every list below, on the device
  const GemmWorkItem* items = nullptr;
  int* counters = nullptr;
  /// The wide kernel's dense plans (gets_wide_plan): with the last round cut as the options say,
  /// and (where that one has split tiles) without, for launches whose C takes no TMA stores.
  size_t wide_tiles = 0;
  WidePlan wide_split, wide_whole;
  DeviceBlockPlan wide_split_on_device, wide_whole_on_device;
  /// The wide kernel's plan of a structured product (gets_wide_structured_plan).
  TallPlan wide_structured;
  DeviceBlockPlan wide_structured_on_device;
  /// Under an Upper mask: the plan's items with the tiles below the diagonal stored by their mirror
  /// tiles (items_with_mirror_zeros), for the register-B kernel's TMA stores.
  std::vector<GemmWorkItem> mirrored;
  const GemmWorkItem* mirrored_items = nullptr;
  /// The tall kernel's plans (gets_tall_plan): plain, and for a launch that also writes op(A)ᵀ.
  TallPlan tall, tall_writing;
  DeviceBlockPlan tall_on_device, tall_writing_on_device;
  const KRange* tall_writing_runs = nullptr;

  /// What the kernel selection needs to know of these plans.
  PlanFacts facts() const;
};

/// The plans of `p` (its mirrors resolved: with_stored_mirrors_as_dense) on `device` for `family`,
/// built on first use. Thread-safe; entries live as long as the process.
const CachedPlan& cached_plan(const GemmProblem& p, DType dtype, int device, const GemmFamily& family,
                              const GemmOptions& options);

/// What the selection needs to know of `device` (queried once).
const DeviceCaps& device_caps(int device);

}  // namespace sg::detail::cuda
