// Encoding the Hopper kernels' TMA maps (tma_maps.h) through the driver entry point the CUDA
// runtime hands out, so the library needs no link against libcuda.
#include "cuda/gemm/tma_maps.h"

#include <cuda_runtime.h>

#include <structgrad/core/error.h>
#include "cuda/gemm/tile_shapes.h"

namespace sg::detail::cuda {

namespace {

using TensorMapEncoder = decltype(&cuTensorMapEncodeTiled);

/// The driver's cuTensorMapEncodeTiled; null where the driver does not offer it (then no product
/// takes TMA maps, and every tile goes through the register stagers).
TensorMapEncoder tensor_map_encoder() {
  static const TensorMapEncoder encoder = []() -> TensorMapEncoder {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();  // clear the (non-sticky) error it left
      return nullptr;
    }
    return reinterpret_cast<TensorMapEncoder>(fn);
  }();
  return encoder;
}

constexpr TileShape kWgmma = tile_shape(GemmTileConfig::Float32Tf32Wgmma);

}  // namespace

bool tensor_maps_available() { return tensor_map_encoder() != nullptr; }

void encode_tile_map(const OperandView<float>& v, int64_t k_extent, bool raw, CUtensorMap* map, uint32_t box_rows) {
  const cuuint64_t outer = static_cast<cuuint64_t>(v.extent), k = static_cast<cuuint64_t>(k_extent);
  const cuuint64_t dims[2] = {raw ? outer : k, raw ? k : outer};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(v.ld) * sizeof(float)};
  const cuuint32_t box[2] = {raw ? 32u : cuuint32_t{kWgmma.k_step}, raw ? 32u : box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result =
      tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float*>(v.data), dims, strides, box,
                           element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  SG_CHECK(result == CUDA_SUCCESS, "structured gemm: cuTensorMapEncodeTiled failed (CUresult ", static_cast<int>(result),
           ") for a ", v.extent, "x", k_extent, " operand with leading dimension ", v.ld);
}

void encode_tile_maps(const OperandView<float>& v, int64_t k_extent, uint32_t wanted, CUtensorMap* direct,
                      CUtensorMap* raw, uint32_t direct_rows) {
  if (wanted & 1u) encode_tile_map(v, k_extent, false, direct, direct_rows);
  if (wanted & 2u) encode_tile_map(v, k_extent, true, raw, 32);
}

bool encode_raw_block_map(const OperandView<float>& v, int64_t k_extent, CUtensorMap* map) {
  // The columns past the extent are read from the row's padding or the next row, and meet only
  // output columns past n.
  const int64_t blocks = (v.extent + 31) / 32;
  if (v.ld < 32 * blocks) return false;
  const cuuint64_t dims[3] = {32, static_cast<cuuint64_t>(k_extent), static_cast<cuuint64_t>(blocks)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(v.ld) * sizeof(float), 32 * sizeof(float)};
  const cuuint32_t box[3] = {32, kWgmma.k_step, kWgmma.rows / 32};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult result =
      tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, const_cast<float*>(v.data), dims, strides, box,
                           element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  SG_CHECK(result == CUDA_SUCCESS, "structured gemm: cuTensorMapEncodeTiled failed (CUresult ", static_cast<int>(result),
           ") for the column blocks of a ", v.extent, "x", k_extent, " operand with leading dimension ", v.ld);
  return true;
}

void encode_store_map(CUtensorMap* map, void* data, int64_t rows, int64_t cols, int64_t ld, uint32_t box_rows,
                      const char* what) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * sizeof(float)};
  const cuuint32_t box[2] = {32, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result =
      tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, data, dims, strides, box, element_strides,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  SG_CHECK(result == CUDA_SUCCESS, "structured gemm: cuTensorMapEncodeTiled failed (CUresult ", static_cast<int>(result),
           ") for a ", rows, "x", cols, " ", what, " with leading dimension ", ld);
}

}  // namespace sg::detail::cuda
