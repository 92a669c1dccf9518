// The per-element math of the fused optimizer steps (SGD with momentum/Nesterov, Adam and
// AdamW), written once for host and device: the CPU backend's loop and the CUDA backend's
// kernel both call these, so both devices apply the same formulas (PyTorch semantics).
#pragma once

#include <cmath>

#include "ops/backend.h"
#include "ops/functors.h"

namespace sg::detail {

/// a·b + c rounded once, on the host and the device alike. The updates spell out their fused
/// multiply-adds, so that no compiler contracts them differently in the per-parameter and the
/// multi-tensor kernels: both round every element the same way.
template <typename T>
SG_HD T fmadd(T a, T b, T c) {
#ifdef __CUDA_ARCH__
  return fma(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// ---- SGD ------------------------------------------------------------------------------------
//   g   = grad + weight_decay·param
//   buf = first_step ? g : momentum·buf + (1 − dampening)·g        (when momentum != 0)
//   g   = nesterov ? g + momentum·buf : buf                          (when momentum != 0)
//   param −= lr·g

/// SgdParams rounded once to the parameter's dtype (differences such as 1 − dampening are
/// formed in double first).
template <typename T>
struct SgdCoefficients {
  T lr, momentum, one_minus_dampening, weight_decay;
  bool use_momentum, nesterov, first_step;
};

template <typename T>
inline SgdCoefficients<T> sgd_coefficients(const SgdParams& h) {
  SgdCoefficients<T> c;
  c.lr = static_cast<T>(h.lr);
  c.momentum = static_cast<T>(h.momentum);
  c.one_minus_dampening = static_cast<T>(1.0 - h.dampening);
  c.weight_decay = static_cast<T>(h.weight_decay);
  c.use_momentum = h.momentum != 0.0;
  c.nesterov = h.nesterov;
  c.first_step = h.first_step;
  return c;
}

/// Returns the updated parameter; updates `momentum_buf` when c.use_momentum (it is not
/// touched otherwise, so callers without a buffer may pass a dummy).
template <typename T>
SG_HD T sgd_update(T param, T grad, T& momentum_buf, const SgdCoefficients<T>& c) {
  T g = grad;
  if (c.weight_decay != T(0)) g = fmadd(c.weight_decay, param, g);
  if (c.use_momentum) {
    momentum_buf = c.first_step ? g : fmadd(c.momentum, momentum_buf, c.one_minus_dampening * g);
    g = c.nesterov ? fmadd(c.momentum, momentum_buf, g) : momentum_buf;
  }
  return fmadd(-c.lr, g, param);
}

// ---- Adam / AdamW -------------------------------------------------------------------------
//   decoupled (AdamW): param *= 1 − lr·weight_decay      otherwise: g = grad + weight_decay·param
//   m = beta1·m + (1 − beta1)·g
//   v = beta2·v + (1 − beta2)·g²
//   param −= lr · (m / (1 − beta1^t)) / (sqrt(v / (1 − beta2^t)) + eps)

/// AdamParams rounded once to the parameter's dtype; the differences (1 − beta1, 1 − lr·wd)
/// and the bias corrections of step t are formed in double on the host first.
template <typename T>
struct AdamCoefficients {
  T lr, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay;
  T decay_factor;                        // 1 − lr·weight_decay (AdamW)
  T bias_correction1, bias_correction2;  // 1 − beta1^t, 1 − beta2^t
  bool decoupled_weight_decay;
};

template <typename T>
inline AdamCoefficients<T> adam_coefficients(const AdamParams& h) {
  const double t = static_cast<double>(h.step);
  AdamCoefficients<T> c;
  c.lr = static_cast<T>(h.lr);
  c.beta1 = static_cast<T>(h.beta1);
  c.one_minus_beta1 = static_cast<T>(1.0 - h.beta1);
  c.beta2 = static_cast<T>(h.beta2);
  c.one_minus_beta2 = static_cast<T>(1.0 - h.beta2);
  c.eps = static_cast<T>(h.eps);
  c.weight_decay = static_cast<T>(h.weight_decay);
  c.decay_factor = static_cast<T>(1.0 - h.lr * h.weight_decay);
  c.bias_correction1 = static_cast<T>(1.0 - std::pow(h.beta1, t));
  c.bias_correction2 = static_cast<T>(1.0 - std::pow(h.beta2, t));
  c.decoupled_weight_decay = h.decoupled_weight_decay;
  return c;
}

/// Updates one parameter element and its two moment estimates in place.
template <typename T>
SG_HD void adam_update(T& param, T grad, T& exp_avg, T& exp_avg_sq, const AdamCoefficients<T>& c) {
  using std::sqrt;
  T g = grad;
  if (c.weight_decay != T(0)) {
    if (c.decoupled_weight_decay) {
      param *= c.decay_factor;
    } else {
      g = fmadd(c.weight_decay, param, g);
    }
  }
  exp_avg = fmadd(c.beta1, exp_avg, c.one_minus_beta1 * g);
  exp_avg_sq = fmadd(c.beta2, exp_avg_sq, (c.one_minus_beta2 * g) * g);
  const T m_hat = exp_avg / c.bias_correction1;
  const T v_hat = exp_avg_sq / c.bias_correction2;
  param -= (c.lr * m_hat) / (sqrt(v_hat) + c.eps);
}

}  // namespace sg::detail
