// Implementation of memory/collision_stats.h (serial and exact; sort-based grouping).
#include "memory/collision_stats.h"

#include <algorithm>
#include <numeric>

#include "memory/ngram.h"

namespace pg {

std::vector<OrderCollisionStats> collision_stats(const MemoryLayout& layout, std::span<const uint32_t> tokens,
                                                 std::span<const uint64_t> doc_offsets) {
  const int64_t P = static_cast<int64_t>(tokens.size()), H = layout.heads(), K = layout.heads_per_order();
  const int64_t mo = layout.max_order();
  Addresses a;
  a.resize(P, layout);
  compute_addresses(layout, tokens, doc_offsets, 0, P, a.rows.data(), a.signs.data());
  std::vector<uint64_t> ctx(static_cast<size_t>(P * mo));
  ngram_contexts(tokens, doc_offsets, 0, P, mo, ctx.data());

  std::vector<OrderCollisionStats> out;
  for (int64_t o = 0; o < layout.n_orders(); ++o) {
    OrderCollisionStats st;
    st.order = layout.orders()[o];
    st.positions = P;
    // Distinct n-grams: positions sorted by key, one representative (first position) per key + its count.
    std::vector<std::pair<uint64_t, int64_t>> keyed(static_cast<size_t>(P));
    for (int64_t p = 0; p < P; ++p)
      keyed[static_cast<size_t>(p)] = {memhash::ngram_key(ctx.data() + p * mo, st.order), p};
    std::sort(keyed.begin(), keyed.end());
    std::vector<int64_t> rep, count;
    for (int64_t i = 0; i < P; ++i) {
      if (i == 0 || keyed[static_cast<size_t>(i)].first != keyed[static_cast<size_t>(i - 1)].first) {
        rep.push_back(keyed[static_cast<size_t>(i)].second);
        count.push_back(0);
      }
      ++count.back();
    }
    const int64_t D = static_cast<int64_t>(rep.size());
    st.distinct = D;
    auto row = [&](int64_t x, int64_t k) {
      return a.rows[static_cast<size_t>(rep[static_cast<size_t>(x)] * H + o * K + k)];
    };

    // Occupancy and foreign share per head.
    std::vector<std::vector<int32_t>> occ(static_cast<size_t>(K));
    double mean_sum = 0, vm_sum = 0, foreign_sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t R = layout.head_row_count(o, k);
      auto& oc = occ[static_cast<size_t>(k)];
      oc.assign(static_cast<size_t>(R), 0);
      for (int64_t x = 0; x < D; ++x) ++oc[static_cast<size_t>(layout.head_row_index(o, k, row(x, k)))];
      const double mean = static_cast<double>(D) / static_cast<double>(R);
      double var = 0;
      for (int32_t c : oc) var += (c - mean) * (c - mean);
      var /= static_cast<double>(R);
      mean_sum += mean;
      vm_sum += mean > 0 ? var / mean : 0.0;
      int64_t foreign = 0;
      for (int64_t x = 0; x < D; ++x)
        if (oc[static_cast<size_t>(layout.head_row_index(o, k, row(x, k)))] >= 2)
          foreign += count[static_cast<size_t>(x)];
      foreign_sum += static_cast<double>(foreign) / static_cast<double>(P);
    }
    st.mean_occupancy = mean_sum / static_cast<double>(K);
    st.var_over_mean = vm_sum / static_cast<double>(K);
    st.foreign = foreign_sum / static_cast<double>(K);

    // Groups of distinct n-grams per (head, row): ids sorted by row.
    std::vector<std::vector<int64_t>> by_row(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) {
      auto& ids = by_row[static_cast<size_t>(k)];
      ids.resize(static_cast<size_t>(D));
      std::iota(ids.begin(), ids.end(), 0);
      std::stable_sort(ids.begin(), ids.end(), [&](int64_t x, int64_t y) { return row(x, k) < row(y, k); });
    }
    // Cross-head: pairs within head-0 groups.
    int64_t pairs = 0, sharing = 0, extra = 0;
    const auto& g0 = by_row[0];
    for (int64_t i = 0; i < D;) {
      int64_t j = i;
      while (j < D && row(g0[static_cast<size_t>(j)], 0) == row(g0[static_cast<size_t>(i)], 0)) ++j;
      for (int64_t p = i; p < j; ++p)
        for (int64_t q = p + 1; q < j; ++q) {
          int64_t e = 0;
          for (int64_t k = 1; k < K; ++k) e += row(g0[static_cast<size_t>(p)], k) == row(g0[static_cast<size_t>(q)], k);
          ++pairs;
          sharing += e > 0;
          extra += e;
        }
      i = j;
    }
    st.head0_pairs = pairs;
    st.cross_share = pairs ? static_cast<double>(sharing) / static_cast<double>(pairs) : 0.0;
    st.cross_mean_extra = pairs ? static_cast<double>(extra) / static_cast<double>(pairs) : 0.0;

    // Neighbours: union over heads of the groups holding x.
    std::vector<std::pair<int64_t, int64_t>> ranges(static_cast<size_t>(D * K));  // [x, k] -> group [b, e)
    for (int64_t k = 0; k < K; ++k) {
      const auto& g = by_row[static_cast<size_t>(k)];
      for (int64_t i = 0; i < D;) {
        int64_t j = i;
        while (j < D && row(g[static_cast<size_t>(j)], k) == row(g[static_cast<size_t>(i)], k)) ++j;
        for (int64_t p = i; p < j; ++p) ranges[static_cast<size_t>(g[static_cast<size_t>(p)] * K + k)] = {i, j};
        i = j;
      }
    }
    double nb = 0;
    std::vector<int64_t> members;
    for (int64_t x = 0; x < D; ++x) {
      members.clear();
      for (int64_t k = 0; k < K; ++k) {
        const auto [b, e] = ranges[static_cast<size_t>(x * K + k)];
        for (int64_t p = b; p < e; ++p) members.push_back(by_row[static_cast<size_t>(k)][static_cast<size_t>(p)]);
      }
      std::sort(members.begin(), members.end());
      nb += static_cast<double>(std::unique(members.begin(), members.end()) - members.begin()) - 1.0;
    }
    st.mean_neighbours = D ? nb / static_cast<double>(D) : 0.0;
    out.push_back(st);
  }
  return out;
}

}  // namespace pg
