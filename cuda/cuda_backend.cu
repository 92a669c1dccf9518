// The CUDA backend of one device: grid-stride maps for the elementwise ops (the math of
// ops/functors.h), own kernels for sums, transposes, structure ops, random numbers and the
// fused optimizer steps, cuBLAS for Dense·Dense, the structured GEMM for everything else.
// All work goes to the device's library stream; only transfers to the host synchronise.
#include "cuda/cuda_backend.h"


#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <type_traits>

#include "core/capture.h"
#include <structgrad/core/storage.h>
#include "cuda/allocator.h"
#include "cuda/check.h"
#include "cuda/gemm/selection.h"
#include "cuda/kernel_util.cuh"
#include "cuda/runtime.h"
#include "cuda/structured_gemm.h"
#include "ops/functors.h"
#include "cuda/linalg_batched.cuh"
#include "ops/matrix_batch.h"
#include "ops/optim_math.h"

namespace sg::detail::cuda {

namespace {

constexpr int kTile = 32;         // transpose / symmetrize tile edge
constexpr int kTileRows = 8;      // a tile block is kTile × kTileRows threads
constexpr int kSumThreads = 256;  // block of the one-block-per-output sum
constexpr int kWarp = 32;

/// The largest grid.y and grid.z of a launch; the tiled matrix kernels' blocks walk what lies beyond.
constexpr int64_t kMaxGridYZ = 65535;

// ---- elementwise functors (the math lives in ops/functors.h) --------------------------

// Elementwise maps, each run by launch_for_each: one plain launch on the library stream.

template <typename T>
struct FillMap {
  T* out;
  T value;
  __device__ void operator()(int64_t i) const { out[i] = value; }
};

template <typename T>
struct UnaryMap {
  UnaryOp op;
  T alpha;
  const T* in;
  T* out;
  __device__ void operator()(int64_t i) const { out[i] = apply_unary<T>(op, in[i], alpha); }
};

template <typename T>
struct BinaryMap {
  BinaryOp op;
  T alpha;
  const T* a;
  const T* b;
  T* out;
  __device__ void operator()(int64_t i) const { out[i] = apply_binary<T>(op, a[i], b[i], alpha); }
};

/// Output element i of a broadcast reads a and b at the offsets the Broadcast gives it.
template <typename T>
struct BroadcastBinaryMap {
  BinaryOp op;
  T alpha;
  const T* a;
  const T* b;
  T* out;
  Broadcast bc;
  __device__ void operator()(int64_t i) const {
    int64_t ao = 0, bo = 0;
    broadcast_offsets(bc, i, ao, bo);
    out[i] = apply_binary<T>(op, a[ao], b[bo], alpha);
  }
};

template <typename From, typename To>
struct ConvertMap {
  const From* in;
  To* out;
  __device__ void operator()(int64_t i) const { out[i] = static_cast<To>(in[i]); }
};

// ---- sums -------------------------------------------------------------------------------
// x is viewed as [outer, reduce, inner] and summed over the middle. Everything adds in
// double in an order fixed by the shape alone (never by the GPU model or the grid size), so
// a sum is bitwise repeatable, without atomics. Two layouts:
//  * inner == 1 (rows): a block of 256 threads per row segment; thread t adds elements
//    t, t + 256, ... in order, then warps reduce by shuffles and warp 0 adds the warp sums.
//  * inner > 1 (columns): a thread per output column, adding rows in order; neighbouring
//    threads read neighbouring columns, so the loads are coalesced.
// When that leaves too few blocks or threads to fill the GPU (a full sum, a sum over a long
// dim 0), the reduced dimension is cut into chunks of a fixed length: pass 1 writes one
// double partial per (output, chunk) into a scratch block of the caching allocator, pass 2
// adds each output's partials with the row kernel.

constexpr int64_t kRowChunk = 8192;           // elements per block segment when splitting rows
constexpr int64_t kMinRowsForOnePass = 512;   // this many row blocks keep the GPU busy alone
constexpr int64_t kColumnChunk = 64;          // rows per thread when splitting columns
constexpr int64_t kMinColumnsForOnePass = 16384;

/// Sum of one warp's values (lane 0 holds the result), in a fixed order.
__device__ __forceinline__ double warp_sum(double value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  return value;
}

/// For every segment s = (row, chunk): out[s] = Σ_j x[row·row_length + chunk·chunk_length + j]
/// over the chunk's part of the row. One block (kSumThreads) per segment, block-strided.
template <typename In, typename Out>
__global__ void sum_row_segments_kernel(const In* x, Out* out, int64_t rows, int64_t row_length, int64_t chunks,
                                        int64_t chunk_length) {
  __shared__ double warp_sums[kSumThreads / kWarp];
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  const int64_t segments = rows * chunks;
  for (int64_t segment = blockIdx.x; segment < segments; segment += gridDim.x) {
    const int64_t row = segment / chunks, chunk = segment - row * chunks;
    const int64_t begin = chunk * chunk_length;
    const int64_t length = min(chunk_length, row_length - begin);
    const In* part = x + row * row_length + begin;
    double acc = 0.0;
    for (int64_t j = threadIdx.x; j < length; j += kSumThreads) acc += static_cast<double>(part[j]);
    acc = warp_sum(acc);
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < kSumThreads / kWarp ? warp_sums[lane] : 0.0;
      acc = warp_sum(acc);
      if (lane == 0) out[segment] = static_cast<Out>(acc);
    }
    __syncthreads();  // warp_sums is reused by the next segment
  }
}

/// For every (o, i, chunk): out[(o·inner + i)·chunks + chunk] = Σ_r x[(o·reduce + r)·inner + i]
/// over the chunk's rows r, in order. One thread each; i varies fastest across threads.
template <typename In, typename Out>
__global__ void sum_column_segments_kernel(const In* x, Out* out, int64_t outer, int64_t reduce, int64_t inner,
                                           int64_t chunks, int64_t chunk_length) {
  const int64_t segments = outer * inner * chunks;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t t = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < segments; t += stride) {
    const int64_t i = t % inner;
    const int64_t rest = t / inner;
    const int64_t chunk = rest % chunks, o = rest / chunks;
    const int64_t begin = chunk * chunk_length;
    const int64_t end = min(reduce, begin + chunk_length);
    const In* column = x + o * reduce * inner + i;
    double acc = 0.0;
    for (int64_t r = begin; r < end; ++r) acc += static_cast<double>(column[r * inner]);
    out[(o * inner + i) * chunks + chunk] = static_cast<Out>(acc);
  }
}

// ---- layout and structure kernels ------------------------------------------------------

/// out[c][r] = x[r][c] for each of `count` packed matrices, through a padded shared tile, so reads and
/// writes are both coalesced. Block (kTile, kTileRows); blockIdx.x walks column tiles, blockIdx.y row
/// tiles (strided), blockIdx.z the matrices (strided).
template <typename T>
__global__ void transpose_kernel(const T* x_batch, T* out_batch, int64_t rows, int64_t cols, int64_t count) {
  __shared__ T tile[kTile][kTile + 1];
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  const int64_t col0 = int64_t{blockIdx.x} * kTile;
  for (int64_t matrix = blockIdx.z; matrix < count; matrix += gridDim.z) {
    const T* x = x_batch + matrix * rows * cols;
    T* out = out_batch + matrix * rows * cols;
    for (int64_t tile_row = blockIdx.y; tile_row < row_tiles; tile_row += gridDim.y) {
      const int64_t row0 = tile_row * kTile;
      for (int dy = threadIdx.y; dy < kTile; dy += kTileRows) {
        const int64_t r = row0 + dy, c = col0 + threadIdx.x;
        if (r < rows && c < cols) tile[dy][threadIdx.x] = x[r * cols + c];
      }
      __syncthreads();
      for (int dy = threadIdx.y; dy < kTile; dy += kTileRows) {
        const int64_t out_row = col0 + dy, out_col = row0 + threadIdx.x;  // out is [cols, rows]
        if (out_row < cols && out_col < rows) out[out_row * rows + out_col] = tile[threadIdx.x][dy];
      }
      __syncthreads();
    }
  }
}

/// out = (x + xᵀ)/2 for each of `count` packed n×n matrices. Block (bi, bj) with bi <= bj owns the
/// tile pair at rows bi·32.., cols bj·32.. ("upper" tile) and its mirror ("lower" tile): it reads both
/// into shared memory before writing either, so out may alias x. Entry (p, q) and its mirror
/// (q, p) are both (x[lo][hi] + x[hi][lo]) · 0.5 with lo = min(p, q), hi = max(p, q), from the
/// same two shared values in the same order: the result is symmetric bit for bit. blockIdx.z walks
/// the matrices (strided).
template <typename T>
__global__ void symmetrize_kernel(const T* x_batch, T* out_batch, int64_t n, int64_t count) {
  const int64_t tile_i = blockIdx.y, tile_j = blockIdx.x;
  if (tile_i > tile_j) return;
  __shared__ T upper[kTile][kTile + 1];  // upper[a][b] = x[row0 + a][col0 + b]
  __shared__ T lower[kTile][kTile + 1];  // lower[a][b] = x[col0 + a][row0 + b]
  const int64_t row0 = tile_i * kTile, col0 = tile_j * kTile;
  const int tx = threadIdx.x;
  const bool diagonal_tile = tile_i == tile_j;
  for (int64_t matrix = blockIdx.z; matrix < count; matrix += gridDim.z) {
    const T* x = x_batch + matrix * n * n;
    T* out = out_batch + matrix * n * n;
    for (int dy = threadIdx.y; dy < kTile; dy += kTileRows) {
      if (row0 + dy < n && col0 + tx < n) upper[dy][tx] = x[(row0 + dy) * n + col0 + tx];
      if (col0 + dy < n && row0 + tx < n) lower[dy][tx] = x[(col0 + dy) * n + row0 + tx];
    }
    __syncthreads();
    for (int dy = threadIdx.y; dy < kTile; dy += kTileRows) {
      // Upper tile entry (row0 + dy, col0 + tx). Local indices of (lo, hi): lo is in the row
      // tile, hi in the column tile; on a diagonal tile they are the smaller and larger index.
      if (row0 + dy < n && col0 + tx < n) {
        const int lo = diagonal_tile ? min(dy, tx) : dy;
        const int hi = diagonal_tile ? max(dy, tx) : tx;
        out[(row0 + dy) * n + col0 + tx] = (upper[lo][hi] + lower[hi][lo]) * T(0.5);
      }
      // Lower tile entry (col0 + dy, row0 + tx): lo = row0 + tx, hi = col0 + dy.
      if (!diagonal_tile && col0 + dy < n && row0 + tx < n) {
        out[(col0 + dy) * n + row0 + tx] = (upper[tx][dy] + lower[dy][tx]) * T(0.5);
      }
    }
    if (matrix + gridDim.z < count) __syncthreads();  // the tiles are read before the next matrix's land
  }
}

/// Bit pattern of a value, for the bitwise symmetry check.
__device__ __forceinline__ unsigned long long bits_of(double v) {
  return static_cast<unsigned long long>(__double_as_longlong(v));
}
__device__ __forceinline__ unsigned long long bits_of(float v) { return __float_as_uint(v); }

/// triu (lower = false) keeps c − r >= diagonal; tril (lower = true) keeps c − r <= diagonal, in each
/// packed rows × cols matrix of a batch (`batched`: more than one, so a row index wraps at rows).
template <typename T>
struct TriangleMap {
  const T* x;
  T* out;
  int64_t rows, cols, diagonal;
  bool lower, batched;
  __device__ void operator()(int64_t i) const {
    const int64_t q = i / cols, c = i - q * cols;
    const int64_t r = batched ? q % rows : q;
    const bool keep = lower ? c - r <= diagonal : c - r >= diagonal;
    out[i] = keep ? x[i] : T(0);
  }
};

/// Element i of the diagonals of a batch of packed n × n matrices: matrix i / n, entry i mod n.
__device__ __forceinline__ int64_t diagonal_at(int64_t i, int64_t n) { return i / n * n * n + i % n * (n + 1); }

template <typename T>
struct DiagonalMap {
  const T* x;
  T* out;
  int64_t n;
  __device__ void operator()(int64_t i) const { out[i] = x[diagonal_at(i, n)]; }
};

template <typename T>
struct SetDiagonalMap {
  const T* d;
  T* out;
  int64_t n;
  __device__ void operator()(int64_t i) const { out[diagonal_at(i, n)] = d[i]; }
};

/// Records in *first_bad the smallest index of a batch of packed n × n matrices that breaks the
/// structure: a non-zero outside its stored part (MatrixPart bits), or a symmetric pair that differs.
template <typename T>
struct StructureViolationMap {
  const T* x;
  unsigned long long* first_bad;
  int64_t n;
  uint8_t stored;
  bool symmetric;
  __device__ void operator()(int64_t i) const {
    const int64_t e = i % (n * n), r = e / n, c = e % n;
    const uint8_t part = r > c ? kBelowDiagonal : r == c ? kOnDiagonal : kAboveDiagonal;
    bool bad = !(stored & part) && x[i] != T(0);
    if (symmetric && r < c) bad = bad || bits_of(x[i]) != bits_of(x[i - e + c * n + r]);
    if (bad) atomicMin(first_bad, static_cast<unsigned long long>(i));
  }
};

template <typename T>
struct RandomMap {
  T* out;
  uint64_t seed, offset;
  bool normal;
  __device__ void operator()(int64_t i) const {
    const uint64_t counter = offset + static_cast<uint64_t>(i);
    out[i] = static_cast<T>(normal ? random_normal(seed, counter) : random_uniform(seed, counter));
  }
};

// ---- optimizer kernels (the math lives in ops/optim_math.h) ----------------------------

template <typename T>
struct SgdMap {
  T* param;
  const T* grad;
  T* momentum_buf;  // nullptr without momentum
  SgdCoefficients<T> c;
  __device__ void operator()(int64_t i) const {
    T unused = T(0);
    T& buf = momentum_buf ? momentum_buf[i] : unused;
    param[i] = sgd_update<T>(param[i], grad[i], buf, c);
  }
};

template <typename T>
struct AdamMap {
  T* param;
  const T* grad;
  T* exp_avg;
  T* exp_avg_sq;
  AdamCoefficients<T> c;
  __device__ void operator()(int64_t i) const {
    T p = param[i], m = exp_avg[i], v = exp_avg_sq[i];
    adam_update<T>(p, grad[i], m, v, c);
    param[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
};

// ---- cuBLAS -------------------------------------------------------------------------------

int cublas_dim(const char* what, int64_t value) {
  SG_CHECK(value >= 0 && value <= INT_MAX, "cuda gemm: ", what, " = ", value, " exceeds cuBLAS's int range");
  return static_cast<int>(value);
}

/// Row-major C[m×n] = alpha·op(A)·op(B). cuBLAS is column-major: the row-major buffer of C is
/// the column-major Cᵀ [n×m], and Cᵀ = op(B)ᵀ·op(A)ᵀ. A row-major buffer read column-major is
/// its own transpose, so op(B)ᵀ is B's buffer with trans_b's flag unchanged (and so for A):
/// gemm(op_b, op_a, n, m, k, alpha, B, ldb, A, lda, beta, C, ldc), beta = 1 when accumulating.
template <typename T>
void dense_gemm(const GemmProblem& p, int device) {
  const int m = cublas_dim("m", p.m), n = cublas_dim("n", p.n), k = cublas_dim("k", p.k);
  const int lda = cublas_dim("lda", p.lda), ldb = cublas_dim("ldb", p.ldb), ldc = cublas_dim("ldc", p.ldc);
  const cublasOperation_t op_a = p.a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = p.b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const T alpha = static_cast<T>(p.alpha), beta = p.accumulate ? T(1) : T(0);
  const T* a = static_cast<const T*>(p.a_data);
  const T* b = static_cast<const T*>(p.b_data);
  T* c = static_cast<T*>(p.c_data);
  cublasHandle_t handle = cublas_handle(device);
  if constexpr (std::is_same_v<T, float>) {
    // The handle is this thread's own: its math mode follows the product's precision.
    SG_CUBLAS_CHECK(cublasSetMathMode(handle, p.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  }
  if (p.batch == 1) {
    if constexpr (std::is_same_v<T, float>)
      SG_CUBLAS_CHECK(cublasSgemm(handle, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
    else
      SG_CUBLAS_CHECK(cublasDgemm(handle, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
    return;
  }
  // A batch: cuBLAS's own L mode, stride 0 for an operand the batch shares.
  const int batch = cublas_dim("batch", p.batch);
  if constexpr (std::is_same_v<T, float>)
    SG_CUBLAS_CHECK(cublasSgemmStridedBatched(handle, op_b, op_a, n, m, k, &alpha, b, ldb, p.batch_stride_b, a, lda,
                                              p.batch_stride_a, &beta, c, ldc, p.batch_stride_c, batch));
  else
    SG_CUBLAS_CHECK(cublasDgemmStridedBatched(handle, op_b, op_a, n, m, k, &alpha, b, ldb, p.batch_stride_b, a, lda,
                                              p.batch_stride_a, &beta, c, ldc, p.batch_stride_c, batch));
}

}  // namespace

// ---- CudaBackend ------------------------------------------------------------------------

CudaBackend::CudaBackend(int device) : device_(device) {}

void CudaBackend::expect_on_device(const char* op, const Tensor& t) const {
  SG_CHECK(t.defined(), "cuda ", op, ": got an undefined tensor");
  SG_CHECK(t.device() == Device(DeviceType::CUDA, device_), "cuda ", op, ": expected a tensor on cuda:", device_,
           ", got one on ", t.device());
}

void CudaBackend::fill(Tensor& out, double value) {
  expect_on_device("fill", out);
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(device_);
  dispatch_any(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_for_each("fill", device_, n, FillMap<T>{data_of<T>(out), static_cast<T>(value)});
  });
}

void CudaBackend::copy(const Tensor& src, Tensor& dst) {
  expect_on_device("copy", src);
  expect_on_device("copy", dst);
  SG_CHECK(src.numel() == dst.numel(), "cuda copy: source has ", src.numel(), " elements, destination ",
           dst.numel());
  const int64_t n = src.numel();
  if (n == 0) return;
  DeviceGuard guard(device_);
  if (src.dtype() == dst.dtype()) {
    if (src.data_ptr() == dst.data_ptr()) return;
    SG_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.nbytes(), cudaMemcpyDeviceToDevice,
                                  stream(device_)));
    return;
  }
  dispatch_any(src.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    dispatch_any(dst.dtype(), [&](auto to_tag) {
      using To = decltype(to_tag);
      launch_for_each("copy", device_, n, ConvertMap<From, To>{data_of<From>(src), data_of<To>(dst)});
    });
  });
}

void CudaBackend::copy_from_host(const void* host, Tensor& dst) {
  expect_on_device("copy_from_host", dst);
  if (dst.nbytes() == 0) return;
  refuse_under_capture("copy to cuda", dst.device(),
                       "copies host memory, which every replay would read again; copy_ into a static input before "
                       "replay instead");
  DeviceGuard guard(device_);
  // From pageable memory the call returns once the bytes are staged, so `host` may be freed.
  SG_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), host, dst.nbytes(), cudaMemcpyHostToDevice, stream(device_)));
  count_transfer(device_, TransferDirection::HostToDevice, dst.nbytes());
}

void CudaBackend::copy_to_host(const Tensor& src, void* host) {
  expect_on_device("copy_to_host", src);
  if (src.nbytes() == 0) return;
  refuse_under_capture("copy to the host", src.device(), "waits for the device and reads its memory back");
  DeviceGuard guard(device_);
  const cudaStream_t s = stream(device_);
  SG_CUDA_CHECK(cudaMemcpyAsync(host, src.data_ptr(), src.nbytes(), cudaMemcpyDeviceToHost, s));
  count_transfer(device_, TransferDirection::DeviceToHost, src.nbytes());
  SG_CUDA_CHECK(cudaStreamSynchronize(s));
}

void CudaBackend::unary(UnaryOp op, const Tensor& x, Tensor& out, double alpha) {
  expect_on_device("unary", x);
  expect_on_device("unary", out);
  SG_CHECK(x.dtype() == out.dtype() && x.numel() == out.numel(), "cuda unary: input ", x.shape(), " ", x.dtype(),
           " does not match output ", out.shape(), " ", out.dtype());
  const int64_t n = x.numel();
  if (n == 0) return;
  DeviceGuard guard(device_);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_for_each("unary", device_, n, UnaryMap<T>{op, static_cast<T>(alpha), data_of<T>(x), data_of<T>(out)});
  });
}

void CudaBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, const Broadcast& bc,
                         double alpha) {
  expect_on_device("binary", a);
  expect_on_device("binary", b);
  expect_on_device("binary", out);
  SG_CHECK(a.dtype() == out.dtype() && b.dtype() == out.dtype(), "cuda binary: dtypes ", a.dtype(), ", ", b.dtype(),
           " and ", out.dtype(), " differ");
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(device_);
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pa = data_of<T>(a);
    const T* pb = data_of<T>(b);
    T* po = data_of<T>(out);
    if (bc.same) {
      SG_CHECK(a.numel() == n && b.numel() == n, "cuda binary: shapes ", a.shape(), " and ", b.shape(),
               " do not match the output ", out.shape());
      launch_for_each("binary", device_, n, BinaryMap<T>{op, static_cast<T>(alpha), pa, pb, po});
    } else {
      int64_t covered = 1;
      for (int d = 0; d < bc.dims; ++d) covered *= bc.size[d];
      SG_CHECK(covered == n, "cuda binary: the broadcast covers ", covered, " elements, the output ", out.shape());
      launch_for_each("binary", device_, n, BroadcastBinaryMap<T>{op, static_cast<T>(alpha), pa, pb, po, bc});
    }
  });
}

void CudaBackend::sum(const Tensor& x, Tensor& out, int64_t outer, int64_t reduce, int64_t inner) {
  expect_on_device("sum", x);
  expect_on_device("sum", out);
  SG_CHECK(x.dtype() == out.dtype(), "cuda sum: dtypes ", x.dtype(), " and ", out.dtype(), " differ");
  SG_CHECK(outer >= 0 && reduce >= 0 && inner >= 0 && outer * reduce * inner == x.numel() &&
               outer * inner == out.numel(),
           "cuda sum: [", outer, ", ", reduce, ", ", inner, "] does not match input ", x.shape(), " and output ",
           out.shape());
  const int64_t outputs = outer * inner;
  if (outputs == 0) return;
  DeviceGuard guard(device_);
  const cudaStream_t s = stream(device_);
  const int64_t block_cap = int64_t{sm_count(device_)} * 16;
  auto row_blocks = [&](int64_t segments) {
    return static_cast<unsigned int>(std::max<int64_t>(1, std::min(segments, block_cap)));
  };
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = data_of<T>(x);
    T* result = data_of<T>(out);
    // Rows longer than a warp take a block each; shorter rows and inner > 1 a thread each.
    const bool rows_layout = inner == 1 && reduce > kWarp;
    const int64_t chunk_length = rows_layout ? kRowChunk : kColumnChunk;
    const int64_t chunks = (reduce + chunk_length - 1) / chunk_length;
    const bool one_pass = chunks <= 1 || (rows_layout ? outer >= kMinRowsForOnePass : outputs >= kMinColumnsForOnePass);
    if (one_pass) {
      if (rows_layout) {
        sum_row_segments_kernel<T, T><<<row_blocks(outer), kSumThreads, 0, s>>>(in, result, outer, reduce, 1, reduce);
        SG_CUDA_CHECK_LAUNCH("sum_row_segments_kernel");
      } else {
        sum_column_segments_kernel<T, T><<<grid_for(device_, outputs), kThreads, 0, s>>>(in, result, outer, reduce,
                                                                                         inner, 1, reduce);
        SG_CUDA_CHECK_LAUNCH("sum_column_segments_kernel");
      }
      return;
    }
    // Pass 1: partials[output][chunk]; pass 2: each output's partials, added by the row kernel.
    Storage scratch(static_cast<size_t>(outputs * chunks) * sizeof(double), Device(DeviceType::CUDA, device_));
    double* partials = static_cast<double*>(scratch.data);
    if (rows_layout) {
      sum_row_segments_kernel<T, double><<<row_blocks(outer * chunks), kSumThreads, 0, s>>>(in, partials, outer, reduce,
                                                                                          chunks, chunk_length);
      SG_CUDA_CHECK_LAUNCH("sum_row_segments_kernel");
    } else {
      sum_column_segments_kernel<T, double><<<grid_for(device_, outputs * chunks), kThreads, 0, s>>>(
          in, partials, outer, reduce, inner, chunks, chunk_length);
      SG_CUDA_CHECK_LAUNCH("sum_column_segments_kernel");
    }
    sum_row_segments_kernel<double, T><<<row_blocks(outputs), kSumThreads, 0, s>>>(partials, result, outputs, chunks,
                                                                                  1, chunks);
    SG_CUDA_CHECK_LAUNCH("sum_row_segments_kernel");
    // `scratch` goes back to the cache here; reuse is stream-ordered (cuda/allocator.cpp).
  });
}

void CudaBackend::transpose(const Tensor& x, Tensor& out) {
  expect_on_device("transpose", x);
  expect_on_device("transpose", out);
  const MatrixBatch v = matrix_batch("cuda transpose", nullptr, x);
  const int64_t rows = v.rows, cols = v.cols;
  SG_CHECK(out.numel() == x.numel() && out.dtype() == x.dtype(), "cuda transpose: output ", out.shape(), " ",
           out.dtype(), " does not fit input ", x.shape(), " ", x.dtype());
  SG_CHECK(out.data_ptr() != x.data_ptr(), "cuda transpose: output must not alias the input");
  if (x.numel() == 0) return;
  const int64_t col_tiles = (cols + kTile - 1) / kTile, row_tiles = (rows + kTile - 1) / kTile;
  SG_CHECK(col_tiles <= INT_MAX, "cuda transpose: ", cols, " columns are too many");
  DeviceGuard guard(device_);
  const dim3 grid(static_cast<unsigned int>(col_tiles), static_cast<unsigned int>(std::min(row_tiles, kMaxGridYZ)),
                  static_cast<unsigned int>(std::min(v.count(), kMaxGridYZ)));
  const dim3 block(kTile, kTileRows);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    transpose_kernel<T><<<grid, block, 0, stream(device_)>>>(data_of<T>(x), data_of<T>(out), rows, cols, v.count());
    SG_CUDA_CHECK_LAUNCH("transpose_kernel");
  });
}

void CudaBackend::triangle(const char* op, const Tensor& x, Tensor& out, int64_t diagonal, bool lower) {
  expect_on_device(op, x);
  expect_on_device(op, out);
  const MatrixBatch v = matrix_batch(lower ? "cuda tril" : "cuda triu", nullptr, x);
  SG_CHECK(out.shape() == x.shape() && out.dtype() == x.dtype(), "cuda ", op, ": output ", out.shape(),
           " does not match input ", x.shape());
  DeviceGuard guard(device_);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_for_each(op, device_, x.numel(),
                    TriangleMap<T>{data_of<T>(x), data_of<T>(out), v.rows, v.cols, diagonal, lower, v.count() > 1});
  });
}

void CudaBackend::triu(const Tensor& x, Tensor& out, int64_t diagonal) { triangle("triu", x, out, diagonal, false); }

void CudaBackend::tril(const Tensor& x, Tensor& out, int64_t diagonal) { triangle("tril", x, out, diagonal, true); }

void CudaBackend::symmetrize(const Tensor& x, Tensor& out) {
  expect_on_device("symmetrize", x);
  expect_on_device("symmetrize", out);
  const MatrixBatch v = square_batch("cuda symmetrize", nullptr, x);
  SG_CHECK(out.shape() == x.shape() && out.dtype() == x.dtype(), "cuda symmetrize: output ", out.shape(),
           " does not match input ", x.shape());
  const int64_t n = v.rows;
  if (x.numel() == 0) return;
  const int64_t tiles = (n + kTile - 1) / kTile;
  SG_CHECK(tiles <= 65535, "cuda symmetrize: n = ", n, " is too large");
  DeviceGuard guard(device_);
  const dim3 grid(static_cast<unsigned int>(tiles), static_cast<unsigned int>(tiles),
                  static_cast<unsigned int>(std::min(v.count(), kMaxGridYZ)));
  const dim3 block(kTile, kTileRows);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    symmetrize_kernel<T><<<grid, block, 0, stream(device_)>>>(data_of<T>(x), data_of<T>(out), n, v.count());
    SG_CUDA_CHECK_LAUNCH("symmetrize_kernel");
  });
}

void CudaBackend::diagonal(const Tensor& x, Tensor& out) {
  expect_on_device("diagonal", x);
  expect_on_device("diagonal", out);
  const MatrixBatch v = square_batch("cuda diagonal", nullptr, x);
  SG_CHECK(out.numel() == v.count() * v.rows && out.dtype() == x.dtype(), "cuda diagonal: output ", out.shape(),
           " does not fit the diagonals of ", x.shape());
  DeviceGuard guard(device_);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_for_each("diagonal", device_, out.numel(), DiagonalMap<T>{data_of<T>(x), data_of<T>(out), v.rows});
  });
}

void CudaBackend::set_diagonal(const Tensor& x, const Tensor& d, Tensor& out) {
  expect_on_device("set_diagonal", x);
  expect_on_device("set_diagonal", d);
  expect_on_device("set_diagonal", out);
  const MatrixBatch v = square_batch("cuda set_diagonal", nullptr, x);
  SG_CHECK(out.shape() == x.shape() && out.dtype() == x.dtype() && d.dtype() == x.dtype(),
           "cuda set_diagonal: output ", out.shape(), " does not match input ", x.shape());
  SG_CHECK(d.numel() == v.count() * v.rows, "cuda set_diagonal: diagonals of ", d.numel(),
           " elements do not fit matrices of shape ", x.shape());
  if (x.numel() == 0) return;
  copy(x, out);  // same stream: the diagonal writes below are ordered after it
  DeviceGuard guard(device_);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_for_each("set_diagonal", device_, d.numel(), SetDiagonalMap<T>{data_of<T>(d), data_of<T>(out), v.rows});
  });
}

int64_t CudaBackend::find_structure_violation(const Tensor& x, Structure s) {
  expect_on_device("find_structure_violation", x);
  if (s == Structure::Dense || x.numel() == 0) return -1;
  const MatrixBatch v = square_batch("cuda find_structure_violation", nullptr, x);
  DeviceGuard guard(device_);
  const cudaStream_t st = stream(device_);
  Storage first_bad(sizeof(unsigned long long), Device(DeviceType::CUDA, device_));
  auto* first_bad_ptr = static_cast<unsigned long long*>(first_bad.data);
  SG_CUDA_CHECK(cudaMemsetAsync(first_bad_ptr, 0xFF, sizeof(unsigned long long), st));  // "none found"
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_for_each("find_structure_violation", device_, x.numel(),
                    StructureViolationMap<T>{data_of<T>(x), first_bad_ptr, v.rows, traits(s).stored, traits(s).symmetric});
  });
  unsigned long long result = 0;
  SG_CUDA_CHECK(cudaMemcpyAsync(&result, first_bad_ptr, sizeof(result), cudaMemcpyDeviceToHost, st));
  count_transfer(device_, TransferDirection::DeviceToHost, sizeof(result));
  SG_CUDA_CHECK(cudaStreamSynchronize(st));
  return result == ~0ull ? -1 : static_cast<int64_t>(result);
}

void CudaBackend::random(Tensor& out, RandomKind kind, uint64_t seed, uint64_t offset) {
  expect_on_device("random", out);
  DeviceGuard guard(device_);
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_for_each("random", device_, out.numel(),
                    RandomMap<T>{data_of<T>(out), seed, offset, kind == RandomKind::Normal});
  });
}

namespace {
/// The product as the choice between cuBLAS and the structured GEMM sees it: in float64 a Symmetric
/// operand whose mirror is stored is the Dense matrix it is, since DGEMM runs a whole product faster
/// than the structured GEMM's float64 loops (docs/structured_gemm.md).
GemmProblem as_stored(const GemmProblem& p, DType dtype) {
  return dtype == DType::Float64 ? with_stored_mirrors_as_dense(p, false) : p;
}

/// Dense·Dense with a Full mask goes to cuBLAS; every other product to the structured GEMM.
bool dense_product(const GemmProblem& p) {
  return p.a.structure == Structure::Dense && p.b.structure == Structure::Dense && p.mask == Structure::Dense;
}
}  // namespace

bool CudaBackend::gemm(const GemmProblem& problem, DType dtype) {
  SG_CHECK(problem.m >= 0 && problem.n >= 0 && problem.k >= 0 && problem.batch >= 0, "cuda gemm: negative size m = ",
           problem.m, ", n = ", problem.n, ", k = ", problem.k, ", batch = ", problem.batch);
  SG_CHECK(problem.batch <= 1 || problem.batch_stride_c != 0,
           "cuda gemm: the products of a batch write one C each, got C's stride 0");
  if (problem.m == 0 || problem.n == 0 || problem.batch == 0) return false;
  DeviceGuard guard(device_);
  const GemmProblem p = as_stored(problem, dtype);
  const size_t element = element_size(dtype);
  if (!dense_product(p)) {
    if (problem.batch == 1) return launch_structured_gemm(problem, dtype, device_);
    SG_CHECK(problem.at == nullptr, "cuda gemm: op(A)ᵀ is written for one product at a time, not for a batch");
    // A structured batch: small products on one fused launch, larger ones one launch per product,
    // each on the plan of its shape.
    if (batched::gemm(problem, dtype, device_)) return false;
    for (int64_t i = 0; i < problem.batch; ++i) launch_structured_gemm(batch_item(problem, i, element), dtype, device_);
    return false;
  }
  if (p.k == 0) {  // an empty sum: C = 0 (all-zero bytes are 0.0 in float and double), or C unchanged
    if (p.accumulate) return false;
    for (int64_t i = 0; i < p.batch; ++i)
      SG_CUDA_CHECK(cudaMemset2DAsync(batch_item(p, i, element).c_data, static_cast<size_t>(p.ldc) * element, 0,
                                      static_cast<size_t>(p.n) * element, static_cast<size_t>(p.m), stream(device_)));
    return false;
  }
  if (dtype == DType::Float32) {
    dense_gemm<float>(p, device_);
  } else {
    dense_gemm<double>(p, device_);
  }
  return false;
}

bool CudaBackend::writes_transposed_a(const GemmProblem& p, DType dtype) {
  return p.batch == 1 && !dense_product(as_stored(p, dtype)) && p.k > 0 &&
         ::sg::detail::cuda::writes_transposed_a(p, dtype, device_);
}

void CudaBackend::sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& h) {
  expect_on_device("sgd_step", param);
  expect_on_device("sgd_step", grad);
  SG_CHECK(grad.numel() == param.numel() && grad.dtype() == param.dtype(), "cuda sgd_step: gradient ", grad.shape(),
           " ", grad.dtype(), " does not match parameter ", param.shape(), " ", param.dtype());
  const bool use_momentum = h.momentum != 0.0;
  if (use_momentum) {
    expect_on_device("sgd_step", momentum_buf);
    SG_CHECK(momentum_buf.numel() == param.numel() && momentum_buf.dtype() == param.dtype(),
             "cuda sgd_step: momentum buffer ", momentum_buf.shape(), " does not match parameter ", param.shape());
  }
  DeviceGuard guard(device_);
  dispatch_dtype(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const SgdMap<T> map{data_of<T>(param), data_of<T>(grad), use_momentum ? data_of<T>(momentum_buf) : nullptr,
                        sgd_coefficients<T>(h)};
    launch_for_each("sgd_step", device_, param.numel(), map);
  });
}

void CudaBackend::adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                            const AdamParams& h) {
  const Tensor* const operands[] = {&param, &grad, &exp_avg, &exp_avg_sq};
  for (const Tensor* t : operands) {
    expect_on_device("adam_step", *t);
    SG_CHECK(t->numel() == param.numel() && t->dtype() == param.dtype(), "cuda adam_step: tensor ", t->shape(), " ",
             t->dtype(), " does not match parameter ", param.shape(), " ", param.dtype());
  }
  SG_CHECK(h.step >= 1, "cuda adam_step: step must be 1-based, got ", h.step);
  DeviceGuard guard(device_);
  dispatch_dtype(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const AdamMap<T> map{data_of<T>(param), data_of<T>(grad), data_of<T>(exp_avg), data_of<T>(exp_avg_sq),
                         adam_coefficients<T>(h)};
    launch_for_each("adam_step", device_, param.numel(), map);
  });
}

}  // namespace sg::detail::cuda

namespace sg::detail {

Backend& cuda_backend(int device) {
  cuda::check_device(device);
  struct Slot {
    std::once_flag created;
    cuda::CudaBackend* backend = nullptr;  // leaked on purpose: used until process exit
  };
  static auto* slots = new std::array<Slot, cuda::kMaxDevices>();
  Slot& slot = (*slots)[static_cast<size_t>(device)];
  std::call_once(slot.created, [&] { slot.backend = new cuda::CudaBackend(device); });
  return *slot.backend;
}

}  // namespace sg::detail
