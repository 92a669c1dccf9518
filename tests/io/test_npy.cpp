// .npy files: round trips (dtypes, ranks 0-3, empty, structured, from and to a device), the exact bytes
// we write, hand-made files in other header styles, every corrupt-file error, and NumPy interop where
// NumPy is present.
#include "io/io_test_util.h"

namespace {

using namespace sgtest::io;

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
