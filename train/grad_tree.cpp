// Implementation of train/grad_tree.h.
#include "train/grad_tree.h"

#include <bit>
#include <cstring>

#include "core/error.h"
#include "core/timer.h"

namespace pg {

bool is_power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

int tree_depth(int64_t n) {
  PG_CHECK(n >= 1, "tree over ", n, " leaves");
  return static_cast<int>(std::bit_width(static_cast<uint64_t>(n - 1)));  // ceil(log2 n)
}

void tree_reduce(int64_t lo, int64_t n, const std::function<void(int64_t)>& leaf, const std::function<void(int)>& save,
                 const std::function<void(int)>& combine, int depth0) {
  PG_CHECK(n >= 1);
  if (n == 1) {
    leaf(lo);
    return;
  }
  const int64_t left = n - n / 2;  // the larger half first (equal halves for even n)
  tree_reduce(lo, left, leaf, save, combine, depth0 + 1);
  save(depth0);
  tree_reduce(lo + left, n / 2, leaf, save, combine, depth0 + 1);
  combine(depth0);
}

namespace {

// Times and counts the exchanges of one call.
struct Counted {
  PeerLink& link;
  ExchangeStats* st;
  Timer t;
  Counted(PeerLink& l, ExchangeStats* s) : link(l), st(s) {}
  ~Counted() {
    if (st) st->seconds += t.seconds();
  }
  void sendrecv(int partner, std::span<const std::byte> send, std::span<std::byte> recv) {
    link.sendrecv(partner, send, recv);
    if (st) st->bytes_sent += static_cast<int64_t>(send.size()), ++st->messages;
  }
};

void check_ranks(const PeerLink& link) {
  PG_CHECK(is_power_of_two(link.size()), "tree_allreduce over ", link.size(), " ranks (a power of two is required)");
}

}  // namespace

void tree_allreduce(PeerLink& link, std::span<float> v, std::vector<float>& scratch, ExchangeStats* st) {
  const int R = link.size(), r = link.rank();
  if (R == 1) return;
  check_ranks(link);
  Counted c(link, st);
  // Reduce-scatter by recursive halving, nearest partner first: at distance d the pair (r, r ^ d) holds the same
  // segment, each with the sum over its group of d ranks; the lower group's is the left operand.
  size_t s = 0, e = v.size();
  std::vector<std::pair<size_t, size_t>> parents;
  for (int d = 1; d < R; d <<= 1) {
    const int partner = r ^ d;
    const bool low = (r & d) == 0;
    const size_t mid = s + (e - s) / 2;
    const size_t ks = low ? s : mid, ke = low ? mid : e;  // kept
    const size_t gs = low ? mid : s, ge = low ? e : mid;  // given to the partner
    scratch.resize(ke - ks);
    c.sendrecv(partner, bytes_of(v.data() + gs, ge - gs), bytes_of(scratch.data(), ke - ks));
    float* x = v.data() + ks;
    const float* y = scratch.data();
    const size_t n = ke - ks;
    if (low) {
#pragma omp parallel for schedule(static) if (n > 65536)
      for (size_t i = 0; i < n; ++i) x[i] = x[i] + y[i];
    } else {
#pragma omp parallel for schedule(static) if (n > 65536)
      for (size_t i = 0; i < n; ++i) x[i] = y[i] + x[i];
    }
    parents.emplace_back(s, e);
    s = ks, e = ke;
  }
  // Allgather by recursive doubling, farthest partner first: each pair swaps its halves of the parent segment.
  for (int d = R >> 1; d >= 1; d >>= 1) {
    const int partner = r ^ d;
    const auto [ps, pe] = parents.back();
    parents.pop_back();
    const size_t os = s == ps ? e : ps, oe = s == ps ? pe : s;  // the partner's half
    c.sendrecv(partner, bytes_of(v.data() + s, e - s), bytes_of(v.data() + os, oe - os));
    s = ps, e = pe;
  }
}

void tree_allreduce(PeerLink& link, double& x, ExchangeStats* st) {
  const int R = link.size(), r = link.rank();
  if (R == 1) return;
  check_ranks(link);
  Counted c(link, st);
  for (int d = 1; d < R; d <<= 1) {
    double y = 0;
    c.sendrecv(r ^ d, bytes_of(&x, 1), bytes_of(&y, 1));
    x = (r & d) == 0 ? x + y : y + x;
  }
}

namespace {
// Sends `send` to `partner` and receives its list into `recv` (sizes and width first, then rows and values in one
// message); checks what arrives.
void swap_sparse(Counted& c, int partner, const SparseGrad& send, SparseGrad& recv, std::vector<std::byte>& buf) {
  int64_t mine[2] = {send.size(), send.width}, theirs[2] = {0, 0};
  c.sendrecv(partner, bytes_of(mine, 2), bytes_of(theirs, 2));
  PG_CHECK(theirs[0] >= 0 && theirs[0] <= (int64_t{1} << 40) && theirs[1] >= 0 && theirs[1] <= (int64_t{1} << 20) &&
               (theirs[1] == send.width || theirs[0] == 0 || send.size() == 0),
           "sparse exchange: rank ", partner, " sent ", theirs[0], " rows of width ", theirs[1],
           ", this rank has width ", send.width);
  const int64_t w = send.size() ? send.width : theirs[1];
  const size_t n_out = static_cast<size_t>(send.size()), n_in = static_cast<size_t>(theirs[0]);
  const size_t out_bytes = n_out * sizeof(int64_t) + n_out * static_cast<size_t>(w) * sizeof(float);
  const size_t in_bytes = n_in * sizeof(int64_t) + n_in * static_cast<size_t>(w) * sizeof(float);
  buf.resize(out_bytes + in_bytes);
  std::memcpy(buf.data(), send.rows.data(), n_out * sizeof(int64_t));
  std::memcpy(buf.data() + n_out * sizeof(int64_t), send.values.data(), n_out * static_cast<size_t>(w) * sizeof(float));
  c.sendrecv(partner, std::span<const std::byte>(buf.data(), out_bytes),
             std::span<std::byte>(buf.data() + out_bytes, in_bytes));
  recv.width = w;
  recv.rows.resize(n_in);
  recv.values.resize(n_in * static_cast<size_t>(w));
  std::memcpy(recv.rows.data(), buf.data() + out_bytes, n_in * sizeof(int64_t));
  std::memcpy(recv.values.data(), buf.data() + out_bytes + n_in * sizeof(int64_t),
              n_in * static_cast<size_t>(w) * sizeof(float));
  for (size_t i = 1; i < n_in; ++i)
    PG_CHECK(recv.rows[i - 1] < recv.rows[i], "sparse exchange: rank ", partner, " sent unsorted rows");
}
}  // namespace

void tree_allreduce(PeerLink& link, SparseGrad& g, SparseGrad& recv, SparseGrad& out, std::vector<std::byte>& buf,
                    ExchangeStats* st) {
  const int R = link.size(), r = link.rank();
  if (R == 1) return;
  check_ranks(link);
  Counted c(link, st);
  for (int d = 1; d < R; d <<= 1) {
    const int partner = r ^ d;
    swap_sparse(c, partner, g, recv, buf);
    if (g.size() == 0) g.width = recv.width;
    if ((r & d) == 0) merge_sparse(g, recv, out);
    else merge_sparse(recv, g, out);
    std::swap(g, out);
  }
}

void tree_reduce_scatter(PeerLink& link, SparseGrad& g, std::span<const int64_t> bounds, SparseGrad& recv,
                         SparseGrad& out, std::vector<std::byte>& buf, ExchangeStats* st) {
  const int R = link.size(), r = link.rank();
  PG_CHECK(static_cast<int>(bounds.size()) == R + 1, "tree_reduce_scatter: ", bounds.size(), " bounds for ", R,
           " ranks");
  if (R == 1) return;
  check_ranks(link);
  Counted c(link, st);
  const int64_t w = g.width;
  for (int d = 1; d < R; d <<= 1) {
    const int partner = r ^ d;
    // Rows whose owner agrees with this rank in bit d stay (the group this rank belongs to at the next level);
    // the others go to the partner, whose group owns them. Rows are sorted, so owners rise along the list.
    out.width = w;
    out.rows.clear(), out.values.clear();
    size_t kept = 0;
    int owner = 0;
    for (size_t i = 0; i < g.rows.size(); ++i) {
      const int64_t row = g.rows[i];
      PG_CHECK(row >= 0 && row < bounds[static_cast<size_t>(R)], "tree_reduce_scatter: row ", row,
               " outside the table");
      while (row >= bounds[static_cast<size_t>(owner) + 1]) ++owner;
      const float* v = g.values.data() + i * static_cast<size_t>(w);
      if ((owner & d) == (r & d)) {
        if (kept != i) {
          g.rows[kept] = row;
          std::memmove(g.values.data() + kept * static_cast<size_t>(w), v, static_cast<size_t>(w) * sizeof(float));
        }
        ++kept;
      } else {
        out.rows.push_back(row);
        out.values.insert(out.values.end(), v, v + w);
      }
    }
    g.rows.resize(kept);
    g.values.resize(kept * static_cast<size_t>(w));
    swap_sparse(c, partner, out, recv, buf);
    PG_CHECK(recv.size() == 0 || recv.width == w, "sparse exchange: width ", recv.width, " for ", w);
    recv.width = w;
    if ((r & d) == 0) merge_sparse(g, recv, out);
    else merge_sparse(recv, g, out);
    std::swap(g, out);
  }
  PG_CHECK(g.size() == 0 ||
               (g.rows.front() >= bounds[static_cast<size_t>(r)] && g.rows.back() < bounds[static_cast<size_t>(r) + 1]),
           "tree_reduce_scatter: rows of another rank left");
}

void check_same_on_all_ranks(PeerLink& link, uint64_t value, const std::string& what) {
  const int R = link.size(), r = link.rank();
  if (R == 1) return;
  check_ranks(link);
  // (value, a rank holding it, a rank holding another value or -1): merged up the tree of ranks.
  int64_t mine[3] = {static_cast<int64_t>(value), r, -1};
  for (int d = 1; d < R; d <<= 1) {
    int64_t theirs[3] = {0, 0, 0};
    link.sendrecv(r ^ d, bytes_of(mine, 3), bytes_of(theirs, 3));
    const bool low = (r & d) == 0;
    int64_t* left = low ? mine : theirs;
    int64_t* right = low ? theirs : mine;
    int64_t merged[3] = {left[0], left[1], left[2] >= 0 ? left[2] : right[2]};
    if (merged[2] < 0 && right[0] != left[0]) merged[2] = right[1];
    std::memcpy(mine, merged, sizeof(merged));
  }
  if (mine[2] >= 0)
    throw UserError(str("the ranks disagree on ", what, ": rank ", mine[1], " and rank ", mine[2],
                        " differ (hint: every ",
                        "rank must run the same command on the same files; a resume needs the run directory on ",
                        "storage every node sees)"));
}

}  // namespace pg
