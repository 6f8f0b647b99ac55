// Named, counter-based random streams: a stream is (seed, name) and its i-th value is a pure function of
// (seed, name, i), so one stream's values never depend on how much another stream was used.
#pragma once
#include <cmath>
#include <cstdint>
#include <string_view>

namespace pg {

// SplitMix64 finalizer: a bijective 64-bit mix (also used to derive stream keys).
inline constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
// FNV-1a over bytes, then mixed: a stable 64-bit id of a stream name.
inline constexpr uint64_t hash_name(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  return mix64(h);
}

class RngStream {
 public:
  RngStream() = default;
  RngStream(uint64_t seed, std::string_view name) : key_(mix64(mix64(seed) ^ hash_name(name))) {}
  // A sub-stream keyed by this stream's key and `name` (independent of this stream's counter).
  RngStream child(std::string_view name) const {
    RngStream r;
    r.key_ = mix64(key_ ^ hash_name(name));
    return r;
  }
  // The i-th value of the stream, without advancing it.
  uint64_t at(uint64_t i) const { return mix64(key_ + mix64(i + 0x9e3779b97f4a7c15ULL)); }
  uint64_t next_u64() { return at(counter_++); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n) (n > 0), unbiased by rejection.
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
      uint64_t v = next_u64();
      if (v < limit) return v % n;
    }
  }
  // Standard normal (Box-Muller, one value per two uniforms; no cached spare so state = counter).
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  uint64_t counter() const { return counter_; }
  void set_counter(uint64_t c) { counter_ = c; }
  uint64_t key() const { return key_; }

 private:
  uint64_t key_ = 0;
  uint64_t counter_ = 0;
};

}  // namespace pg
