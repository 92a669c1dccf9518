// What ops and optimizers need of CUDA graph capture (cuda/graph.cpp; cuda/no_cuda/no_cuda.cpp
// without CUDA): whether this thread is capturing, refusing what a graph cannot replay, and checks
// that run after replays or before them. Internal.
#pragma once

#include <functional>

#include <structgrad/core/types.h>

namespace sg::detail {

/// True while this thread captures work on `device` (a CUDA device) into an sg::cuda::Graph.
bool capturing(Device device);
/// Throws, naming `op`, while this thread captures work on `device`: `op` does something a graph
/// cannot replay (reads device memory back to the host, draws host-seeded random numbers, ...). The
/// capture then cannot end with a graph.
void refuse_under_capture(const char* op, Device device, const char* reason);
/// Under capture: runs `check` (an op's check of its own results, which reads them back) when the
/// graph's user calls Graph::check_errors, after a replay, instead of now.
void defer_check(Device device, std::function<void()> check);
/// Under capture: runs `check` before each replay; it throws when a host-side value the captured
/// work was recorded with has changed since.
void check_before_replay(Device device, std::function<void()> check);

}  // namespace sg::detail
