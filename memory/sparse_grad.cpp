// Implementation of memory/sparse_grad.h. Sign flips are exact (an XOR of the float sign bit).
#include "memory/sparse_grad.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

namespace pg {
namespace {

// dst[j] = s[j] * src[j] for j < w (s from sign words).
inline void signed_copy(float* dst, const float* src, const uint64_t* s, int64_t w) {
  for (int64_t j0 = 0; j0 < w; j0 += 64) {
    const uint64_t m = s[j0 >> 6];
    const int64_t e = std::min<int64_t>(64, w - j0);
    for (int64_t j = 0; j < e; ++j) {
      const uint32_t bits = std::bit_cast<uint32_t>(src[j0 + j]) ^ (static_cast<uint32_t>((m >> j) & 1u) << 31);
      dst[j0 + j] = std::bit_cast<float>(bits);
    }
  }
}
// dst[j] += s[j] * src[j].
inline void signed_add(float* dst, const float* src, const uint64_t* s, int64_t w) {
  for (int64_t j0 = 0; j0 < w; j0 += 64) {
    const uint64_t m = s[j0 >> 6];
    const int64_t e = std::min<int64_t>(64, w - j0);
    for (int64_t j = 0; j < e; ++j) {
      const uint32_t bits = std::bit_cast<uint32_t>(src[j0 + j]) ^ (static_cast<uint32_t>((m >> j) & 1u) << 31);
      dst[j0 + j] += std::bit_cast<float>(bits);
    }
  }
}

}  // namespace

void gather_signed(const Addresses& a, const float* table, int64_t width, bool sums_heads, float* out) {
  const int64_t H = a.heads, W = a.sign_words;
  const int64_t ow = sums_heads ? width : H * width;
#pragma omp parallel for schedule(static) if (a.n > 256)
  for (int64_t i = 0; i < a.n; ++i) {
    float* o = out + i * ow;
    const int64_t* rows = a.row_ptr(i);
    for (int64_t h = 0; h < H; ++h) {
      const float* src = table + rows[h] * width;
      const uint64_t* s = a.signs.data() + (i * H + h) * W;
      if (!sums_heads) signed_copy(o + h * width, src, s, width);
      else if (h == 0) signed_copy(o, src, s, width);
      else signed_add(o, src, s, width);
    }
  }
}

namespace {

// Sorts keys (row << 32 | entry) by row with stable LSD radix passes of 11 bits over the row's significant bits:
// entries start in increasing order, so equal rows keep it and the result is the (row, entry) order.
void radix_sort_by_row(std::vector<uint64_t>& keys, std::vector<uint64_t>& tmp, uint64_t max_row) {
  constexpr int kBits = 11;
  constexpr size_t kBuckets = size_t{1} << kBits;
  tmp.resize(keys.size());
  const int row_bits = std::bit_width(max_row);
  for (int shift = 32; shift < 32 + row_bits; shift += kBits) {
    size_t count[kBuckets] = {};
    for (uint64_t k : keys) ++count[(k >> shift) & (kBuckets - 1)];
    size_t sum = 0;
    for (size_t& c : count) {
      const size_t n = c;
      c = sum;
      sum += n;
    }
    for (uint64_t k : keys) tmp[count[(k >> shift) & (kBuckets - 1)]++] = k;
    keys.swap(tmp);
  }
}

}  // namespace

void sparse_grad(const Addresses& a, const float* dout, int64_t width, bool sums_heads, SparseGrad& out,
                 SparseGradScratch& scratch) {
  auto& seg = scratch.segments;
  const int64_t H = a.heads, W = a.sign_words, E = a.n * H;
  const int64_t ow = sums_heads ? width : H * width;
  const int64_t* rows = a.rows.data();
  // Entry order sorted by (row, entry): row_of(q), entry_of(q) for q < E.
  // One pass builds the radix keys and finds the row range (keys are only used when rows and entries fit 32 bits).
  auto& keys = scratch.keys;
  auto& order = scratch.order;
  keys.resize(static_cast<size_t>(E));
  int64_t max_row = 0, min_row = 0;
  for (int64_t e = 0; e < E; ++e) {
    max_row = std::max(max_row, rows[e]), min_row = std::min(min_row, rows[e]);
    keys[static_cast<size_t>(e)] = static_cast<uint64_t>(rows[e]) << 32 | static_cast<uint64_t>(e);
  }
  PG_CHECK(min_row >= 0, "sparse_grad: negative row ", min_row);
  const bool radix = E <= int64_t{UINT32_MAX} && max_row <= int64_t{UINT32_MAX};
  if (radix) {
    radix_sort_by_row(keys, scratch.tmp, static_cast<uint64_t>(max_row));
  } else {
    order.resize(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) order[static_cast<size_t>(e)] = {rows[e], e};
    std::sort(order.begin(), order.end());  // keys are unique: the result does not depend on the algorithm
  }
  const auto row_of = [&](int64_t q) {
    return radix ? static_cast<int64_t>(keys[static_cast<size_t>(q)] >> 32) : order[static_cast<size_t>(q)].first;
  };
  const auto entry_of = [&](int64_t q) {
    return radix ? static_cast<int64_t>(keys[static_cast<size_t>(q)] & UINT32_MAX)
                 : order[static_cast<size_t>(q)].second;
  };
  // Segment starts.
  seg.clear();
  for (int64_t q = 0; q < E; ++q)
    if (q == 0 || row_of(q) != row_of(q - 1)) seg.push_back(q);
  const int64_t U = static_cast<int64_t>(seg.size());
  seg.push_back(E);
  out.width = width;
  // Capacity for the most rows a batch can touch (E), so these buffers do not reallocate and re-fault as U
  // drifts from batch to batch (reserved address space is free; pages fault in once, when first written).
  // The first add of a step swaps them with the accumulator's, so both pairs settle within two steps.
  out.rows.reserve(static_cast<size_t>(E));
  out.values.reserve(static_cast<size_t>(E * width));
  out.rows.resize(static_cast<size_t>(U));
  out.values.resize(static_cast<size_t>(U * width));
#pragma omp parallel for schedule(static) if (U > 1024)
  for (int64_t u = 0; u < U; ++u) {
    float* v = out.values.data() + u * width;
    out.rows[static_cast<size_t>(u)] = row_of(seg[static_cast<size_t>(u)]);
    for (int64_t q = seg[static_cast<size_t>(u)]; q < seg[static_cast<size_t>(u) + 1]; ++q) {
      const int64_t e = entry_of(q), i = e / H, h = e % H;
      const float* src = dout + i * ow + (sums_heads ? 0 : h * width);
      const uint64_t* s = a.signs.data() + e * W;
      if (q == seg[static_cast<size_t>(u)]) signed_copy(v, src, s, width);
      else signed_add(v, src, s, width);
    }
  }
}

void dense_grad_reference(const Addresses& a, const float* dout, int64_t width, bool sums_heads, float* dense) {
  const int64_t H = a.heads, W = a.sign_words;
  const int64_t ow = sums_heads ? width : H * width;
  for (int64_t i = 0; i < a.n; ++i)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t row = a.rows[static_cast<size_t>(i * H + h)];
      const float* src = dout + i * ow + (sums_heads ? 0 : h * width);
      const uint64_t* s = a.signs.data() + (i * H + h) * W;
      for (int64_t j = 0; j < width; ++j) {
        const bool neg = (s[j >> 6] >> (j & 63)) & 1u;
        dense[row * width + j] += neg ? -src[j] : src[j];
      }
    }
}

void merge_sparse(const SparseGrad& a, const SparseGrad& b, SparseGrad& out) {
  PG_CHECK(a.width == b.width || a.size() == 0 || b.size() == 0, "merge_sparse: widths ", a.width, " and ", b.width);
  PG_CHECK(&out != &a && &out != &b, "merge_sparse: out aliases an input");
  const int64_t w = a.size() ? a.width : b.width;
  const int64_t na = a.size(), nb = b.size();
  // Serial pass: the merged row order and, per output row, its source in a and b (-1 = absent).
  out.width = w;
  out.rows.clear();
  out.rows.reserve(static_cast<size_t>(na + nb));
  thread_local std::vector<std::pair<int64_t, int64_t>> src;  // reused across calls (and simulated ranks)
  src.clear();
  src.reserve(static_cast<size_t>(na + nb));
  int64_t i = 0, j = 0;
  while (i < na || j < nb) {
    const int64_t ra = i < na ? a.rows[static_cast<size_t>(i)] : INT64_MAX;
    const int64_t rb = j < nb ? b.rows[static_cast<size_t>(j)] : INT64_MAX;
    if (ra < rb) {
      out.rows.push_back(ra), src.emplace_back(i++, -1);
    } else if (rb < ra) {
      out.rows.push_back(rb), src.emplace_back(-1, j++);
    } else {
      out.rows.push_back(ra), src.emplace_back(i++, j++);
    }
  }
  const int64_t U = static_cast<int64_t>(out.rows.size());
  out.values.resize(static_cast<size_t>(U * w));
  const std::pair<int64_t, int64_t>* sp = src.data();  // the calling thread's: OpenMP workers have their own
#pragma omp parallel for schedule(static) if (U > 1024)
  for (int64_t u = 0; u < U; ++u) {
    const auto [ia, ib] = sp[u];
    float* d = out.values.data() + u * w;
    if (ib < 0) {
      std::memcpy(d, a.values.data() + ia * w, sizeof(float) * static_cast<size_t>(w));
    } else if (ia < 0) {
      std::memcpy(d, b.values.data() + ib * w, sizeof(float) * static_cast<size_t>(w));
    } else {
      const float* x = a.values.data() + ia * w;
      const float* y = b.values.data() + ib * w;
      for (int64_t k = 0; k < w; ++k) d[k] = x[k] + y[k];
    }
  }
}

SparseGradAccumulator::SparseGradAccumulator(int64_t rows, int64_t width)
    : width_(width), slot_(static_cast<size_t>(rows), -1) {}

void SparseGradAccumulator::add(SparseGrad& g) {
  PG_CHECK(g.width == width_);
  const int64_t U = g.size();
  if (rows_.empty()) {  // first micro-batch of the step: take g's buffers, every row is new, in g's order
    rows_.swap(g.rows);
    values_.swap(g.values);
    g.rows.clear();
    PG_CHECK(rows_.size() < static_cast<size_t>(INT32_MAX));
    for (int64_t u = 0; u < U; ++u) slot_[static_cast<size_t>(rows_[static_cast<size_t>(u)])] = static_cast<int32_t>(u);
    return;
  }
  // Slots: serial, in the gradient's (sorted) row order.
  auto& dst = dst_;
  auto& fresh = fresh_;
  dst.resize(static_cast<size_t>(U));
  fresh.resize(static_cast<size_t>(U));
  for (int64_t u = 0; u < U; ++u) {
    const int64_t r = g.rows[static_cast<size_t>(u)];
    int32_t& s = slot_[static_cast<size_t>(r)];
    fresh[static_cast<size_t>(u)] = s < 0;
    if (s < 0) {
      PG_CHECK(rows_.size() < static_cast<size_t>(INT32_MAX));
      s = static_cast<int32_t>(rows_.size());
      rows_.push_back(r);
    }
    dst[static_cast<size_t>(u)] = s;
  }
  const size_t need = rows_.size() * static_cast<size_t>(width_);
  if (values_.size() < need) values_.resize(need);
#pragma omp parallel for schedule(static) if (U > 1024)
  for (int64_t u = 0; u < U; ++u) {
    float* d = values_.data() + static_cast<int64_t>(dst[static_cast<size_t>(u)]) * width_;
    const float* s = g.values.data() + u * width_;
    if (fresh[static_cast<size_t>(u)]) std::memcpy(d, s, sizeof(float) * static_cast<size_t>(width_));
    else
      for (int64_t j = 0; j < width_; ++j) d[j] += s[j];
  }
}

void SparseGradAccumulator::clear() {
  for (int64_t r : rows_) slot_[static_cast<size_t>(r)] = -1;
  rows_.clear();  // values_ keeps its size: the next step overwrites what it uses
}
}  // namespace pg
