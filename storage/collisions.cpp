// Implementation of storage/collisions.h.
#include "storage/collisions.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <parallel/algorithm>
#include <span>

#include "core/error.h"
#include "core/h5.h"
#include "core/progress.h"
#include "core/text.h"
#include "core/timer.h"
#include "memory/hash.h"
#include "memory/ngram.h"
#include "memory/layout.h"

namespace pg {

std::string collision_definitions() {
  return "Definitions (per order n, over the U distinct suffix n-grams of the N stream positions, compared by their\n"
         "exact token tuples, boundary-padded at document starts; per head k with R_k addressable rows):\n"
         "  occupancy   o(r) = distinct n-grams whose head-k row is r, over all R_k rows (empty ones included):\n"
         "              mean U/R_k; var/mean (expected 1 - 1/R_k ~ 1 for ideal hashing). Mean over heads.\n"
         "  foreign     share of the N positions whose head-k row also holds another distinct n-gram (o >= 2);\n"
         "              expected 1 - (1 - 1/R_k)^(U-1). Mean over heads.\n"
         "  x-head      over unordered pairs of distinct n-grams sharing their head-0 row: the share that share\n"
         "              at least one other head ('share') and the mean number of other heads shared ('extra').\n"
         "              PageGram(S): 1-(1-1/S)^(K-1) and (K-1)/S; Engram-style (independent heads):\n"
         "              1-prod_{j>0}(1-1/R_j) and sum_{j>0} 1/R_j; flat: no other head (-).\n"
         "  neighbours  mean number of other distinct n-grams sharing at least one row (any head) with one;\n"
         "              expected (U-1) q, q = P(a pair shares a row): PageGram (1/P_n)(1-(1-1/S)^K),\n"
         "              Engram-style 1-prod_j(1-1/R_j), flat 1/R.\n"
         "Measured values first, the analytic expectation in parentheses.\n";
}

namespace {

// Exact n-gram identity: up to 4 token ids (boundary = 0xFFFFFFFF) in 128 bits, plus the position.
struct GramKey {
  uint64_t lo, hi;
  uint32_t pos;
  bool operator<(const GramKey& o) const {
    if (hi != o.hi) return hi < o.hi;
    if (lo != o.lo) return lo < o.lo;
    return pos < o.pos;
  }
  bool same_gram(const GramKey& o) const { return lo == o.lo && hi == o.hi; }
};
constexpr uint32_t kBoundary32 = 0xFFFFFFFFu;

uint32_t tok32(uint64_t t) { return t == memhash::kBoundaryToken ? kBoundary32 : static_cast<uint32_t>(t); }
uint64_t untok(uint32_t t) { return t == kBoundary32 ? memhash::kBoundaryToken : t; }

}  // namespace

namespace {
// Parallel regions only for large loops: on a loaded 2-core machine, barriers of small regions cost more than the
// work. Positions and n-grams are addressed in chunks of kChunk.
constexpr int64_t kParallelMin = 1 << 17, kChunk = 4096;

// Step 2 of measure_collisions: the head rows of each distinct n-gram of order index o (first_of indexes the sorted
// keys), as dense per-head indices [U, K] (MemoryLayout::head_row_index).
std::vector<uint32_t> gram_rows(const MemoryLayout& layout, int64_t o, const std::vector<GramKey>& keys,
                                const std::vector<int64_t>& first_of) {
  const int64_t U = static_cast<int64_t>(first_of.size()), K = layout.heads_per_order(), H = layout.heads(),
                mo = layout.max_order(), n = layout.orders()[static_cast<size_t>(o)];
  std::vector<uint32_t> rows(static_cast<size_t>(U * K));
#pragma omp parallel if (U > kParallelMin)
  {
    std::vector<uint64_t> ctx(static_cast<size_t>(kChunk * mo));
    std::vector<int64_t> r(static_cast<size_t>(kChunk * H));
    std::vector<uint64_t> sg(static_cast<size_t>(kChunk * H * layout.sign_words()));
#pragma omp for schedule(static)
    for (int64_t c = 0; c < (U + kChunk - 1) / kChunk; ++c) {
      const int64_t g0 = c * kChunk, m = std::min(kChunk, U - g0);
      for (int64_t i = 0; i < m; ++i) {
        const GramKey& k = keys[static_cast<size_t>(first_of[static_cast<size_t>(g0 + i)])];
        const uint32_t tt[4] = {static_cast<uint32_t>(k.lo), static_cast<uint32_t>(k.lo >> 32),
                                static_cast<uint32_t>(k.hi), static_cast<uint32_t>(k.hi >> 32)};
        for (int64_t j = 0; j < mo; ++j)
          ctx[static_cast<size_t>(i * mo + j)] = j < n ? untok(tt[j]) : memhash::kBoundaryToken;
      }
      layout.address(ctx.data(), m, r.data(), sg.data());
      for (int64_t i = 0; i < m; ++i)
        for (int64_t k = 0; k < K; ++k)
          rows[static_cast<size_t>((g0 + i) * K + k)] =
              static_cast<uint32_t>(layout.head_row_index(o, k, r[static_cast<size_t>(i * H + o * K + k)]));
    }
  }
  return rows;
}

// Step 3 for head k: the distinct n-grams grouped by their head-k row (counting sort, stable: deterministic member
// order), and for every pair inside a group the other heads it shares. Returns {pairs sharing another head, extra
// heads shared, neighbour pairs counted at their first shared head}; offset and members are scratch.
struct PairCounts {
  int64_t share = 0, extra = 0, neighbours = 0;
};
PairCounts count_pairs(const std::vector<uint32_t>& rows, const std::vector<uint32_t>& occ, int64_t U, int64_t K,
                       int64_t k, int64_t pairs, std::vector<int64_t>& offset, std::vector<uint32_t>& members) {
  const int64_t R = static_cast<int64_t>(occ.size());
  // Counting sort of the distinct n-grams by head-k row (stable: deterministic member order).
  offset.assign(static_cast<size_t>(R + 1), 0);
  for (int64_t r = 0; r < R; ++r)
    offset[static_cast<size_t>(r + 1)] = offset[static_cast<size_t>(r)] + occ[static_cast<size_t>(r)];
  members.resize(static_cast<size_t>(U));
  {
    std::vector<int64_t> fill(offset.begin(), offset.end() - 1);
    for (int64_t g = 0; g < U; ++g)
      members[static_cast<size_t>(fill[rows[static_cast<size_t>(g * K + k)]]++)] = static_cast<uint32_t>(g);
  }
  int64_t share = 0, extra = 0, nbr = 0;
#pragma omp parallel reduction(+ : share, extra, nbr) if (pairs > kParallelMin)
  {
    std::vector<uint32_t> buf;
#pragma omp for schedule(dynamic, 4096)
    for (int64_t r = 0; r < R; ++r) {
      const int64_t b = offset[static_cast<size_t>(r)], m = offset[static_cast<size_t>(r + 1)] - b;
      if (m < 2) continue;
      buf.resize(static_cast<size_t>(m * K));
      for (int64_t i = 0; i < m; ++i)
        std::copy_n(rows.data() + static_cast<size_t>(members[static_cast<size_t>(b + i)]) * K, K, buf.data() + i * K);
      for (int64_t p = 0; p < m; ++p) {
        const uint32_t* a = buf.data() + p * K;
        for (int64_t q = p + 1; q < m; ++q) {
          const uint32_t* c = buf.data() + q * K;
          uint64_t mask = 0;
          for (int64_t j = 0; j < K; ++j) mask |= static_cast<uint64_t>(a[j] == c[j]) << j;
          const int64_t e = std::popcount(mask) - 1;  // other heads shared (bit k is always set)
          share += e > 0;
          extra += e;
          nbr += std::countr_zero(mask) == k;  // a neighbour pair, counted at its first shared head
        }
      }
    }
  }
  return {share, extra, nbr};
}

// Step 4: the analytic expectations of cross-head sharing for the K heads of order index o (written into `heads`);
// returns q, the probability that two distinct n-grams share at least one row.
double set_expectations(const MemoryLayout& layout, int64_t o, std::span<HeadCollisions> heads) {
  const int64_t K = layout.heads_per_order();
  double q_any = 0;
  if (layout.has_pages()) {  // P_n pages of K heads x S slots each
    const double S = static_cast<double>(layout.slots()),
                 P = static_cast<double>(layout.sizes()[static_cast<size_t>(o)]);
    q_any = (1.0 - std::pow(1.0 - 1.0 / S, static_cast<double>(K))) / P;
    for (int64_t k = 0; k < K; ++k) {
      heads[static_cast<size_t>(k)].exp_cross_share = 1.0 - std::pow(1.0 - 1.0 / S, static_cast<double>(K - 1));
      heads[static_cast<size_t>(k)].exp_cross_extra = static_cast<double>(K - 1) / S;
    }
    return q_any;
  }
  double none = 1.0;
  for (int64_t j = 0; j < K; ++j) none *= 1.0 - 1.0 / static_cast<double>(layout.head_row_count(o, j));
  q_any = 1.0 - none;
  for (int64_t k = 0; k < K; ++k) {
    double keep = 1.0, sum = 0.0;
    for (int64_t j = 0; j < K; ++j)
      if (j != k) {
        keep *= 1.0 - 1.0 / static_cast<double>(layout.head_row_count(o, j));
        sum += 1.0 / static_cast<double>(layout.head_row_count(o, j));
      }
    heads[static_cast<size_t>(k)].exp_cross_share = 1.0 - keep;
    heads[static_cast<size_t>(k)].exp_cross_extra = sum;
  }
  return q_any;
}

// One order's row of the table: head means, head 0's pair statistics, neighbours and their expectation.
OrderCollisions summarize_order(int64_t n, int64_t N, int64_t U, std::span<const HeadCollisions> heads,
                                int64_t neighbour_pairs, double q_any) {
  const double K = static_cast<double>(heads.size());
  OrderCollisions oc;
  oc.order = n;
  oc.positions = N;
  oc.distinct = U;
  for (const HeadCollisions& hc : heads) {
    oc.mean_occupancy += hc.mean_occupancy / K;
    oc.var_over_mean += hc.var_over_mean / K;
    oc.exp_var_over_mean += hc.exp_var_over_mean / K;
    oc.foreign += hc.foreign / K;
    oc.exp_foreign += hc.exp_foreign / K;
  }
  const HeadCollisions& ref = heads.front();
  oc.head0_pairs = ref.pairs;
  oc.cross_share = ref.cross_share;
  oc.cross_extra = ref.cross_extra;
  oc.exp_cross_share = ref.exp_cross_share;
  oc.exp_cross_extra = ref.exp_cross_extra;
  oc.neighbour_pairs = neighbour_pairs;
  oc.neighbours = 2.0 * static_cast<double>(neighbour_pairs) / static_cast<double>(U);
  oc.exp_neighbours = static_cast<double>(U - 1) * q_any;
  return oc;
}
}  // namespace

LayoutCollisions measure_collisions(const MemoryLayout& layout, const EvalStream& stream, bool progress) {
  Timer total;
  LayoutCollisions out;
  out.layout = layout.name();
  out.slots = layout.slots();
  out.label = layout.label();
  out.heads_per_order = layout.heads_per_order();
  out.params = layout.params();
  const int64_t N = stream.size(), K = layout.heads_per_order(), mo = layout.max_order();
  PG_CHECK(mo <= 4, "collision statistics support orders up to 4 (", mo, ")");
  PG_CHECK(K <= 64, "collision statistics support up to 64 heads per order");
  if (N <= 0) throw UserError("collisions: the token stream is empty");
  if (N >= static_cast<int64_t>(kBoundary32)) throw UserError("collisions: at most 4G positions per stream");
  for (uint32_t t : stream.ids)
    if (t == kBoundary32) throw UserError("collisions: token id 0xFFFFFFFF is reserved for the document boundary");
  const std::span<const uint32_t> ids(stream.ids);
  const std::span<const uint64_t> docs(stream.doc_starts);

  std::vector<GramKey> keys(static_cast<size_t>(N));
  for (int64_t o = 0; o < layout.n_orders(); ++o) {
    Timer t;
    const int64_t n = layout.orders()[o];
    // 1. Exact keys of every position's n-gram, sorted: distinct n-grams = runs.
#pragma omp parallel if (N > kParallelMin)
    {
      std::vector<uint64_t> ctx(static_cast<size_t>(kChunk * mo));
#pragma omp for schedule(static)
      for (int64_t c = 0; c < (N + kChunk - 1) / kChunk; ++c) {
        const int64_t i0 = c * kChunk, m = std::min(kChunk, N - i0);
        detail::ngram_contexts_unchecked(ids, docs, stream.first + i0, m, mo, ctx.data());
        for (int64_t i = 0; i < m; ++i) {
          uint32_t tt[4] = {0, 0, 0, 0};
          for (int64_t j = 0; j < n; ++j) tt[j] = tok32(ctx[static_cast<size_t>(i * mo + j)]);
          keys[static_cast<size_t>(i0 + i)] = {tt[0] | (uint64_t{tt[1]} << 32), tt[2] | (uint64_t{tt[3]} << 32),
                                               static_cast<uint32_t>(i0 + i)};
        }
      }
    }
    if (N > kParallelMin) __gnu_parallel::sort(keys.begin(), keys.end());
    else std::sort(keys.begin(), keys.end());
    std::vector<int64_t> first_of;  // index into keys of each distinct n-gram's first occurrence
    for (int64_t i = 0; i < N; ++i)
      if (i == 0 || !keys[static_cast<size_t>(i)].same_gram(keys[static_cast<size_t>(i - 1)])) first_of.push_back(i);
    const int64_t U = static_cast<int64_t>(first_of.size());
    std::vector<uint32_t> count(static_cast<size_t>(U));
    for (int64_t g = 0; g < U; ++g)
      count[static_cast<size_t>(g)] = static_cast<uint32_t>((g + 1 < U ? first_of[static_cast<size_t>(g + 1)] : N) -
                                                            first_of[static_cast<size_t>(g)]);
    if (progress)
      Note() << "  collisions " << out.label << ": order " << n << ": " << U << " distinct n-grams in " << N
             << " positions (" << fmt_fixed(t.seconds(), 1) << " s)";

    // 2. Rows of each distinct n-gram (all orders are addressed; this order's K columns are kept), as dense
    //    per-head indices in [0, R_k).
    const std::vector<uint32_t> rows = gram_rows(layout, o, keys, first_of);

    // 3. Per head: occupancy, foreign share, row groups (counting sort) and the pairs inside them.
    std::vector<int64_t> pair_share(static_cast<size_t>(K)), pair_extra(static_cast<size_t>(K));
    int64_t neighbour_pairs = 0;
    std::vector<uint32_t> occ, members;
    std::vector<int64_t> offset;
    for (int64_t k = 0; k < K; ++k) {
      HeadCollisions hc;
      hc.order = n;
      hc.head = k;
      const int64_t R = layout.head_row_count(o, k);
      hc.rows = R;
      occ.assign(static_cast<size_t>(R), 0);
      for (int64_t g = 0; g < U; ++g) ++occ[rows[static_cast<size_t>(g * K + k)]];
      double s2 = 0;
      int64_t mx = 0, empty = 0, pairs = 0;
#pragma omp parallel for reduction(+ : s2, empty, pairs) reduction(max : mx) schedule(static) if (R > kParallelMin)
      for (int64_t r = 0; r < R; ++r) {
        const int64_t c = occ[static_cast<size_t>(r)];
        s2 += static_cast<double>(c) * static_cast<double>(c);
        empty += c == 0;
        mx = std::max(mx, c);
        pairs += c * (c - 1) / 2;
      }
      const double mean = static_cast<double>(U) / static_cast<double>(R);
      hc.mean_occupancy = mean;
      hc.var_over_mean = (s2 / static_cast<double>(R) - mean * mean) / mean;
      hc.exp_var_over_mean = 1.0 - 1.0 / static_cast<double>(R);
      hc.max_occupancy = mx;
      hc.empty_rows = empty;
      hc.pairs = pairs;
      if (static_cast<double>(pairs) * static_cast<double>(K) > 2e11)
        throw UserError(str("collisions: ", out.label, " order ", n, " head ", k, " would compare ", pairs,
                            " pairs of n-grams (", U, " distinct n-grams in ", R,
                            " rows; hint: use fewer --tokens or a larger table)"));
      int64_t foreign = 0;
#pragma omp parallel for reduction(+ : foreign) schedule(static) if (U > kParallelMin)
      for (int64_t g = 0; g < U; ++g)
        if (occ[rows[static_cast<size_t>(g * K + k)]] >= 2) foreign += count[static_cast<size_t>(g)];
      hc.foreign = static_cast<double>(foreign) / static_cast<double>(N);
      hc.exp_foreign = 1.0 - std::pow(1.0 - 1.0 / static_cast<double>(R), static_cast<double>(U - 1));

      const auto [share, extra, nbr] = count_pairs(rows, occ, U, K, k, pairs, offset, members);
      pair_share[static_cast<size_t>(k)] = share;
      pair_extra[static_cast<size_t>(k)] = extra;
      neighbour_pairs += nbr;
      hc.cross_share = pairs ? static_cast<double>(share) / static_cast<double>(pairs) : 0.0;
      hc.cross_extra = pairs ? static_cast<double>(extra) / static_cast<double>(pairs) : 0.0;
      out.heads.push_back(hc);
    }

    // 4. Analytic expectations of cross-head sharing and neighbours.
    const size_t h0 = out.heads.size() - static_cast<size_t>(K);
    const double q_any = set_expectations(layout, o, std::span<HeadCollisions>(out.heads).subspan(h0));

    out.orders.push_back(
        summarize_order(n, N, U, std::span<const HeadCollisions>(out.heads).subspan(h0), neighbour_pairs, q_any));
    if (progress)
      Note() << "  collisions " << out.label << ": order " << n << " done (" << fmt_fixed(t.seconds(), 1) << " s)";
  }
  out.seconds = total.seconds();
  return out;
}

namespace {
std::string pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100.0 * x);
  return b;
}
std::string num(double x, int prec = 3) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", prec, x);
  return b;
}
std::string cell(const std::string& measured, const std::string& expected) { return measured + " (" + expected + ")"; }
}  // namespace

std::string format_collision_table(const std::vector<LayoutCollisions>& all, bool per_head) {
  std::string out;
  char buf[512];
  const int64_t N = all.empty() || all[0].orders.empty() ? 0 : all[0].orders[0].positions;
  out += str("Collision statistics (report Table 3) over ", N, " stream positions.\n");
  std::snprintf(buf, sizeof buf, "%-15s %-3s %10s %10s %17s %17s %17s %19s %17s %19s\n", "layout", "n", "distinct",
                "rows/head", "occupancy", "var/mean", "foreign", "x-head share", "x-head extra", "neighbours");
  out += buf;
  for (const LayoutCollisions& L : all)
    for (const OrderCollisions& o : L.orders) {
      const bool multi = L.heads_per_order > 1;
      const HeadCollisions* h0 = nullptr;
      for (const HeadCollisions& h : L.heads)
        if (h.order == o.order && h.head == 0) h0 = &h;
      std::snprintf(buf, sizeof buf, "%-15s %-3lld %10lld %10lld %17s %17s %17s %19s %17s %19s\n", L.label.c_str(),
                    static_cast<long long>(o.order), static_cast<long long>(o.distinct),
                    static_cast<long long>(h0 ? h0->rows : 0),
                    cell(num(o.mean_occupancy), num(o.mean_occupancy)).c_str(),
                    cell(num(o.var_over_mean), num(o.exp_var_over_mean)).c_str(),
                    cell(pct(o.foreign), pct(o.exp_foreign)).c_str(),
                    multi ? cell(pct(o.cross_share), pct(o.exp_cross_share)).c_str() : "-",
                    multi ? cell(num(o.cross_extra), num(o.exp_cross_extra)).c_str() : "-",
                    cell(num(o.neighbours, 2), num(o.exp_neighbours, 2)).c_str());
      out += buf;
    }
  if (per_head) {
    out += "\nPer head:\n";
    std::snprintf(buf, sizeof buf, "%-15s %-3s %-4s %10s %8s %6s %17s %17s %12s %19s %17s\n", "layout", "n", "head",
                  "rows", "empty", "max", "var/mean", "foreign", "pairs", "x-head share", "x-head extra");
    out += buf;
    for (const LayoutCollisions& L : all)
      for (const HeadCollisions& h : L.heads) {
        const bool multi = L.heads_per_order > 1;
        std::snprintf(buf, sizeof buf, "%-15s %-3lld %-4lld %10lld %8lld %6lld %17s %17s %12lld %19s %17s\n",
                      L.label.c_str(), static_cast<long long>(h.order), static_cast<long long>(h.head),
                      static_cast<long long>(h.rows), static_cast<long long>(h.empty_rows),
                      static_cast<long long>(h.max_occupancy),
                      cell(num(h.var_over_mean), num(h.exp_var_over_mean)).c_str(),
                      cell(pct(h.foreign), pct(h.exp_foreign)).c_str(), static_cast<long long>(h.pairs),
                      multi ? cell(pct(h.cross_share), pct(h.exp_cross_share)).c_str() : "-",
                      multi ? cell(num(h.cross_extra), num(h.exp_cross_extra)).c_str() : "-");
        out += buf;
      }
  }
  out += "\n" + collision_definitions();
  return out;
}

void write_collisions_h5(const std::string& path, const std::vector<LayoutCollisions>& all,
                         const std::vector<std::pair<std::string, std::string>>& attrs) {
  h5::write_atomic(path, [&](const h5::Group& root) {
    for (const auto& [k, v] : attrs) root.set_attr(k, v);
    root.set_attr("format", std::string("pagegram-collisions"));  // core/output.h: what the file is
    root.set_attr("definitions", collision_definitions());
    const h5::Group top = root.create("collisions");
    for (const LayoutCollisions& L : all) {
      const h5::Group g = top.create(L.label);
      g.set_attr("layout", L.layout);
      g.set_attr("slots", L.slots);
      g.set_attr("heads_per_order", L.heads_per_order);
      g.set_attr("params", L.params);
      g.set_attr("seconds", L.seconds);
      // Per order (summary) and per (order, head) columns.
      const h5::Group s = g.create("orders");
      s.write_rows(L.orders);
      const h5::Group ph = g.create("heads");
      ph.write_rows(L.heads);
    }
  });
}

void write_addresses_h5(const std::string& path, const MemoryLayout& layout, const EvalStream& stream, int64_t n,
                        const std::vector<std::pair<std::string, std::string>>& attrs) {
  n = std::min(n, stream.size());
  if (n <= 0) throw UserError("addresses: the token stream is empty");
  const int64_t H = layout.heads();
  std::vector<int64_t> rows(static_cast<size_t>(n * H));
  stream_rows(layout, stream, 0, n, rows.data());
  std::vector<int64_t> blocks(rows.size()), offsets(rows.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n * H; ++i) {
    const BlockLocation b = layout.block_of(rows[static_cast<size_t>(i)]);
    blocks[static_cast<size_t>(i)] = b.block;
    offsets[static_cast<size_t>(i)] = b.offset;
  }
  std::vector<uint32_t> tokens(stream.ids.begin() + stream.first, stream.ids.begin() + stream.first + n);
  h5::write_atomic(path, [&](const h5::Group& root) {
    for (const auto& [k, v] : attrs) root.set_attr(k, v);
    root.set_attr("format", std::string("pagegram-addresses"));  // core/output.h: what the file is
    const h5::Group g = root.create("addresses");
    for (const auto& [k, v] : layout.identity()) g.set_attr(k, v);
    g.set_attr("num_blocks", layout.num_blocks());
    g.set_attr("block_bytes", kBlockBytes);
    g.set_attr("row_bytes", layout.nf4_bytes_per_row());
    g.set_attr("definition", std::string("rows[i, h]: table row of head h (order-major: h = o*K + k) at stream "
                                         "position i; block[i, h]: its 4 KiB block in the page-aligned NF4 file; "
                                         "offset[i, h]: its byte offset in that block"));
    g.write<uint32_t>("tokens", tokens);
    g.write<int64_t>("rows", std::span<const int64_t>(rows), {static_cast<uint64_t>(n), static_cast<uint64_t>(H)});
    g.write<int64_t>("block", std::span<const int64_t>(blocks), {static_cast<uint64_t>(n), static_cast<uint64_t>(H)});
    g.write<int64_t>("offset", std::span<const int64_t>(offsets), {static_cast<uint64_t>(n), static_cast<uint64_t>(H)});
  });
}

}  // namespace pg
