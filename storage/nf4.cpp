// Implementation of storage/nf4.h.
#include "storage/nf4.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "storage/round_trip.h"

namespace pg::nf4 {

uint16_t float_to_half(float x) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t absf = f & 0x7FFFFFFFu;
  if (absf >= 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u | (absf > 0x7F800000u ? 0x200u : 0u));
  if (absf >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65520: infinity
  if (absf < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    if (absf < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25 rounds to 0
    const uint32_t e = absf >> 23, mant = (absf & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e;  // value = mant * 2^(e-150); half subnormal unit 2^-24; 14 <= shift <= 24
    uint32_t h = mant >> shift;  // mant * 2^(e-126) truncated; round to nearest even on the dropped bits
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((absf - 0x38000000u) >> 13);  // rebias exponent 127 -> 15
  const uint32_t rem = absf & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);
    return sign ? -v : v;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7F800000u | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t half_round_up(float x) {
  uint16_t h = float_to_half(x);
  if (half_to_float(h) < x) ++h;  // non-negative halves are ordered like their bit patterns
  return h;
}

namespace {
// Midpoints between neighbouring codes: code index = number of midpoints strictly below v.
struct Midpoints {
  float m[15];
  constexpr Midpoints() : m{} {
    for (int i = 0; i < 15; ++i) m[i] = (kCodebook[i] + kCodebook[i + 1]) * 0.5f;
  }
};
constexpr Midpoints kMid;

inline int nearest_code(float v) {
  int q = 0;
  for (int i = 0; i < 15; ++i) q += v > kMid.m[i];
  return q;
}
}  // namespace

bool quantize_row(const float* x, int64_t width, uint8_t* out) {
  const int64_t groups = (width + kGroup - 1) / kGroup;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t b = g * kGroup, n = std::min(kGroup, width - b);
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      const float a = std::fabs(x[b + i]);
      if (!(a <= 65504.0f)) return false;  // NaN, infinity or beyond the fp16 range
      amax = std::max(amax, a);
    }
    const uint16_t sh = amax > 0.0f ? half_round_up(amax) : 0;
    const float s = half_to_float(sh);
    uint8_t codes[kGroup];
    if (s > 0.0f) {
      for (int64_t i = 0; i < n; ++i) codes[i] = static_cast<uint8_t>(nearest_code(x[b + i] / s));
    } else {
      for (int64_t i = 0; i < n; ++i) codes[i] = kZeroCode;
    }
    for (int64_t i = n; i < kGroup; ++i) codes[i] = kZeroCode;
    uint8_t* o = out + g * kGroupBytes;
    o[0] = static_cast<uint8_t>(sh & 0xFF);
    o[1] = static_cast<uint8_t>(sh >> 8);
    for (int64_t j = 0; j < kGroup / 2; ++j) o[2 + j] = static_cast<uint8_t>((codes[2 * j] << 4) | codes[2 * j + 1]);
  }
  return true;
}

float group_scale(const uint8_t* row, int64_t g) {
  const uint8_t* o = row + g * kGroupBytes;
  return half_to_float(static_cast<uint16_t>(o[0] | (o[1] << 8)));
}

void dequantize_row(const uint8_t* in, int64_t width, float* x) {
  const int64_t groups = (width + kGroup - 1) / kGroup;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t b = g * kGroup, n = std::min(kGroup, width - b);
    const uint8_t* o = in + g * kGroupBytes;
    const float s = half_to_float(static_cast<uint16_t>(o[0] | (o[1] << 8)));
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t byte = o[2 + i / 2];
      const int q = (i & 1) ? (byte & 0xF) : (byte >> 4);
      x[b + i] = kCodebook[q] * s;
    }
  }
}

void round_trip_table(float* table, int64_t rows, int64_t width) {
  const int64_t bad = round_trip_rows(table, rows, width, row_bytes(width), quantize_row, dequantize_row);
  if (bad >= 0)
    throw UserError(str("NF4: table row ", bad, " holds a value that is not finite or beyond the fp16 range (65504)"));
}

}  // namespace pg::nf4
