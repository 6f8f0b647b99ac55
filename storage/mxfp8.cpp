// Implementation of storage/mxfp8.h.
#include "storage/mxfp8.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "storage/round_trip.h"

namespace pg::mxfp8 {

namespace {
// Every code's value, built once (256 floats).
struct DecodeTable {
  float v[256];
  DecodeTable() {
    for (int c = 0; c < 256; ++c) {
      const int e = (c >> 3) & 0xF, m = c & 7;
      float a;
      if (e == 0xF && m == 7) a = std::numeric_limits<float>::quiet_NaN();
      else if (e == 0) a = std::ldexp(static_cast<float>(m), -9);  // subnormal: m * 2^-9
      else a = std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);  // normal: 2^(e-7) (1 + m/8)
      v[c] = (c & 0x80) ? -a : a;
    }
  }
};
const DecodeTable& decode_table() {
  static const DecodeTable t;
  return t;
}
}  // namespace

uint8_t e4m3_encode(float y) {
  const uint32_t f = std::bit_cast<uint32_t>(y);
  const uint8_t sign = static_cast<uint8_t>((f >> 24) & 0x80u);
  const float a = std::fabs(y);
  // 448 is the largest finite value: every larger magnitude (even one that would round to "480") saturates.
  if (a >= kMaxElem) return static_cast<uint8_t>(sign | kMaxCode);
  if (a < 0x1p-6f) {
    // Subnormal range: multiples of 2^-9, code = the multiple (8 = 2^-6 is code 0x08, the smallest normal).
    const float v = a * 512.0f;  // exact, in [0, 8)
    uint32_t q = static_cast<uint32_t>(v);
    const float frac = v - static_cast<float>(q);
    if (frac > 0.5f || (frac == 0.5f && (q & 1u))) ++q;
    return static_cast<uint8_t>(sign | q);
  }
  // Normal: keep 3 of fp32's 23 mantissa bits, round to nearest even on the dropped 20 (a carry moves into the
  // exponent field, which is the next E4M3 value; a < 448 never rounds past 0x7E).
  const uint32_t b = std::bit_cast<uint32_t>(a);
  const int e = static_cast<int>(b >> 23) - 127;  // in [-6, 8]
  const uint32_t mant = b & 0x7FFFFFu;
  uint32_t code = (static_cast<uint32_t>(e + 7) << 3) | (mant >> 20);
  const uint32_t rem = mant & 0xFFFFFu;
  if (rem > 0x80000u || (rem == 0x80000u && (code & 1u))) ++code;
  return static_cast<uint8_t>(sign | code);
}

float e4m3_decode(uint8_t code) { return decode_table().v[code]; }

uint8_t scale_for_absmax(float amax) {
  // floor(log2 amax) is the fp32 exponent for a normal amax; subnormal amax (< 2^-126) and 0 clamp to e = 0.
  const int field = static_cast<int>((std::bit_cast<uint32_t>(amax) >> 23) & 0xFFu);  // 1..254 for normal finite
  if (field == 0) return 0;
  return static_cast<uint8_t>(std::clamp(field - 127 - kElemEmax + kScaleBias, 0, 254));
}

float e8m0_decode(uint8_t e) {
  if (e == kScaleNaN) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(e) - kScaleBias);
}

bool quantize_row(const float* x, int64_t width, uint8_t* out) {
  const int64_t blocks = (width + kBlock - 1) / kBlock;
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t b = k * kBlock, n = std::min(kBlock, width - b);
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      const float a = std::fabs(x[b + i]);
      if (!(a <= std::numeric_limits<float>::max())) return false;  // NaN or infinity
      amax = std::max(amax, a);
    }
    const uint8_t e = scale_for_absmax(amax);
    // 1/X = 2^(127 - e) is a finite fp32 power of two for e in [0, 254], so x / X is the exact product x * (1/X)
    // (short of fp32 underflow far below E4M3's resolution, where both round to zero).
    const float inv = std::ldexp(1.0f, kScaleBias - static_cast<int>(e));
    uint8_t* o = out + k * (kBlock + 1);
    o[0] = e;
    for (int64_t i = 0; i < n; ++i) o[1 + i] = e4m3_encode(x[b + i] * inv);
  }
  return true;
}

float block_scale(const uint8_t* row, int64_t b) { return e8m0_decode(row[b * (kBlock + 1)]); }

void dequantize_row(const uint8_t* in, int64_t width, float* x) {
  const DecodeTable& t = decode_table();
  const int64_t blocks = (width + kBlock - 1) / kBlock;
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t b = k * kBlock, n = std::min(kBlock, width - b);
    const uint8_t* o = in + k * (kBlock + 1);
    const float s = e8m0_decode(o[0]);
    for (int64_t i = 0; i < n; ++i) x[b + i] = t.v[o[1 + i]] * s;
  }
}

void round_trip_table(float* table, int64_t rows, int64_t width) {
  const int64_t bad = round_trip_rows(table, rows, width, row_bytes(width), quantize_row, dequantize_row);
  if (bad >= 0) throw UserError(str("MXFP8: table row ", bad, " holds a value that is not finite"));
}

}  // namespace pg::mxfp8
