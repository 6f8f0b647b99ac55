// N-gram contexts of a token stream with document boundaries (docs/model.md §3) and the batch address computation:
// the rows and sign vectors of position p are a pure function of (stream, document offsets, p), never of
// where a training window starts.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "memory/hash.h"
#include "memory/layout.h"

namespace pg {

// Addresses of n positions: rows [n, heads] and sign words [n, heads, sign_words] (see MemoryLayout::address).
// Buffers keep their capacity across resize() (allocate once, reuse every micro-batch).
struct Addresses {
  int64_t n = 0, heads = 0, sign_words = 0;
  std::vector<int64_t> rows;
  std::vector<uint64_t> signs;
  void resize(int64_t n_pos, const MemoryLayout& layout) {
    n = n_pos;
    heads = layout.heads();
    sign_words = layout.sign_words();
    rows.resize(static_cast<size_t>(n * heads));
    signs.resize(static_cast<size_t>(n * heads * sign_words));
  }
  const int64_t* row_ptr(int64_t i) const { return rows.data() + i * heads; }
  const uint64_t* sign_ptr(int64_t i, int64_t h) const { return signs.data() + (i * heads + h) * sign_words; }
};

// First token of the document holding position p: the largest doc_offsets[d] <= p (0 when none).
// doc_offsets is non-decreasing (a token store's offsets, the final n_tokens entry included or not).
inline int64_t document_start(std::span<const uint64_t> doc_offsets, int64_t p) {
  auto it = std::upper_bound(doc_offsets.begin(), doc_offsets.end(), static_cast<uint64_t>(p));
  return it == doc_offsets.begin() ? 0 : static_cast<int64_t>(*(it - 1));
}

namespace detail {
// ngram_contexts without the range check (callable inside OpenMP regions).
template <class Tok>
void ngram_contexts_unchecked(std::span<const Tok> tokens, std::span<const uint64_t> doc_offsets, int64_t p0, int64_t n,
                              int64_t max_order, uint64_t* ctx) {
  if (n <= 0) return;
  int64_t start = document_start(doc_offsets, p0);
  // Next document start after p0 (advanced as positions cross it).
  auto next_it = std::upper_bound(doc_offsets.begin(), doc_offsets.end(), static_cast<uint64_t>(p0));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = p0 + i;
    while (next_it != doc_offsets.end() && static_cast<int64_t>(*next_it) <= p)
      start = static_cast<int64_t>(*next_it++);
    uint64_t* c = ctx + i * max_order;
    for (int64_t j = 0; j < max_order; ++j)
      c[j] = p - j >= start ? static_cast<uint64_t>(tokens[static_cast<size_t>(p - j)]) : memhash::kBoundaryToken;
  }
}
}  // namespace detail

// ctx [n, max_order]: ctx[i*max_order + j] = token p0+i-j, or kBoundaryToken when p0+i-j is before the start
// of the document holding p0+i.
template <class Tok>
void ngram_contexts(std::span<const Tok> tokens, std::span<const uint64_t> doc_offsets, int64_t p0, int64_t n,
                    int64_t max_order, uint64_t* ctx) {
  PG_CHECK(p0 >= 0 && n >= 0 && p0 + n <= static_cast<int64_t>(tokens.size()), "positions [", p0, ", ", p0 + n,
           ") outside the stream of ", tokens.size(), " tokens");
  detail::ngram_contexts_unchecked(tokens, doc_offsets, p0, n, max_order, ctx);
}

// Rows and signs of positions [p0, p1) of the stream: rows [p1-p0, heads], signs [p1-p0, heads, sign_words].
// Parallel over fixed chunks of positions (each position independent: identical for any thread count).
template <class Tok>
void compute_addresses(const MemoryLayout& layout, std::span<const Tok> tokens, std::span<const uint64_t> doc_offsets,
                       int64_t p0, int64_t p1, int64_t* rows, uint64_t* signs) {
  constexpr int64_t kChunk = 256;
  const int64_t n = p1 - p0, mo = layout.max_order(), H = layout.heads(), W = layout.sign_words();
  PG_CHECK(p0 >= 0 && n >= 0 && p1 <= static_cast<int64_t>(tokens.size()) && mo <= 8, "positions [", p0, ", ", p1,
           ") outside the stream of ", tokens.size(), " tokens");
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    uint64_t ctx[kChunk * 8];
    const int64_t a = c * kChunk, m = std::min(kChunk, n - a);
    detail::ngram_contexts_unchecked(tokens, doc_offsets, p0 + a, m, mo, ctx);
    layout.address(ctx, m, rows + a * H, signs + a * H * W);
  }
}

// Addresses of B windows: window b covers positions [starts[b], starts[b] + T) of the stream (the inputs of a
// [T+1]-token window); out is resized to B*T positions, window-major.
template <class Tok>
void compute_window_addresses(const MemoryLayout& layout, std::span<const Tok> tokens,
                              std::span<const uint64_t> doc_offsets, std::span<const int64_t> starts, int64_t T,
                              Addresses& out) {
  const int64_t B = static_cast<int64_t>(starts.size());
  out.resize(B * T, layout);
  for (int64_t b = 0; b < B; ++b)
    compute_addresses(layout, tokens, doc_offsets, starts[b], starts[b] + T, out.rows.data() + b * T * out.heads,
                      out.signs.data() + b * T * out.heads * out.sign_words);
}

}  // namespace pg
