// Implementation of memory/sparse_grad.h. Sign flips are exact (an XOR of the float sign bit).
#include "memory/sparse_grad.h"

#include <algorithm>
#include <bit>
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
      if (!sums_heads)
        signed_copy(o + h * width, src, s, width);
      else if (h == 0)
        signed_copy(o, src, s, width);
      else
        signed_add(o, src, s, width);
    }
  }
}

void sparse_grad(const Addresses& a, const float* dout, int64_t width, bool sums_heads, SparseGrad& out,
                 SparseGradScratch& scratch) {
  auto& order = scratch.order;
  auto& seg = scratch.segments;
  const int64_t H = a.heads, W = a.sign_words, E = a.n * H;
  const int64_t ow = sums_heads ? width : H * width;
  order.resize(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) order[static_cast<size_t>(e)] = {a.rows[static_cast<size_t>(e)], e};
  std::sort(order.begin(), order.end());  // keys are unique: the result does not depend on the algorithm
  // Segment starts.
  seg.clear();
  for (int64_t e = 0; e < E; ++e)
    if (e == 0 || order[static_cast<size_t>(e)].first != order[static_cast<size_t>(e - 1)].first) seg.push_back(e);
  const int64_t U = static_cast<int64_t>(seg.size());
  seg.push_back(E);
  out.width = width;
  out.rows.resize(static_cast<size_t>(U));
  out.values.resize(static_cast<size_t>(U * width));
#pragma omp parallel for schedule(static) if (U > 1024)
  for (int64_t u = 0; u < U; ++u) {
    float* v = out.values.data() + u * width;
    out.rows[static_cast<size_t>(u)] = order[static_cast<size_t>(seg[static_cast<size_t>(u)])].first;
    for (int64_t q = seg[static_cast<size_t>(u)]; q < seg[static_cast<size_t>(u) + 1]; ++q) {
      const int64_t e = order[static_cast<size_t>(q)].second, i = e / H, h = e % H;
      const float* src = dout + i * ow + (sums_heads ? 0 : h * width);
      const uint64_t* s = a.signs.data() + e * W;
      if (q == seg[static_cast<size_t>(u)])
        signed_copy(v, src, s, width);
      else
        signed_add(v, src, s, width);
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

SparseGradAccumulator::SparseGradAccumulator(int64_t rows, int64_t width)
    : width_(width), slot_(static_cast<size_t>(rows), -1) {}

void SparseGradAccumulator::add(const SparseGrad& g) {
  PG_CHECK(g.width == width_);
  const int64_t U = g.size();
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
  values_.resize(rows_.size() * static_cast<size_t>(width_));
#pragma omp parallel for schedule(static) if (U > 1024)
  for (int64_t u = 0; u < U; ++u) {
    float* d = values_.data() + static_cast<int64_t>(dst[static_cast<size_t>(u)]) * width_;
    const float* s = g.values.data() + u * width_;
    if (fresh[static_cast<size_t>(u)])
      std::memcpy(d, s, sizeof(float) * static_cast<size_t>(width_));
    else
      for (int64_t j = 0; j < width_; ++j) d[j] += s[j];
  }
}

void SparseGradAccumulator::clear() {
  for (int64_t r : rows_) slot_[static_cast<size_t>(r)] = -1;
  rows_.clear();
  values_.clear();
}

}  // namespace pg
