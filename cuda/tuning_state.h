// Process-wide tuning switches of one kind (the structured GEMM's, the linear algebra's): read and set
// whole under a lock, and set for a scope by a guard (tests, benchmarks). Plain C++.
#pragma once

#include <mutex>

namespace sg::detail::cuda {

/// The switches of type T that every later call reads.
template <class T>
class TuningState {
 public:
  T get() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return value_;
  }
  void set(const T& value) {
    std::lock_guard<std::mutex> lock(mutex_);
    value_ = value;
  }

 private:
  mutable std::mutex mutex_;
  T value_{};
};

/// The one process-wide state of switches of type T.
template <class T>
TuningState<T>& tuning_state() {
  static TuningState<T> state;
  return state;
}

/// Sets the switches that Get reads and Set writes for a scope, and restores the previous ones at its
/// end, an exception's or an early test skip's included.
template <class T, T (*Get)(), void (*Set)(const T&)>
class ScopedTuning {
 public:
  template <class Edit>
  explicit ScopedTuning(Edit edit) : previous_(Get()) {
    T tuning = previous_;
    edit(tuning);
    Set(tuning);
  }
  ~ScopedTuning() { Set(previous_); }
  ScopedTuning(const ScopedTuning&) = delete;
  ScopedTuning& operator=(const ScopedTuning&) = delete;

 private:
  T previous_;
};

}  // namespace sg::detail::cuda
