// Tests of storage/nf4.h and storage/table_file.h (SPEC §9: NF4 zero-row fidelity and error bound; corrupt or truncated
// files are refused with a clear error).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/rng.h"
#include "storage/nf4.h"
#include "storage/table_file.h"
#include "memory/layout.h"
#include "memory/pagegram_layout.h"

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
        for (int64_t j = i / 64 * 64; j < std::min(w, i / 64 * 64 + 64); ++j) amax = std::max(amax, std::fabs(x[static_cast<size_t>(j)]));
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
  x[0] = 2.0f;   // code 15 (1.0 * scale 2)
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
        out[i * width + j] = r % 7 == 0 ? 0.0f : static_cast<float>(std::sin(0.37 * static_cast<double>(r * width + j)) * 0.01 * static_cast<double>(1 + r % 5));
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
  expect_io_error([&] { TableFileReader::open(copy, *L); }, {"not a PageGram NF4 table file"});

  // Mismatched layouts: other slots, other hash seed, other layout.
  expect_io_error([&] { TableFileReader::open(path, *layout("pagegram", 3000000, 8)); }, {"layout mismatch"});
  expect_io_error([&] { TableFileReader::open(path, *layout("pagegram", 3000000, 4, 7)); }, {"layout mismatch", "hash_seed"});
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

}  // namespace
}  // namespace pg
