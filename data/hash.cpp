// XXH64 (reference algorithm, little-endian reads) and file hashing for data/hash.h.
#include "data/hash.h"

#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "data/mapped_file.h"

namespace pg::data {
namespace {

constexpr uint64_t P1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t P2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t P3 = 0x165667B19E3779F9ULL;
constexpr uint64_t P4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t P5 = 0x27D4EB2F165667C5ULL;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t read64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // the project targets little-endian x86-64 / aarch64
}
inline uint32_t read32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t round(uint64_t acc, uint64_t in) {
  acc += in * P2;
  acc = rotl(acc, 31);
  return acc * P1;
}
inline uint64_t merge(uint64_t acc, uint64_t v) {
  acc ^= round(0, v);
  return acc * P1 + P4;
}

// The tail of XXH64 after the 32-byte stripes: the bytes [p, end) that are left, then the avalanche.
uint64_t finish(uint64_t h, const uint8_t* p, const uint8_t* end) {
  while (p + 8 <= end) {
    h ^= round(0, read64(p));
    h = rotl(h, 27) * P1 + P4;
    p += 8;
  }
  if (p + 4 <= end) {
    h ^= static_cast<uint64_t>(read32(p)) * P1;
    h = rotl(h, 23) * P2 + P3;
    p += 4;
  }
  while (p < end) {
    h ^= static_cast<uint64_t>(*p) * P5;
    h = rotl(h, 11) * P1;
    ++p;
  }
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}
uint64_t converge(const uint64_t* v) {
  uint64_t h = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
  for (int i = 0; i < 4; ++i) h = merge(h, v[i]);
  return h;
}

}  // namespace

Xxh64Stream::Xxh64Stream(uint64_t seed) : seed_(seed), v_{seed + P1 + P2, seed + P2, seed, seed - P1} {}

void Xxh64Stream::update(const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  total_ += n;
  if (buffered_ + n < 32) {
    if (n) std::memcpy(buf_ + buffered_, p, n);
    buffered_ += n;
    return;
  }
  if (buffered_ > 0) {  // complete the buffered stripe
    const size_t take = 32 - buffered_;
    std::memcpy(buf_ + buffered_, p, take);
    for (int i = 0; i < 4; ++i) v_[i] = round(v_[i], read64(buf_ + 8 * i));
    p += take, n -= take, buffered_ = 0;
  }
  for (; n >= 32; p += 32, n -= 32)
    for (int i = 0; i < 4; ++i) v_[i] = round(v_[i], read64(p + 8 * i));
  if (n) std::memcpy(buf_, p, n);
  buffered_ = n;
}

uint64_t Xxh64Stream::digest() const {
  uint64_t h = total_ >= 32 ? converge(v_) : seed_ + P5;
  h += total_;
  return finish(h, buf_, buf_ + buffered_);
}

uint64_t xxh64_bytes(const void* data, size_t n, uint64_t seed) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  const uint8_t* const end = p + n;
  uint64_t h;
  if (n >= 32) {
    uint64_t v[4] = {seed + P1 + P2, seed + P2, seed, seed - P1};
    const uint8_t* const limit = end - 32;
    do {
      for (int i = 0; i < 4; ++i) v[i] = round(v[i], read64(p + 8 * i));
      p += 32;
    } while (p <= limit);
    h = converge(v);
  } else {
    h = seed + P5;
  }
  h += static_cast<uint64_t>(n);
  return finish(h, p, end);
}

uint64_t hash_file(const std::string& path) {
  MappedFile f(path);
  return xxh64_bytes(f.data(), f.size());
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace pg::data
