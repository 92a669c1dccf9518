// .npy and .npz reading and writing: the NPY preamble and its header (a Python dict literal),
// the ZIP container of .npz (local headers, central directory, end records, CRC-32), and the
// checks that turn a corrupt, truncated or foreign file into an sg::Error naming file and fault.
#include <structgrad/io/npy.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>

#include <zlib.h>

#include <structgrad/autograd/grad_mode.h>

namespace sg {
namespace {

// ---- little-endian bytes -----------------------------------------------------------------

bool host_is_little_endian() {
  const uint16_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

void check_host_endianness(const char* op) {
  SG_CHECK(host_is_little_endian(), op, ": this host is big-endian; structgrad reads and writes only little-endian files");
}

uint16_t get16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t get32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t get64(const unsigned char* p) { return static_cast<uint64_t>(get32(p)) | (static_cast<uint64_t>(get32(p + 4)) << 32); }

void put16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v & 0xFF));
  out.push_back(static_cast<char>(v >> 8));
}
void put32(std::string& out, uint32_t v) {
  put16(out, static_cast<uint16_t>(v & 0xFFFF));
  put16(out, static_cast<uint16_t>(v >> 16));
}

// ---- byte sources: a file, or an archive entry already in memory -------------------------

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  /// Reads n bytes at offset; the caller has checked that offset + n <= size().
  virtual void read(uint64_t offset, void* dst, size_t n) = 0;
  /// True when size() is what an archive entry declares rather than bytes already at hand.
  virtual bool size_is_declared() const { return false; }
};

class FileSource : public ByteSource {
 public:
  FileSource(const std::string& path, const char* op) : path_(path), op_(op) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    SG_CHECK(std::filesystem::exists(status), op, ": no such file: ", path);
    SG_CHECK(!std::filesystem::is_directory(status), op, ": ", path, " is a directory, not a file");
    in_.open(path, std::ios::binary);
    SG_CHECK(in_.is_open(), op, ": cannot open ", path, " for reading (", std::strerror(errno), ")");
    in_.seekg(0, std::ios::end);
    const std::streamoff end = in_.tellg();
    SG_CHECK(end >= 0, op, ": cannot determine the size of ", path);
    size_ = static_cast<uint64_t>(end);
  }
  uint64_t size() const override { return size_; }
  void read(uint64_t offset, void* dst, size_t n) override {
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    SG_CHECK(in_.good() && static_cast<size_t>(in_.gcount()) == n, op_, ": reading ", n, " bytes at offset ", offset,
             " of ", path_, " failed");
  }

 private:
  std::string path_;
  const char* op_;
  std::ifstream in_;
  uint64_t size_ = 0;
};

class MemorySource : public ByteSource {
 public:
  MemorySource(const unsigned char* data, size_t size) : data_(data), size_(size) {}
  uint64_t size() const override { return size_; }
  void read(uint64_t offset, void* dst, size_t n) override {
    if (n) std::memcpy(dst, data_ + offset, n);
  }

 private:
  const unsigned char* data_;
  size_t size_;
};

// ---- writing through a temporary file that is renamed into place --------------------------

class OutFile {
 public:
  OutFile(const std::string& path, const char* op) : path_(path), op_(op) {
    tmp_path_ = path + ".tmp" + std::to_string(std::random_device{}());
    out_.open(tmp_path_, std::ios::binary | std::ios::trunc);
    SG_CHECK(out_.is_open(), op, ": cannot open ", path, " for writing (", std::strerror(errno), ")");
  }
  ~OutFile() {
    if (committed_) return;
    out_.close();
    std::error_code ec;
    std::filesystem::remove(tmp_path_, ec);
  }
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;

  void write(const void* data, size_t n) {
    out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
    SG_CHECK(out_.good(), op_, ": writing ", path_, " failed after ", offset_, " bytes (disk full?)");
    offset_ += n;
  }
  void write(const std::string& bytes) { write(bytes.data(), bytes.size()); }
  uint64_t offset() const { return offset_; }

  /// Overwrites bytes written earlier at `at` (a size known only after the data), then goes on
  /// writing at the end.
  void patch(uint64_t at, const std::string& bytes) {
    out_.seekp(static_cast<std::streamoff>(at));
    out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out_.seekp(0, std::ios::end);
    SG_CHECK(out_.good(), op_, ": writing ", path_, " failed at offset ", at);
  }

  void commit() {
    out_.flush();
    SG_CHECK(out_.good(), op_, ": writing ", path_, " failed (disk full?)");
    out_.close();
    std::error_code ec;
    std::filesystem::rename(tmp_path_, path_, ec);
    SG_CHECK(!ec, op_, ": cannot move the written file into place at ", path_, " (", ec.message(), ")");
    committed_ = true;
  }

 private:
  std::string path_, tmp_path_;
  const char* op_;
  std::ofstream out_;
  uint64_t offset_ = 0;
  bool committed_ = false;
};

// ---- the NPY format ------------------------------------------------------------------------
// Preamble: "\x93NUMPY", major, minor, header length (2 bytes LE for 1.0, 4 for 2.0/3.0), then
// the header: "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }" padded with spaces
// and a final '\n' so that the data starts at a multiple of 64 bytes. Data follows, C order.

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicLength = 6;
constexpr size_t kNpyAlignment = 64;
constexpr size_t kNpyMaxDims = 64;  // NumPy's NPY_MAXDIMS

struct NpyArrayInfo {
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t data_offset = 0;
  uint64_t data_bytes = 0;
};

std::string shape_tuple(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) s += ",";
  return s + ")";
}

/// The full preamble (magic, version, length, padded header) for a C-ordered host tensor.
std::string npy_preamble(const Tensor& host) {
  const std::string dict = std::string("{'descr': '") + (host.dtype() == DType::Float32 ? "<f4" : host.dtype() == DType::Float64 ? "<f8" : "<i8") +
                           "', 'fortran_order': False, 'shape': " + shape_tuple(host.shape()) + ", }";
  // Version 1.0 always: with at most 64 dimensions the header stays far below its 64 KiB limit.
  const size_t unpadded = 10 + dict.size() + 1;  // preamble + dict + '\n'
  const size_t pad = (kNpyAlignment - unpadded % kNpyAlignment) % kNpyAlignment;
  const std::string header = dict + std::string(pad, ' ') + "\n";
  std::string out(kNpyMagic, kNpyMagicLength);
  out += '\x01';
  out += '\x00';
  put16(out, static_cast<uint16_t>(header.size()));
  return out + header;
}

/// A value of the header dict: a string, a bool, a tuple of non-negative ints, or a list
/// (a structured dtype, which is reported, not parsed).
struct HeaderValue {
  enum Kind { String, Bool, Tuple, List } kind = String;
  std::string text;
  bool flag = false;
  std::vector<uint64_t> ints;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& header, const std::string& what) : s_(header), what_(what) {}

  /// Parses the dict into (descr, fortran_order, shape); every key must appear once.
  void parse(HeaderValue& descr, HeaderValue& fortran_order, HeaderValue& shape) {
    bool seen[3] = {false, false, false};
    skip_space();
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') {
        ++pos_;
        break;
      }
      const HeaderValue key = parse_value();
      if (key.kind != HeaderValue::String) fail("a key is not a string");
      skip_space();
      expect(':');
      skip_space();
      const HeaderValue value = parse_value();
      int index = key.text == "descr" ? 0 : key.text == "fortran_order" ? 1 : key.text == "shape" ? 2 : -1;
      if (index < 0) fail("unknown key '" + key.text + "'");
      if (seen[index]) fail("key '" + key.text + "' appears twice");
      seen[index] = true;
      (index == 0 ? descr : index == 1 ? fortran_order : shape) = value;
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != '}') {
        fail("expected ',' or '}' at offset " + std::to_string(pos_));
      }
    }
    skip_space();
    if (pos_ != s_.size()) fail("unexpected text after the dictionary at offset " + std::to_string(pos_));
    const char* names[3] = {"descr", "fortran_order", "shape"};
    for (int i = 0; i < 3; ++i)
      if (!seen[i]) fail(std::string("missing key '") + names[i] + "'");
    if (fortran_order.kind != HeaderValue::Bool) fail("'fortran_order' is not True or False");
    if (shape.kind != HeaderValue::Tuple) fail("'shape' is not a tuple");
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    std::string shown = s_.substr(0, 200);
    while (!shown.empty() && (shown.back() == ' ' || shown.back() == '\n')) shown.pop_back();
    SG_FAIL(what_, " has a malformed .npy header (", problem, "): \"", shown, s_.size() > 200 ? "..." : "", "\"");
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r' ||
                                s_[pos_] == '\0'))
      ++pos_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "' at offset " + std::to_string(pos_));
    ++pos_;
  }
  bool take_word(const char* word) {
    const size_t n = std::strlen(word);
    if (s_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }
  uint64_t parse_uint() {
    if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected a non-negative integer at offset " + std::to_string(pos_));
    uint64_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      const uint64_t digit = static_cast<uint64_t>(s_[pos_++] - '0');
      if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10)
        fail("a dimension does not fit in 64 bits");
      v = v * 10 + digit;
    }
    if (peek() == 'L') ++pos_;  // written by Python 2
    return v;
  }
  HeaderValue parse_value() {
    HeaderValue v;
    const char c = peek();
    if (c == '\'' || c == '"') {
      ++pos_;
      while (pos_ < s_.size() && s_[pos_] != c) {
        if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
        v.text += s_[pos_++];
      }
      expect(c);
      v.kind = HeaderValue::String;
    } else if (take_word("True")) {
      v.kind = HeaderValue::Bool;
      v.flag = true;
    } else if (take_word("False")) {
      v.kind = HeaderValue::Bool;
      v.flag = false;
    } else if (c == '(') {
      ++pos_;
      v.kind = HeaderValue::Tuple;
      skip_space();
      while (peek() != ')') {
        v.ints.push_back(parse_uint());
        skip_space();
        if (peek() == ',') {
          ++pos_;
          skip_space();
        } else if (peek() != ')') {
          fail("expected ',' or ')' in the shape at offset " + std::to_string(pos_));
        }
      }
      ++pos_;
    } else if (c == '[') {  // a structured dtype: skip to the matching bracket
      const size_t begin = pos_;
      int depth = 0;
      char quote = 0;
      for (; pos_ < s_.size(); ++pos_) {
        const char ch = s_[pos_];
        if (quote) {
          if (ch == quote) quote = 0;
        } else if (ch == '\'' || ch == '"') {
          quote = ch;
        } else if (ch == '[') {
          ++depth;
        } else if (ch == ']' && --depth == 0) {
          break;
        }
      }
      expect(']');
      v.kind = HeaderValue::List;
      v.text = s_.substr(begin, pos_ - begin);
    } else {
      fail("unexpected value at offset " + std::to_string(pos_));
    }
    return v;
  }

  const std::string& s_;
  const std::string& what_;
  size_t pos_ = 0;
};

/// Reads and checks the preamble and header; the data is checked to fill the rest exactly.
NpyArrayInfo read_npy_info(ByteSource& src, const std::string& what) {
  const uint64_t file_size = src.size();
  // Read front to back, each byte once (preamble, header, then the data in read_npy_host), so
  // that an inflated entry can be read as the stream it is.
  unsigned char pre[12] = {};
  src.read(0, pre, static_cast<size_t>(std::min<uint64_t>(file_size, 10)));
  const size_t magic_seen = static_cast<size_t>(std::min<uint64_t>(file_size, kNpyMagicLength));
  SG_CHECK(file_size > 0, what, " is empty (0 bytes), not a .npy file");
  SG_CHECK(std::memcmp(pre, kNpyMagic, magic_seen) == 0, what,
           " is not a .npy file: it does not start with the magic string \\x93NUMPY");
  SG_CHECK(file_size >= 10, what, " is truncated: ", file_size, " bytes, shorter than the 10-byte .npy preamble");
  const int major = pre[6], minor = pre[7];
  SG_CHECK((major == 1 || major == 2 || major == 3) && minor == 0, what, " has .npy format version ", major, ".",
           minor, "; structgrad reads versions 1.0, 2.0 and 3.0");
  const uint64_t prefix = major == 1 ? 10 : 12;
  SG_CHECK(file_size >= prefix, what, " is truncated: ", file_size, " bytes, shorter than the ", prefix,
           "-byte .npy preamble of version ", major, ".0");
  if (prefix == 12) src.read(10, pre + 10, 2);
  const uint64_t header_length = major == 1 ? get16(pre + 8) : get32(pre + 8);
  SG_CHECK(header_length <= file_size - prefix, what, " has a header length of ", header_length,
           " bytes, which exceeds ", src.size_is_declared() ? "its declared size (" : "the file (", file_size,
           " bytes): it is truncated or corrupt");
  std::string header(static_cast<size_t>(header_length), '\0');
  if (header_length) src.read(prefix, header.data(), header.size());

  HeaderValue descr, fortran_order, shape;
  HeaderParser(header, what).parse(descr, fortran_order, shape);
  NpyArrayInfo info;
  if (descr.kind == HeaderValue::List) {
    SG_FAIL(what, " holds a structured dtype ", descr.text,
            "; structgrad reads plain float32 ('<f4'), float64 ('<f8') and int64 ('<i8') arrays");
  } else if (descr.text == "<f4") {
    info.dtype = DType::Float32;
  } else if (descr.text == "<f8") {
    info.dtype = DType::Float64;
  } else if (descr.text == "<i8") {
    info.dtype = DType::Int64;
  } else if (descr.text == ">f4" || descr.text == ">f8" || descr.text == ">i8") {
    SG_FAIL(what, " holds big-endian data ('", descr.text,
            "'); structgrad reads little-endian float32 ('<f4'), float64 ('<f8') and int64 ('<i8'): convert with arr.astype('<",
            descr.text.substr(1), "')");
  } else {
    SG_FAIL(what, " has dtype '", descr.text,
            "'; structgrad reads float32 ('<f4'), float64 ('<f8') and int64 ('<i8'): convert with "
            "arr.astype(np.float32), arr.astype(np.float64) or arr.astype(np.int64)");
  }
  SG_CHECK(!fortran_order.flag, what,
           " is stored in Fortran (column-major) order; structgrad reads C order: save np.ascontiguousarray(arr)");

  SG_CHECK(shape.ints.size() <= kNpyMaxDims, what, " has a shape of ", shape.ints.size(),
           " dimensions; NumPy allows at most ", kNpyMaxDims, ": the header is corrupt");
  // As NumPy checks an array's size: the non-zero dimensions times the element size fit in a
  // signed 64-bit byte count, even when a zero dimension leaves no elements, as in (2**62, 0).
  int64_t bytes = static_cast<int64_t>(element_size(info.dtype));
  bool overflow = false, empty = false;
  for (uint64_t d : shape.ints) {  // each d <= INT64_MAX (parse_uint)
    info.shape.push_back(static_cast<int64_t>(d));
    if (d == 0)
      empty = true;
    else
      overflow = overflow || __builtin_mul_overflow(bytes, static_cast<int64_t>(d), &bytes);
  }
  SG_CHECK(!overflow, what, " has shape ", info.shape, " whose size overflows 64 bits (its non-zero dimensions times ",
           element_size(info.dtype), " bytes): the header is corrupt");
  info.data_offset = prefix + header_length;
  info.data_bytes = empty ? 0 : static_cast<uint64_t>(bytes);
  const uint64_t available = file_size - info.data_offset;
  SG_CHECK(!src.size_is_declared() || info.data_bytes == available, what, " declares ", file_size,
           " bytes uncompressed, but its header says ", info.shape, " ", dtype_name(info.dtype), ", ",
           info.data_bytes, " bytes after the ", info.data_offset, "-byte header: the archive is corrupt");
  SG_CHECK(info.data_bytes <= available, what, " is truncated: header says ", info.shape, " ", dtype_name(info.dtype),
           " (", info.data_bytes, " bytes), file has ", available, " after the ", info.data_offset, "-byte header");
  SG_CHECK(info.data_bytes == available, what, " has ", available - info.data_bytes,
           " unexpected bytes after the data: header says ", info.shape, " ", dtype_name(info.dtype), " (",
           info.data_bytes, " bytes), file has ", available, " after the ", info.data_offset, "-byte header");
  return info;
}

/// The array `src` holds, on the CPU in the file's dtype.
Tensor read_npy_host(ByteSource& src, const std::string& what) {
  const NpyArrayInfo info = read_npy_info(src, what);
  Tensor t = detail::make_tensor(info.shape, info.dtype, kCPU);
  if (info.data_bytes) src.read(info.data_offset, t.data_ptr(), static_cast<size_t>(info.data_bytes));
  return t;
}

/// Refuses a device that no tensor can be made on (cuda:0 without CUDA, or without a GPU) before
/// the file is read, naming the file.
void check_load_device(const LoadOptions& options, const std::string& file) {
  if (options.device_.is_cpu()) return;
  try {
    detail::make_tensor({0}, DType::Float32, options.device_);
  } catch (const Error& e) {
    SG_FAIL(file, " cannot be loaded to ", options.device_, " (", e.what(), ")");
  }
}

/// A loaded host tensor in the dtype and on the device `options` ask for.
Tensor to_requested(Tensor t, const LoadOptions& options, const std::string& what) {
  NoGradGuard guard;
  try {
    if (options.dtype_ && *options.dtype_ != t.dtype()) t = t.to(*options.dtype_);
    if (options.device_ != t.device()) t = t.to(options.device_);
  } catch (const Error& e) {
    SG_FAIL(what, " cannot be loaded to ", options.device_, " (", e.what(), ")");
  }
  return t;
}

/// A host copy of `t` outside any graph (the tensor itself when already on the CPU), checked to
/// be something NumPy reads.
Tensor host_tensor(const Tensor& t, const char* op, const std::string& name) {
  SG_CHECK(t.defined(), op, ": tensor ", name, " is undefined");
  SG_CHECK(static_cast<size_t>(t.dim()) <= kNpyMaxDims, op, ": tensor ", name, " has ", t.dim(),
           " dimensions; NumPy reads at most ", kNpyMaxDims);
  NoGradGuard guard;
  return t.detach().to(kCPU);
}

// ---- CRC-32 (ZIP's), through zlib ---------------------------------------------------------

/// Continues the CRC-32 `crc` over n bytes, in pieces that fit zlib's 32-bit lengths.
uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (n > 0) {
    const uInt piece = static_cast<uInt>(std::min<size_t>(n, size_t{1} << 30));
    c = ::crc32(c, p, piece);
    p += piece;
    n -= piece;
  }
  return static_cast<uint32_t>(c);
}

// ---- the ZIP container -------------------------------------------------------------------
// Per entry: local header (30 bytes + name), then the stored bytes. Then the central directory
// (46 bytes + name + extra + comment per entry) and the end record (22 bytes + comment), with
// ZIP64 records and extra fields standing in where a count, size or offset does not fit.

constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kStored = 0, kDeflated = 8;  // compression methods
constexpr uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1;  // 1980-01-01: reproducible files
constexpr uint16_t kUtf8NameFlag = 0x0800;
constexpr size_t kLocalHeaderSize = 30, kCentralHeaderSize = 46, kEndSize = 22;

std::string hex32(uint32_t v) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

struct ZipEntry {
  std::string name;
  uint16_t flags = 0, method = 0;
  uint32_t crc = 0;
  uint64_t compressed_size = 0, size = 0, local_offset = 0;
  uint64_t data_offset = 0;  // after the local header; set by locate_entries
};

constexpr char kNpySuffix[] = ".npy";
constexpr size_t kNpySuffixLength = 4;

/// The array's name: the entry's without ".npy" (locate_entries has checked the suffix).
std::string array_name(const ZipEntry& e) { return e.name.substr(0, e.name.size() - kNpySuffixLength); }

void check_crc32(const std::string& entry, uint32_t stored, uint32_t computed) {
  SG_CHECK(computed == stored, entry, " fails its CRC-32 check (stored ", hex32(stored), ", computed ", hex32(computed),
           "): the archive is corrupt");
}

bool is_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

bool starts_with_npy_magic(ByteSource& src) {
  if (src.size() < kNpyMagicLength) return false;
  char head[kNpyMagicLength];
  src.read(0, head, kNpyMagicLength);
  return std::memcmp(head, kNpyMagic, kNpyMagicLength) == 0;
}

// ---- deflated entries, through zlib ------------------------------------------------------------
// np.savez_compressed deflates each entry (raw deflate, no zlib wrapper). An entry is inflated
// as a stream straight into the tensor, zlib being asked for exactly the bytes still expected, so
// no more than the declared size is ever produced or allocated; the declared size must agree
// with the array's header, and is itself bounded by deflate's largest expansion over the
// compressed bytes, which are in the file.

constexpr uint64_t kMaxDeflateRatio = 1032;  // no deflate stream expands more (zlib's technical notes)
constexpr size_t kInflateChunk = size_t{64} << 10;
constexpr size_t kDeflateChunk = size_t{256} << 10;
constexpr size_t kZlibPiece = size_t{1} << 30;  // zlib's lengths are 32-bit

/// A deflated entry as a ByteSource read once, front to back (as read_npy_info and
/// read_npy_host do); size() is the declared uncompressed size. finish() checks that the stream
/// ends exactly there, with all its compressed bytes used and the directory's CRC-32.
class InflatedSource : public ByteSource {
 public:
  InflatedSource(ByteSource& file, const ZipEntry& e, const std::string& entry)
      : file_(file), e_(e), what_(entry),
        input_(static_cast<size_t>(std::min<uint64_t>(e.compressed_size, kInflateChunk))) {
    const int rc = inflateInit2(&zs_, -MAX_WBITS);
    SG_CHECK(rc == Z_OK, what_, ": zlib could not start inflating (", zError(rc), ")");
  }
  ~InflatedSource() override { inflateEnd(&zs_); }
  InflatedSource(const InflatedSource&) = delete;
  InflatedSource& operator=(const InflatedSource&) = delete;

  uint64_t size() const override { return e_.size; }
  bool size_is_declared() const override { return true; }

  void read(uint64_t offset, void* dst, size_t n) override {
    SG_CHECK(offset == produced_ && n <= e_.size - produced_, what_,
             ": internal error: an inflated entry is read once, in order");
    auto* out = static_cast<unsigned char*>(dst);
    while (n > 0) {
      SG_CHECK(!ended_, what_, " inflates to ", produced_, " bytes, fewer than the ", e_.size,
               " its directory entry declares: the archive is corrupt");
      const size_t got = inflate_step(out, static_cast<uInt>(std::min(n, kZlibPiece)));
      crc_ = crc32_update(crc_, out, got);
      out += got;
      n -= got;
      produced_ += got;
    }
  }

  void finish() {
    unsigned char beyond = 0;
    while (!ended_)
      SG_CHECK(inflate_step(&beyond, 1) == 0, what_, " inflates to more than the ", e_.size,
               " bytes its directory entry declares: the archive is corrupt");
    const uint64_t unused = e_.compressed_size - fed_ + zs_.avail_in;
    SG_CHECK(unused == 0, what_, " has ", unused, " of its ", e_.compressed_size,
             " compressed bytes left after the end of its deflate stream: the archive is corrupt");
    check_crc32(what_, e_.crc, crc_);
  }

 private:
  /// One inflate call into out[0, capacity), refilling the input first when it ran dry; returns
  /// the bytes produced and notes the stream's end.
  size_t inflate_step(unsigned char* out, uInt capacity) {
    if (zs_.avail_in == 0 && fed_ < e_.compressed_size) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(e_.compressed_size - fed_, input_.size()));
      file_.read(e_.data_offset + fed_, input_.data(), n);
      fed_ += n;
      zs_.next_in = input_.data();
      zs_.avail_in = static_cast<uInt>(n);
    }
    zs_.next_out = out;
    zs_.avail_out = capacity;
    const int rc = ::inflate(&zs_, Z_NO_FLUSH);
    const size_t got = capacity - zs_.avail_out;
    if (rc == Z_STREAM_END) ended_ = true;
    if (rc == Z_OK || rc == Z_STREAM_END) return got;
    SG_CHECK(!(rc == Z_BUF_ERROR && zs_.avail_in == 0), what_, " is cut short: its ", e_.compressed_size,
             " compressed bytes end before its deflate stream does: the archive is corrupt");
    SG_CHECK(rc != Z_MEM_ERROR, what_, ": zlib ran out of memory while inflating");
    SG_FAIL(what_, " holds corrupt deflate data (zlib: ", zs_.msg ? zs_.msg : zError(rc), "): the archive is corrupt");
  }

  ByteSource& file_;
  const ZipEntry& e_;
  const std::string what_;
  std::vector<unsigned char> input_;
  z_stream zs_{};
  uint32_t crc_ = 0;
  uint64_t fed_ = 0, produced_ = 0;
  bool ended_ = false;
};

/// Deflates what is written to it into `out`, as Python's zipfile does for np.savez_compressed
/// (raw deflate at zlib's default level); finish() returns the compressed size.
class DeflateWriter {
 public:
  DeflateWriter(OutFile& out, const std::string& what) : out_(out), what_(what), buffer_(kDeflateChunk) {
    const int rc = deflateInit2(&zs_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    SG_CHECK(rc == Z_OK, what_, ": zlib could not start compressing (", zError(rc), ")");
  }
  ~DeflateWriter() { deflateEnd(&zs_); }
  DeflateWriter(const DeflateWriter&) = delete;
  DeflateWriter& operator=(const DeflateWriter&) = delete;

  void write(const void* data, size_t n) {
    const auto* p = static_cast<const Bytef*>(data);
    while (n > 0) {
      const size_t piece = std::min(n, kZlibPiece);
      zs_.next_in = const_cast<Bytef*>(p);  // zlib does not write through it
      zs_.avail_in = static_cast<uInt>(piece);
      run(Z_NO_FLUSH);
      p += piece;
      n -= piece;
    }
  }
  uint64_t finish() {
    run(Z_FINISH);
    return written_;
  }

 private:
  /// Deflates until the input is used (and, for Z_FINISH, the stream is ended), writing out
  /// each full buffer.
  void run(int flush) {
    int rc = Z_OK;
    do {
      zs_.next_out = buffer_.data();
      zs_.avail_out = static_cast<uInt>(buffer_.size());
      rc = ::deflate(&zs_, flush);
      SG_CHECK(rc != Z_STREAM_ERROR, what_, ": zlib failed while compressing");
      const size_t n = buffer_.size() - zs_.avail_out;
      out_.write(buffer_.data(), n);
      written_ += n;
    } while (zs_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
  }

  OutFile& out_;
  const std::string what_;
  std::vector<unsigned char> buffer_;
  z_stream zs_{};
  uint64_t written_ = 0;
};

/// The host tensor an entry holds, its bytes checked against the directory's CRC-32.
Tensor read_entry(ByteSource& src, const ZipEntry& e, const std::string& entry) {
  if (e.method == kDeflated) {
    InflatedSource stream(src, e, entry);
    Tensor t = read_npy_host(stream, entry);
    stream.finish();
    return t;
  }
  std::vector<unsigned char> bytes(static_cast<size_t>(e.size));
  if (e.size) src.read(e.data_offset, bytes.data(), bytes.size());
  check_crc32(entry, e.crc, crc32_update(0, bytes.data(), bytes.size()));
  MemorySource entry_source(bytes.data(), bytes.size());
  return read_npy_host(entry_source, entry);
}

/// Checks the disk fields of an end record (`record` names it): a .npz is one file, so both disk
/// numbers are 0 and the entries on this disk are all the entries.
void check_single_disk(const std::string& file, const char* record, uint64_t disk, uint64_t directory_disk,
                       uint64_t count_on_disk, uint64_t count) {
  SG_CHECK(disk == 0 && directory_disk == 0, file, "'s ", record, " numbers this disk ", disk,
           " and the central directory's disk ", directory_disk,
           ", where a single-file archive has 0 for both: the field is corrupt (split archives are not read)");
  SG_CHECK(count_on_disk == count, file, "'s ", record, " counts ", count_on_disk, " entries on this disk but ", count,
           " in all, where a single-file archive has one number for both: the archive is corrupt");
}

/// The central directory's entries, after locating it through the (ZIP64) end record.
/// `data_end` is set to where the entries' data must end (the central directory's start).
std::vector<ZipEntry> read_central_directory(ByteSource& src, const std::string& file, uint64_t& data_end) {
  const uint64_t size = src.size();
  const char* npy_hint = "; it is a .npy file: use sg::load_npy";
  SG_CHECK(size >= kEndSize, file, " is not a .npz (ZIP) archive: ", size, " bytes, too short for its end record",
           starts_with_npy_magic(src) ? npy_hint : "");
  // The end record is the last 22 bytes plus a comment of up to 65535 bytes.
  const uint64_t tail_size = std::min<uint64_t>(size, kEndSize + 0xFFFF);
  std::vector<unsigned char> tail(static_cast<size_t>(tail_size));
  src.read(size - tail_size, tail.data(), tail.size());
  int64_t end_at = -1;
  for (int64_t i = static_cast<int64_t>(tail_size - kEndSize); i >= 0; --i) {
    const unsigned char* p = tail.data() + i;
    if (get32(p) == kEndSignature && static_cast<uint64_t>(i) + kEndSize + get16(p + 20) == tail_size) {
      end_at = i;
      break;
    }
  }
  SG_CHECK(end_at >= 0, file,
           " has no ZIP end-of-central-directory record: it is truncated or not a .npz archive",
           starts_with_npy_magic(src) ? npy_hint : "");
  const unsigned char* end = tail.data() + end_at;
  const uint64_t end_offset = size - tail_size + static_cast<uint64_t>(end_at);
  uint64_t count = get16(end + 10), cd_size = get32(end + 12), cd_offset = get32(end + 16);
  check_single_disk(file, "end record", get16(end + 4), get16(end + 6), get16(end + 8), count);
  uint64_t records_start = end_offset;
  if (count == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
    // ZIP64: a locator (20 bytes) right before the end record points at the ZIP64 end record (56+).
    SG_CHECK(end_offset >= 20, file, " lacks the ZIP64 locator its end record calls for: the archive is corrupt");
    unsigned char locator[20];
    src.read(end_offset - 20, locator, 20);
    SG_CHECK(get32(locator) == kZip64LocatorSignature, file,
             " lacks the ZIP64 locator its end record calls for: the archive is corrupt");
    const uint64_t record_offset = get64(locator + 8);
    SG_CHECK(record_offset <= end_offset - 20 && end_offset - 20 - record_offset >= 56, file,
             " has a ZIP64 end record offset (", record_offset, ") outside the archive: it is corrupt");
    unsigned char record[56];
    src.read(record_offset, record, 56);
    SG_CHECK(get32(record) == kZip64EndSignature, file, " has no ZIP64 end record where its locator points: it is corrupt");
    check_single_disk(file, "ZIP64 end record", get32(record + 16), get32(record + 20), get64(record + 24),
                      get64(record + 32));
    count = get64(record + 32);
    cd_size = get64(record + 40);
    cd_offset = get64(record + 48);
    records_start = record_offset;
  }
  SG_CHECK(cd_offset <= records_start && cd_size <= records_start - cd_offset, file, "'s central directory (",
           cd_size, " bytes at offset ", cd_offset, ") runs past its end record at ", records_start,
           ": the archive is truncated or corrupt");
  SG_CHECK(cd_offset + cd_size == records_start, file, "'s central directory (", cd_size, " bytes at offset ",
           cd_offset, ") ends ", records_start - cd_offset - cd_size, " bytes before its end record at ",
           records_start, ", which must follow it directly: the archive is corrupt");
  std::vector<unsigned char> cd(static_cast<size_t>(cd_size));
  if (cd_size) src.read(cd_offset, cd.data(), cd.size());

  // Every entry the directory's bytes hold is parsed, then their number is checked against the
  // end record's count: an archive is read whole or not at all.
  std::vector<ZipEntry> entries;
  size_t pos = 0;
  for (uint64_t i = 0; pos < cd.size(); ++i) {
    SG_CHECK(cd.size() - pos >= kCentralHeaderSize && get32(cd.data() + pos) == kCentralHeaderSignature, file,
             "'s central directory entry ", i, " is missing or corrupt");
    const unsigned char* h = cd.data() + pos;
    ZipEntry e;
    e.flags = get16(h + 8);
    e.method = get16(h + 10);
    e.crc = get32(h + 16);
    e.compressed_size = get32(h + 20);
    e.size = get32(h + 24);
    const size_t name_length = get16(h + 28), extra_length = get16(h + 30), comment_length = get16(h + 32);
    e.local_offset = get32(h + 42);
    SG_CHECK(cd.size() - pos - kCentralHeaderSize >= name_length + extra_length + comment_length, file,
             "'s central directory entry ", i, " is cut short: the archive is corrupt");
    e.name.assign(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_length);
    // ZIP64 extra field: 8-byte values for those of size, compressed size, offset set to 0xFFFFFFFF.
    const unsigned char* extra = h + kCentralHeaderSize + name_length;
    for (size_t x = 0; x + 4 <= extra_length;) {
      const uint16_t id = get16(extra + x), length = get16(extra + x + 2);
      SG_CHECK(x + 4 + length <= extra_length, file, ": entry '", e.name, "' has a corrupt extra field");
      if (id == kZip64ExtraId) {
        size_t at = x + 4;
        for (uint64_t* field : {&e.size, &e.compressed_size, &e.local_offset}) {
          if (*field != 0xFFFFFFFF) continue;
          SG_CHECK(at + 8 <= x + 4 + length, file, ": entry '", e.name, "' has a ZIP64 extra field that is too short");
          *field = get64(extra + at);
          at += 8;
        }
      }
      x += 4 + length;
    }
    entries.push_back(e);
    pos += kCentralHeaderSize + name_length + extra_length + comment_length;
  }
  SG_CHECK(entries.size() == count, file, "'s end record counts ", count, " entries, but its central directory (",
           cd_size, " bytes at offset ", cd_offset, ") holds ", entries.size(), ": the archive is corrupt");
  data_end = cd_offset;
  return entries;
}

/// Checks each entry's name, method and local header, and that no two entries share bytes; sets
/// each data_offset. No entry's data is read here.
void locate_entries(ByteSource& src, std::vector<ZipEntry>& entries, const std::string& file, uint64_t data_end) {
  std::set<std::string> names;
  for (ZipEntry& e : entries) {
    const std::string entry = file + " entry '" + e.name + "'";
    SG_CHECK(!(e.flags & 1), entry, " is encrypted, which is not supported");
    SG_CHECK(e.method == kStored || e.method == kDeflated, entry, " uses ZIP compression method ", e.method,
             "; structgrad reads stored (np.savez) and deflated (np.savez_compressed) entries");
    SG_CHECK(e.method != kStored || e.compressed_size == e.size, entry, " is stored but its compressed size (",
             e.compressed_size, ") differs from its size (", e.size, "): the archive is corrupt");
    SG_CHECK(e.name.size() > kNpySuffixLength &&
                 e.name.compare(e.name.size() - kNpySuffixLength, kNpySuffixLength, kNpySuffix) == 0,
             entry, " is not a .npy array (names in a .npz end in .npy)");
    SG_CHECK(names.insert(array_name(e)).second, file, " holds the entry '", e.name, "' twice");

    SG_CHECK(e.local_offset <= data_end && data_end - e.local_offset >= kLocalHeaderSize, entry,
             " has its local header at offset ", e.local_offset, ", outside the archive data (", data_end,
             " bytes): the archive is corrupt");
    unsigned char local[kLocalHeaderSize];
    src.read(e.local_offset, local, kLocalHeaderSize);
    SG_CHECK(get32(local) == kLocalHeaderSignature, entry, " has no local header at offset ", e.local_offset,
             ": the archive is corrupt");
    const uint64_t name_length = get16(local + 26), extra_length = get16(local + 28);
    e.data_offset = e.local_offset + kLocalHeaderSize + name_length + extra_length;
    SG_CHECK(e.data_offset <= data_end && e.compressed_size <= data_end - e.data_offset, entry,
             " is truncated: it needs ", e.compressed_size, " bytes at offset ", e.data_offset,
             " but the archive data ends at ", data_end);
    // The declared size bounds every allocation made for a deflated entry; bound it in turn by
    // the compressed bytes, which are in the file.
    SG_CHECK(e.method != kDeflated || e.size / kMaxDeflateRatio + (e.size % kMaxDeflateRatio != 0) <= e.compressed_size,
             entry, " declares ", e.size, " bytes uncompressed from ", e.compressed_size,
             " compressed, more than deflate can expand to (", kMaxDeflateRatio, " times): the archive is corrupt");
    std::string local_name(static_cast<size_t>(name_length), '\0');
    src.read(e.local_offset + kLocalHeaderSize, local_name.data(), local_name.size());
    SG_CHECK(local_name == e.name, entry, " is named '", local_name,
             "' in its local header: the archive is corrupt");
  }
  // In file order each entry ends before the next one's local header: a directory that points
  // two entries at the same bytes is corrupt (and would let a small file inflate many times over).
  std::vector<const ZipEntry*> in_file_order;
  for (const ZipEntry& e : entries) in_file_order.push_back(&e);
  std::sort(in_file_order.begin(), in_file_order.end(),
            [](const ZipEntry* a, const ZipEntry* b) { return a->local_offset < b->local_offset; });
  for (size_t i = 1; i < in_file_order.size(); ++i) {
    const ZipEntry& before = *in_file_order[i - 1];
    const ZipEntry& after = *in_file_order[i];
    const uint64_t before_end = before.data_offset + before.compressed_size;
    SG_CHECK(before_end <= after.local_offset, file, "'s entries '", before.name, "' (bytes ", before.local_offset,
             " to ", before_end, ") and '", after.name, "' (from byte ", after.local_offset,
             ") overlap: the archive is corrupt");
  }
}

}  // namespace

void save_npy(const std::string& path, const Tensor& t) {
  check_host_endianness("save_npy");
  const Tensor host = host_tensor(t, "save_npy", "for " + path);
  OutFile out(path, "save_npy");
  out.write(npy_preamble(host));
  if (host.nbytes()) out.write(host.data_ptr(), host.nbytes());
  out.commit();
}

Tensor load_npy(const std::string& path, LoadOptions options) {
  check_host_endianness("load_npy");
  const std::string file = "load_npy: " + path;
  check_load_device(options, file);
  FileSource src(path, "load_npy");
  return to_requested(read_npy_host(src, file), options, file);
}

void save_npz(const std::string& path, const NamedTensors& tensors, NpzCompression compression) {
  check_host_endianness("save_npz");
  SG_CHECK(tensors.size() <= 0xFFFF, "save_npz: ", tensors.size(), " tensors for ", path,
           " exceed the 65535 entries of a ZIP archive without ZIP64");
  std::set<std::string> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string& name = tensors[i].first;
    SG_CHECK(!name.empty(), "save_npz: the name of tensor ", i, " for ", path, " is empty");
    SG_CHECK(name.find('\0') == std::string::npos, "save_npz: the name of tensor ", i, " for ", path,
             " contains a NUL character");
    SG_CHECK(name.size() + 4 <= 0xFFFF, "save_npz: the name of tensor ", i, " for ", path, " is too long");
    SG_CHECK(names.insert(name).second, "save_npz: the name '", name, "' appears twice in the tensors for ", path);
    SG_CHECK(tensors[i].second.defined(), "save_npz: tensor '", name, "' for ", path, " is undefined");
  }
  constexpr uint64_t kLimit = 0xFFFFFFFF;  // sizes and offsets at or above it need ZIP64
  OutFile out(path, "save_npz");
  std::string central;
  for (const auto& [name, t] : tensors) {
    const Tensor host = host_tensor(t, "save_npz", "'" + name + "'");
    const std::string preamble = npy_preamble(host);
    const uint64_t entry_size = preamble.size() + host.nbytes();
    const std::string entry_name = name + ".npy";
    const uint64_t offset = out.offset();
    const bool deflated = compression == NpzCompression::Deflated;
    auto check_limit = [&](bool fits) {
      SG_CHECK(fits, "save_npz: ", path, " would exceed the 4 GiB limit of a ZIP archive without ZIP64 at tensor '",
               name, "' (", entry_size, " bytes); save large tensors with save_npy");
    };
    // A stored entry's end is known before writing it; a deflated one's is checked once written.
    check_limit(entry_size < kLimit &&
                (deflated || offset + kLocalHeaderSize + entry_name.size() + entry_size < kLimit));
    uint32_t crc = crc32_update(0, preamble.data(), preamble.size());
    crc = crc32_update(crc, host.data_ptr(), host.nbytes());
    const uint16_t flags = is_ascii(entry_name) ? 0 : kUtf8NameFlag;
    const uint16_t method = deflated ? kDeflated : kStored;

    std::string local;
    put32(local, kLocalHeaderSignature);
    put16(local, 20);  // version needed to extract: 2.0
    put16(local, flags);
    put16(local, method);
    put16(local, 0);  // time 00:00
    put16(local, kDosDate1980);
    put32(local, crc);
    put32(local, static_cast<uint32_t>(entry_size));  // compressed size; a deflated one's is patched in below
    put32(local, static_cast<uint32_t>(entry_size));
    put16(local, static_cast<uint16_t>(entry_name.size()));
    put16(local, 0);  // extra field length
    local += entry_name;
    out.write(local);
    uint64_t compressed_size = entry_size;
    if (deflated) {
      DeflateWriter deflater(out, "save_npz: tensor '" + name + "' for " + path);
      deflater.write(preamble.data(), preamble.size());
      deflater.write(host.data_ptr(), host.nbytes());
      compressed_size = deflater.finish();
      check_limit(out.offset() < kLimit);
      std::string size_field;
      put32(size_field, static_cast<uint32_t>(compressed_size));
      out.patch(offset + 18, size_field);
    } else {
      out.write(preamble);
      if (host.nbytes()) out.write(host.data_ptr(), host.nbytes());
    }

    put32(central, kCentralHeaderSignature);
    put16(central, 20);  // made by: version 2.0
    put16(central, 20);  // needed: version 2.0
    put16(central, flags);
    put16(central, method);
    put16(central, 0);
    put16(central, kDosDate1980);
    put32(central, crc);
    put32(central, static_cast<uint32_t>(compressed_size));
    put32(central, static_cast<uint32_t>(entry_size));
    put16(central, static_cast<uint16_t>(entry_name.size()));
    put16(central, 0);  // extra
    put16(central, 0);  // comment
    put16(central, 0);  // disk
    put16(central, 0);  // internal attributes
    put32(central, 0);  // external attributes
    put32(central, static_cast<uint32_t>(offset));
    central += entry_name;
  }
  const uint64_t cd_offset = out.offset();
  SG_CHECK(cd_offset + central.size() < kLimit, "save_npz: ", path,
           " would exceed the 4 GiB limit of a ZIP archive without ZIP64; save large tensors with save_npy");
  std::string end;
  put32(end, kEndSignature);
  put16(end, 0);
  put16(end, 0);
  put16(end, static_cast<uint16_t>(tensors.size()));
  put16(end, static_cast<uint16_t>(tensors.size()));
  put32(end, static_cast<uint32_t>(central.size()));
  put32(end, static_cast<uint32_t>(cd_offset));
  put16(end, 0);  // comment length
  out.write(central);
  out.write(end);
  out.commit();
}

NamedTensors load_npz(const std::string& path, LoadOptions options) {
  check_host_endianness("load_npz");
  const std::string file = "load_npz: " + path;
  check_load_device(options, file);
  FileSource src(path, "load_npz");
  uint64_t data_end = 0;
  std::vector<ZipEntry> entries = read_central_directory(src, file, data_end);
  locate_entries(src, entries, file, data_end);

  NamedTensors out;
  for (const ZipEntry& e : entries) {
    const std::string entry = file + " entry '" + e.name + "'";
    out.emplace_back(array_name(e), to_requested(read_entry(src, e, entry), options, entry));
  }
  return out;
}

}  // namespace sg
