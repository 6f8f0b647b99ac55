// Implementation of train/table_shards.h.
#include "train/table_shards.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/timer.h"

namespace pg {

namespace {
// Exchanges with one partner, counted in `st` (bytes sent, messages, time).
void sendrecv(PeerLink& link, int partner, std::span<const std::byte> send, std::span<std::byte> recv,
              ExchangeStats* st) {
  const Timer t;
  link.sendrecv(partner, send, recv);
  if (st) st->seconds += t.seconds(), st->bytes_sent += static_cast<int64_t>(send.size()), ++st->messages;
}
}  // namespace

std::vector<int64_t> shard_bounds(int64_t rows, int ranks) {
  std::vector<int64_t> b(static_cast<size_t>(ranks) + 1);
  for (int q = 0; q < ranks; ++q) b[static_cast<size_t>(q)] = shard_of(rows, ranks, q).lo;
  b[static_cast<size_t>(ranks)] = rows;
  return b;
}

TableShards::TableShards(PeerLink& link, int64_t rows) : link_(link), bounds_(shard_bounds(rows, link.size())) {
  PG_CHECK(is_power_of_two(link.size()), "a table sharded over ", link.size(), " ranks (a power of two is required)");
}

void TableShards::fetch(MemoryTable& t, std::span<const int64_t> rows, float* out, ExchangeStats* st) {
  const int R = ranks(), r = rank();
  const int64_t w = t.layout().width();
  PG_CHECK(t.shard().lo == bounds_[static_cast<size_t>(r)] && t.shard().hi == bounds_[static_cast<size_t>(r) + 1],
           "fetch: this rank's table holds [", t.shard().lo, ", ", t.shard().hi, ")");
  PG_CHECK(rows.empty() || (rows.front() >= 0 && rows.back() < bounds_.back()), "fetch: rows outside the table of ",
           bounds_.back(), " rows");
  // The requested rows of rank q: rows[first(q) .. first(q + 1)).
  const auto first = [&](int q) {
    return static_cast<size_t>(std::lower_bound(rows.begin(), rows.end(), bounds_[static_cast<size_t>(q)]) -
                               rows.begin());
  };
  {
    const size_t a = first(r), b = first(r + 1);
    t.read_rows(rows.subspan(a, b - a), out + static_cast<int64_t>(a) * w);
  }
  for (int k = 1; k < R; ++k) {
    const int p = r ^ k;
    const size_t a = first(p), b = first(p + 1);
    int64_t n_mine = static_cast<int64_t>(b - a), n_theirs = 0;
    sendrecv(link_, p, bytes_of(&n_mine, 1), bytes_of(&n_theirs, 1), st);
    PG_CHECK(n_theirs >= 0 && n_theirs <= t.shard().size(), "fetch: rank ", p, " asks for ", n_theirs, " rows");
    theirs_.resize(static_cast<size_t>(n_theirs));
    sendrecv(link_, p, bytes_of(rows.data() + a, b - a), bytes_of(theirs_.data(), theirs_.size()), st);
    for (size_t i = 0; i < theirs_.size(); ++i)
      PG_CHECK(t.shard().contains(theirs_[i]) && (i == 0 || theirs_[i - 1] < theirs_[i]), "fetch: rank ", p,
               " asks for row ", theirs_[i], ", not a sorted row of [", t.shard().lo, ", ", t.shard().hi, ")");
    reply_.resize(theirs_.size() * static_cast<size_t>(w));
    t.read_rows(theirs_, reply_.data());
    sendrecv(link_, p, bytes_of(reply_.data(), reply_.size()),
             bytes_of(out + static_cast<int64_t>(a) * w, (b - a) * static_cast<size_t>(w)), st);
  }
}

void TableShards::reduce_gradient(SparseGrad& g, ExchangeStats* st) {
  tree_reduce_scatter(link_, g, bounds_, recv_, out_, buf_, st);
}

}  // namespace pg
