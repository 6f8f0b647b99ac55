// Implementation of storage/eval_stream.h.
#include "storage/eval_stream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>

#include "core/error.h"
#include "core/timer.h"
#include "memory/ngram.h"

namespace pg {

EvalStream stream_from_store(const data::TokenStore& store, uint64_t begin, uint64_t n, int64_t context) {
  const uint64_t total = store.n_tokens();
  if (begin > total)
    throw UserError(str("token store ", store.path(), ": stream start ", begin, " beyond its ", total, " tokens"));
  n = std::min<uint64_t>(n, total - begin);
  const uint64_t lo = begin >= static_cast<uint64_t>(context) ? begin - static_cast<uint64_t>(context) : 0;
  EvalStream s;
  s.first = static_cast<int64_t>(begin - lo);
  s.ids.resize(static_cast<size_t>(begin + n - lo));
  store.with_ids([&](auto ids) {
    for (uint64_t i = lo; i < begin + n; ++i) s.ids[static_cast<size_t>(i - lo)] = static_cast<uint32_t>(ids[i]);
  });
  // Document starts relative to lo: the document holding lo starts at or before 0 (document_start() then
  // returns 0 for it, which is correct for every stream position since they are >= context from lo or the
  // document truly starts there).
  const auto off = store.doc_offsets();
  s.doc_starts.push_back(0);
  auto it = std::upper_bound(off.begin(), off.end(), lo);
  for (; it != off.end() && *it < begin + n; ++it) s.doc_starts.push_back(*it - lo);
  return s;
}

EvalStream stream_from_ids(std::vector<uint32_t> ids, std::vector<uint64_t> doc_starts) {
  EvalStream s;
  s.ids = std::move(ids);
  s.doc_starts = std::move(doc_starts);
  if (s.doc_starts.empty()) s.doc_starts.push_back(0);
  PG_CHECK(std::is_sorted(s.doc_starts.begin(), s.doc_starts.end()), "document starts must be sorted");
  return s;
}

void stream_rows(const MemoryLayout& layout, const EvalStream& s, int64_t i0, int64_t i1, int64_t* rows) {
  PG_CHECK(i0 >= 0 && i0 <= i1 && i1 <= s.size(), "positions [", i0, ", ", i1, ") outside a stream of ", s.size());
  static thread_local std::vector<uint64_t> signs;  // discarded; kept to avoid re-faulting every call
  signs.resize(static_cast<size_t>((i1 - i0) * layout.heads() * layout.sign_words()));
  compute_addresses(layout, std::span<const uint32_t>(s.ids), std::span<const uint64_t>(s.doc_starts), s.first + i0,
                    s.first + i1, rows, signs.data());
}

void stream_blocks(const MemoryLayout& layout, const EvalStream& s, int64_t i0, int64_t i1,
                   std::vector<uint32_t>& blocks, std::vector<uint64_t>* ends) {
  const int64_t H = layout.heads(), n = i1 - i0;
  PG_CHECK(layout.num_blocks() < static_cast<int64_t>(std::numeric_limits<uint32_t>::max()), "layout of ",
           layout.num_blocks(), " blocks exceeds uint32 block ids");
  static thread_local std::vector<int64_t> rows;
  rows.resize(static_cast<size_t>(n * H));
  stream_rows(layout, s, i0, i1, rows.data());
  for (int64_t i = 0; i < n; ++i) {
    const size_t start = blocks.size();
    for (int64_t h = 0; h < H; ++h) {
      const BlockLocation loc = layout.block_of(rows[static_cast<size_t>(i * H + h)]);
      for (int64_t b = loc.block; b < loc.block + loc.blocks; ++b) {
        const uint32_t id = static_cast<uint32_t>(b);
        bool seen = false;
        for (size_t j = start; j < blocks.size(); ++j) seen |= blocks[j] == id;
        if (!seen) blocks.push_back(id);
      }
    }
    if (ends) ends->push_back(blocks.size());
  }
}

SplitStream stream_from_split(const data::DataSet& ds, const std::string& split, int64_t tokens) {
  if (tokens < 0) throw UserError(str("--tokens: must be >= 0, got ", tokens));
  const data::TokenStore* store = ds.heldout.get();
  uint64_t begin = 0, end = store->n_tokens();
  if (split == "test") {
    begin = static_cast<uint64_t>(ds.val_tokens);
  } else if (split == "validation") {
    end = static_cast<uint64_t>(ds.val_tokens);
  } else if (split == "train") {
    store = ds.train.get();
    end = store->n_tokens();
  } else if (split != "heldout") {
    throw UserError(str("--split: unknown split '", split, "' (hint: test, validation, heldout or train)"));
  }
  SplitStream out;
  out.available = end > begin ? end - begin : 0;
  const uint64_t n = tokens > 0 ? std::min<uint64_t>(out.available, static_cast<uint64_t>(tokens)) : out.available;
  if (n == 0) throw UserError(str("the ", split, " stream of ", store->path(), " is empty"));
  out.stream = stream_from_store(*store, begin, n, 8);
  out.desc = str(split, " stream of ", store->path(), ": tokens [", begin, ", ", begin + n, ")");
  return out;
}

}  // namespace pg
