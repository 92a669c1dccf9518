// Multi-tensor optimizer steps (PyTorch's fused / foreach): the parameters of one dtype go to one
// launch in lists of up to kMaxSlots, passed by value in the kernel's arguments, so a step costs a
// launch per dtype instead of one per parameter, and a captured step replays with the same lists.
// Adam's step count and bias corrections live on the device and are advanced by a one-thread kernel,
// so a CUDA graph replays the step with the right t. The per-element math is ops/optim_math.h's,
// the same as the per-parameter kernels'.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda/check.h"
#include "cuda/cuda_backend.h"
#include "cuda/kernel_util.cuh"
#include "cuda/runtime.h"
#include "ops/optim_math.h"

namespace sg::detail::cuda {

namespace {

/// Slots per launch: Adam's four pointers and an end per slot take 1.4 KiB of the 4 KiB of kernel
/// arguments. ops/backend.h's multi-tensor calls name this limit.
constexpr int kMaxSlots = 36;

/// Where element i of a launch's flattened parameters lies: slot `slot`, offset `offset`.
struct SlotIndex {
  int slot;
  int64_t offset;
};

/// ends[s] = the elements of slots 0..s; binary search for the slot holding i.
__device__ inline SlotIndex locate(const int64_t* ends, int count, int64_t i) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (i < ends[mid]) hi = mid;
    else lo = mid + 1;
  }
  return {lo, i - (lo > 0 ? ends[lo - 1] : 0)};
}

template <typename T>
struct AdamListMap {
  T* param[kMaxSlots];
  const T* grad[kMaxSlots];
  T* exp_avg[kMaxSlots];
  T* exp_avg_sq[kMaxSlots];
  int64_t ends[kMaxSlots];
  int count;
  AdamCoefficients<T> c;  // bias corrections read from `counter`
  const double* counter;  // t, 1 − beta1^t, 1 − beta2^t

  __device__ void operator()(int64_t i) const {
    const SlotIndex at = locate(ends, count, i);
    AdamCoefficients<T> k = c;
    k.bias_correction1 = static_cast<T>(counter[1]);
    k.bias_correction2 = static_cast<T>(counter[2]);
    T p = param[at.slot][at.offset], m = exp_avg[at.slot][at.offset], v = exp_avg_sq[at.slot][at.offset];
    adam_update<T>(p, grad[at.slot][at.offset], m, v, k);
    param[at.slot][at.offset] = p;
    exp_avg[at.slot][at.offset] = m;
    exp_avg_sq[at.slot][at.offset] = v;
  }
};

template <typename T>
struct SgdListMap {
  T* param[kMaxSlots];
  const T* grad[kMaxSlots];
  T* momentum[kMaxSlots];  // null without momentum
  int64_t ends[kMaxSlots];
  bool first_step[kMaxSlots];
  int count;
  SgdCoefficients<T> c;

  __device__ void operator()(int64_t i) const {
    const SlotIndex at = locate(ends, count, i);
    SgdCoefficients<T> k = c;
    k.first_step = first_step[at.slot];
    T unused = T(0);
    T& buf = momentum[at.slot] ? momentum[at.slot][at.offset] : unused;
    param[at.slot][at.offset] = sgd_update<T>(param[at.slot][at.offset], grad[at.slot][at.offset], buf, k);
  }
};

/// t += 1 and the bias corrections of the new t, in double (as the host computes them for the
/// per-parameter kernels).
__global__ void advance_adam_counter(double* counter, double beta1, double beta2) {
  const double t = counter[0] + 1.0;
  counter[0] = t;
  counter[1] = 1.0 - pow(beta1, t);
  counter[2] = 1.0 - pow(beta2, t);
}

/// Calls launch(first, count) for each run of at most kMaxSlots slots of `dtype`, in order.
template <typename Slot, typename Launch>
void for_each_list(const std::vector<Slot>& slots, DType dtype, Launch&& launch) {
  std::vector<const Slot*> of_dtype;
  for (const Slot& s : slots)
    if (s.param->dtype() == dtype && s.param->numel() > 0) of_dtype.push_back(&s);
  for (size_t first = 0; first < of_dtype.size(); first += kMaxSlots) {
    const size_t count = std::min<size_t>(kMaxSlots, of_dtype.size() - first);
    launch(of_dtype.data() + first, static_cast<int>(count));
  }
}

}  // namespace

void CudaBackend::adam_step_many(const std::vector<AdamSlot>& slots, const AdamParams& h, Tensor& counter) {
  expect_on_device("adam_step_many", counter);
  SG_CHECK(counter.dtype() == DType::Float64 && counter.numel() == 3,
           "cuda adam_step_many: the step counter must be float64 [3], got ", counter.shape(), " ", counter.dtype());
  for (const AdamSlot& s : slots) {
    const Tensor* const operands[] = {s.param, s.grad, s.exp_avg, s.exp_avg_sq};
    for (const Tensor* t : operands) {
      expect_on_device("adam_step_many", *t);
      SG_CHECK(t->numel() == s.param->numel() && t->dtype() == s.param->dtype(), "cuda adam_step_many: tensor ",
               t->shape(), " ", t->dtype(), " does not match parameter ", s.param->shape(), " ", s.param->dtype());
    }
  }
  DeviceGuard guard(device_);
  auto* count_and_corrections = static_cast<double*>(counter.data_ptr());
  advance_adam_counter<<<1, 1, 0, stream(device_)>>>(count_and_corrections, h.beta1, h.beta2);
  SG_CUDA_CHECK_LAUNCH("advance_adam_counter");
  for (DType dtype : {DType::Float32, DType::Float64}) {
    dispatch_dtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      for_each_list(slots, dtype, [&](const AdamSlot* const* list, int count) {
        AdamListMap<T> map{};
        int64_t total = 0;
        for (int s = 0; s < count; ++s) {
          map.param[s] = data_of<T>(*list[s]->param);
          map.grad[s] = data_of<T>(*list[s]->grad);
          map.exp_avg[s] = data_of<T>(*list[s]->exp_avg);
          map.exp_avg_sq[s] = data_of<T>(*list[s]->exp_avg_sq);
          total += list[s]->param->numel();
          map.ends[s] = total;
        }
        map.count = count;
        map.c = adam_coefficients<T>(h);
        map.counter = count_and_corrections;
        launch_for_each("adam_step_many", device_, total, map);
      });
    });
  }
}

void CudaBackend::sgd_step_many(const std::vector<SgdSlot>& slots, const SgdParams& h) {
  const bool use_momentum = h.momentum != 0.0;
  for (const SgdSlot& s : slots) {
    expect_on_device("sgd_step_many", *s.param);
    expect_on_device("sgd_step_many", *s.grad);
    SG_CHECK(s.grad->numel() == s.param->numel() && s.grad->dtype() == s.param->dtype(),
             "cuda sgd_step_many: gradient ", s.grad->shape(), " ", s.grad->dtype(), " does not match parameter ",
             s.param->shape(), " ", s.param->dtype());
    SG_CHECK(use_momentum == (s.momentum != nullptr), "cuda sgd_step_many: a momentum buffer is needed exactly when "
             "momentum is not 0");
    if (s.momentum) {
      expect_on_device("sgd_step_many", *s.momentum);
      SG_CHECK(s.momentum->numel() == s.param->numel() && s.momentum->dtype() == s.param->dtype(),
               "cuda sgd_step_many: momentum buffer ", s.momentum->shape(), " does not match parameter ",
               s.param->shape());
    }
  }
  DeviceGuard guard(device_);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    dispatch_dtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      for_each_list(slots, dtype, [&](const SgdSlot* const* list, int count) {
        SgdListMap<T> map{};
        int64_t total = 0;
        for (int s = 0; s < count; ++s) {
          map.param[s] = data_of<T>(*list[s]->param);
          map.grad[s] = data_of<T>(*list[s]->grad);
          map.momentum[s] = list[s]->momentum ? data_of<T>(*list[s]->momentum) : nullptr;
          map.first_step[s] = list[s]->first_step;
          total += list[s]->param->numel();
          map.ends[s] = total;
        }
        map.count = count;
        map.c = sgd_coefficients<T>(h);
        launch_for_each("sgd_step_many", device_, total, map);
      });
    });
  }
}

}  // namespace sg::detail::cuda
