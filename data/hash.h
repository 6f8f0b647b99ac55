// Frozen 64-bit hashes of the data formats (XXH64, seed 0 unless stated) and the small helpers around them.
// They are part of the token store and cache-key formats (data/FORMATS.md): never change them, tests pin them.
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pg::data {

// XXH64 of `n` bytes: the reference algorithm of xxHash, so `xxhash.xxh64(b, seed)` in Python agrees.
uint64_t xxh64_bytes(const void* p, size_t n, uint64_t seed = 0);
// XXH64 of a string's bytes. Only std::string / std::string_view bind here (no const char*), so that
// neither xxh64("abc", 0) nor xxh64(ptr, n) can silently mean something else.
template <class S>
requires std::same_as<S, std::string> || std::same_as<S, std::string_view> uint64_t xxh64(const S& s,
                                                                                          uint64_t seed = 0) {
  return xxh64_bytes(s.data(), s.size(), seed);
}

// XXH64 of bytes handed over in pieces (a table streamed from a checkpoint): update() in any split, then digest()
// equals xxh64_bytes of all the bytes in order.
class Xxh64Stream {
 public:
  explicit Xxh64Stream(uint64_t seed = 0);
  void update(const void* p, size_t n);
  uint64_t digest() const;

 private:
  uint64_t seed_, v_[4], total_ = 0;
  unsigned char buf_[32];
  size_t buffered_ = 0;
};

// XXH64 of a whole file's bytes; throws IoError naming the file when it cannot be read.
uint64_t hash_file(const std::string& path);

// 16 lowercase hex digits, e.g. "00f3a1c2d4e5b6a7".
std::string hex64(uint64_t v);

}  // namespace pg::data
