// Helpers of the tensor-file tests (test_npy.cpp, test_npz.cpp, test_checkpoint.cpp): bytes in and
// out of files, hand-made .npy headers and ZIP archives, and a fixture with a scratch directory.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "test_util.h"

namespace sgtest::io {

namespace fs = std::filesystem;

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "could not write " << path;
}

::testing::AssertionResult contains_all(const std::string& message, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts)
    if (message.find(part) == std::string::npos)
      return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << part << "\"";
  return ::testing::AssertionSuccess();
}

inline std::string raw_bytes(const sg::Tensor& t) {
  const sg::Tensor host = t.to(sg::kCPU);
  return std::string(static_cast<const char*>(host.data_ptr()), host.nbytes());
}

template <typename T>
inline std::string bytes_of(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

inline void put16(std::string& s, uint32_t v) {
  s.push_back(static_cast<char>(v & 0xFF));
  s.push_back(static_cast<char>((v >> 8) & 0xFF));
}
inline void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xFFFF);
  put16(s, v >> 16);
}
inline void put64(std::string& s, uint64_t v) {
  put32(s, static_cast<uint32_t>(v));
  put32(s, static_cast<uint32_t>(v >> 32));
}
inline uint32_t get32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<size_t>(i)]);
  return v;
}

/// CRC-32 computed bit by bit (independent of the library's table-driven one).
inline uint32_t bitwise_crc32(const std::string& bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

/// A .npy file with the given header dict (padded to 64 bytes as numpy does) and data.
inline std::string npy_file(const std::string& dict, const std::string& data, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  if (major == 1)
    put16(out, static_cast<uint32_t>(header.size()));
  else
    put32(out, static_cast<uint32_t>(header.size()));
  return out + header + data;
}

/// One entry of a hand-built archive: its bytes as the archive holds them (deflated ones
/// included), and the uncompressed size and CRC-32 its headers declare (by default those of the
/// bytes themselves, as for a stored entry).
struct ZipItem {
  std::string name, data;
  std::optional<uint64_t> size = std::nullopt;
  std::optional<uint32_t> crc = std::nullopt;
};

/// A ZIP archive built by hand. With `zip64`, every entry carries ZIP64 extra fields in both
/// headers (sizes and offset 0xFFFFFFFF in the fixed fields) and the archive ends with the
/// ZIP64 end record and locator, as large archives written by Python do.
inline std::string zip_archive(const std::vector<ZipItem>& entries, bool zip64, uint16_t method = 0) {
  std::string out, central;
  for (const ZipItem& item : entries) {
    const std::string& name = item.name;
    const std::string& data = item.data;
    const uint64_t offset = out.size();
    const uint64_t size = item.size.value_or(data.size());
    const uint32_t crc = item.crc.value_or(bitwise_crc32(data));
    std::string extra, local_extra;  // ZIP64 fields: sizes (and, centrally, the offset)
    if (zip64) {
      put16(local_extra, 0x0001);
      put16(local_extra, 16);
      put64(local_extra, size);
      put64(local_extra, data.size());
      put16(extra, 0x0001);
      put16(extra, 24);
      put64(extra, size);
      put64(extra, data.size());
      put64(extra, offset);
    }
    const uint32_t size32 = zip64 ? 0xFFFFFFFFu : static_cast<uint32_t>(size);
    const uint32_t compressed32 = zip64 ? 0xFFFFFFFFu : static_cast<uint32_t>(data.size());
    const uint32_t offset32 = zip64 ? 0xFFFFFFFFu : static_cast<uint32_t>(offset);
    put32(out, 0x04034b50);
    put16(out, zip64 ? 45 : 20);
    put16(out, 0);
    put16(out, method);
    put16(out, 0);
    put16(out, 0x21);
    put32(out, crc);
    put32(out, compressed32);
    put32(out, size32);
    put16(out, static_cast<uint32_t>(name.size()));
    put16(out, static_cast<uint32_t>(local_extra.size()));
    out += name + local_extra + data;

    put32(central, 0x02014b50);
    put16(central, zip64 ? 45 : 20);
    put16(central, zip64 ? 45 : 20);
    put16(central, 0);
    put16(central, method);
    put16(central, 0);
    put16(central, 0x21);
    put32(central, crc);
    put32(central, compressed32);
    put32(central, size32);
    put16(central, static_cast<uint32_t>(name.size()));
    put16(central, static_cast<uint32_t>(extra.size()));
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put32(central, 0);
    put32(central, offset32);
    central += name + extra;
  }
  const uint64_t cd_offset = out.size();
  out += central;
  if (zip64) {
    const uint64_t record_offset = out.size();
    put32(out, 0x06064b50);
    put64(out, 44);
    put16(out, 45);
    put16(out, 45);
    put32(out, 0);
    put32(out, 0);
    put64(out, entries.size());
    put64(out, entries.size());
    put64(out, central.size());
    put64(out, cd_offset);
    put32(out, 0x07064b50);
    put32(out, 0);
    put64(out, record_offset);
    put32(out, 1);
  }
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, zip64 ? 0xFFFF : static_cast<uint32_t>(entries.size()));
  put16(out, zip64 ? 0xFFFF : static_cast<uint32_t>(entries.size()));
  put32(out, zip64 ? 0xFFFFFFFFu : static_cast<uint32_t>(central.size()));
  put32(out, zip64 ? 0xFFFFFFFFu : static_cast<uint32_t>(cd_offset));
  put16(out, 0);
  return out;
}

/// `data` as a raw deflate stream of stored blocks (at most 65535 bytes each, the last one
/// final), which zlib inflates back to `data`: deflated entries made without a compressor.
inline std::string deflate_stored(const std::string& data) {
  std::string out;
  size_t at = 0;
  do {
    const size_t n = std::min<size_t>(data.size() - at, 0xFFFF);
    out.push_back(at + n == data.size() ? 1 : 0);  // BFINAL, BTYPE 00 (stored)
    put16(out, static_cast<uint32_t>(n));
    put16(out, static_cast<uint32_t>(~n & 0xFFFF));
    out += data.substr(at, n);
    at += n;
  } while (at < data.size());
  return out;
}

/// Replaces every occurrence of `from` by `to` (same length) in `bytes`; returns how many.
inline int replace_all(std::string& bytes, const std::string& from, const std::string& to) {
  int n = 0;
  for (size_t at = bytes.find(from); at != std::string::npos; at = bytes.find(from, at + to.size())) {
    bytes.replace(at, from.size(), to);
    ++n;
  }
  return n;
}

class IoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("structgrad_test_io_" + std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

/// A float64 .npy header dict of the given shape tuple.
inline std::string f8_header(const std::string& shape) {
  return "{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", }";
}

inline std::string tuple_of_ones(int n) {
  std::string t = "(";
  for (int i = 0; i < n; ++i) t += i ? ", 1" : "1";
  return t + (n == 1 ? ",)" : ")");
}

}  // namespace sgtest::io
