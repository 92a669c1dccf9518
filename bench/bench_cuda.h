// What the CUDA benchmarks share beside bench_util.h: checks that end the program, under its
// name, on a failed CUDA, cuBLAS or cuSOLVER call; CUDA events around one call; and the median
// time of a body between such events on the library's stream.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "bench/bench_util.h"
#include "cuda/runtime.h"

namespace bench {

/// The name a failed check's message starts with; each benchmark's main sets it first.
inline const char* program = "benchmark";

/// Exits with status 1, naming the program and the error, unless the call succeeded.
inline void check(cudaError_t e) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", program, cudaGetErrorString(e));
    std::exit(1);
  }
}
inline void check(cublasStatus_t s) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: cuBLAS status %d\n", program, static_cast<int>(s));
    std::exit(1);
  }
}
inline void check(cusolverStatus_t s) {
  if (s != CUSOLVER_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: cuSOLVER status %d\n", program, static_cast<int>(s));
    std::exit(1);
  }
}

/// CUDA events around single calls on one stream.
class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {
    check(cudaEventCreate(&start_));
    check(cudaEventCreate(&stop_));
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  /// Milliseconds from an event before body(rep) to one after it, waited for.
  double ms(const std::function<void(int)>& body, int rep) {
    check(cudaEventRecord(start_, stream_));
    body(rep);
    check(cudaEventRecord(stop_, stream_));
    check(cudaEventSynchronize(stop_));
    float elapsed = 0;
    check(cudaEventElapsedTime(&elapsed, start_, stop_));
    return elapsed;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_, stop_;
};

/// The upper median (the median of an odd count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// The median milliseconds of body(r), r = 0 … reps − 1, between events on the library's stream,
/// after three warm-ups; prepare(r), when given, runs before each start event (untimed).
inline double median_ms(int reps, const std::function<void(int)>& body,
                        const std::function<void(int)>& prepare = {}) {
  const cudaStream_t stream = sg::detail::cuda::stream(0);
  EventTimer timer(stream);
  for (int w = 0; w < 3; ++w) {
    if (prepare) prepare(w);
    body(w);
  }
  check(cudaStreamSynchronize(stream));
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    if (prepare) prepare(r);
    times.push_back(timer.ms(body, r));
  }
  return median(times);
}

}  // namespace bench
