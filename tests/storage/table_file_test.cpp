// Tests of storage/nf4.h and storage/table_file.h (NF4 zero-row fidelity and error bound; corrupt or truncated
// files are refused with a clear error).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <limits>
#include <tuple>

#include "core/rng.h"
#include "data/hash.h"
#include "storage/mxfp8.h"
#include "storage/nf4.h"
#include "storage/table_file.h"
#include "memory/layout.h"
#include "memory/pagegram_layout.h"
#include "tests/test_util.h"

namespace pg {
namespace {

TEST(Nf4, HalfConversions) {
  EXPECT_EQ(nf4::float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(nf4::float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(nf4::float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(nf4::float_to_half(0.1f), 0x2E66);
  EXPECT_EQ(nf4::float_to_half(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(nf4::float_to_half(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(nf4::float_to_half(1e6f), 0x7C00);
  for (uint32_t h = 0; h < 0x10000; ++h) {  // every finite half survives the round trip
    if (((h >> 10) & 0x1F) == 0x1F) continue;
    EXPECT_EQ(nf4::float_to_half(nf4::half_to_float(static_cast<uint16_t>(h))), h) << h;
  }
  RngStream r(1, "half");
  for (int i = 0; i < 10000; ++i) {
    const float x = static_cast<float>(std::ldexp(r.uniform(), static_cast<int>(r.below(40)) - 25));
    const float up = nf4::half_to_float(nf4::half_round_up(x));
    EXPECT_GE(up, x);
    EXPECT_LE(up, x * (1.0f + 1.0f / 1024) + std::ldexp(1.0f, -24));
  }
}

TEST(Nf4, ZeroRowStaysExactlyZero) {
  for (int64_t w : {64, 384, 100}) {
    std::vector<float> x(static_cast<size_t>(w), 0.0f), y(static_cast<size_t>(w), 1.0f);
    std::vector<uint8_t> q(static_cast<size_t>(nf4::row_bytes(w)), 0xAB);
    ASSERT_TRUE(nf4::quantize_row(x.data(), w, q.data()));
    nf4::dequantize_row(q.data(), w, y.data());
    for (float v : y) EXPECT_EQ(std::bit_cast<uint32_t>(v), 0u);  // +0.0 exactly
  }
  // A zero inside a non-zero row is exact too.
  std::vector<float> x(64, 0.0f), y(64);
  x[5] = 0.37f;
  x[6] = -1.5f;
  std::vector<uint8_t> q(34);
  ASSERT_TRUE(nf4::quantize_row(x.data(), 64, q.data()));
  nf4::dequantize_row(q.data(), 64, y.data());
  for (int i = 0; i < 64; ++i)
    if (i != 5 && i != 6) {
      EXPECT_EQ(y[static_cast<size_t>(i)], 0.0f);
    }
  EXPECT_EQ(y[6], -1.5f);  // the absmax element is exact when the absmax is an fp16 value
}

TEST(Nf4, ErrorWithinCodebookBound) {
  RngStream r(2, "nf4");
  for (int64_t w : {64, 384, 100}) {
    for (int rep = 0; rep < 200; ++rep) {
      const double scale = std::ldexp(1.0, static_cast<int>(r.below(30)) - 20);
      std::vector<float> x(static_cast<size_t>(w)), y(static_cast<size_t>(w));
      for (auto& v : x) v = static_cast<float>(r.normal() * scale);
      std::vector<uint8_t> q(static_cast<size_t>(nf4::row_bytes(w)));
      ASSERT_TRUE(nf4::quantize_row(x.data(), w, q.data()));
      nf4::dequantize_row(q.data(), w, y.data());
      for (int64_t i = 0; i < w; ++i) {
        const float s = nf4::group_scale(q.data(), i / 64);
        float amax = 0;
        for (int64_t j = i / 64 * 64; j < std::min(w, i / 64 * 64 + 64); ++j)
          amax = std::max(amax, std::fabs(x[static_cast<size_t>(j)]));
        EXPECT_GE(s, amax);
        EXPECT_LE(s, amax * (1 + 1.0 / 1024) + 6e-8);
        const double err = std::fabs(static_cast<double>(x[static_cast<size_t>(i)]) - y[static_cast<size_t>(i)]);
        EXPECT_LE(err, nf4::kMaxHalfGap * s * (1 + 1e-6)) << "w " << w << " i " << i;
        // Nearest code: no other code is closer to x/s.
        const double v = static_cast<double>(x[static_cast<size_t>(i)]) / s;
        const double mine = std::fabs(v - y[static_cast<size_t>(i)] / s);
        for (float c : nf4::kCodebook) EXPECT_LE(mine, std::fabs(v - c) + 1e-6);
      }
    }
  }
}

TEST(Nf4, NibbleOrderAndRefusals) {
  std::vector<float> x(64, 0.0f);
  x[0] = 2.0f;  // code 15 (1.0 * scale 2)
  x[3] = -2.0f;  // code 0
  std::vector<uint8_t> q(34);
  ASSERT_TRUE(nf4::quantize_row(x.data(), 64, q.data()));
  EXPECT_EQ(q[0], 0x00);  // scale 2.0 = 0x4000, little-endian
  EXPECT_EQ(q[1], 0x40);
  EXPECT_EQ(q[2], 0xF7);  // element 0 in the high nibble, element 1 in the low nibble
  EXPECT_EQ(q[3], 0x70);
  x[9] = std::nanf("");
  EXPECT_FALSE(nf4::quantize_row(x.data(), 64, q.data()));
  x[9] = 1e6f;
  EXPECT_FALSE(nf4::quantize_row(x.data(), 64, q.data()));
  EXPECT_THROW(nf4::round_trip_table(x.data(), 1, 64), UserError);
}

// ---- Table file.

std::unique_ptr<MemoryLayout> layout(const std::string& name, int64_t params, int64_t slots = 4, int64_t seed = 0) {
  MemoryConfig m;
  m.layout = name;
  m.target_params = params;
  m.slots = slots;
  m.hash.seed = seed;
  return make_layout(m, 384);
}

// Deterministic values; every 7th row is zero.
RowSource test_rows(int64_t width) {
  return [width](int64_t r0, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < width; ++j) {
        const int64_t r = r0 + i;
        out[i * width + j] = r % 7 == 0 ? 0.0f
                                        : static_cast<float>(std::sin(0.37 * static_cast<double>(r * width + j)) *
                                                             0.01 * static_cast<double>(1 + r % 5));
      }
  };
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / str("pg_table_test_", getpid(), "_", name)).string();
}

void expect_io_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no IoError thrown";
  } catch (const IoError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    for (const auto& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
  }
}

TEST(TableFile, RoundTripEveryLayout) {
  struct Case {
    const char* name;
    int64_t params, slots;
  };
  for (const Case& c : {Case{"flat", 3000000, 4}, Case{"engram", 3000000, 4}, Case{"pagegram", 3000000, 4},
                        Case{"pagegram", 3000000, 15}, Case{"pagegram", 5000000, 60}}) {
    SCOPED_TRACE(str(c.name, " S=", c.slots));
    auto L = layout(c.name, c.params, c.slots);
    const std::string path = temp_path("rt.pgt");
    const int64_t w = L->width();
    const TableFileHeader h = write_table_file(path, *L, test_rows(w), {{{"source", "test"}}, false});
    EXPECT_EQ(std::filesystem::file_size(path), h.file_bytes());
    EXPECT_EQ(h.file_bytes() % 4096, 0u);
    EXPECT_EQ(h.data_blocks, static_cast<uint64_t>(L->num_blocks()));
    TableFileReader r = TableFileReader::open(path, *L);
    EXPECT_EQ(r.header().identity_value("info.source"), "test");
    EXPECT_EQ(r.header().identity_value("layout"), c.name);
    r.verify_all();
    std::vector<float> src(static_cast<size_t>(w)), got(static_cast<size_t>(w));
    for (int64_t row = 0; row < L->rows(); row += std::max<int64_t>(1, L->rows() / 997)) {
      test_rows(w)(row, 1, src.data());
      nf4::round_trip_table(src.data(), 1, w);
      r.read_row(row, got.data());
      ASSERT_EQ(got, src) << "row " << row;
      if (row % 7 == 0) {
        for (float v : got) ASSERT_EQ(v, 0.0f);
      }
    }
    std::filesystem::remove(path);
  }
}

TEST(TableFile, RefusesTruncatedCorruptedAndMismatched) {
  auto L = layout("pagegram", 3000000, 4);
  const std::string path = temp_path("bad.pgt");
  const TableFileHeader h = write_table_file(path, *L, test_rows(L->width()));
  const std::string copy = temp_path("bad_copy.pgt");
  auto reset = [&] { std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing); };
  auto patch = [&](uint64_t off, uint8_t x) {
    std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(off));
    char c;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(off));
    f.put(static_cast<char>(c ^ x));
  };

  reset();  // truncated by one block
  std::filesystem::resize_file(copy, h.file_bytes() - 4096);
  expect_io_error([&] { TableFileReader::open(copy, *L); }, {copy, "truncated", "data block", "byte offset"});
  reset();  // truncated inside the header
  std::filesystem::resize_file(copy, 100);
  expect_io_error([&] { TableFileReader::open(copy, *L); }, {"truncated"});
  reset();  // trailing bytes
  std::filesystem::resize_file(copy, h.file_bytes() + 10);
  expect_io_error([&] { TableFileReader::open(copy, *L); }, {"more than"});

  reset();  // a flipped data byte: found by verify_all and by a read of that block, not by open
  const uint64_t blk = h.data_blocks / 2;
  patch(h.data_offset() + blk * 4096 + 100, 0x10);
  {
    TableFileReader r = TableFileReader::open(copy, *L);
    expect_io_error([&] { r.verify_all(); }, {str("data block ", blk), "checksum mismatch", "byte offset"});
    std::vector<uint8_t> b(4096);
    expect_io_error([&] { r.read_block(static_cast<int64_t>(blk), b.data()); }, {"corrupted"});
    r.read_block(0, b.data());  // other blocks still read
  }
  reset();
  patch(40, 0x01);  // header field
  expect_io_error([&] { TableFileReader::open(copy, *L); }, {"header checksum", "byte offset 120"});
  reset();
  patch(h.identity_offset + 3, 0x01);
  expect_io_error([&] { TableFileReader::open(copy, *L); }, {"identity checksum"});
  reset();
  patch(h.checksum_offset + 8, 0x01);
  expect_io_error([&] { TableFileReader::open(copy, *L); }, {"checksum table"});
  reset();
  patch(0, 0x01);
  expect_io_error([&] { TableFileReader::open(copy, *L); }, {"not a PageGram table file"});

  // Mismatched layouts: other slots, other hash seed, other layout.
  expect_io_error([&] { TableFileReader::open(path, *layout("pagegram", 3000000, 8)); }, {"layout mismatch"});
  expect_io_error([&] { TableFileReader::open(path, *layout("pagegram", 3000000, 4, 7)); },
                  {"layout mismatch", "hash_seed"});
  expect_io_error([&] { TableFileReader::open(path, *layout("engram", 3000000)); }, {"layout mismatch", "layout"});
  expect_io_error([&] { TableFileReader::open(temp_path("missing.pgt"), *L); }, {"cannot open"});
  std::filesystem::remove(copy);
  std::filesystem::remove(path);
}

TEST(TableFile, RandomFileIsValidAndDense) {
  auto L = layout("engram", 2000000);
  const std::string path = temp_path("rand.pgt");
  const TableFileHeader h = write_random_table_file(path, *L, 5);
  TableFileReader r = TableFileReader::open(path, *L);
  r.verify_all();
  std::vector<float> row(64);
  r.read_row(12345, row.data());
  float amax = 0;
  for (float v : row) amax = std::max(amax, std::fabs(v));
  EXPECT_GT(amax, 0.005f);
  EXPECT_LT(amax, 0.11f);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, h.file_bytes());  // not sparse
  std::filesystem::remove(path);
}

TEST(TableFile, RefusesUnquantizableRows) {
  auto L = layout("flat", 1000000);
  const std::string path = temp_path("nan.pgt");
  const int64_t w = L->width();
  try {
    write_table_file(path, *L, [&](int64_t r0, int64_t n, float* out) {
      for (int64_t i = 0; i < n * w; ++i) out[i] = (r0 + i / w == 17) ? std::nanf("") : 0.0f;
    });
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("row 17"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  for (const auto& f : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    EXPECT_EQ(f.path().string().find(path + ".tmp"), std::string::npos) << "staged file left behind";
}

// ---- MXFP8 table files.

TEST(TableFile, PlacementRuleReproducesBlockOfForNf4) {
  // The storage-side placement rule, given NF4's row bytes, is MemoryLayout::block_of (memory/) row for row; MXFP8
  // uses the same rule with its own row bytes.
  for (auto [name, params, slots] :
       {std::tuple{"flat", 3000000, 4}, std::tuple{"engram", 3000000, 4}, std::tuple{"pagegram", 3000000, 4},
        std::tuple{"pagegram", 3000000, 15}, std::tuple{"pagegram", 5000000, 60}}) {
    SCOPED_TRACE(str(name, " S=", slots));
    auto L = layout(name, params, slots);
    const TablePlacement nf = table_placement(*L, TableQuantization::kNf4);
    EXPECT_EQ(nf.row_bytes, L->nf4_bytes_per_row());
    EXPECT_EQ(nf.num_blocks(), L->num_blocks());
    for (int64_t r = 0; r < L->rows(); r += 1 + r % 13) {
      const BlockLocation a = L->block_of(r), b = place_row(nf.unit_rows, nf.row_bytes, r);
      ASSERT_EQ(a.block, b.block) << r;
      ASSERT_EQ(a.offset, b.offset) << r;
      ASSERT_EQ(a.blocks, b.blocks) << r;
    }
  }
  // Hand-computed MXFP8 placements (width 64: 66 bytes per row).
  auto E = layout("engram", 3000000);
  const TablePlacement e = table_placement(*E, TableQuantization::kMxfp8);
  EXPECT_EQ(e.row_bytes, 66);
  EXPECT_EQ(e.unit_rows, 1);
  EXPECT_EQ(e.block_of(61).block, 0);  // 62 rows per block
  EXPECT_EQ(e.block_of(61).offset, 61 * 66);
  EXPECT_EQ(e.block_of(62).block, 1);
  EXPECT_EQ(e.block_of(62).offset, 0);
  EXPECT_EQ(e.num_blocks(), (E->rows() + 61) / 62);
  auto P4 = layout("pagegram", 3000000, 4);  // page: 8 heads x 4 slots x 66 B = 2112 B, one page per block
  const TablePlacement p4 = table_placement(*P4, TableQuantization::kMxfp8);
  EXPECT_EQ(p4.unit_rows, 32);
  EXPECT_EQ(p4.block_of(31).block, 0);
  EXPECT_EQ(p4.block_of(31).offset, 31 * 66);
  EXPECT_EQ(p4.block_of(32).block, 1);
  EXPECT_EQ(p4.block_of(32).offset, 0);
  auto P15 = layout("pagegram", 3000000, 15);  // page: 120 x 66 = 7920 B, spans two blocks
  const TablePlacement p15 = table_placement(*P15, TableQuantization::kMxfp8);
  EXPECT_EQ(p15.block_of(119).block, 0);
  EXPECT_EQ(p15.block_of(119).blocks, 2);
  EXPECT_EQ(p15.block_of(119).offset, 119 * 66);
  EXPECT_EQ(p15.block_of(120).block, 2);
  EXPECT_EQ(p15.num_blocks(), 2 * P15->rows() / 120);
}

TEST(TableFile, Mxfp8RoundTripEveryLayout) {
  struct Case {
    const char* name;
    int64_t params, slots;
  };
  for (const Case& c : {Case{"flat", 3000000, 4}, Case{"engram", 3000000, 4}, Case{"pagegram", 3000000, 4},
                        Case{"pagegram", 3000000, 15}, Case{"pagegram", 5000000, 60}}) {
    SCOPED_TRACE(str(c.name, " S=", c.slots));
    auto L = layout(c.name, c.params, c.slots);
    const std::string path = temp_path("mx.pgt");
    const int64_t w = L->width();
    TableWriteOptions opt{{{"source", "test"}}, false};
    opt.quantization = TableQuantization::kMxfp8;
    const TableFileHeader h = write_table_file(path, *L, test_rows(w), opt);
    EXPECT_EQ(h.version, 2u);
    EXPECT_EQ(h.quantization, TableQuantization::kMxfp8);
    EXPECT_EQ(h.row_bytes, static_cast<uint64_t>(w + (w + 31) / 32));
    EXPECT_EQ(std::filesystem::file_size(path), h.file_bytes());
    EXPECT_EQ(h.data_blocks, static_cast<uint64_t>(table_placement(*L, TableQuantization::kMxfp8).num_blocks()));
    EXPECT_GT(h.data_blocks, static_cast<uint64_t>(L->num_blocks()));  // 8-bit codes: more blocks than NF4
    {  // the header's code at byte offset 104 (version 2)
      std::ifstream f(path, std::ios::binary);
      uint32_t v = 0, q = 0;
      f.seekg(8);
      f.read(reinterpret_cast<char*>(&v), 4);
      f.seekg(104);
      f.read(reinterpret_cast<char*>(&q), 4);
      EXPECT_EQ(v, 2u);
      EXPECT_EQ(q, 1u);
    }
    TableFileReader r = TableFileReader::open(path, *L);
    EXPECT_EQ(r.header().quantization, TableQuantization::kMxfp8);
    EXPECT_EQ(r.header().identity_value("quantization"), "mxfp8");
    EXPECT_NE(r.header().identity_value("mxfp8_block"), "");
    EXPECT_EQ(r.header().identity_value("nf4_group"), "");
    EXPECT_EQ(r.header().identity_value("info.source"), "test");
    r.verify_all();
    EXPECT_NO_THROW(TableFileReader::open(path, *L, TableQuantization::kMxfp8));
    expect_io_error([&] { TableFileReader::open(path, *L, TableQuantization::kNf4); },
                    {path, "quantization is mxfp8", "byte offset 104", "expected nf4"});
    std::vector<float> src(static_cast<size_t>(w)), got(static_cast<size_t>(w)), nf(static_cast<size_t>(w));
    int64_t inexact = 0, step = std::max<int64_t>(1, L->rows() / 997);
    if (step % 7 == 0) ++step;  // not only the zero rows (every 7th)
    for (int64_t row = 0; row < L->rows(); row += step) {
      test_rows(w)(row, 1, src.data());
      nf = src;
      mxfp8::round_trip_table(src.data(), 1, w);
      round_trip_table(TableQuantization::kNf4, nf.data(), 1, w);
      r.read_row(row, got.data());
      ASSERT_EQ(got, src) << "row " << row;
      inexact += got != nf;  // the MXFP8 values, not NF4's
      if (row % 7 == 0) {
        for (float v : got) ASSERT_EQ(v, 0.0f);
      }
    }
    EXPECT_GT(inexact, 0);
    std::filesystem::remove(path);
  }
}

TEST(TableFile, Nf4FilesAreStillVersion1AndReadTheSame) {
  auto L = layout("pagegram", 3000000, 4);
  const std::string path = temp_path("v1.pgt");
  const TableFileHeader h = write_table_file(path, *L, test_rows(L->width()), {{{"source", "test"}}, false});
  EXPECT_EQ(h.version, 1u);
  EXPECT_EQ(h.quantization, TableQuantization::kNf4);
  {  // bytes [104, 120) stay zero in a version 1 file
    std::ifstream f(path, std::ios::binary);
    char b[16];
    f.seekg(104);
    f.read(b, 16);
    for (char c : b) EXPECT_EQ(c, 0);
  }
  // The identity has no key a version 1 reader would not know.
  const TableFileReader r = TableFileReader::open(path, *L, TableQuantization::kNf4);
  EXPECT_EQ(r.header().identity_value("quantization"), "nf4");
  EXPECT_EQ(r.header().identity_value("mxfp8_block"), "");
  EXPECT_EQ(h.identity, r.header().identity);
  expect_io_error([&] { TableFileReader::open(path, *L, TableQuantization::kMxfp8); },
                  {"quantization is nf4 (a version 1 file), expected mxfp8"});
  // The whole file, byte for byte, is what the writer before MXFP8 wrote for the same rows (the digest of the file
  // written by commit 933e88f's storage/ library).
  EXPECT_EQ(data::hash_file(path), 0xfd15d96da16972a0ULL) << std::hex << data::hash_file(path);
  std::filesystem::remove(path);
}

TEST(TableFile, RefusesInconsistentQuantization) {
  auto L = layout("engram", 2000000);
  const std::string path = temp_path("mxbad.pgt");
  TableWriteOptions opt;
  opt.quantization = TableQuantization::kMxfp8;
  const TableFileHeader h = write_table_file(path, *L, test_rows(L->width()), opt);
  const std::string copy = temp_path("mxbad_copy.pgt");
  // Rewrites header field [off, off + 4) and the header checksum, as a foreign writer would.
  auto with_field = [&](uint64_t off, uint32_t v) {
    std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
    std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
    char hb[128];
    f.read(hb, 128);
    std::memcpy(hb + off, &v, 4);
    const uint64_t hh = data::xxh64_bytes(hb, 120);
    std::memcpy(hb + 120, &hh, 8);
    f.seekp(0);
    f.write(hb, 128);
  };
  with_field(104, 7);
  expect_io_error([&] { TableFileReader::open(copy, *L); }, {"unknown quantization code 7", "byte offset 104"});
  with_field(104, 0);  // says NF4: the row bytes (66) are not NF4's (34)
  expect_io_error([&] { TableFileReader::open(copy, *L); }, {"inconsistent header fields"});
  with_field(8, 1);  // version 1 implies NF4, same
  expect_io_error([&] { TableFileReader::open(copy, *L); }, {"inconsistent header fields"});
  with_field(8, 3);
  expect_io_error([&] { TableFileReader::open(copy, *L); }, {"format version 3", "reads versions 1 and 2"});
  // An NF4 file (version 1) with a version 2 header naming nf4 (code 0): consistent, and read as NF4.
  const std::string nf = temp_path("nf.pgt");
  write_table_file(nf, *L, test_rows(L->width()));
  std::filesystem::copy_file(nf, path, std::filesystem::copy_options::overwrite_existing);
  with_field(8, 2);
  EXPECT_EQ(TableFileReader::open(copy, *L).header().quantization, TableQuantization::kNf4);
  (void)h;
  std::filesystem::remove(nf);
  std::filesystem::remove(copy);
  std::filesystem::remove(path);
}

TEST(TableFile, Mxfp8RandomFileAndRefusals) {
  auto L = layout("engram", 2000000);
  const std::string path = temp_path("mxrand.pgt");
  TableWriteOptions opt;
  opt.quantization = TableQuantization::kMxfp8;
  write_random_table_file(path, *L, 5, opt);
  TableFileReader r = TableFileReader::open(path, *L, TableQuantization::kMxfp8);
  r.verify_all();
  std::vector<float> row(64);
  float amax = 0;
  for (int64_t i : {int64_t{0}, int64_t{12345}, L->rows() - 1}) {
    r.read_row(i, row.data());
    for (float v : row) {
      ASSERT_TRUE(std::isfinite(v));
      amax = std::max(amax, std::fabs(v));
    }
  }
  EXPECT_GT(amax, 0.005f);
  EXPECT_LE(amax, 448.0f / 8192);
  // A non-finite value is refused with its row, and nothing is left behind; a large finite one is fine.
  const int64_t w = L->width();
  try {
    write_table_file(
        path, *L,
        [&](int64_t r0, int64_t n, float* out) {
          for (int64_t i = 0; i < n * w; ++i)
            out[i] = (r0 + i / w == 23) ? -std::numeric_limits<float>::infinity() : 1e20f;
        },
        opt);
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("row 23 holds a value that is not finite"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::exists(path));  // the random file from before, untouched
  for (const auto& f : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    EXPECT_EQ(f.path().string().find(path + ".tmp"), std::string::npos) << "staged file left behind";
  std::filesystem::remove(path);
}

TEST(TableFile, QuantizationNames) {
  EXPECT_EQ(parse_quantization("nf4"), TableQuantization::kNf4);
  EXPECT_EQ(parse_quantization("mxfp8"), TableQuantization::kMxfp8);
  EXPECT_EQ(quantization_name(TableQuantization::kMxfp8), "mxfp8");
  EXPECT_THROW(parse_quantization("fp8"), UserError);
  EXPECT_EQ(quantized_row_bytes(TableQuantization::kNf4, 384), 204);
  EXPECT_EQ(quantized_row_bytes(TableQuantization::kMxfp8, 384), 396);
  EXPECT_EQ(quantized_row_bytes(TableQuantization::kMxfp8, 100), 104);
}

}  // namespace
}  // namespace pg
