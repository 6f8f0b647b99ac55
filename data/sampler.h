// What the trainer and evaluator read from token stores: random training windows (WindowSampler), the fixed
// validation windows (ValidationWindows) and the held-out test stream (TestStream). Shapes: T = context,
// a window is T+1 consecutive ids (inputs [0, T), targets [1, T+1)).
#pragma once
#include <cstdint>

#include "core/rng.h"
#include "data/token_store.h"

namespace pg::data {

// Window w starts at RngStream(seed, "data.order").below(n_tokens - T) drawn at the stream's counter, so the
// window sequence is a pure function of (seed, counter). The state is the counter (saved in checkpoints).
// Windows may cross document boundaries (documents end with </s>).
class WindowSampler {
 public:
  // Throws UserError when the store holds fewer than T+1 tokens.
  WindowSampler(const TokenStore& train, int64_t T, uint64_t seed);
  // Start of the next window (advances the counter), in [0, n_tokens - T - 1].
  uint64_t next_start();
  uint64_t counter() const { return rng_.counter(); }
  void set_counter(uint64_t c) { rng_.set_counter(c); }
  int64_t context() const { return T_; }
  const TokenStore& store() const { return *store_; }

 private:
  const TokenStore* store_;
  int64_t T_;
  RngStream rng_;
};

// The first `val_tokens` held-out tokens cut into floor(val_tokens / (T+1)) non-overlapping windows; window
// k is tokens [k(T+1), (k+1)(T+1)). A fixed set: the same for every run with this store, T and val_tokens.
class ValidationWindows {
 public:
  // Throws UserError when the held-out store has fewer than val_tokens tokens.
  ValidationWindows(const TokenStore& heldout, int64_t T, int64_t val_tokens);
  int64_t count() const { return count_; }
  int64_t context() const { return T_; }
  uint64_t start(int64_t k) const;
  // out: [T+1] ids of window k.
  void window(int64_t k, int32_t* out) const;
  // out: [n, T+1] ids of windows k0 .. k0+n-1.
  void windows(int64_t k0, int64_t n, int32_t* out) const;

 private:
  const TokenStore* store_;
  int64_t T_, count_;
};

// Held-out tokens [val_tokens, n_tokens): the test stream, disjoint from the validation windows.
class TestStream {
 public:
  TestStream(const TokenStore& heldout, int64_t val_tokens);
  uint64_t begin() const { return begin_; }  // position in the held-out store
  uint64_t size() const { return store_->n_tokens() - begin_; }
  // out[0..n) = stream tokens [pos, pos + n).
  void copy(uint64_t pos, uint64_t n, int32_t* out) const { store_->copy(begin_ + pos, n, out); }
  const TokenStore& store() const { return *store_; }

 private:
  const TokenStore* store_;
  uint64_t begin_;
};

}  // namespace pg::data
