// Implementation of memory/hash.h: primality and prime selection for sub-table sizes.
#include "memory/hash.h"

#include <cmath>

#include "core/error.h"

namespace pg::memhash {
namespace {

__extension__ typedef unsigned __int128 u128;

uint64_t mulmod(uint64_t a, uint64_t b, uint64_t m) { return static_cast<uint64_t>(static_cast<u128>(a) * b % m); }
uint64_t powmod(uint64_t a, uint64_t e, uint64_t m) {
  uint64_t r = 1;
  a %= m;
  while (e) {
    if (e & 1) r = mulmod(r, a, m);
    a = mulmod(a, a, m);
    e >>= 1;
  }
  return r;
}

}  // namespace

bool is_prime(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t p : {2ULL, 3ULL, 5ULL, 7ULL, 11ULL, 13ULL, 17ULL, 19ULL, 23ULL, 29ULL, 31ULL, 37ULL}) {
    if (n % p == 0) return n == p;
  }
  uint64_t d = n - 1;
  int s = 0;
  while ((d & 1) == 0) d >>= 1, ++s;
  for (uint64_t a : {2ULL, 3ULL, 5ULL, 7ULL, 11ULL, 13ULL, 17ULL, 19ULL, 23ULL, 29ULL, 31ULL, 37ULL}) {
    uint64_t x = powmod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int i = 1; i < s; ++i) {
      x = mulmod(x, x, n);
      if (x == n - 1) {
        composite = false;
        break;
      }
    }
    if (composite) return false;
  }
  return true;
}

std::vector<int64_t> nearest_primes(double target, int64_t m) {
  PG_CHECK(m >= 0 && target >= 0 && target < 9.0e18);
  std::vector<int64_t> out;
  // Two cursors walking away from the target; take the nearer candidate each time.
  int64_t lo = static_cast<int64_t>(std::floor(target));
  int64_t hi = lo + 1;
  auto next_lo = [&]() {
    while (lo >= 2 && !is_prime(static_cast<uint64_t>(lo))) --lo;
  };
  auto next_hi = [&]() {
    while (!is_prime(static_cast<uint64_t>(hi))) ++hi;
  };
  next_lo();
  next_hi();
  while (static_cast<int64_t>(out.size()) < m) {
    const bool lo_ok = lo >= 2;
    if (lo_ok && (target - static_cast<double>(lo)) <= (static_cast<double>(hi) - target)) {
      out.push_back(lo--);
      next_lo();
    } else {
      out.push_back(hi++);
      next_hi();
    }
  }
  return out;
}

std::vector<int64_t> consecutive_primes(int64_t start, int64_t m) {
  std::vector<int64_t> out;
  for (int64_t c = std::max<int64_t>(start, 2); static_cast<int64_t>(out.size()) < m; ++c)
    if (is_prime(static_cast<uint64_t>(c))) out.push_back(c);
  return out;
}

}  // namespace pg::memhash
