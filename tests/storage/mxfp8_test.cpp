// Tests of storage/mxfp8.h: E4M3 and E8M0 encodings checked against hand-computed values, the OCP MX
// scale rule, round to nearest even with saturation, exact round trips of representable rows, the per-value error
// bound, zero blocks, widths that are not a multiple of 32, and non-finite values refused with the row.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "storage/mxfp8.h"

namespace pg {
namespace {

using mxfp8::e4m3_decode;
using mxfp8::e4m3_encode;

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }

TEST(Mxfp8, E4M3HandEncodings) {
  EXPECT_EQ(e4m3_encode(1.0f), 0x38);  // exponent 7 (bias 7), mantissa 0
  EXPECT_EQ(e4m3_encode(-1.0f), 0xB8);
  EXPECT_EQ(e4m3_encode(1.125f), 0x39);  // 1 + 1/8
  EXPECT_EQ(e4m3_encode(3.0f), 0x44);  // 1.5 * 2^1: exponent 8, mantissa 4
  EXPECT_EQ(e4m3_encode(448.0f), 0x7E);  // the largest finite value
  EXPECT_EQ(e4m3_encode(-448.0f), 0xFE);
  EXPECT_EQ(e4m3_encode(256.0f), 0x78);
  EXPECT_EQ(e4m3_encode(std::ldexp(1.0f, -6)), 0x08);  // the smallest normal
  EXPECT_EQ(e4m3_encode(std::ldexp(1.0f, -9)), 0x01);  // the smallest subnormal
  EXPECT_EQ(e4m3_encode(std::ldexp(7.0f, -9)), 0x07);  // the largest subnormal 7 * 2^-9
  EXPECT_EQ(e4m3_encode(0.0f), 0x00);
  EXPECT_EQ(e4m3_encode(-0.0f), 0x80);  // the sign of zero is kept
  EXPECT_EQ(e4m3_encode(0.1f), 0x1D);  // 0.1 = 1.6 * 2^-4: mantissa 4.8 -> 5, 1.625/16 = 0.1015625
  EXPECT_EQ(e4m3_decode(0x1D), 0.1015625f);
}

TEST(Mxfp8, E4M3RoundsToNearestEvenAndSaturates) {
  // Ties between neighbours go to the even code.
  EXPECT_EQ(e4m3_encode(1.0625f), 0x38);  // 1 and 1.125: tie -> 0x38
  EXPECT_EQ(e4m3_encode(1.1875f), 0x3A);  // 1.125 and 1.25: tie -> 0x3A
  EXPECT_EQ(e4m3_encode(1.0626f), 0x39);  // just above the tie
  EXPECT_EQ(e4m3_encode(std::ldexp(0.5f, -9)), 0x00);  // 0 and 2^-9: tie -> 0
  EXPECT_EQ(e4m3_encode(std::ldexp(1.5f, -9)), 0x02);  // 2^-9 and 2^-8: tie -> 0x02
  EXPECT_EQ(e4m3_encode(std::ldexp(7.5f, -9)), 0x08);  // largest subnormal and smallest normal: tie -> 0x08
  EXPECT_EQ(e4m3_encode(std::ldexp(0.49f, -9)), 0x00);
  EXPECT_EQ(e4m3_encode(-std::ldexp(0.49f, -9)), 0x80);  // rounds to -0
  EXPECT_EQ(e4m3_encode(432.0f), 0x7E);  // 416 and 448: tie -> 0x7E (even)
  EXPECT_EQ(e4m3_encode(431.9f), 0x7D);  // 416
  EXPECT_EQ(e4m3_encode(447.99f), 0x7E);
  // Beyond 448 (even past the 464 midpoint to the nonexistent 480): saturate, never the NaN code 0x7F.
  for (float y : {448.5f, 463.9f, 464.0f, 480.0f, 511.0f, 1e6f, std::numeric_limits<float>::max()}) {
    EXPECT_EQ(e4m3_encode(y), 0x7E) << y;
    EXPECT_EQ(e4m3_encode(-y), 0xFE) << y;
  }
}

TEST(Mxfp8, E4M3EveryCodeRoundTripsAndIsTheNearest) {
  EXPECT_TRUE(std::isnan(e4m3_decode(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_decode(0xFF)));
  std::vector<float> finite;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    const float v = e4m3_decode(static_cast<uint8_t>(c));
    ASSERT_TRUE(std::isfinite(v)) << c;
    EXPECT_EQ(e4m3_encode(v), c) << c;  // exact for every representable value, -0 included
    finite.push_back(v);
  }
  EXPECT_EQ(e4m3_decode(0x7E), 448.0f);
  EXPECT_EQ(e4m3_decode(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(bits(e4m3_decode(0x80)), 0x80000000u);
  // Random values: the chosen code's value is the nearest finite E4M3 value; on an exact tie the code is even.
  RngStream r(3, "e4m3");
  for (int i = 0; i < 200000; ++i) {
    const float y = static_cast<float>((r.uniform() * 2 - 1) * std::ldexp(1.0, static_cast<int>(r.below(24)) - 14));
    const uint8_t c = e4m3_encode(y);
    const double got = e4m3_decode(c);
    double best = 1e300;
    for (float v : finite) best = std::min(best, std::fabs(static_cast<double>(y) - v));
    ASSERT_EQ(std::fabs(static_cast<double>(y) - got), best) << y;
    if (std::signbit(got) != std::signbit(y)) ADD_FAILURE() << "sign of " << y;
  }
}

TEST(Mxfp8, E8M0ScaleFollowsTheOcpRule) {
  EXPECT_EQ(mxfp8::e8m0_decode(127), 1.0f);
  EXPECT_EQ(mxfp8::e8m0_decode(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(mxfp8::e8m0_decode(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(mxfp8::e8m0_decode(0xFF)));
  // shared exponent = floor(log2 amax) - 8, biased by 127.
  EXPECT_EQ(mxfp8::scale_for_absmax(1.0f), 119);  // 2^-8
  EXPECT_EQ(mxfp8::scale_for_absmax(1.99f), 119);
  EXPECT_EQ(mxfp8::scale_for_absmax(2.0f), 120);
  EXPECT_EQ(mxfp8::scale_for_absmax(3.0f), 120);
  EXPECT_EQ(mxfp8::scale_for_absmax(448.0f), 127);  // floor(log2 448) = 8
  EXPECT_EQ(mxfp8::scale_for_absmax(0.01f), 112);  // floor(log2 0.01) = -7 -> -15
  EXPECT_EQ(mxfp8::scale_for_absmax(0.0f), 0);  // zero block: clamped to the smallest scale
  EXPECT_EQ(mxfp8::scale_for_absmax(std::ldexp(1.0f, -119)), 0);  // -127 exactly
  EXPECT_EQ(mxfp8::scale_for_absmax(std::ldexp(1.0f, -118)), 1);
  EXPECT_EQ(mxfp8::scale_for_absmax(std::ldexp(1.0f, -140)), 0);  // fp32 subnormal
  EXPECT_EQ(mxfp8::scale_for_absmax(std::numeric_limits<float>::max()), 246);  // never 0xFF
}

TEST(Mxfp8, HandComputedRow) {
  // One block of 32: amax 3 -> shared exponent 1 - 8 = -7 (byte 120, X = 2^-7); x / X = 128, 64, -384, 1.92, 1.984.
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f;
  x[1] = 0.5f;
  x[2] = -3.0f;
  x[3] = 0.015f;  // 1.92 = 1 + 7.36/8 -> mantissa 7: 1.875
  x[4] = 0.0155f;  // 1.984 = 1 + 7.87/8 -> mantissa 8: carries into the exponent, 2.0
  ASSERT_EQ(mxfp8::row_bytes(32), 33);
  std::vector<uint8_t> q(33, 0xAB);
  ASSERT_TRUE(mxfp8::quantize_row(x.data(), 32, q.data()));
  EXPECT_EQ(q[0], 120);
  EXPECT_EQ(q[1], 0x70);  // 128 = 2^7: exponent field 14
  EXPECT_EQ(q[2], 0x68);  // 64
  EXPECT_EQ(q[3], 0xFC);  // -384 = -1.5 * 2^8
  EXPECT_EQ(q[4], 0x3F);  // 1.875: exponent field 7, mantissa 7
  EXPECT_EQ(q[5], 0x40);  // 2.0: exponent field 8, mantissa 0
  for (int i = 6; i < 33; ++i) EXPECT_EQ(q[static_cast<size_t>(i)], 0x00) << i;
  std::vector<float> y(32, 1.0f);
  mxfp8::dequantize_row(q.data(), 32, y.data());
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[2], -3.0f);
  EXPECT_EQ(y[3], 0.0146484375f);  // 1.875 * 2^-7
  EXPECT_EQ(y[4], 0.015625f);  // 2 * 2^-7
  EXPECT_EQ(mxfp8::block_scale(q.data(), 0), std::ldexp(1.0f, -7));
  for (int i = 5; i < 32; ++i) EXPECT_EQ(bits(y[static_cast<size_t>(i)]), 0u) << i;
}

TEST(Mxfp8, OcpScaleSaturatesTheLargestValues) {
  // amax 1.9: shared exponent 0 - 8, x / X = 486.4 > 448: saturates to 448 X = 1.75 (the OCP scale rule's clipping).
  std::vector<float> x = {1.9f, -1.9f, 1.75f, 1.0f};
  std::vector<uint8_t> q(static_cast<size_t>(mxfp8::row_bytes(4)));
  ASSERT_EQ(q.size(), 5u);
  ASSERT_TRUE(mxfp8::quantize_row(x.data(), 4, q.data()));
  EXPECT_EQ(q[0], 119);
  EXPECT_EQ(q[1], 0x7E);
  EXPECT_EQ(q[2], 0xFE);
  EXPECT_EQ(q[3], 0x7E);
  EXPECT_EQ(q[4], 0x78);
  std::vector<float> y(4);
  mxfp8::dequantize_row(q.data(), 4, y.data());
  EXPECT_EQ(y, (std::vector<float>{1.75f, -1.75f, 1.75f, 1.0f}));
}

TEST(Mxfp8, ZeroBlocksAndRowsStayExactlyZero) {
  for (int64_t w : {32, 64, 100, 7}) {
    std::vector<float> x(static_cast<size_t>(w), 0.0f), y(static_cast<size_t>(w), 1.0f);
    std::vector<uint8_t> q(static_cast<size_t>(mxfp8::row_bytes(w)), 0xAB);
    ASSERT_TRUE(mxfp8::quantize_row(x.data(), w, q.data()));
    for (uint8_t b : q) EXPECT_EQ(b, 0x00);  // scale byte 0 (2^-127) and +0 codes
    mxfp8::dequantize_row(q.data(), w, y.data());
    for (float v : y) EXPECT_EQ(bits(v), 0u);  // +0.0 exactly
  }
  // A zero block between non-zero ones keeps its own (zero) scale; the others are unaffected.
  std::vector<float> x(96, 0.0f), y(96);
  x[3] = 5.0f;
  x[70] = -0.25f;
  std::vector<uint8_t> q(static_cast<size_t>(mxfp8::row_bytes(96)));
  ASSERT_TRUE(mxfp8::quantize_row(x.data(), 96, q.data()));
  EXPECT_EQ(q[0], 121);  // floor(log2 5) = 2
  EXPECT_EQ(q[33], 0);  // block 1: all zero
  EXPECT_EQ(q[66], 117);  // floor(log2 0.25) = -2
  mxfp8::dequantize_row(q.data(), 96, y.data());
  for (int i = 0; i < 96; ++i) EXPECT_EQ(y[static_cast<size_t>(i)], x[static_cast<size_t>(i)]) << i;
}

TEST(Mxfp8, WidthNotAMultipleOf32) {
  // 100 values: blocks of 32, 32, 32 and 4; 104 bytes, the last block's scale at byte 99 and its codes at 100..103.
  const int64_t w = 100;
  ASSERT_EQ(mxfp8::row_bytes(w), 104);
  std::vector<float> x(static_cast<size_t>(w));
  for (int64_t i = 0; i < w; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i + 1);  // block maxima 32, 64, 96
  x[99] = -0.75f;
  x[96] = 0.5f;
  x[97] = 0.125f;
  x[98] = 0.0f;
  std::vector<uint8_t> q(104, 0xAB);
  ASSERT_TRUE(mxfp8::quantize_row(x.data(), w, q.data()));
  EXPECT_EQ(q[0], 124);  // 32: floor(log2) 5 -> -3
  EXPECT_EQ(q[33], 125);  // 64: 6 -> -2
  EXPECT_EQ(q[66], 125);  // 96: 6 -> -2
  EXPECT_EQ(q[99], 118);  // last block amax 0.75: floor(log2) -1 -> -9 (X = 2^-9), its own scale
  EXPECT_EQ(q[100], 0x78);  // 0.5 / 2^-9 = 256
  EXPECT_EQ(q[101], 0x68);  // 0.125 / 2^-9 = 64
  EXPECT_EQ(q[102], 0x00);
  EXPECT_EQ(q[103], 0xFC);  // -384
  std::vector<float> y(static_cast<size_t>(w));
  mxfp8::dequantize_row(q.data(), w, y.data());
  // Block 0 (X = 2^-3): x / X = 8 (i + 1); in [128, 256) E4M3 steps by 16.
  EXPECT_EQ(y[15], 16.0f);  // 128: exact
  EXPECT_EQ(y[16], 16.0f);  // 17 -> 136: tie between 128 (mantissa 0) and 144 (1) -> the even 128
  EXPECT_EQ(y[17], 18.0f);  // 144: exact
  EXPECT_EQ(y[18], 20.0f);  // 19 -> 152: tie between 144 (1) and 160 (2) -> the even 160
  for (int64_t i = 0; i < w; ++i) {
    const float X = mxfp8::block_scale(q.data(), i / 32);
    EXPECT_LE(std::fabs(x[static_cast<size_t>(i)] - y[static_cast<size_t>(i)]),
              std::max(std::fabs(x[static_cast<size_t>(i)]) / 16, X / 1024))
        << i;
  }
  EXPECT_EQ(y[96], 0.5f);
  EXPECT_EQ(y[97], 0.125f);
  EXPECT_EQ(y[99], -0.75f);
}

TEST(Mxfp8, RepresentableRowsRoundTripExactly) {
  RngStream r(4, "mx_exact");
  std::vector<float> finite;
  for (int c = 0; c < 256; ++c)
    if ((c & 0x7F) != 0x7F) finite.push_back(e4m3_decode(static_cast<uint8_t>(c)));
  for (int rep = 0; rep < 500; ++rep) {
    const int64_t w = 1 + static_cast<int64_t>(r.below(200));
    std::vector<float> x(static_cast<size_t>(w));
    for (int64_t b = 0; b < w; b += 32) {
      const int k = static_cast<int>(r.below(60)) - 30;  // the block's X = 2^k
      const int64_t n = std::min<int64_t>(32, w - b);
      for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(b + i)] = std::ldexp(finite[r.below(finite.size())], k);
      // the block's largest magnitude must be in [256, 448] X for the OCP scale to be 2^k
      x[static_cast<size_t>(b + static_cast<int64_t>(r.below(static_cast<uint64_t>(n))))] =
          std::ldexp(e4m3_decode(static_cast<uint8_t>(0x78 + r.below(7))) * (r.below(2) ? -1.0f : 1.0f), k);
    }
    std::vector<uint8_t> q(static_cast<size_t>(mxfp8::row_bytes(w)));
    std::vector<float> y(static_cast<size_t>(w));
    ASSERT_TRUE(mxfp8::quantize_row(x.data(), w, q.data()));
    mxfp8::dequantize_row(q.data(), w, y.data());
    for (int64_t i = 0; i < w; ++i) ASSERT_EQ(bits(y[static_cast<size_t>(i)]), bits(x[static_cast<size_t>(i)])) << i;
  }
}

TEST(Mxfp8, ErrorBoundAndIdempotence) {
  RngStream r(5, "mx_err");
  int64_t saturated = 0, values = 0;
  for (int64_t w : {32, 64, 100, 384, 5}) {
    for (int rep = 0; rep < 200; ++rep) {
      const double scale = std::ldexp(1.0, static_cast<int>(r.below(40)) - 30);
      std::vector<float> x(static_cast<size_t>(w)), y(static_cast<size_t>(w)), z(static_cast<size_t>(w));
      for (auto& v : x) v = static_cast<float>(r.normal() * scale);
      std::vector<uint8_t> q(static_cast<size_t>(mxfp8::row_bytes(w))), q2(q.size());
      ASSERT_TRUE(mxfp8::quantize_row(x.data(), w, q.data()));
      mxfp8::dequantize_row(q.data(), w, y.data());
      for (int64_t i = 0; i < w; ++i) {
        const int64_t b = i / 32 * 32;
        float amax = 0;
        for (int64_t j = b; j < std::min(w, b + 32); ++j) amax = std::max(amax, std::fabs(x[static_cast<size_t>(j)]));
        const double X = mxfp8::block_scale(q.data(), i / 32);
        EXPECT_EQ(X, std::ldexp(1.0, std::ilogb(amax) - 8)) << "OCP scale";
        EXPECT_GE(amax, 256 * X);
        EXPECT_LT(amax, 512 * X);
        const double xi = x[static_cast<size_t>(i)], err = std::fabs(xi - y[static_cast<size_t>(i)]);
        ++values;
        if (std::fabs(xi) <= 448 * X) {
          EXPECT_LE(err, std::max(std::fabs(xi) / 16, X / 1024)) << "w " << w << " i " << i;
        } else {
          ++saturated;
          EXPECT_EQ(std::fabs(y[static_cast<size_t>(i)]), 448 * X);
          EXPECT_LT(err, 64 * X);
          EXPECT_LE(err, amax / 4);
        }
        EXPECT_EQ(std::signbit(y[static_cast<size_t>(i)]), std::signbit(x[static_cast<size_t>(i)]));
      }
      // A dequantized row is representable: quantizing it again gives the same bytes.
      ASSERT_TRUE(mxfp8::quantize_row(y.data(), w, q2.data()));
      EXPECT_EQ(q2, q);
      mxfp8::dequantize_row(q2.data(), w, z.data());
      EXPECT_EQ(z, y);
    }
  }
  EXPECT_GT(saturated, 0);  // normal data does reach the saturation branch (values in (448, 512) X)
  EXPECT_LT(saturated, values / 10);
}

TEST(Mxfp8, NonFiniteValuesAreRefusedWithTheRow) {
  std::vector<float> x(64, 0.5f);
  std::vector<uint8_t> q(static_cast<size_t>(mxfp8::row_bytes(64)));
  EXPECT_TRUE(mxfp8::quantize_row(x.data(), 64, q.data()));
  x[40] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(mxfp8::quantize_row(x.data(), 64, q.data()));
  x[40] = -std::numeric_limits<float>::infinity();
  EXPECT_FALSE(mxfp8::quantize_row(x.data(), 64, q.data()));
  x[40] = std::nanf("");
  EXPECT_FALSE(mxfp8::quantize_row(x.data(), 64, q.data()));
  x[40] = 1e30f;  // large but finite: fine (no fp16-like range limit)
  EXPECT_TRUE(mxfp8::quantize_row(x.data(), 64, q.data()));

  std::vector<float> table(5 * 64, 0.25f);
  table[3 * 64 + 10] = std::nanf("");
  table[4 * 64 + 1] = std::numeric_limits<float>::infinity();
  try {
    mxfp8::round_trip_table(table.data(), 5, 64);
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("row 3 "), std::string::npos) << e.what();
  }
  std::vector<float> ok(3 * 40, 0.3f);
  mxfp8::round_trip_table(ok.data(), 3, 40);
  for (float v : ok)
    EXPECT_EQ(v, e4m3_decode(e4m3_encode(0.3f / 0x1p-10f)) * 0x1p-10f);  // 0.3: floor(log2) -2 -> X 2^-10
}

}  // namespace
}  // namespace pg
