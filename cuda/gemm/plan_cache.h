// The plans of the structured GEMM, cached per product shape, device and stream: the tile
// scheduler's plans (one-item-per-block, and the persistent kernels' where the product gets them),
// uploaded once into one device table, so a training loop's later steps plan and allocate nothing.
#pragma once

#include <memory>
#include <vector>

#include <structgrad/core/storage.h>
#include <structgrad/core/types.h>
#include "cuda/gemm/tuning.h"
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

/// The cached plans of one product shape on one device and stream: the host plans, and where each list is in
/// the entry's one device table.
struct CachedPlan : ProductPlans {
  std::unique_ptr<Storage> device_table;  ///< every list below, on the device
  const GemmWorkItem* items = nullptr;    ///< plan's items, and its split tiles' arrival counters
  int* counters = nullptr;
  DeviceBlockPlan wide_split_on_device, wide_whole_on_device, wide_structured_on_device;
  const GemmWorkItem* mirrored_items = nullptr;
  DeviceBlockPlan tall_on_device, tall_writing_on_device;
  const KRange* tall_writing_runs = nullptr;
};

/// The plans of `p` (its mirrors resolved: with_stored_mirrors_as_dense) on `device` for `family`,
/// built on first use. Thread-safe; entries live as long as the process.
const CachedPlan& cached_plan(const GemmProblem& p, DType dtype, int device, const GemmFamily& family,
                              const GemmTuning& options);

/// The launch plan of `p` (select_launch over the cached plans), made on first use per shape, operand
/// layout (leading dimensions, 16-byte alignment, vouched zeros) and tuning. Thread-safe.
const LaunchPlan& cached_launch(const GemmProblem& p, DType dtype, int device, const GemmFamily& family,
                                const GemmTuning& options);

/// The one-item-per-block plan launch_structured_gemm uses for `p` on `device` (built on first use,
/// cached); for the tests and the benchmark.
const GemmWorkPlan& structured_gemm_plan(const GemmProblem& p, DType dtype, int device);

/// What the selection needs to know of `device` (queried once).
const DeviceCaps& device_caps(int device);

}  // namespace sg::detail::cuda
