// Implementation of memory/step_collisions.h.
#include "memory/step_collisions.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace pg {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Slot of a key in a power-of-two table (the key is already a well-mixed hash).
inline size_t slot_of(uint64_t key, size_t mask) { return static_cast<size_t>(key ^ (key >> 29)) & mask; }
}  // namespace

uint32_t StepCollisionCounter::CountMap::add(uint64_t key, uint32_t c) {
  if (key == 0) return zero_count += c;
  if (static_cast<size_t>(10 * (size + 1)) > 7 * keys.size()) grow();  // load factor <= 0.7
  const size_t mask = keys.size() - 1;
  for (size_t i = slot_of(key, mask);; i = (i + 1) & mask) {
    if (keys[i] == key) return counts[i] += c;
    if (keys[i] == 0) {
      keys[i] = key;
      ++size;
      return counts[i] = c;
    }
  }
}

void StepCollisionCounter::CountMap::grow() {
  std::vector<uint64_t> ok = std::move(keys);
  std::vector<uint32_t> oc = std::move(counts);
  const size_t cap = std::max<size_t>(1024, ok.size() * 2);
  keys.assign(cap, 0);
  counts.assign(cap, 0);
  const size_t mask = cap - 1;
  for (size_t j = 0; j < ok.size(); ++j) {
    if (ok[j] == 0) continue;
    size_t i = slot_of(ok[j], mask);
    while (keys[i] != 0) i = (i + 1) & mask;
    keys[i] = ok[j];
    counts[i] = oc[j];
  }
}

StepCollisionCounter::StepCollisionCounter(const MemoryLayout& layout, bool track_owners)
    : layout_(layout), unit_rows_(layout.has_pages() ? layout.unit_rows() : 0), track_owners_(track_owners) {
  PG_CHECK(layout.rows() < std::numeric_limits<int32_t>::max(), "table of ", layout.rows(), " rows");
  first_.assign(static_cast<size_t>(layout.rows()), -1);
  if (unit_rows_) page_count_.assign(static_cast<size_t>(layout.rows() / unit_rows_), 0);
  if (track_owners_) {
    owner_key_.assign(static_cast<size_t>(layout.rows()), 0);
    owner_count_.assign(static_cast<size_t>(layout.rows()), 0);
    counts_.resize(static_cast<size_t>(layout.n_orders()));
  }
}

void StepCollisionCounter::add(const int64_t* rows, const uint64_t* keys, int64_t n) {
  const int64_t H = layout_.heads(), no = layout_.n_orders();
  rows_.insert(rows_.end(), rows, rows + n * H);
  keys_.insert(keys_.end(), keys, keys + n * no);
  n_ += n;
}

int64_t StepCollisionCounter::owner_bytes() const {
  int64_t b =
      static_cast<int64_t>(owner_key_.capacity() * sizeof(uint64_t) + owner_count_.capacity() * sizeof(uint32_t));
  for (const CountMap& m : counts_)
    b += static_cast<int64_t>(m.keys.capacity() * sizeof(uint64_t) + m.counts.capacity() * sizeof(uint32_t));
  return b;
}

StepCollisionStats StepCollisionCounter::finish(bool report) {
  const int64_t N = n_, H = layout_.heads(), K = layout_.heads_per_order(), no = layout_.n_orders();
  PG_CHECK(N < std::numeric_limits<int32_t>::max(), "step of ", N, " lookups");
  StepCollisionStats st;
  if (report) {
    st.n_orders = no;
    st.heads_per_order = K;
    st.lookups.assign(static_cast<size_t>(no), N);
    st.distinct.assign(static_cast<size_t>(no), 0);
    st.page_mates.assign(static_cast<size_t>(no), kNaN);
    const size_t OK = static_cast<size_t>(no * K);
    st.touched_rows.assign(OK, 0);
    st.shared_pairs.assign(OK, 0);
    st.lookups_per_row.assign(OK, kNaN);
    st.foreign_step.assign(OK, kNaN);
    st.foreign_owner.assign(OK, kNaN);
    st.co_heads.assign(OK, kNaN);
  }
  if (!report && !track_owners_) {
    n_ = 0, rows_.clear(), keys_.clear();
    return st;
  }
  std::vector<int64_t> rep, cnt;  // per distinct n-gram: a position holding it, its lookups this step
  std::vector<int64_t> touched;
  for (int64_t o = 0; o < no; ++o) {
    // Distinct n-grams of this order: positions sorted by (key, position).
    sorted_.resize(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) sorted_[static_cast<size_t>(i)] = {keys_[static_cast<size_t>(i * no + o)], i};
    std::sort(sorted_.begin(), sorted_.end());
    rep.clear(), cnt.clear();
    for (int64_t i = 0; i < N; ++i) {
      if (i == 0 || sorted_[static_cast<size_t>(i)].first != sorted_[static_cast<size_t>(i - 1)].first) {
        rep.push_back(sorted_[static_cast<size_t>(i)].second);
        cnt.push_back(0);
      }
      ++cnt.back();
    }
    const int64_t D = static_cast<int64_t>(rep.size());
    // The distinct n-grams' keys and head rows, compact in key order: [D], [D, K].
    dkey_.resize(static_cast<size_t>(D));
    drow_.resize(static_cast<size_t>(D * K));
    for (int64_t x = 0; x < D; ++x) {
      const int64_t p = rep[static_cast<size_t>(x)];
      dkey_[static_cast<size_t>(x)] = keys_[static_cast<size_t>(p * no + o)];
      std::copy_n(rows_.data() + p * H + o * K, K, drow_.data() + x * K);
    }
    auto key = [&](int64_t x) { return dkey_[static_cast<size_t>(x)]; };
    auto row = [&](int64_t x, int64_t k) { return drow_[static_cast<size_t>(x * K + k)]; };

    // Owners: running lookup counts (this step included); a row's owner is the n-gram with the most lookups
    // so far among those addressing it. Only the counts of this step's n-grams grow, so comparing each of
    // them with the current owner keeps the argmax exact (strictly more lookups to take over a row).
    if (track_owners_) {
      CountMap& m = counts_[static_cast<size_t>(o)];
      for (int64_t x = 0; x < D; ++x) {
        const uint64_t kx = key(x);
        const uint32_t total = m.add(kx, static_cast<uint32_t>(cnt[static_cast<size_t>(x)]));
        for (int64_t k = 0; k < K; ++k) {
          const size_t r = static_cast<size_t>(row(x, k));
          if (owner_key_[r] == kx && owner_count_[r] > 0) owner_count_[r] = total;
          else if (total > owner_count_[r]) owner_key_[r] = kx, owner_count_[r] = total;
        }
      }
    }
    if (!report) continue;
    st.distinct[static_cast<size_t>(o)] = D;

    next_.resize(static_cast<size_t>(D));
    for (int64_t k = 0; k < K; ++k) {
      const size_t ok = static_cast<size_t>(o * K + k);
      // Groups of distinct n-grams per head-k row: singly linked lists (first_[row], next_[x]).
      touched.clear();
      for (int64_t x = 0; x < D; ++x) {
        const size_t r = static_cast<size_t>(row(x, k));
        if (first_[r] < 0) touched.push_back(static_cast<int64_t>(r));
        next_[static_cast<size_t>(x)] = first_[r];
        first_[r] = static_cast<int32_t>(x);
      }
      int64_t foreign_lookups = 0, pairs = 0, extra = 0, non_owner_rows = 0;
      for (int64_t r : touched) {
        const int32_t head = first_[static_cast<size_t>(r)];
        const bool shared = next_[static_cast<size_t>(head)] >= 0;
        if (shared) {
          for (int32_t x = head; x >= 0; x = next_[static_cast<size_t>(x)]) {
            foreign_lookups += cnt[static_cast<size_t>(x)];
            for (int32_t y = next_[static_cast<size_t>(x)]; y >= 0; y = next_[static_cast<size_t>(y)]) {
              ++pairs;
              for (int64_t k2 = 0; k2 < K; ++k2)
                if (k2 != k && row(x, k2) == row(y, k2)) ++extra;
            }
          }
        }
        if (track_owners_ && (shared || key(head) != owner_key_[static_cast<size_t>(r)])) ++non_owner_rows;
        first_[static_cast<size_t>(r)] = -1;
      }
      const int64_t T = static_cast<int64_t>(touched.size());
      st.touched_rows[ok] = T;
      st.shared_pairs[ok] = pairs;
      if (T > 0) {
        st.lookups_per_row[ok] = static_cast<double>(N) / static_cast<double>(T);
        st.foreign_step[ok] = static_cast<double>(foreign_lookups) / static_cast<double>(N);
        if (track_owners_) st.foreign_owner[ok] = static_cast<double>(non_owner_rows) / static_cast<double>(T);
      }
      if (pairs > 0 && K > 1) st.co_heads[ok] = static_cast<double>(extra) / static_cast<double>(pairs);
    }

    // Page-mates (PageGram): other distinct n-grams of the step on the lookup's page.
    if (unit_rows_ && N > 0) {
      for (int64_t x = 0; x < D; ++x) ++page_count_[static_cast<size_t>(row(x, 0) / unit_rows_)];
      int64_t mates = 0;
      for (int64_t x = 0; x < D; ++x)
        mates += cnt[static_cast<size_t>(x)] * (page_count_[static_cast<size_t>(row(x, 0) / unit_rows_)] - 1);
      for (int64_t x = 0; x < D; ++x) page_count_[static_cast<size_t>(row(x, 0) / unit_rows_)] = 0;
      st.page_mates[static_cast<size_t>(o)] = static_cast<double>(mates) / static_cast<double>(N);
    }
  }
  n_ = 0, rows_.clear(), keys_.clear();
  return st;
}

}  // namespace pg
