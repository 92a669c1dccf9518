// The CUDA backend's comparisons, arg reductions, gathers and scatters (the kernels of indexing,
// cat, max/argmax) and its random integers and permutations. The math is ops/functors.h's, shared
// with the CPU backend, so both devices give the same masks, indices and random numbers.
#include <cub/device/device_radix_sort.cuh>

#include <climits>
#include <cstdint>

#include <structgrad/core/storage.h>
#include "cuda/cuda_backend.h"
#include "cuda/kernel_util.cuh"
#include "ops/functors.h"

namespace sg::detail::cuda {

namespace {

template <typename In, typename Out>
struct CompareMap {
  CompareOp op;
  const In* a;
  const In* b;
  Out* out;
  Broadcast bc;
  __device__ void operator()(int64_t i) const {
    int64_t ao = i, bo = i;
    if (!bc.same) broadcast_offsets(bc, i, ao, bo);
    out[i] = apply_compare<In>(op, a[ao], b[bo]) ? Out(1) : Out(0);
  }
};

/// One thread per output (o, i): a walk down the reduced dimension, first best index kept.
template <typename T>
struct ArgReduceMap {
  ArgReduce kind;
  const T* x;
  T* values;  // nullptr: indices only
  int64_t* indices;
  int64_t reduce, inner;
  __device__ void operator()(int64_t t) const {
    const int64_t o = t / inner, i = t - o * inner;
    const T* column = x + o * reduce * inner + i;
    int64_t best = 0;
    T best_value = column[0];
    for (int64_t r = 1; r < reduce; ++r) {
      const T v = column[r * inner];
      if (arg_better<T>(kind, v, best_value)) {
        best = r;
        best_value = v;
      }
    }
    indices[t] = best;
    if (values) values[t] = best_value;
  }
};

/// Compact element t = (o, j, i) and its wide-side offset.
struct IndexedOffsets {
  IndexMap m;
  const int64_t* index;
  __device__ void at(int64_t t, int64_t& wide) const {
    const int64_t i = t % m.inner, rest = t / m.inner;
    const int64_t j = rest % m.count, o = rest / m.count;
    wide = (o * m.extent + index_position(m, index, o, j, i)) * m.inner + i;
  }
};

template <typename T>
struct GatherMap {
  IndexedOffsets where;
  const T* x;
  T* out;
  __device__ void operator()(int64_t t) const {
    int64_t wide = 0;
    where.at(t, wide);
    out[t] = x[wide];
  }
};

__device__ __forceinline__ void add_atomically(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void add_atomically(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void add_atomically(int64_t* p, int64_t v) {
  // Two's complement: an unsigned add is the signed add.
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

template <typename T>
struct ScatterMap {
  IndexedOffsets where;
  const T* src;
  T* out;
  bool accumulate;
  __device__ void operator()(int64_t t) const {
    int64_t wide = 0;
    where.at(t, wide);
    if (accumulate) add_atomically(out + wide, src[t]);
    else out[wide] = src[t];
  }
};

struct BadIndexMap {
  const int64_t* index;
  int64_t extent;
  unsigned long long* first_bad;
  __device__ void operator()(int64_t i) const {
    if (index[i] < 0 || index[i] >= extent) atomicMin(first_bad, static_cast<unsigned long long>(i));
  }
};

struct RandomIntegerMap {
  int64_t* out;
  int64_t low;
  uint64_t span, seed, offset;
  __device__ void operator()(int64_t i) const {
    out[i] = low + static_cast<int64_t>(random_below(seed, offset + static_cast<uint64_t>(i), span));
  }
};

struct PermutationKeyMap {
  uint64_t* keys;
  int64_t* positions;
  uint64_t seed, offset;
  __device__ void operator()(int64_t i) const {
    keys[i] = random_key(seed, offset + static_cast<uint64_t>(i));
    positions[i] = i;
  }
};

}  // namespace

void CudaBackend::expect_index(const char* op, const Tensor& index) const {
  expect_on_device(op, index);
  SG_CHECK(index.dtype() == DType::Int64, "cuda ", op, ": expected an int64 index, got ", index.dtype());
}

void CudaBackend::compare(CompareOp op, const Tensor& a, const Tensor& b, Tensor& out, const Broadcast& bc) {
  expect_on_device("compare", a);
  expect_on_device("compare", b);
  expect_on_device("compare", out);
  SG_CHECK(a.dtype() == b.dtype(), "cuda compare: dtypes ", a.dtype(), " and ", b.dtype(), " differ");
  DeviceGuard guard(device_);
  dispatch_any(a.dtype(), [&](auto in_tag) {
    using In = decltype(in_tag);
    dispatch_dtype(out.dtype(), [&](auto out_tag) {
      using Out = decltype(out_tag);
      launch_for_each("compare", device_, out.numel(),
                      CompareMap<In, Out>{op, data_of<In>(a), data_of<In>(b), data_of<Out>(out), bc});
    });
  });
}

void CudaBackend::arg_reduce(ArgReduce kind, const Tensor& x, Tensor& values, Tensor& indices, int64_t outer,
                             int64_t reduce, int64_t inner) {
  expect_on_device("arg_reduce", x);
  expect_index("arg_reduce", indices);
  SG_CHECK(reduce >= 1 && outer * reduce * inner == x.numel() && indices.numel() == outer * inner,
           "cuda arg_reduce: [", outer, ", ", reduce, ", ", inner, "] does not match input ", x.shape(),
           " and indices ", indices.shape());
  if (values.defined()) {
    expect_on_device("arg_reduce", values);
    SG_CHECK(values.dtype() == x.dtype() && values.numel() == indices.numel(), "cuda arg_reduce: values ",
             values.shape(), " ", values.dtype(), " do not fit indices ", indices.shape());
  }
  DeviceGuard guard(device_);
  dispatch_any(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_for_each("arg_reduce", device_, outer * inner,
                    ArgReduceMap<T>{kind, data_of<T>(x), values.defined() ? data_of<T>(values) : nullptr,
                                    data_of<int64_t>(indices), reduce, inner});
  });
}

void CudaBackend::expect_index_map(const char* op, const Tensor& wide, const Tensor& compact, const IndexMap& m) const {
  expect_on_device(op, wide);
  expect_on_device(op, compact);
  if (m.index) expect_index(op, *m.index);
  SG_CHECK(wide.dtype() == compact.dtype() && wide.numel() == m.outer * m.extent * m.inner &&
               compact.numel() == m.outer * m.count * m.inner,
           "cuda ", op, ": [", m.outer, ", ", m.extent, " ↔ ", m.count, ", ", m.inner, "] does not match ",
           wide.shape(), " ", wide.dtype(), " and ", compact.shape(), " ", compact.dtype());
}

void CudaBackend::gather(const Tensor& x, Tensor& out, const IndexMap& m) {
  expect_index_map("gather", x, out, m);
  DeviceGuard guard(device_);
  const IndexedOffsets where{m, m.index ? data_of<int64_t>(*m.index) : nullptr};
  dispatch_any(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_for_each("gather", device_, out.numel(), GatherMap<T>{where, data_of<T>(x), data_of<T>(out)});
  });
}

void CudaBackend::scatter(const Tensor& src, Tensor& out, const IndexMap& m, bool accumulate) {
  expect_index_map("scatter", out, src, m);
  DeviceGuard guard(device_);
  const IndexedOffsets where{m, m.index ? data_of<int64_t>(*m.index) : nullptr};
  dispatch_any(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_for_each("scatter", device_, src.numel(),
                    ScatterMap<T>{where, data_of<T>(src), data_of<T>(out), accumulate});
  });
}

int64_t CudaBackend::find_bad_index(const Tensor& index, int64_t extent) {
  expect_index("find_bad_index", index);
  if (index.numel() == 0) return -1;
  DeviceGuard guard(device_);
  const cudaStream_t st = stream(device_);
  Storage first_bad(sizeof(unsigned long long), Device(DeviceType::CUDA, device_));
  auto* first_bad_ptr = static_cast<unsigned long long*>(first_bad.data);
  SG_CUDA_CHECK(cudaMemsetAsync(first_bad_ptr, 0xFF, sizeof(unsigned long long), st));  // "none found"
  launch_for_each("find_bad_index", device_, index.numel(), BadIndexMap{data_of<int64_t>(index), extent, first_bad_ptr});
  unsigned long long result = 0;
  SG_CUDA_CHECK(cudaMemcpyAsync(&result, first_bad_ptr, sizeof(result), cudaMemcpyDeviceToHost, st));
  count_transfer(device_, TransferDirection::DeviceToHost, sizeof(result));
  SG_CUDA_CHECK(cudaStreamSynchronize(st));
  return result == ~0ull ? -1 : static_cast<int64_t>(result);
}

void CudaBackend::random_integers(Tensor& out, int64_t low, uint64_t span, uint64_t seed, uint64_t offset) {
  expect_index("random_integers", out);
  DeviceGuard guard(device_);
  launch_for_each("random_integers", device_, out.numel(),
                  RandomIntegerMap{data_of<int64_t>(out), low, span, seed, offset});
}

void CudaBackend::random_permutation(Tensor& out, uint64_t seed, uint64_t offset) {
  expect_index("random_permutation", out);
  const int64_t n = out.numel();
  if (n == 0) return;
  SG_CHECK(n <= INT_MAX, "cuda random_permutation: n = ", n, " exceeds the sort's int range");
  DeviceGuard guard(device_);
  const cudaStream_t st = stream(device_);
  const Device device(DeviceType::CUDA, device_);
  const size_t count = static_cast<size_t>(n);
  // Keys and positions, then one stable radix sort by key into `out`; the scratch comes from the
  // caching allocator and goes back to it in stream order.
  Storage keys_in(count * sizeof(uint64_t), device), keys_out(count * sizeof(uint64_t), device);
  Storage positions(count * sizeof(int64_t), device);
  auto* keys = static_cast<uint64_t*>(keys_in.data);
  auto* sorted_keys = static_cast<uint64_t*>(keys_out.data);
  auto* unsorted = static_cast<int64_t*>(positions.data);
  launch_for_each("random_permutation", device_, n, PermutationKeyMap{keys, unsorted, seed, offset});
  size_t scratch_bytes = 0;
  SG_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, scratch_bytes, keys, sorted_keys, unsorted,
                                                data_of<int64_t>(out), static_cast<int>(n), 0, 64, st));
  Storage scratch(std::max<size_t>(scratch_bytes, 1), device);
  SG_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(scratch.data, scratch_bytes, keys, sorted_keys, unsorted,
                                                data_of<int64_t>(out), static_cast<int>(n), 0, 64, st));
}

}  // namespace sg::detail::cuda
