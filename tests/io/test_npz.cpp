// .npz archives: round trips stored and deflated, their CRC-32s and headers, ZIP64 and local extra
// fields, archives NumPy wrote (tests/data), and every inconsistency of a corrupt archive named.
#include "io/io_test_util.h"

namespace {

using namespace sgtest::io;

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
  return dir ? fs::path(dir) : fs::path(__FILE__).parent_path().parent_path().parent_path();
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

}  // namespace
