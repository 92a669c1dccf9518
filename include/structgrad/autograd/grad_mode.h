// Grad mode: a thread-local switch that decides whether ops record onto the tape.
#pragma once

namespace sg::autograd {

/// True while ops record onto this thread's tape (the default).
bool grad_mode_enabled();
/// Turns recording on or off for this thread (prefer NoGradGuard, which restores it).
/// Example: `sg::autograd::set_grad_mode(false);`
void set_grad_mode(bool enabled);

/// Stops recording for its scope (like torch::NoGradGuard). Example:
/// `{ sg::NoGradGuard guard; w.copy_(w - 0.1 * w.grad()); }`
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace sg::autograd

namespace sg {
using autograd::NoGradGuard;
}
