// Training window sampler, validation windows and the test stream (data/sampler.h).
#include "data/sampler.h"

#include "core/error.h"

namespace pg::data {

WindowSampler::WindowSampler(const TokenStore& train, int64_t T, uint64_t seed)
    : store_(&train), T_(T), rng_(seed, "data.order") {
  PG_CHECK(T >= 1, "context ", T);
  if (train.n_tokens() < static_cast<uint64_t>(T) + 1)
    throw UserError(str("token store ", train.path(), " has ", train.n_tokens(), " tokens, fewer than one window of ",
                        T + 1, " (hint: lower model.context or use a larger corpus)"));
}

uint64_t WindowSampler::next_start() { return rng_.below(store_->n_tokens() - static_cast<uint64_t>(T_)); }

ValidationWindows::ValidationWindows(const TokenStore& heldout, int64_t T, int64_t val_tokens)
    : store_(&heldout), T_(T), count_(val_tokens / (T + 1)) {
  PG_CHECK(T >= 1 && val_tokens >= 0, "context ", T, " val_tokens ", val_tokens);
  if (heldout.n_tokens() < static_cast<uint64_t>(val_tokens))
    throw UserError(str("held-out store ", heldout.path(), " has ", heldout.n_tokens(), " tokens, fewer than ",
                        "data.val_tokens = ", val_tokens,
                        " (hint: lower data.val_tokens or raise data.heldout_fraction and re-tokenize)"));
}

uint64_t ValidationWindows::start(int64_t k) const {
  PG_CHECK(k >= 0 && k < count_, "validation window ", k, " of ", count_);
  return static_cast<uint64_t>(k) * static_cast<uint64_t>(T_ + 1);
}

void ValidationWindows::window(int64_t k, int32_t* out) const {
  store_->copy(start(k), static_cast<uint64_t>(T_) + 1, out);
}

void ValidationWindows::windows(int64_t k0, int64_t n, int32_t* out) const {
  for (int64_t i = 0; i < n; ++i) window(k0 + i, out + i * (T_ + 1));
}

TestStream::TestStream(const TokenStore& heldout, int64_t val_tokens)
    : store_(&heldout), begin_(static_cast<uint64_t>(val_tokens)) {
  if (heldout.n_tokens() < begin_)
    throw UserError(str("held-out store ", heldout.path(), " has ", heldout.n_tokens(),
                        " tokens, fewer than data.val_tokens = ", val_tokens,
                        " (hint: lower data.val_tokens or raise data.heldout_fraction and re-tokenize)"));
}

}  // namespace pg::data
