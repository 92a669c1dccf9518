// Storage allocation: 64-byte aligned host memory, or a block of the CUDA caching allocator.
#include "core/storage.h"

#include <cstdlib>

#include "core/error.h"

namespace sg {

Storage::Storage(size_t bytes, Device dev) : nbytes(bytes), device(dev) {
  if (bytes == 0) return;
  if (dev.is_cpu()) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    data = std::aligned_alloc(64, rounded);
    SG_CHECK(data != nullptr, "cpu allocator: out of memory allocating ", bytes, " bytes");
  } else {
    data = detail::device_allocate(dev, bytes);
  }
}

Storage::~Storage() {
  if (!data) return;
  if (device.is_cpu()) {
    std::free(data);
  } else {
    try {
      detail::device_free(device, data, nbytes);
    } catch (...) {
      // A destructor must not throw; the block is lost to the cache at worst.
    }
  }
}

}  // namespace sg
