// MXFP8 quantization of table rows (OCP Microscaling Formats (MX) v1.0, element format FP8 E4M3): each block of 32
// consecutive values of a row shares one E8M0 scale X = 2^(e - 127) (one byte e; 0xFF is NaN and never written),
// and every value is one E4M3 byte (sign, 4 exponent bits of bias 7, 3 mantissa bits; no infinities, S.1111.111 is
// NaN and never written; largest finite 448 = 0x7E, smallest subnormal 2^-9 = 0x01).
//
// Scale (OCP MX §6.3): shared exponent = floor(log2(max|x| of the block)) - 8 (8 = emax of E4M3), clamped to the
// E8M0 range [-127, 127] (an all-zero block, and any block with max|x| < 2^-118, gets e = 0, X = 2^-127). Elements:
// x / X rounded to the nearest E4M3 value, ties to even, saturating to +-448 (x / X lies in [256, 512) for the
// block's absmax, so values in (448, 512) X clip to 448 X). The sign of zero is kept (-0.0 -> 0x80).
//
// Row byte layout (storage/FORMATS.md): ceil(width / 32) blocks back to back, block k at byte 33 k: the scale byte,
// then one code byte per value (32, fewer in a last block when width is not a multiple of 32): row_bytes =
// width + ceil(width / 32). x^ = decode(code) * X exactly (an fp32 product that never rounds for written scales).
//
// Error of one value x with block scale X (tested): x^ is the finite E4M3 value nearest x / X, times X, so
// |x - x^| <= max(|x| / 16, X / 1024) when |x| <= 448 X, and |x - x^| = |x| - 448 X < 64 X <= max|x| / 4 when it
// saturates. Values of the form c X with c a finite E4M3 value survive exactly (so does every dequantized row).
#pragma once
#include <cstdint>

namespace pg::mxfp8 {

inline constexpr int64_t kBlock = 32;  // values per shared scale
inline constexpr int kElemEmax = 8;  // emax of E4M3 (OCP MX Table 2)
inline constexpr int kScaleBias = 127;  // E8M0: X = 2^(e - 127)
inline constexpr uint8_t kScaleNaN = 0xFF;  // E8M0 NaN (never written)
inline constexpr uint8_t kMaxCode = 0x7E;  // +448, the largest finite E4M3 value
inline constexpr float kMaxElem = 448.0f;

// Bytes of a row of `width` values: one code per value plus one scale per started block of 32.
inline int64_t row_bytes(int64_t width) { return width + (width + kBlock - 1) / kBlock; }

// E4M3 of a finite y: the nearest E4M3 value, ties to the even code, |y| >= 448 saturating to +-448 (0x7E / 0xFE).
uint8_t e4m3_encode(float y);
// The value of an E4M3 code (NaN for 0x7F and 0xFF).
float e4m3_decode(uint8_t code);
// The E8M0 scale byte of a block whose largest magnitude is amax (finite, >= 0): floor(log2 amax) - 8 + 127 clamped
// to [0, 254] (0 for amax = 0).
uint8_t scale_for_absmax(float amax);
// 2^(e - 127) (NaN for 0xFF).
float e8m0_decode(uint8_t e);

// Quantizes one row x[width] into out[row_bytes(width)]. Returns false (out unspecified) when a value is not
// finite: the caller reports the row.
bool quantize_row(const float* x, int64_t width, uint8_t* out);
// x[width] from a quantized row.
void dequantize_row(const uint8_t* in, int64_t width, float* x);
// The scale X of block b of a quantized row.
float block_scale(const uint8_t* row, int64_t b);

// In-place MXFP8 round trip of a [rows, width] table (the values the file holds). Throws UserError naming the first
// row holding a value that is not finite. OpenMP-parallel over rows.
void round_trip_table(float* table, int64_t rows, int64_t width);

}  // namespace pg::mxfp8
