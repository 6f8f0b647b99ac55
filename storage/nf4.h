// NF4 quantization of table rows (docs/model.md §7, report §3.3; QLoRA's 4-bit NormalFloat): each group of 64 values is
// 64 4-bit indices into the standard 16-level code book plus one fp16 absmax scale = 34 bytes.
//
// Group byte layout (storage/FORMATS.md): bytes [0, 2) the scale s as IEEE binary16, little-endian; bytes [2, 34) the
// codes, byte 2 + j holding element 2j in its high nibble and element 2j+1 in its low nibble (bitsandbytes' order).
// s is the smallest fp16 value >= max|x| of the group (rounded up, so |x|/s <= 1 and no value clips); each value
// gets the code c minimizing |x/s - c| (ties to the lower code); x̂ = c * s. A zero value (and so a zero row) maps
// to the code 0.0 and dequantizes to exactly 0. A width that is not a multiple of 64 pads its last group with zeros.
#pragma once
#include <cstdint>

namespace pg::nf4 {

// The standard NF4 code book (bitsandbytes / QLoRA), ascending; index 7 is exactly 0.
inline constexpr float kCodebook[16] = {-1.0f,
                                        -0.6961928009986877f,
                                        -0.5250730514526367f,
                                        -0.39491748809814453f,
                                        -0.28444138169288635f,
                                        -0.18477343022823334f,
                                        -0.09105003625154495f,
                                        0.0f,
                                        0.07958029955625534f,
                                        0.16093020141124725f,
                                        0.24611230194568634f,
                                        0.33791524171829224f,
                                        0.44070982933044434f,
                                        0.5626170039176941f,
                                        0.7229568362236023f,
                                        1.0f};
inline constexpr int kZeroCode = 7;
inline constexpr int64_t kGroup = 64;  // values per group
inline constexpr int64_t kGroupBytes = 34;  // 2 scale bytes + 32 code bytes
// Largest half-gap between neighbouring codes (between -1 and -0.696): the error bound is this times the scale.
inline constexpr double kMaxHalfGap = (1.0 - 0.6961928009986877) / 2;

// IEEE binary16 conversions (round to nearest even; and rounding up for non-negative values).
uint16_t float_to_half(float x);
float half_to_float(uint16_t h);
// The smallest binary16 value >= x, for finite x in [0, 65504] (callers check the range).
uint16_t half_round_up(float x);

// Bytes of a row of `width` values.
inline int64_t row_bytes(int64_t width) { return (width + kGroup - 1) / kGroup * kGroupBytes; }

// Quantizes one row x[width] into out[row_bytes(width)]. Returns false (writing nothing) when a value is not
// finite or a group's absmax exceeds the fp16 range (65504): the caller reports the row.
bool quantize_row(const float* x, int64_t width, uint8_t* out);
// x[width] from a quantized row.
void dequantize_row(const uint8_t* in, int64_t width, float* x);
// The scale of group g of a quantized row.
float group_scale(const uint8_t* row, int64_t g);

// In-place NF4 round trip of a [rows, width] table (quantized evaluation: the fp32 table replaced by what the file
// holds). Throws UserError naming the first row that cannot be quantized. OpenMP-parallel over rows.
void round_trip_table(float* table, int64_t rows, int64_t width);

}  // namespace pg::nf4
