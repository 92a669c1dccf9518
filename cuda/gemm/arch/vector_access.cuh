// 16-byte vector accesses: global loads through the read-only path, shared loads and stores,
// as float4 (float) or double2 (double).
#pragma once

#include <cstdint>
#include <cstring>

namespace sg::detail::cuda {

template <typename T>
struct Vec16;

template <>
struct Vec16<float> {
  using type = float4;
};

template <>
struct Vec16<double> {
  using type = double2;
};

template <typename T, int N>
__device__ __forceinline__ void load_vec_global(const T* p, T (&out)[N]) {
  using V = typename Vec16<T>::type;
  static_assert(sizeof(V) == N * sizeof(T), "vector width");
  const V v = __ldg(reinterpret_cast<const V*>(p));
  memcpy(out, &v, sizeof(V));
}

template <typename T, int N>
__device__ __forceinline__ void store_vec_shared(T* p, const T (&in)[N]) {
  using V = typename Vec16<T>::type;
  V v;
  memcpy(&v, in, sizeof(V));
  *reinterpret_cast<V*>(p) = v;
}

// Four consecutive shared elements (one LDS.128 for float, two for double).
template <typename T>
__device__ __forceinline__ void load4_shared(const T* p, T* out) {
  using V = typename Vec16<T>::type;
  constexpr int kVec = 16 / sizeof(T);
#pragma unroll
  for (int q = 0; q < 4; q += kVec) {
    const V v = *reinterpret_cast<const V*>(p + q);
    memcpy(out + q, &v, sizeof(V));
  }
}

}  // namespace sg::detail::cuda
