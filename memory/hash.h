// The n-gram hash, format version kHashVersion (memory/config.h): n-gram keys, per-(order, head, role)
// seeds, row and page hashes, sign vectors, and the prime sizes of sub-tables. Frozen: pinned by golden tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"
#include "memory/config.h"

namespace pg::memhash {

// Stands in for every position before the start of the current document (docs/model.md §3, like Engram's pad id).
// No token id can take this value (ids are < 2^32).
inline constexpr uint64_t kBoundaryToken = ~0ULL;

// What a hash is used for; each role of each (order, head) has its own seed.
enum class Role : uint64_t { kRow = 1, kPage = 2, kSign = 3 };

inline constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

// Seed of the hash of `role` for order n and head k (page hashes use head 0), derived from the config's
// hash seed. Version 1: four SplitMix64 rounds over (seed, version salt, role, order, head).
inline constexpr uint64_t derive_seed(uint64_t hash_seed, int64_t order, int64_t head, Role role) {
  uint64_t s = mix64(hash_seed ^ 0x50616765476d3176ULL);  // "PageGm1v"
  s = mix64(s ^ (static_cast<uint64_t>(role) * kGolden));
  s = mix64(s ^ (static_cast<uint64_t>(order) << 32));
  s = mix64(s ^ (static_cast<uint64_t>(head) + 0x1000));
  return s;
}

// 64-bit key of the suffix n-gram ending at ctx[0]: ctx[i] is x_{t-i} (kBoundaryToken before the document
// start). The key depends on the order n and on the token order, and only on those n tokens.
inline constexpr uint64_t ngram_key(const uint64_t* ctx, int64_t n) {
  uint64_t h = mix64(0x6e6772616d6b6579ULL ^ static_cast<uint64_t>(n));  // "ngramkey"
  for (int64_t i = n - 1; i >= 0; --i) h = mix64(h ^ (ctx[i] * kGolden + static_cast<uint64_t>(i)));
  return h;
}

// Seeded hash of a key: two SplitMix64 rounds keyed by the seed (independent across seeds in practice;
// the cross-head tests measure it).
inline constexpr uint64_t keyed_hash(uint64_t key, uint64_t seed) { return mix64(mix64(key ^ seed) + seed); }

// Sign lanes 64*w .. 64*w+63 of a sign vector: bit j set means lane 64*w+j is negated. A fresh 64-bit hash
// per 64 lanes.
inline constexpr uint64_t sign_word(uint64_t key, uint64_t sign_seed, int64_t w) {
  return mix64(keyed_hash(key, sign_seed) + static_cast<uint64_t>(w + 1) * kGolden);
}

// Deterministic primality for 64-bit values (Miller-Rabin with a base set exact below 2^64).
bool is_prime(uint64_t n);
// The m distinct primes nearest to target (|p - target|, ties to the smaller), nearest first.
std::vector<int64_t> nearest_primes(double target, int64_t m);
// The m consecutive primes >= start (Engram's rule: the next prime above base - 1, globally distinct).
std::vector<int64_t> consecutive_primes(int64_t start, int64_t m);

}  // namespace pg::memhash
