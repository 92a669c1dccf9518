// Tensor files and checkpoints: .npy/.npz round trips (dtypes, ranks 0-3, empty, structured,
// stored and deflated), the exact bytes we write, hand-made files in other header styles and
// ZIP64, archives NumPy wrote (tests/data), every corrupt-file error, module and optimizer state
// dicts, bit-identical resume, and NumPy interop when present.
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

namespace {

namespace fs = std::filesystem;

// ---- helpers -------------------------------------------------------------------------------

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
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

std::string raw_bytes(const sg::Tensor& t) {
  const sg::Tensor host = t.to(sg::kCPU);
  return std::string(static_cast<const char*>(host.data_ptr()), host.nbytes());
}

template <typename T>
std::string bytes_of(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

void put16(std::string& s, uint32_t v) {
  s.push_back(static_cast<char>(v & 0xFF));
  s.push_back(static_cast<char>((v >> 8) & 0xFF));
}
void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xFFFF);
  put16(s, v >> 16);
}
void put64(std::string& s, uint64_t v) {
  put32(s, static_cast<uint32_t>(v));
  put32(s, static_cast<uint32_t>(v >> 32));
}
uint32_t get32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<size_t>(i)]);
  return v;
}

/// CRC-32 computed bit by bit (independent of the library's table-driven one).
uint32_t bitwise_crc32(const std::string& bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

/// A .npy file with the given header dict (padded to 64 bytes as numpy does) and data.
std::string npy_file(const std::string& dict, const std::string& data, int major = 1) {
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
std::string zip_archive(const std::vector<ZipItem>& entries, bool zip64, uint16_t method = 0) {
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
std::string deflate_stored(const std::string& data) {
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
int replace_all(std::string& bytes, const std::string& from, const std::string& to) {
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

// ---- .npy round trips ----------------------------------------------------------------------

class NpyRoundTrip : public IoTest, public ::testing::WithParamInterface<std::tuple<sg::DType, sg::Shape>> {};

TEST_P(NpyRoundTrip, ValuesShapeAndDtypeSurvive) {
  const auto [dtype, shape] = GetParam();
  sg::manual_seed(7);
  const sg::Tensor x = sg::randn(shape, dtype);
  sg::save_npy(path("x.npy"), x);
  const sg::Tensor y = sg::load_npy(path("x.npy"));
  EXPECT_EQ(y.shape(), shape);
  EXPECT_EQ(y.dtype(), dtype);
  EXPECT_EQ(y.device(), sg::kCPU);
  EXPECT_EQ(y.structure(), sg::Structure::Dense);
  EXPECT_EQ(raw_bytes(y), raw_bytes(x));
  // The file is exactly a 64-byte-aligned header plus the data.
  const std::string file = read_bytes(path("x.npy"));
  const size_t header_end = 10 + (static_cast<unsigned char>(file[8]) | (static_cast<unsigned char>(file[9]) << 8));
  EXPECT_EQ(header_end % 64, 0u);
  EXPECT_EQ(file.size(), header_end + x.nbytes());
}

std::string round_trip_name(const ::testing::TestParamInfo<std::tuple<sg::DType, sg::Shape>>& info) {
  std::string name = std::get<0>(info.param) == sg::kFloat32 ? "f32_rank" : "f64_rank";
  name += std::to_string(std::get<1>(info.param).size());
  for (int64_t d : std::get<1>(info.param)) name += "_" + std::to_string(d);
  return name;
}

INSTANTIATE_TEST_SUITE_P(Io, NpyRoundTrip,
                         ::testing::Combine(::testing::Values(sg::kFloat32, sg::kFloat64),
                                            ::testing::Values(sg::Shape{}, sg::Shape{0}, sg::Shape{1}, sg::Shape{7},
                                                              sg::Shape{3, 4}, sg::Shape{0, 5}, sg::Shape{33, 1},
                                                              sg::Shape{2, 3, 4})),
                         round_trip_name);

TEST_F(IoTest, NpyHeaderIsWhatNumpyWrites) {
  sg::save_npy(path("a.npy"), sg::zeros({3, 4}));
  sg::save_npy(path("b.npy"), sg::zeros({5}, sg::kFloat64));
  sg::save_npy(path("c.npy"), sg::full({}, 2.5, sg::kFloat64));
  const std::string a = read_bytes(path("a.npy")), b = read_bytes(path("b.npy")), c = read_bytes(path("c.npy"));
  EXPECT_EQ(a.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  // numpy 2.x writes exactly these 128 bytes for a float32 [3, 4] array.
  EXPECT_EQ(a.substr(0, 128), std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                                  "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }" +
                                  std::string(58, ' ') + "\n");
  EXPECT_EQ(b.substr(10, 57), "{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }");
  EXPECT_EQ(c.substr(10, 55), "{'descr': '<f8', 'fortran_order': False, 'shape': (), }");
  ASSERT_EQ(c.size(), 128u + 8);
  double value = 0;
  std::memcpy(&value, c.data() + 128, 8);
  EXPECT_EQ(value, 2.5);
}

TEST_F(IoTest, NpyKeepsSpecialValuesBitForBit) {
  const std::vector<double> v = {0.0, -0.0, std::numeric_limits<double>::infinity(),
                                 -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(),
                                 std::numeric_limits<double>::denorm_min(), 1e308};
  const sg::Tensor x = sg::from_vector(v, {7}, sg::kFloat64);
  sg::save_npy(path("special.npy"), x);
  EXPECT_EQ(raw_bytes(sg::load_npy(path("special.npy"))), bytes_of(v));
}

TEST_F(IoTest, Int64IndicesRoundTrip) {
  const std::vector<int64_t> v = {0, -1, 9000000000LL, 42};
  sg::save_npy(path("labels.npy"), sg::from_vector(v, {2, 2}));
  const sg::Tensor back = sg::load_npy(path("labels.npy"));
  EXPECT_EQ(back.dtype(), sg::kInt64);
  EXPECT_EQ(back.shape(), (sg::Shape{2, 2}));
  EXPECT_EQ(back.to_vector_as<int64_t>(), v);
}

TEST_F(IoTest, StructuredTensorsSaveTheirFullMatrixAndLoadDense) {
  sg::manual_seed(3);
  const sg::UpperTriangular u = sg::UpperTriangular::randn(5, sg::kFloat64);
  const sg::Symmetric s = sg::Symmetric::randn(4);
  sg::save_npy(path("u.npy"), u);
  sg::save_npy(path("s.npy"), s);
  const sg::Tensor u_loaded = sg::load_npy(path("u.npy"));
  const sg::Tensor s_loaded = sg::load_npy(path("s.npy"));
  EXPECT_EQ(u_loaded.structure(), sg::Structure::Dense);
  EXPECT_EQ(s_loaded.structure(), sg::Structure::Dense);
  const sg::UpperTriangular u2 = sg::as_upper(u_loaded);
  const sg::Symmetric s2 = sg::as_symmetric(s_loaded);
  EXPECT_EQ(u2.structure(), sg::Structure::UpperTriangular);
  EXPECT_EQ(raw_bytes(u2), raw_bytes(u));
  EXPECT_EQ(raw_bytes(s2), raw_bytes(s));
}

TEST_F(IoTest, LoadConvertsDtypeOnRequest) {
  const sg::Tensor x = sg::tensor({{0.1, -2.0}, {1e-3, 7.25}}, sg::kFloat64);
  sg::save_npy(path("x.npy"), x);
  const sg::Tensor as32 = sg::load_npy(path("x.npy"), sg::kFloat32);
  EXPECT_EQ(as32.dtype(), sg::kFloat32);
  EXPECT_EQ(as32.to_vector(), x.to(sg::kFloat32).to_vector());
  sg::save_npy(path("y.npy"), as32);
  const sg::Tensor as64 = sg::load_npy(path("y.npy"), sg::LoadOptions().dtype(sg::kFloat64));
  EXPECT_EQ(as64.dtype(), sg::kFloat64);
  EXPECT_EQ(as64.to_vector(), as32.to_vector());
  EXPECT_EQ(sg::load_npy(path("y.npy")).dtype(), sg::kFloat32);  // no conversion unless asked
}

class IoDevice : public IoTest, public ::testing::WithParamInterface<sg::Device> {};

TEST_P(IoDevice, SavesFromAndLoadsToTheDevice) {
  const sg::Device device = GetParam();
  SG_SKIP_IF_UNAVAILABLE(device);
  sg::manual_seed(11);
  const sg::Tensor x = sg::randn({6, 5}, sg::TensorOptions().device(device));
  sg::save_npy(path("x.npy"), x);
  sg::save_npz(path("x.npz"), {{"x", x}});
  const sg::Tensor y = sg::load_npy(path("x.npy"), device);
  const sg::Tensor z = sg::load_npz(path("x.npz"), sg::LoadOptions().device(device)).at(0).second;
  EXPECT_EQ(y.device(), device);
  EXPECT_EQ(z.device(), device);
  EXPECT_EQ(raw_bytes(y), raw_bytes(x));
  EXPECT_EQ(raw_bytes(z), raw_bytes(x));
}

INSTANTIATE_TEST_SUITE_P(Io, IoDevice, ::testing::ValuesIn(sgtest::test_devices()), sgtest::device_test_name);

TEST_F(IoTest, ReadsOtherHeaderStylesAndVersions) {
  const std::vector<float> v = {1.5f, -2.0f, 3.25f, 0.0f, 8.0f, -0.5f};
  const std::string data = bytes_of(v);
  // Keys in another order, double quotes, no trailing comma, Python 2 long suffix, versions 2 and 3.
  write_bytes(path("order.npy"), npy_file("{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}", data));
  write_bytes(path("quotes.npy"), npy_file("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (6,)}", data));
  write_bytes(path("long.npy"), npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (3L, 2L), }", data));
  write_bytes(path("v2.npy"), npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", data, 2));
  write_bytes(path("v3.npy"), npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 6), }", data, 3));
  const std::vector<std::pair<std::string, sg::Shape>> cases = {
      {"order.npy", {2, 3}}, {"quotes.npy", {6}}, {"long.npy", {3, 2}}, {"v2.npy", {6}}, {"v3.npy", {1, 6}}};
  for (const auto& [name, shape] : cases) {
    const sg::Tensor t = sg::load_npy(path(name));
    EXPECT_EQ(t.shape(), shape) << name;
    EXPECT_EQ(raw_bytes(t), data) << name;
  }
}

// ---- .npy errors ---------------------------------------------------------------------------

TEST_F(IoTest, TruncatedDataNamesFileShapeAndSizes) {
  sg::save_npy(path("data.npy"), sg::ones({3, 4}));
  std::string bytes = read_bytes(path("data.npy"));
  bytes.resize(128 + 20);
  write_bytes(path("data.npy"), bytes);
  EXPECT_EQ(sgtest::message_of([&] { sg::load_npy(path("data.npy")); }),
            "load_npy: " + path("data.npy") +
                " is truncated: header says [3, 4] float32 (48 bytes), file has 20 after the 128-byte header");
}

TEST_F(IoTest, CorruptNpyFilesGiveClearErrors) {
  const std::string data = bytes_of(std::vector<double>{1, 2, 3, 4});
  const std::string good = npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", data);
  struct Case {
    std::string name, bytes;
    std::vector<std::string> expected;
  };
  std::string long_header = good;
  long_header[8] = '\x60';  // header length 0xEA60 = 60000 in a 160-byte file
  long_header[9] = '\xEA';
  std::string version4 = good;
  version4[6] = 4;
  const std::vector<Case> cases = {
      {"empty.npy", "", {"is empty (0 bytes), not a .npy file"}},
      {"magic.npy", "PK\x03\x04 not numpy at all", {"is not a .npy file", "magic string"}},
      {"short.npy", good.substr(0, 8), {"is truncated: 8 bytes, shorter than the 10-byte .npy preamble"}},
      {"version.npy", version4, {"has .npy format version 4.0", "reads versions 1.0, 2.0 and 3.0"}},
      {"header_len.npy", long_header, {"header length of 60000 bytes, which exceeds the file (160 bytes)"}},
      {"int.npy", npy_file("{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", data),
       {"has dtype '<i4'", "float32 ('<f4'), float64 ('<f8') and int64 ('<i8')"}},
      {"half.npy", npy_file("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", data), {"has dtype '<f2'"}},
      {"big.npy", npy_file("{'descr': '>f8', 'fortran_order': False, 'shape': (4,), }", data),
       {"holds big-endian data ('>f8')", "arr.astype('<f8')"}},
      {"fortran.npy", npy_file("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }", data),
       {"Fortran (column-major) order"}},
      {"struct.npy", npy_file("{'descr': [('a', '<f8'), ('b', '<f8')], 'fortran_order': False, 'shape': (2,), }", data),
       {"structured dtype [('a', '<f8'), ('b', '<f8')]"}},
      {"nokey.npy", npy_file("{'descr': '<f8', 'fortran_order': False, }", data),
       {"malformed .npy header (missing key 'shape')"}},
      {"extrakey.npy", npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (4,), 'x': 1}", data),
       {"malformed .npy header"}},
      {"garbage.npy", npy_file("descr=<f8 shape=4", data), {"malformed .npy header (expected '{' at offset 0)"}},
      {"negative.npy", npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (-4,), }", data),
       {"malformed .npy header (expected a non-negative integer"}},
      {"unclosed.npy", npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (4, ", data),
       {"malformed .npy header"}},
      {"overflow.npy", npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", data),
       {"has shape [4294967296, 4294967296] whose size overflows 64 bits"}},
      {"hugedim.npy", npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }", data),
       {"a dimension does not fit in 64 bits"}},
      {"toolarge.npy", npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000), }", data),
       {"is truncated: header says [1000000, 1000000] float64 (8000000000000 bytes), file has 32"}},
      {"trailing.npy", good + "junk", {"has 4 unexpected bytes after the data"}},
  };
  for (const Case& c : cases) {
    write_bytes(path(c.name), c.bytes);
    const std::string message = sgtest::message_of([&] { sg::load_npy(path(c.name)); });
    EXPECT_TRUE(contains_all(message, {"load_npy: " + path(c.name)})) << c.name;
    for (const std::string& part : c.expected) EXPECT_TRUE(contains_all(message, {part})) << c.name;
  }
  write_bytes(path("good.npy"), good);
  EXPECT_EQ(sg::load_npy(path("good.npy")).to_vector(), (std::vector<double>{1, 2, 3, 4}));
}

/// A float64 .npy header dict of the given shape tuple.
std::string f8_header(const std::string& shape) {
  return "{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", }";
}

std::string tuple_of_ones(int n) {
  std::string t = "(";
  for (int i = 0; i < n; ++i) t += i ? ", 1" : "1";
  return t + (n == 1 ? ",)" : ")");
}

TEST_F(IoTest, NpyShapesOfMoreThan64DimensionsAreRefused) {
  const std::string one = bytes_of(std::vector<double>{2.5});
  write_bytes(path("d64.npy"), npy_file(f8_header(tuple_of_ones(64)), one));
  const sg::Tensor t = sg::load_npy(path("d64.npy"));
  EXPECT_EQ(t.dim(), 64);
  EXPECT_EQ(t.to_vector(), (std::vector<double>{2.5}));
  sg::save_npy(path("d64_again.npy"), t);  // what we read we also write
  EXPECT_EQ(sg::load_npy(path("d64_again.npy")).shape(), t.shape());

  for (int dims : {65, 20001}) {
    const std::string name = "d" + std::to_string(dims) + ".npy";
    write_bytes(path(name), npy_file(f8_header(tuple_of_ones(dims)), one));
    EXPECT_EQ(sgtest::message_of([&] { sg::load_npy(path(name)); }),
              "load_npy: " + path(name) + " has a shape of " + std::to_string(dims) +
                  " dimensions; NumPy allows at most 64: the header is corrupt");
  }
  write_bytes(path("d65.npz"), zip_archive({{"a.npy", npy_file(f8_header(tuple_of_ones(65)), one)}}, false));
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::load_npz(path("d65.npz")); }),
                           {"load_npz: " + path("d65.npz") + " entry 'a.npy' has a shape of 65 dimensions"}));
  // Nor is such a tensor written.
  const sg::Tensor wide = sg::ones(sg::Shape(65, 1));
  EXPECT_EQ(sgtest::message_of([&] { sg::save_npy(path("w.npy"), wide); }),
            "save_npy: tensor for " + path("w.npy") + " has 65 dimensions; NumPy reads at most 64");
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::save_npz(path("w.npz"), {{"w", wide}}); }),
                           {"save_npz: tensor 'w' has 65 dimensions"}));
  EXPECT_FALSE(fs::exists(path("w.npy")));
  EXPECT_FALSE(fs::exists(path("w.npz")));
}

TEST_F(IoTest, EmptyShapesWithAHugeDimensionAreRefusedByTheLoader) {
  // No elements, but 2**62 float32s would be 2**64 bytes: NumPy refuses such a shape, and so
  // does the loader, naming the file, before any tensor is made.
  for (const std::string shape : {"(4611686018427387904, 0)", "(0, 4611686018427387904)"}) {
    const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
    write_bytes(path("e.npy"), npy_file(header, ""));
    const std::string shown = shape[1] == '0' ? "[0, 4611686018427387904]" : "[4611686018427387904, 0]";
    EXPECT_EQ(sgtest::message_of([&] { sg::load_npy(path("e.npy")); }),
              "load_npy: " + path("e.npy") + " has shape " + shown +
                  " whose size overflows 64 bits (its non-zero dimensions times 4 bytes): the header is corrupt");
    write_bytes(path("e.npz"), zip_archive({{"e.npy", npy_file(header, "")}}, false));
    EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::load_npz(path("e.npz")); }),
                             {"load_npz: " + path("e.npz") + " entry 'e.npy' has shape " + shown}));
  }
  // An empty shape whose size fits loads.
  write_bytes(path("fits.npy"), npy_file(f8_header("(1099511627776, 0)"), ""));
  EXPECT_EQ(sg::load_npy(path("fits.npy")).shape(), (sg::Shape{int64_t{1} << 40, 0}));
}

TEST_F(IoTest, LoadingToAnUnavailableDeviceNamesTheFile) {
  if (sg::cuda::is_available()) GTEST_SKIP() << "a CUDA device exists here";
  sg::save_npy(path("x.npy"), sg::ones({2}));
  sg::save_npz(path("x.npz"), {{"x", sg::ones({2})}});
  // Why no tensor can live on cuda:0 here (a build without CUDA, or no GPU), as the tensor says it.
  const std::string reason = sgtest::message_of([] { sg::zeros({0}, sg::kCUDA); });
  ASSERT_NE(reason, "(no sg::Error thrown)");
  EXPECT_EQ(sgtest::message_of([&] { sg::load_npy(path("x.npy"), "cuda:0"); }),
            "load_npy: " + path("x.npy") + " cannot be loaded to cuda:0 (" + reason + ")");
  EXPECT_EQ(sgtest::message_of([&] { sg::load_npz(path("x.npz"), sg::LoadOptions().device(sg::kCUDA)); }),
            "load_npz: " + path("x.npz") + " cannot be loaded to cuda:0 (" + reason + ")");
  if (!sg::cuda::built_with_cuda()) {
    EXPECT_EQ(reason, "allocating on cuda:0: structgrad was built without CUDA");
  }
}

TEST_F(IoTest, MissingFilesAndUnwritablePathsAreNamed) {
  EXPECT_EQ(sgtest::message_of([&] { sg::load_npy(path("absent.npy")); }), "load_npy: no such file: " + path("absent.npy"));
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::load_npy(dir_.string()); }), {"is a directory"}));
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::save_npy(path("no/such/dir/x.npy"), sg::ones({2})); }),
                           {"save_npy: cannot open " + path("no/such/dir/x.npy") + " for writing"}));
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::save_npy(path("u.npy"), sg::Tensor()); }), {"save_npy", "undefined"}));
  EXPECT_FALSE(fs::exists(path("u.npy")));
  // A failed save leaves no temporary file behind.
  EXPECT_TRUE(fs::is_empty(dir_));
}

// ---- .npz ----------------------------------------------------------------------------------

TEST_F(IoTest, NpzRoundTripKeepsNamesOrderAndValues) {
  sg::manual_seed(5);
  const sg::NamedTensors in = {{"layer0.weight", sg::UpperTriangular::randn(4)},
                               {"layer0.bias", sg::randn({4}, sg::kFloat64)},
                               {"scalar", sg::full({}, -3.5)},
                               {"empty", sg::zeros({0, 3})},
                               {"a_tensor", sg::randn({2, 3, 2})}};
  sg::save_npz(path("m.npz"), in);
  const sg::NamedTensors out = sg::load_npz(path("m.npz"));
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].first, in[i].first);
    EXPECT_EQ(out[i].second.shape(), in[i].second.shape()) << in[i].first;
    EXPECT_EQ(out[i].second.dtype(), in[i].second.dtype()) << in[i].first;
    EXPECT_EQ(out[i].second.structure(), sg::Structure::Dense) << in[i].first;
    EXPECT_EQ(raw_bytes(out[i].second), raw_bytes(in[i].second)) << in[i].first;
  }
  sg::save_npz(path("none.npz"), {});
  EXPECT_TRUE(sg::load_npz(path("none.npz")).empty());
}

TEST_F(IoTest, NpzEntriesAreStoredWithTheirCrc32) {
  const sg::Tensor x = sg::arange(10, sg::kFloat64);
  sg::save_npz(path("x.npz"), {{"x", x}});
  sg::save_npy(path("x.npy"), x);
  const std::string zip = read_bytes(path("x.npz")), npy = read_bytes(path("x.npy"));
  // Local header: signature, version 2.0, no flags, method 0 (stored), CRC, sizes, name "x.npy".
  EXPECT_EQ(get32(zip, 0), 0x04034b50u);
  EXPECT_EQ(zip[8], 0);
  EXPECT_EQ(zip[9], 0);
  EXPECT_EQ(get32(zip, 14), bitwise_crc32(npy));
  EXPECT_EQ(get32(zip, 18), npy.size());
  EXPECT_EQ(get32(zip, 22), npy.size());
  EXPECT_EQ(zip.substr(30, 5), "x.npy");
  EXPECT_EQ(zip.substr(35, npy.size()), npy);  // the entry is the .npy file byte for byte
  // Saving twice gives the same bytes (fixed timestamps).
  sg::save_npz(path("x2.npz"), {{"x", x}});
  EXPECT_EQ(read_bytes(path("x2.npz")), zip);
}

TEST_F(IoTest, ReadsZip64ArchivesAndLocalExtraFields) {
  const std::string a = npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
                                 bytes_of(std::vector<double>{1.25, -4}));
  const std::string b = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1), }",
                                 bytes_of(std::vector<float>{9}));
  for (bool zip64 : {false, true}) {
    write_bytes(path("h.npz"), zip_archive({{"a.npy", a}, {"b.npy", b}}, zip64));
    const sg::NamedTensors t = sg::load_npz(path("h.npz"));
    ASSERT_EQ(t.size(), 2u) << "zip64 " << zip64;
    EXPECT_EQ(t[0].first, "a");
    EXPECT_EQ(t[0].second.to_vector(), (std::vector<double>{1.25, -4}));
    EXPECT_EQ(t[1].first, "b");
    EXPECT_EQ(t[1].second.shape(), (sg::Shape{1, 1}));
    EXPECT_EQ(t[1].second.item(), 9.0);
  }
}

TEST_F(IoTest, CorruptNpzFilesGiveClearErrors) {
  sg::save_npz(path("ok.npz"), {{"w", sg::ones({2, 2})}, {"b", sg::zeros({2})}});
  const std::string ok = read_bytes(path("ok.npz"));
  const std::string file = "load_npz: " + path("bad.npz");
  auto load_bad = [&](const std::string& bytes) {
    write_bytes(path("bad.npz"), bytes);
    return sgtest::message_of([&] { sg::load_npz(path("bad.npz")); });
  };

  EXPECT_TRUE(contains_all(load_bad(ok.substr(0, ok.size() - 30)),
                           {file, "has no ZIP end-of-central-directory record: it is truncated or not a .npz archive"}));
  EXPECT_TRUE(contains_all(load_bad("tiny"), {file, "too short for its end record"}));
  sg::save_npy(path("x.npy"), sg::ones({40}));
  EXPECT_TRUE(contains_all(load_bad(read_bytes(path("x.npy"))), {"it is a .npy file: use sg::load_npy"}));

  std::string flipped = ok;
  flipped[ok.find("w.npy") + 5 + 128 + 3] ^= 0x01;  // a byte of w's data
  EXPECT_TRUE(contains_all(load_bad(flipped), {file + " entry 'w.npy' fails its CRC-32 check (stored 0x"}));

  EXPECT_TRUE(contains_all(load_bad(zip_archive({{"w.npy", "x"}}, false, 14)),
                           {file + " entry 'w.npy' uses ZIP compression method 14", "stored (np.savez) and deflated"}));

  std::string renamed = ok;
  EXPECT_EQ(replace_all(renamed, "w.npy", "w.txt"), 2);
  EXPECT_TRUE(contains_all(load_bad(renamed), {file + " entry 'w.txt' is not a .npy array"}));

  std::string duplicated = ok;
  EXPECT_EQ(replace_all(duplicated, "b.npy", "w.npy"), 2);
  EXPECT_TRUE(contains_all(load_bad(duplicated), {file + " holds the entry 'w.npy' twice"}));

  // The central directory claims a larger entry than the archive holds.
  std::string oversized = ok;
  const size_t cd = ok.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(cd, std::string::npos);
  for (size_t field : {cd + 20, cd + 24}) oversized.replace(field, 4, std::string("\x00\x00\x10\x00", 4));
  EXPECT_TRUE(contains_all(load_bad(oversized), {file + " entry 'w.npy' is truncated: it needs 1048576 bytes"}));

  // The central directory points past the end record.
  std::string bad_offset = ok;
  bad_offset.replace(ok.size() - 6, 4, std::string("\xff\xff\xff\x7f", 4));
  EXPECT_TRUE(contains_all(load_bad(bad_offset), {"central directory", "runs past its end record"}));

  // A corrupt .npy inside a valid archive names the entry.
  const std::string inner = npy_file("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }", "abcd");
  EXPECT_TRUE(contains_all(load_bad(zip_archive({{"n.npy", inner}}, false)), {file + " entry 'n.npy' has dtype '<i4'"}));
}

// ---- the ZIP directory is read whole or not at all --------------------------------------------

/// An archive of x, y, z as save_npz writes it, and where its end record starts (no comment).
struct XyzArchive {
  std::string bytes;
  size_t end = 0;
  uint32_t directory_size = 0, directory_offset = 0;
};

XyzArchive xyz_archive(const std::string& path) {
  sg::save_npz(path, {{"x", sg::ones({2})}, {"y", sg::zeros({3})}, {"z", sg::full({}, 4.0)}});
  XyzArchive a;
  a.bytes = read_bytes(path);
  a.end = a.bytes.size() - 22;
  a.directory_size = get32(a.bytes, a.end + 12);
  a.directory_offset = get32(a.bytes, a.end + 16);
  return a;
}

TEST_F(IoTest, NpzEndRecordCountBelowTheDirectoryIsAnError) {
  const XyzArchive a = xyz_archive(path("xyz.npz"));
  ASSERT_EQ(get32(a.bytes, a.end), 0x06054b50u);
  ASSERT_EQ(a.bytes[a.end + 8], 3);
  ASSERT_EQ(a.bytes[a.end + 10], 3);
  ASSERT_EQ(sg::load_npz(path("xyz.npz")).size(), 3u);
  // The count lowered from 3 to 2, on this disk and in all: Python's zipfile still reads 3
  // arrays (it goes by the directory's byte size); we refuse rather than return 2.
  std::string two = a.bytes;
  two[a.end + 8] = two[a.end + 10] = 2;
  write_bytes(path("two.npz"), two);
  EXPECT_EQ(sgtest::message_of([&] { sg::load_npz(path("two.npz")); }),
            "load_npz: " + path("two.npz") + "'s end record counts 2 entries, but its central directory (" +
                std::to_string(a.directory_size) + " bytes at offset " + std::to_string(a.directory_offset) +
                ") holds 3: the archive is corrupt");
  std::string four = a.bytes;
  four[a.end + 8] = four[a.end + 10] = 4;
  write_bytes(path("four.npz"), four);
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::load_npz(path("four.npz")); }),
                           {"load_npz: " + path("four.npz"), "counts 4 entries", "holds 3"}));
}

TEST_F(IoTest, NpzDirectoryMustEndWhereTheEndRecordBegins) {
  // Count and byte size both lowered to leave out z's directory entry (46 bytes + "z.npy"):
  // the two agree, but the bytes between the directory and the end record give it away.
  const XyzArchive a = xyz_archive(path("xyz.npz"));
  std::string shortened = a.bytes;
  shortened[a.end + 8] = shortened[a.end + 10] = 2;
  const uint32_t size = a.directory_size - (46 + 5);
  for (int i = 0; i < 4; ++i) shortened[a.end + 12 + i] = static_cast<char>((size >> (8 * i)) & 0xFF);
  write_bytes(path("short.npz"), shortened);
  EXPECT_EQ(sgtest::message_of([&] { sg::load_npz(path("short.npz")); }),
            "load_npz: " + path("short.npz") + "'s central directory (" + std::to_string(size) + " bytes at offset " +
                std::to_string(a.directory_offset) + ") ends 51 bytes before its end record at " +
                std::to_string(a.end) + ", which must follow it directly: the archive is corrupt");
}

TEST_F(IoTest, NpzDiskFieldsSayWhatIsInconsistent) {
  const XyzArchive a = xyz_archive(path("xyz.npz"));
  auto load_with = [&](size_t field, char value) {
    std::string bytes = a.bytes;
    bytes[a.end + field] = value;
    write_bytes(path("disk.npz"), bytes);
    return sgtest::message_of([&] { sg::load_npz(path("disk.npz")); });
  };
  const std::string file = "load_npz: " + path("disk.npz");
  const std::string this_disk = load_with(4, 1), directory_disk = load_with(6, 7), on_disk = load_with(8, 2);
  EXPECT_EQ(this_disk, file + "'s end record numbers this disk 1 and the central directory's disk 0, where a "
                              "single-file archive has 0 for both: the field is corrupt (split archives are not read)");
  EXPECT_TRUE(contains_all(directory_disk, {file + "'s end record numbers this disk 0 and the central directory's disk 7"}));
  EXPECT_EQ(on_disk, file + "'s end record counts 2 entries on this disk but 3 in all, where a single-file archive "
                            "has one number for both: the archive is corrupt");
  for (const std::string& message : {this_disk, directory_disk, on_disk})
    EXPECT_FALSE(sgtest::contains(message, "multi-part")) << message;

  // The same fields of a ZIP64 end record.
  const std::string one = npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", bytes_of(std::vector<double>{1}));
  std::string zip64 = zip_archive({{"a.npy", one}}, true);
  const size_t record = zip64.find(std::string("PK\x06\x06", 4));
  ASSERT_NE(record, std::string::npos);
  zip64[record + 16] = 2;
  write_bytes(path("disk.npz"), zip64);
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::load_npz(path("disk.npz")); }),
                           {file + "'s ZIP64 end record numbers this disk 2 and the central directory's disk 0"}));
}

TEST_F(IoTest, NpzEntriesThatShareBytesAreAnError) {
  sg::save_npz(path("ok.npz"), {{"w", sg::ones({2, 2})}, {"b", sg::zeros({2})}});
  std::string bytes = read_bytes(path("ok.npz"));
  // w's entry (a 128-byte header and 16 bytes of data at offset 35) claims 10 bytes more,
  // reaching into b's local header at 179.
  const size_t cd = bytes.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(cd, std::string::npos);
  ASSERT_EQ(get32(bytes, cd + 20), 144u);
  for (size_t field : {cd + 20, cd + 24}) bytes.replace(field, 4, std::string("\x9a\x00\x00\x00", 4));
  write_bytes(path("overlap.npz"), bytes);
  EXPECT_EQ(sgtest::message_of([&] { sg::load_npz(path("overlap.npz")); }),
            "load_npz: " + path("overlap.npz") +
                "'s entries 'w.npy' (bytes 0 to 189) and 'b.npy' (from byte 179) overlap: the archive is corrupt");
}

// ---- deflated .npz (np.savez_compressed) ------------------------------------------------------

TEST_F(IoTest, CompressedNpzRoundTripsBitForBit) {
  sg::manual_seed(21);
  const sg::NamedTensors in = {{"zeros", sg::zeros({64, 64})},
                               {"noise", sg::randn({17, 3}, sg::kFloat64)},
                               {"scalar", sg::full({}, -3.5)},
                               {"empty", sg::zeros({0, 3})},
                               {"upper", sg::UpperTriangular::randn(5)}};
  sg::save_npz(path("c.npz"), in, sg::NpzCompression::Deflated);
  sg::save_npz(path("s.npz"), in);
  const sg::NamedTensors out = sg::load_npz(path("c.npz"));
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].first, in[i].first);
    EXPECT_EQ(out[i].second.shape(), in[i].second.shape()) << in[i].first;
    EXPECT_EQ(out[i].second.dtype(), in[i].second.dtype()) << in[i].first;
    EXPECT_EQ(raw_bytes(out[i].second), raw_bytes(in[i].second)) << in[i].first;
  }
  // 16 KiB of zeros compress to almost nothing.
  const std::string compressed = read_bytes(path("c.npz")), stored = read_bytes(path("s.npz"));
  EXPECT_LT(compressed.size(), stored.size() / 4);
  // Saving twice gives the same bytes.
  sg::save_npz(path("c2.npz"), in, sg::NpzCompression::Deflated);
  EXPECT_EQ(read_bytes(path("c2.npz")), compressed);
  EXPECT_TRUE(sg::load_npz(path("c.npz"), sg::kFloat64).at(0).second.dtype() == sg::kFloat64);
}

TEST_F(IoTest, CompressedNpzHeadersDescribeTheDeflatedEntry) {
  const sg::Tensor x = sg::zeros({100});
  sg::save_npz(path("x.npz"), {{"x", x}}, sg::NpzCompression::Deflated);
  sg::save_npy(path("x.npy"), x);
  const std::string zip = read_bytes(path("x.npz")), npy = read_bytes(path("x.npy"));
  // Local header: method 8 (deflate), the CRC-32 and size of the .npy bytes, and the size of
  // the deflated bytes, which run from after the name to the central directory.
  EXPECT_EQ(get32(zip, 0), 0x04034b50u);
  EXPECT_EQ(zip[8], 8);
  EXPECT_EQ(get32(zip, 14), bitwise_crc32(npy));
  EXPECT_EQ(get32(zip, 22), npy.size());
  const size_t cd = zip.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(cd, std::string::npos);
  EXPECT_EQ(get32(zip, 18), cd - 35);
  EXPECT_EQ(zip[cd + 10], 8);
  EXPECT_EQ(get32(zip, cd + 16), bitwise_crc32(npy));
  EXPECT_EQ(get32(zip, cd + 20), cd - 35);
  EXPECT_EQ(get32(zip, cd + 24), npy.size());
  // The default stays stored.
  sg::save_npz(path("s.npz"), {{"x", x}});
  EXPECT_EQ(read_bytes(path("s.npz"))[8], 0);
}

TEST_F(IoTest, DeflatedEntriesThatLieOrBreakGiveClearErrors) {
  const std::vector<double> v = {1.5, -2, 0.25};
  const std::string npy = npy_file(f8_header("(3,)"), bytes_of(v));  // 128 + 24 bytes
  const uint32_t crc = bitwise_crc32(npy);
  const std::string file = "load_npz: " + path("d.npz"), entry = file + " entry 'v.npy'";
  auto load = [&](const ZipItem& item) {
    write_bytes(path("d.npz"), zip_archive({item}, false, 8));
    return sgtest::message_of([&] { sg::load_npz(path("d.npz")); });
  };
  const std::string stream = deflate_stored(npy);  // 5 + 152 bytes

  // Well-formed, in plain and ZIP64 archives.
  for (bool zip64 : {false, true}) {
    write_bytes(path("d.npz"), zip_archive({{"v.npy", stream, npy.size(), crc}}, zip64, 8));
    const sg::NamedTensors t = sg::load_npz(path("d.npz"));
    ASSERT_EQ(t.size(), 1u);
    EXPECT_EQ(t[0].second.to_vector(), v);
  }

  auto hex = [](uint32_t v) {
    char text[11];
    std::snprintf(text, sizeof text, "0x%08x", v);
    return std::string(text);
  };
  EXPECT_EQ(load({"v.npy", stream, npy.size(), crc ^ 1}),
            entry + " fails its CRC-32 check (stored " + hex(crc ^ 1) + ", computed " + hex(crc) +
                "): the archive is corrupt");

  // A declared size no deflate stream of 157 bytes can reach: refused before any tensor is made.
  const uint64_t allocations = sg::host_memory_stats().num_allocations;
  EXPECT_EQ(load({"v.npy", stream, 0xFFFFFFF0u, crc}),
            entry + " declares 4294967280 bytes uncompressed from 157 compressed, more than deflate can expand "
                    "to (1032 times): the archive is corrupt");
  EXPECT_EQ(sg::host_memory_stats().num_allocations, allocations);

  // Sizes that disagree with the array's header.
  EXPECT_EQ(load({"v.npy", stream, npy.size() - 8, crc}),
            entry + " declares 144 bytes uncompressed, but its header says [3] float64, 24 bytes after the 128-byte "
                    "header: the archive is corrupt");
  EXPECT_EQ(load({"v.npy", stream, 100, crc}),
            entry + " has a header length of 118 bytes, which exceeds its declared size (100 bytes): it is "
                    "truncated or corrupt");

  // Header and declared size agree, but the stream holds more, or fewer, bytes.
  std::string two = npy;
  ASSERT_EQ(replace_all(two, "(3,), ", "(2,), "), 1);
  EXPECT_EQ(load({"v.npy", deflate_stored(two), npy.size() - 8, bitwise_crc32(two.substr(0, npy.size() - 8))}),
            entry + " inflates to more than the 144 bytes its directory entry declares: the archive is corrupt");
  std::string four = npy;
  ASSERT_EQ(replace_all(four, "(3,), ", "(4,), "), 1);
  EXPECT_EQ(load({"v.npy", deflate_stored(four), npy.size() + 8, crc}),
            entry + " inflates to 152 bytes, fewer than the 160 its directory entry declares: the archive is corrupt");

  // Broken streams: cut short, an invalid block type, bytes after the end.
  EXPECT_EQ(load({"v.npy", stream.substr(0, 100), npy.size(), crc}),
            entry + " is cut short: its 100 compressed bytes end before its deflate stream does: the archive is "
                    "corrupt");
  std::string bad_block = stream;
  bad_block[0] = 0x07;  // BFINAL 1, BTYPE 11 (reserved)
  EXPECT_EQ(load({"v.npy", bad_block, npy.size(), crc}),
            entry + " holds corrupt deflate data (zlib: invalid block type): the archive is corrupt");
  EXPECT_EQ(load({"v.npy", stream + "xyz", npy.size(), crc}),
            entry + " has 3 of its 160 compressed bytes left after the end of its deflate stream: the archive is "
                    "corrupt");
  EXPECT_EQ(load({"v.npy", "", 0, 0}), entry + " is empty (0 bytes), not a .npy file");
  EXPECT_EQ(load({"v.npy", "", 152, crc}),
            entry + " declares 152 bytes uncompressed from 0 compressed, more than deflate can expand to (1032 times): "
                    "the archive is corrupt");
  EXPECT_EQ(load({"v.npy", stream.substr(0, 3), 152, crc}),
            entry + " is cut short: its 3 compressed bytes end before its deflate stream does: the archive is corrupt");
}

TEST_F(IoTest, EveryByteFlipOfADeflatedEntryIsCaughtOrHarmless) {
  const sg::Tensor x = sg::arange(40, sg::kFloat64).dense() * 0.5;
  sg::save_npz(path("x.npz"), {{"x", x}}, sg::NpzCompression::Deflated);
  const std::string good = read_bytes(path("x.npz"));
  const size_t cd = good.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(cd, std::string::npos);
  const std::string prefix = "load_npz: " + path("flip.npz") + " entry 'x.npy'";
  int caught = 0;
  for (size_t at = 35; at < cd; ++at) {  // every byte of the deflate stream
    for (unsigned char mask : {0x01, 0x10, 0x80}) {
      std::string bytes = good;
      bytes[at] = static_cast<char>(bytes[at] ^ mask);
      write_bytes(path("flip.npz"), bytes);
      try {
        const sg::NamedTensors t = sg::load_npz(path("flip.npz"));
        // Only a flip that inflates to the same bytes (unused bits at the stream's end) may load.
        ASSERT_EQ(t.size(), 1u);
        EXPECT_EQ(raw_bytes(t[0].second), raw_bytes(x)) << "byte " << at << " mask " << int(mask);
      } catch (const sg::Error& e) {
        EXPECT_TRUE(contains_all(e.what(), {prefix})) << "byte " << at;
        ++caught;
      }
    }
  }
  EXPECT_GT(caught, 0);
}

// ---- files NumPy wrote (tests/data) ----------------------------------------------------------

fs::path source_dir() {
  const char* dir = std::getenv("SG_SOURCE_DIR");
  return dir ? fs::path(dir) : fs::path(__FILE__).parent_path().parent_path();
}

TEST_F(IoTest, ReadsArchivesNumpyWrote) {
  // tests/data/README.md says how they were made; both hold the same arrays.
  for (const std::string name : {"numpy_savez.npz", "numpy_savez_compressed.npz"}) {
    const std::string file = (source_dir() / "tests" / "data" / name).string();
    ASSERT_TRUE(fs::exists(file)) << file;
    const sg::NamedTensors t = sg::load_npz(file);
    ASSERT_EQ(t.size(), 4u) << name;
    EXPECT_EQ(t[0].first, "x");
    EXPECT_EQ(t[0].second.dtype(), sg::kFloat32);
    EXPECT_EQ(t[0].second.shape(), (sg::Shape{2, 3}));
    EXPECT_EQ(raw_bytes(t[0].second), bytes_of(std::vector<float>{0.5f, -1.25f, 3.0f, 1e-3f, -0.0f, 65504.0f})) << name;
    EXPECT_EQ(t[1].first, "y");
    EXPECT_EQ(t[1].second.dtype(), sg::kFloat64);
    EXPECT_EQ(t[1].second.shape(), (sg::Shape{4}));
    EXPECT_EQ(raw_bytes(t[1].second),
              bytes_of(std::vector<double>{0.1, -2.5, 1e300, std::numeric_limits<double>::denorm_min()})) << name;
    EXPECT_EQ(t[2].first, "s");
    EXPECT_EQ(t[2].second.dim(), 0);
    EXPECT_EQ(t[2].second.item(), 7.25);
    EXPECT_EQ(t[3].first, "e");
    EXPECT_EQ(t[3].second.dtype(), sg::kFloat32);
    EXPECT_EQ(t[3].second.shape(), (sg::Shape{0, 3}));
  }
}

TEST_F(IoTest, SaveNpzRejectsBadNames) {
  const sg::Tensor x = sg::ones({2});
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::save_npz(path("a.npz"), {{"x", x}, {"x", x}}); }),
                           {"save_npz: the name 'x' appears twice"}));
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::save_npz(path("a.npz"), {{"", x}}); }),
                           {"save_npz: the name of tensor 0", "is empty"}));
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::save_npz(path("a.npz"), {{"x", x}, {"y", sg::Tensor()}}); }),
                           {"save_npz: tensor 'y'", "is undefined"}));
  EXPECT_FALSE(fs::exists(path("a.npz")));
}

// ---- module state dicts --------------------------------------------------------------------

struct TinyNet : sg::nn::Module {
  explicit TinyNet(sg::TensorOptions o = {}) {
    flow = register_module("flow", std::make_shared<sg::nn::UpperLinear>(4, true, o));
    head = register_module("head", std::make_shared<sg::nn::Linear>(4, 2, true, o));
    form = register_module("form", std::make_shared<sg::nn::SymmetricBilinear>(4, o));
  }
  sg::Tensor loss(const sg::Tensor& x, const sg::Tensor& y, const sg::Tensor& q) const {
    const sg::Tensor h = sg::tanh(flow->forward(x));
    return sg::mean(sg::square(head->forward(h) - y)) + sg::mean(sg::square(form->forward(h) - q));
  }
  std::shared_ptr<sg::nn::UpperLinear> flow;
  std::shared_ptr<sg::nn::Linear> head;
  std::shared_ptr<sg::nn::SymmetricBilinear> form;
};

/// Gives every parameter distinct values inside its structure.
void scramble(TinyNet& net, uint64_t seed) {
  sg::manual_seed(seed);
  sg::NoGradGuard guard;
  for (auto& p : net.parameters()) {
    sg::Tensor r = sg::randn(p.shape(), p.dtype());
    if (p.structure() == sg::Structure::UpperTriangular) r = sg::triu(r);
    if (p.structure() == sg::Structure::Symmetric) r = sg::sym(r);
    p.copy_(r);
  }
}

std::vector<std::string> all_parameter_bytes(const sg::nn::Module& m) {
  std::vector<std::string> out;
  for (auto& p : m.parameters()) out.push_back(raw_bytes(p));
  return out;
}

TEST_F(IoTest, StateDictNamesAndSharesParameters) {
  TinyNet net;
  const auto state = net.state_dict();
  std::vector<std::string> names;
  for (const auto& [name, t] : state) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"flow.weight", "flow.bias", "head.weight", "head.bias", "form.weight"}));
  EXPECT_EQ(state[0].second.structure(), sg::Structure::UpperTriangular);
  EXPECT_FALSE(state[0].second.requires_grad());
  EXPECT_EQ(state[0].second.data_ptr(), net.flow->weight.data_ptr());
}

TEST_F(IoTest, ModuleSaveLoadRestoresInPlaceKeepingStructure) {
  TinyNet a, b;
  scramble(a, 1);
  scramble(b, 2);
  ASSERT_NE(all_parameter_bytes(a), all_parameter_bytes(b));
  const void* b_weight_storage = b.flow->weight.data_ptr();
  const sg::Tensor b_weight_handle = b.flow->weight;
  sg::nn::save(a, path("a.npz"));
  sg::nn::load(b, path("a.npz"));
  EXPECT_EQ(all_parameter_bytes(b), all_parameter_bytes(a));
  EXPECT_EQ(b.flow->weight.data_ptr(), b_weight_storage);  // copied in place
  EXPECT_EQ(raw_bytes(b_weight_handle), raw_bytes(a.flow->weight));
  EXPECT_EQ(b.flow->weight.structure(), sg::Structure::UpperTriangular);
  EXPECT_EQ(b.form->weight.structure(), sg::Structure::Symmetric);
  EXPECT_TRUE(b.flow->weight.requires_grad());
  // numpy-style key access: the archive holds the dotted names.
  const sg::NamedTensors raw = sg::load_npz(path("a.npz"));
  EXPECT_EQ(raw.at(0).first, "flow.weight");
}

TEST_F(IoTest, LoadStateDictChecksEverythingBeforeWriting) {
  TinyNet net;
  scramble(net, 4);
  const auto before = all_parameter_bytes(net);
  auto good = net.state_dict();
  for (auto& [name, t] : good) t = t.clone();
  auto with = [&](const std::string& key, const sg::Tensor& value) {
    auto s = good;
    for (auto& [name, t] : s)
      if (name == key) t = value;
    return s;
  };
  auto load_error = [&](const std::vector<std::pair<std::string, sg::Tensor>>& s) {
    return sgtest::message_of([&] { net.load_state_dict(s); });
  };

  auto missing = good;
  missing.pop_back();
  EXPECT_EQ(load_error(missing), "load_state_dict: the names do not match the module's parameters; missing: 'form.weight'");
  auto extra = good;
  extra.emplace_back("head.scale", sg::ones({1}));
  EXPECT_EQ(load_error(extra), "load_state_dict: the names do not match the module's parameters; unexpected: 'head.scale'");
  EXPECT_EQ(load_error(with("head.bias", sg::zeros({3}))),
            "load_state_dict: parameter 'head.bias' has shape [2] but the state dict holds [3]");
  EXPECT_TRUE(contains_all(load_error(with("head.bias", sg::zeros({2}, sg::kFloat64))),
                           {"load_state_dict: parameter 'head.bias' is float32 but the state dict holds float64"}));
  sg::Tensor not_upper = sg::ones({4, 4});
  EXPECT_EQ(load_error(with("flow.weight", not_upper)),
            "load_state_dict: parameter 'flow.weight' is UpperTriangular but the incoming values are not (as_upper: "
            "entry (1, 0) = 1 is below the diagonal and not zero; use sg::triu to project)");
  const sg::Tensor not_symmetric = sg::tensor({{1, 2, 0, 0}, {3, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}});
  EXPECT_TRUE(contains_all(load_error(with("form.weight", not_symmetric)),
                           {"load_state_dict: parameter 'form.weight' is Symmetric but the incoming values are not"}));
  // Every failure above left the parameters untouched.
  EXPECT_EQ(all_parameter_bytes(net), before);

  // Dense values that satisfy the invariant load and keep the tag.
  auto upper_values = sg::triu(sg::ones({4, 4})).dense();
  net.load_state_dict(with("flow.weight", upper_values));
  EXPECT_EQ(net.flow->weight.structure(), sg::Structure::UpperTriangular);
  EXPECT_EQ(net.flow->weight.to_vector(), upper_values.to_vector());
}

// ---- optimizer state and bit-identical resume ----------------------------------------------

enum class OptKind { Adam, AdamW, SGDMomentum, SGDNesterov };

std::unique_ptr<sg::optim::Optimizer> make_optimizer(OptKind kind, const TinyNet& net, double lr) {
  if (kind == OptKind::Adam) return std::make_unique<sg::optim::Adam>(net.parameters(), sg::optim::AdamOptions{.lr = lr});
  if (kind == OptKind::AdamW)
    return std::make_unique<sg::optim::Adam>(
        net.parameters(), sg::optim::AdamOptions{.lr = lr, .weight_decay = 0.1, .decoupled_weight_decay = true});
  if (kind == OptKind::SGDMomentum)
    return std::make_unique<sg::optim::SGD>(net.parameters(),
                                            sg::optim::SGDOptions{.lr = lr, .momentum = 0.9, .dampening = 0.1});
  return std::make_unique<sg::optim::SGD>(
      net.parameters(), sg::optim::SGDOptions{.lr = lr, .momentum = 0.8, .weight_decay = 0.01, .nesterov = true});
}

struct Batch {
  sg::Tensor x, y, q;
};

std::vector<Batch> make_batches(int count, sg::DType dtype) {
  sg::manual_seed(100);
  std::vector<Batch> out;
  for (int i = 0; i < count; ++i)
    out.push_back({sg::randn({8, 4}, dtype), sg::randn({8, 2}, dtype), sg::randn({8}, dtype)});
  return out;
}

void train(TinyNet& net, sg::optim::Optimizer& opt, const std::vector<Batch>& batches, int begin, int end) {
  for (int i = begin; i < end; ++i) {
    opt.zero_grad();
    net.loss(batches[i].x, batches[i].y, batches[i].q).backward();
    opt.step();
  }
}

class Resume : public IoTest, public ::testing::WithParamInterface<std::tuple<OptKind, sg::DType>> {};

TEST_P(Resume, CheckpointResumesBitIdentically) {
  const auto [kind, dtype] = GetParam();
  const int n = 6, m = 5;
  const auto batches = make_batches(n + m, dtype);

  TinyNet a(dtype);
  scramble(a, 1);
  auto opt_a = make_optimizer(kind, a, 0.05);
  train(a, *opt_a, batches, 0, n);
  sg::save_checkpoint(path("ckpt.npz"), a, *opt_a);
  train(a, *opt_a, batches, n, n + m);

  // A fresh model and optimizer built with other values and another learning rate.
  TinyNet b(dtype);
  scramble(b, 2);
  auto opt_b = make_optimizer(kind, b, 0.5);
  sg::load_checkpoint(path("ckpt.npz"), b, *opt_b);
  train(b, *opt_b, batches, n, n + m);
  EXPECT_EQ(all_parameter_bytes(b), all_parameter_bytes(a));
  EXPECT_EQ(b.flow->weight.structure(), sg::Structure::UpperTriangular);
  EXPECT_EQ(b.form->weight.structure(), sg::Structure::Symmetric);

  // The optimizer state matters: loading only the parameters does not reproduce the run.
  TinyNet c(dtype);
  auto opt_c = make_optimizer(kind, c, 0.05);
  sg::NamedTensors model_only;
  for (auto& [name, t] : sg::load_npz(path("ckpt.npz")))
    if (name.rfind("model.", 0) == 0) model_only.emplace_back(name.substr(6), t);
  c.load_state_dict(model_only);
  train(c, *opt_c, batches, n, n + m);
  EXPECT_NE(all_parameter_bytes(c), all_parameter_bytes(a));
}

std::string resume_name(const ::testing::TestParamInfo<std::tuple<OptKind, sg::DType>>& info) {
  const char* kinds[] = {"Adam", "AdamW", "SGDMomentum", "SGDNesterov"};
  return std::string(kinds[static_cast<int>(std::get<0>(info.param))]) +
         (std::get<1>(info.param) == sg::kFloat32 ? "_f32" : "_f64");
}

INSTANTIATE_TEST_SUITE_P(Io, Resume,
                         ::testing::Combine(::testing::Values(OptKind::Adam, OptKind::AdamW, OptKind::SGDMomentum,
                                                              OptKind::SGDNesterov),
                                            ::testing::Values(sg::kFloat32, sg::kFloat64)),
                         resume_name);

TEST_F(IoTest, OptimizerStateDictContents) {
  TinyNet net;
  sg::optim::Adam adam(net.parameters(), {.lr = 0.01, .beta1 = 0.8});
  const auto batches = make_batches(3, sg::kFloat32);
  train(net, adam, batches, 0, 3);
  std::map<std::string, sg::Tensor> s;
  for (auto& [name, t] : adam.state_dict()) s[name] = t;
  EXPECT_EQ(s.at("adam.step").item(), 3.0);
  EXPECT_EQ(s.at("adam.step").dim(), 0);
  EXPECT_EQ(s.at("adam.beta1").item(), 0.8);
  EXPECT_EQ(s.at("adam.num_params").item(), 5.0);
  EXPECT_EQ(raw_bytes(s.at("adam.exp_avg_sq.4")), raw_bytes(adam.exp_avg_sq(4)));
  EXPECT_EQ(s.size(), 8u + 2 * 5);

  // SGD without a step has no momentum buffers yet, and a fresh SGD accepts that state.
  sg::optim::SGD sgd(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  const auto empty_state = sgd.state_dict();
  EXPECT_EQ(empty_state.size(), 6u);
  train(net, sgd, batches, 0, 1);
  EXPECT_EQ(sgd.state_dict().size(), 6u + 5);
  sgd.load_state_dict(empty_state);  // back to "no step taken"
  EXPECT_EQ(sgd.state_dict().size(), 6u);
}

TEST_F(IoTest, OptimizerLoadRejectsMismatchedState) {
  TinyNet net, other;
  sg::optim::Adam adam(net.parameters(), {});
  sg::optim::SGD sgd(net.parameters(), {.momentum = 0.9});
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sgd.load_state_dict(adam.state_dict()); }),
                           {"SGD::load_state_dict: the state dict has no 'sgd.lr'", "is it from another optimizer?"}));
  sg::optim::Adam small({net.flow->weight}, {});
  EXPECT_EQ(sgtest::message_of([&] { small.load_state_dict(adam.state_dict()); }),
            "Adam::load_state_dict: the state dict is for 5 parameters, this optimizer has 1");
  auto state = adam.state_dict();
  for (auto& [name, t] : state)
    if (name == "adam.exp_avg.2") t = sg::zeros({3, 3});
  EXPECT_EQ(sgtest::message_of([&] { adam.load_state_dict(state); }),
            "Adam::load_state_dict: 'adam.exp_avg.2' is [3, 3] float32 but parameter 2 is [2, 4] float32");
  state = adam.state_dict();
  state.emplace_back("adam.extra", sg::ones({1}));
  EXPECT_EQ(sgtest::message_of([&] { adam.load_state_dict(state); }),
            "Adam::load_state_dict: unexpected entries in the state dict: 'adam.extra'");
  state = adam.state_dict();
  for (auto& [name, t] : state)
    if (name == "adam.step") t = sg::full({}, 2.5, sg::kFloat64);
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { adam.load_state_dict(state); }), {"'adam.step' should be a non-negative integer"}));

  // A checkpoint whose optimizer part does not fit leaves the model unchanged as well.
  scramble(net, 8);
  scramble(other, 9);
  sg::save_checkpoint(path("adam.npz"), net, adam);
  const auto before = all_parameter_bytes(other);
  sg::optim::SGD other_sgd(other.parameters(), {.momentum = 0.9});
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::load_checkpoint(path("adam.npz"), other, other_sgd); }),
                           {"load_checkpoint: " + path("adam.npz"), "SGD::load_state_dict"}));
  EXPECT_EQ(all_parameter_bytes(other), before);
}

// ---- NumPy interop -------------------------------------------------------------------------

bool numpy_available() { return std::system("python3 -c \"import numpy\" > /dev/null 2>&1") == 0; }

int run_python(const std::string& script_path, const std::string& script) {
  std::ofstream(script_path) << script;
  return std::system(("python3 " + script_path).c_str());
}

TEST_F(IoTest, NumpyReadsWhatWeWrite) {
  if (!numpy_available()) GTEST_SKIP() << "python3 with numpy is not installed on this machine";
  // Values i/4 − 3 are exact in both dtypes, so numpy can compare them exactly.
  const sg::Tensor a = sg::arange(12, sg::kFloat32).dense() * 0.25 - 3.0;
  sg::Tensor m = sg::from_vector(a.to_vector(), {3, 4}, sg::kFloat64);
  sg::save_npy(path("m.npy"), m);
  sg::save_npy(path("s.npy"), sg::full({}, 1.5));
  sg::save_npz(path("z.npz"), {{"layer.w", sg::as_upper(sg::triu(sg::ones({3, 3})).dense())},
                               {"v", sg::from_vector(a.to_vector(), {12}, sg::kFloat32)},
                               {"empty", sg::zeros({0, 2})}});
  sg::save_npz(path("c.npz"), {{"v", sg::from_vector(a.to_vector(), {12}, sg::kFloat32)}, {"zeros", sg::zeros({50, 40}, sg::kFloat64)}},
               sg::NpzCompression::Deflated);
  const std::string script = "import numpy as np, sys\n"
                             "d = '" + dir_.string() + "'\n"
                             "ref = (np.arange(12) / 4.0 - 3.0)\n"
                             "m = np.load(d + '/m.npy')\n"
                             "assert m.dtype == np.float64 and m.shape == (3, 4), (m.dtype, m.shape)\n"
                             "assert np.array_equal(m, ref.reshape(3, 4))\n"
                             "s = np.load(d + '/s.npy')\n"
                             "assert s.dtype == np.float32 and s.shape == () and s == 1.5\n"
                             "z = np.load(d + '/z.npz')\n"
                             "assert list(z.keys()) == ['layer.w', 'v', 'empty'], list(z.keys())\n"
                             "assert np.array_equal(z['layer.w'], np.triu(np.ones((3, 3), np.float32)))\n"
                             "assert z['v'].dtype == np.float32 and np.array_equal(z['v'], ref.astype(np.float32))\n"
                             "assert z['empty'].shape == (0, 2)\n"
                             "c = np.load(d + '/c.npz')\n"
                             "assert list(c.keys()) == ['v', 'zeros'], list(c.keys())\n"
                             "assert np.array_equal(c['v'], ref.astype(np.float32))\n"
                             "assert c['zeros'].dtype == np.float64 and np.array_equal(c['zeros'], np.zeros((50, 40)))\n"
                             "import zipfile\n"
                             "assert zipfile.ZipFile(d + '/z.npz').testzip() is None\n"
                             "cz = zipfile.ZipFile(d + '/c.npz')\n"
                             "assert cz.testzip() is None\n"
                             "assert [i.compress_type for i in cz.infolist()] == [zipfile.ZIP_DEFLATED] * 2\n";
  EXPECT_EQ(run_python(path("read.py"), script), 0) << "numpy rejected or misread our files";
}

TEST_F(IoTest, WeReadWhatNumpyWrites) {
  if (!numpy_available()) GTEST_SKIP() << "python3 with numpy is not installed on this machine";
  const std::string script = "import numpy as np\n"
                             "d = '" + dir_.string() + "'\n"
                             "a = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5\n"
                             "np.save(d + '/a.npy', a)\n"
                             "np.save(d + '/f.npy', np.asfortranarray(np.ones((2, 3))))\n"
                             "np.save(d + '/i.npy', np.arange(4, dtype=np.int64) - 1)\n"
                             "np.save(d + '/u.npy', np.arange(4, dtype=np.int32))\n"
                             "np.save(d + '/b.npy', np.arange(3, dtype='>f8'))\n"
                             "np.save(d + '/r.npy', np.float64(7.0))\n"
                             "np.savez(d + '/z.npz', w=np.eye(3), bias=np.float32([1, 2]))\n"
                             "np.savez_compressed(d + '/c.npz', w=np.eye(3))\n";
  ASSERT_EQ(run_python(path("write.py"), script), 0);
  const sg::Tensor a = sg::load_npy(path("a.npy"));
  EXPECT_EQ(a.dtype(), sg::kFloat32);
  EXPECT_EQ(a.shape(), (sg::Shape{2, 3}));
  EXPECT_EQ(a.to_vector(), (std::vector<double>{-2.5, -1.5, -0.5, 0.5, 1.5, 2.5}));
  const sg::Tensor r = sg::load_npy(path("r.npy"));
  EXPECT_EQ(r.dim(), 0);
  EXPECT_EQ(r.item(), 7.0);
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::load_npy(path("f.npy")); }), {"Fortran"}));
  const sg::Tensor i = sg::load_npy(path("i.npy"));
  EXPECT_EQ(i.dtype(), sg::kInt64);
  EXPECT_EQ(i.to_vector_as<int64_t>(), (std::vector<int64_t>{-1, 0, 1, 2}));
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::load_npy(path("u.npy")); }), {"has dtype '<i4'"}));
  EXPECT_TRUE(contains_all(sgtest::message_of([&] { sg::load_npy(path("b.npy")); }), {"big-endian"}));
  const sg::NamedTensors z = sg::load_npz(path("z.npz"));
  ASSERT_EQ(z.size(), 2u);
  EXPECT_EQ(z[0].first, "w");
  EXPECT_EQ(z[0].second.to_vector(), sg::eye(3, sg::kFloat64).to_vector());
  EXPECT_EQ(sg::as_symmetric(z[0].second).structure(), sg::Structure::Symmetric);
  EXPECT_EQ(z[1].first, "bias");
  EXPECT_EQ(z[1].second.dtype(), sg::kFloat32);
  EXPECT_EQ(z[1].second.to_vector(), (std::vector<double>{1, 2}));
  const sg::NamedTensors c = sg::load_npz(path("c.npz"));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].first, "w");
  EXPECT_EQ(c[0].second.to_vector(), sg::eye(3, sg::kFloat64).to_vector());
}

}  // namespace
