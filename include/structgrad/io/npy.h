// Tensor files that NumPy and PyTorch read: .npy (one array, format versions 1.0–3.0) and
// .npz (a ZIP of named .npy arrays, stored as numpy.savez writes them or deflated as
// numpy.savez_compressed does). Files hold values, shape and dtype only: the structure tag is
// not saved, so load gives Dense tensors.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <structgrad/core/tensor.h>

namespace sg {

/// Where and as what a loaded tensor lands, chainable like TensorOptions. By default a
/// load keeps the file's dtype and goes to the CPU; a Device or DType converts to it.
/// Example: `auto x = sg::load_npy("x.npy", sg::LoadOptions().device("cuda:0").dtype(sg::kFloat32));`
struct LoadOptions {
  Device device_ = kCPU;          ///< the device the tensors are loaded to
  std::optional<DType> dtype_;    ///< convert to this dtype; empty keeps the file's dtype

  /// Loads to the CPU, keeping the file's dtype. Example: `sg::LoadOptions opts;`
  LoadOptions() = default;
  /// Loads to `d`. Example: `sg::load_npy("x.npy", sg::kCUDA);`
  LoadOptions(Device d) : device_(d) {}
  /// Loads to the device named `d`. Example: `sg::load_npy("x.npy", "cuda:0");`
  LoadOptions(const char* d) : device_(d) {}
  /// Converts to `d` while loading. Example: `sg::load_npy("x.npy", sg::kFloat64);`
  LoadOptions(DType d) : dtype_(d) {}

  /// A copy that loads to `d`. Example: `sg::LoadOptions().device(sg::kCUDA)`
  LoadOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  /// A copy that converts to `d`. Example: `sg::LoadOptions().dtype(sg::kFloat32)`
  LoadOptions dtype(DType d) const { auto o = *this; o.dtype_ = d; return o; }
};

/// Writes `t` (any rank, float32 '<f4', float64 '<f8' or int64 '<i8', C order) as a .npy file; a tensor
/// on a GPU is copied to the host first. The file is written to a temporary name and renamed,
/// so a failed save never leaves a half-written file at `path`. Throws sg::Error naming the
/// path when it cannot be written. Example: `sg::save_npy("weight.npy", layer.weight);`
void save_npy(const std::string& path, const Tensor& t);

/// Reads a .npy file of little-endian float32 or float64 in C order, any rank, as a Dense
/// tensor (use sg::as_upper / sg::as_symmetric to restore a structure). Throws sg::Error
/// naming the file and the problem for a bad magic string or version, a malformed header,
/// another dtype, big-endian data, fortran_order=True, or a size that does not match the file.
/// Example: `auto U = sg::as_upper(sg::load_npy("U.npy"));`
Tensor load_npy(const std::string& path, LoadOptions options = {});

/// Named tensors in order, as save_npz takes them and load_npz returns them.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// How save_npz writes each entry: Stored as it is (np.savez, the default) or Deflated through
/// zlib (np.savez_compressed), smaller for data that compresses, slower to write and read.
/// Example: `sg::save_npz("data.npz", {{"x", x}}, sg::NpzCompression::Deflated);`
enum class NpzCompression { Stored, Deflated };

/// Writes named tensors as a .npz archive (entry "name.npy" per tensor, with its CRC-32) that
/// numpy.load reads as `f["name"]`: stored by default, as np.savez writes, or deflated, as
/// np.savez_compressed writes. Names must be non-empty and unique. Archives are limited to 4 GiB
/// and 65535 entries (no ZIP64 on writing).
/// Example: `sg::save_npz("data.npz", {{"x", x}, {"y", y}});`
void save_npz(const std::string& path, const NamedTensors& tensors,
              NpzCompression compression = NpzCompression::Stored);

/// Reads every array of a .npz archive in archive order, names without the ".npy" suffix.
/// Entries may be stored (np.savez) or deflated (np.savez_compressed); ZIP64 archives are read.
/// The central directory must be whole and consistent with its end record, each entry's size
/// must agree with its array header before anything is allocated, and every CRC-32 is verified.
/// Throws sg::Error naming the file, the entry and the problem.
/// Example: `for (auto& [name, t] : sg::load_npz("data.npz")) std::cout << name << t.shape() << "\n";`
NamedTensors load_npz(const std::string& path, LoadOptions options = {});

}  // namespace sg
