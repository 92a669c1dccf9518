// The elementwise math of every unary and binary op and the counter-based random number
// generator, written once for host and device: ops/cpu/ and cuda/ both apply these
// functions, so CPU and CUDA compute the same formula (and the same random numbers).
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/backend.h"

#if defined(__CUDACC__)
#define SG_HD __host__ __device__ __forceinline__
#else
#define SG_HD inline
#endif

namespace sg::detail {

template <typename T>
SG_HD T sigmoid_of(T x) {
  // Stable for large |x|.
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

template <typename T>
SG_HD T apply_unary(UnaryOp op, T x, T alpha) {
  using std::abs; using std::exp; using std::log; using std::log1p; using std::pow;
  using std::sqrt; using std::tanh;
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return exp(x);
    case UnaryOp::Log: return log(x);
    case UnaryOp::Sqrt: return sqrt(x);
    case UnaryOp::Square: return x * x;
    case UnaryOp::Abs: return abs(x);
    case UnaryOp::Tanh: return tanh(x);
    case UnaryOp::Sigmoid: return sigmoid_of(x);
    case UnaryOp::Relu: return x > T(0) || x != x ? x : T(0);  // NaN propagates
    case UnaryOp::LeakyRelu: return x > T(0) ? x : alpha * x;
    case UnaryOp::Softplus: return (x > T(0) ? x : T(0)) + log1p(exp(-abs(x)));
    case UnaryOp::Step: return x > T(0) ? T(1) : (x != x ? x : T(0));
    case UnaryOp::Sign: return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
    case UnaryOp::AddScalar: return x + alpha;
    case UnaryOp::MulScalar: return x * alpha;
    case UnaryOp::DivScalar: return x / alpha;
    case UnaryOp::RSubScalar: return alpha - x;
    case UnaryOp::RDivScalar: return alpha / x;
    case UnaryOp::PowScalar: return pow(x, alpha);
    case UnaryOp::RPowScalar: return pow(alpha, x);
    case UnaryOp::ClampMin: return x < alpha ? alpha : x;
    case UnaryOp::ClampMax: return x > alpha ? alpha : x;
    case UnaryOp::FiniteOrZero: return std::isinf(x) ? T(0) : x;
  }
  return x;
}

template <typename T>
SG_HD T apply_binary(BinaryOp op, T a, T b, T alpha) {
  using std::pow;
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::AddScaled: return a + alpha * b;
    case BinaryOp::ReluGrad: return b > T(0) ? a : T(0);
    case BinaryOp::LeakyReluGrad: return b > T(0) ? a : alpha * a;
    case BinaryOp::TanhGrad: return a * (T(1) - b * b);
    case BinaryOp::SigmoidGrad: return a * b * (T(1) - b);
    case BinaryOp::SqrtGrad: return a / (T(2) * b);
    case BinaryOp::AbsGrad: return b > T(0) ? a : (b < T(0) ? -a : T(0));
    case BinaryOp::SoftplusGrad: return a * sigmoid_of(b);
    case BinaryOp::PowGrad: return a * alpha * pow(b, alpha - T(1));
    case BinaryOp::SquareGrad: return a * T(2) * b;
    case BinaryOp::SquaredDiff: { const T d = a - b; return d * d; }
    case BinaryOp::First: return a;
    case BinaryOp::Maximum: return a != a ? a : (b != b ? b : (a < b ? b : a));
    case BinaryOp::Minimum: return a != a ? a : (b != b ? b : (b < a ? b : a));
    case BinaryOp::KeepWhere: return b != T(0) ? a : T(0);
    case BinaryOp::KeepWhereNot: return b == T(0) ? a : T(0);
    case BinaryOp::ClampMinGrad: return b >= alpha ? a : T(0);
    case BinaryOp::ClampMaxGrad: return b <= alpha ? a : T(0);
  }
  return a;
}

template <typename T>
SG_HD bool apply_compare(CompareOp op, T a, T b) {
  switch (op) {
    case CompareOp::Eq: return a == b;
    case CompareOp::Ne: return a != b;
    case CompareOp::Lt: return a < b;
    case CompareOp::Le: return a <= b;
    case CompareOp::Gt: return a > b;
    case CompareOp::Ge: return a >= b;
  }
  return false;
}

/// Whether v replaces `best` in an arg_reduce: strictly better, or a NaN over a number.
template <typename T>
SG_HD bool arg_better(ArgReduce kind, T v, T best) {
  if (v != v) return best == best;
  return kind == ArgReduce::Max ? v > best : v < best;
}

/// Offsets into a and b of output element `i` of a broadcast (see Broadcast).
SG_HD void broadcast_offsets(const Broadcast& bc, int64_t i, int64_t& a_offset, int64_t& b_offset) {
  a_offset = 0;
  b_offset = 0;
  for (int d = bc.dims - 1; d >= 0; --d) {
    const int64_t size = bc.size[d];
    const int64_t q = i / size;
    const int64_t r = i - q * size;
    a_offset += r * bc.a_stride[d];
    b_offset += r * bc.b_stride[d];
    i = q;
  }
}

/// The wide-side position of compact element (o, j, i) of an IndexMap, given its index data.
SG_HD int64_t index_position(const IndexMap& m, const int64_t* index, int64_t o, int64_t j, int64_t i) {
  if (!index) return m.start + j * m.step;
  return m.per_element ? index[(o * m.count + j) * m.inner + i] : index[j];
}

// ---- counter-based random numbers ------------------------------------------------------
// Element i of a draw uses the counter (offset + i) under the seed; a 64-bit mix of
// (seed, counter) gives the bits. Normal numbers use Box–Muller on two mixed words of the
// same counter. Computed in double on every device, then rounded to the tensor's dtype.

SG_HD uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Uniform in [0, 1) with 53 random bits.
SG_HD double random_uniform(uint64_t seed, uint64_t counter, uint64_t stream = 0) {
  const uint64_t bits = mix64(mix64(seed ^ (stream * 0xD1B54A32D192ED03ull)) + counter);
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

/// An integer uniform in [0, span) (span ≥ 1): the high word of bits · span, so that host and
/// device compute the same value.
SG_HD uint64_t random_below(uint64_t seed, uint64_t counter, uint64_t span) {
  const uint64_t bits = mix64(mix64(seed ^ (3 * 0xD1B54A32D192ED03ull)) + counter);
#if defined(__CUDA_ARCH__)
  return __umul64hi(bits, span);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * span) >> 64);
#endif
}

/// The sort key of position `counter` in a random permutation.
SG_HD uint64_t random_key(uint64_t seed, uint64_t counter) {
  return mix64(mix64(seed ^ (4 * 0xD1B54A32D192ED03ull)) + counter);
}

/// Standard normal.
SG_HD double random_normal(uint64_t seed, uint64_t counter) {
  const double u1 = 1.0 - random_uniform(seed, counter, 1);  // in (0, 1]
  const double u2 = random_uniform(seed, counter, 2);
  const double two_pi = 6.283185307179586476925286766559;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2);
}

}  // namespace sg::detail
