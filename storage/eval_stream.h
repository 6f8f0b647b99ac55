// EvalStream: a token stream for the storage and collision tools (flashsim, collisions, addresses, iobench):
// ids with document starts, cut from a split of a token store, and its per-position rows and 4 KiB blocks.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/text.h"  // format_count, parse_bytes, format_bytes
#include "data/pipeline.h"
#include "data/token_store.h"
#include "memory/layout.h"

namespace pg {

// Positions [first, ids.size()) are the stream; the ids before `first` (at most max_order - 1 of them, from the
// same store) only complete the n-grams of the first positions, so an n-gram never depends on where the
// stream was cut (docs/model.md §3). doc_starts: sorted document starts relative to ids (document_start() rule).
struct EvalStream {
  std::vector<uint32_t> ids;
  std::vector<uint64_t> doc_starts;
  int64_t first = 0;
  int64_t size() const { return static_cast<int64_t>(ids.size()) - first; }
};

// Tokens [begin, begin + n) of `store` plus up to `context` ids before them. n is clipped to the store's end.
EvalStream stream_from_store(const data::TokenStore& store, uint64_t begin, uint64_t n, int64_t context = 3);

// A stream made from explicit ids and document starts (tests, synthetic streams): first = 0.
EvalStream stream_from_ids(std::vector<uint32_t> ids, std::vector<uint64_t> doc_starts = {0});

// A split of a dataset as a stream: "test" (held-out tokens after the validation ones), "validation", "heldout" or
// "train"; at most `tokens` of it (<= 0: the whole split). UserError when it is empty.
struct SplitStream {
  EvalStream stream;
  std::string desc;  // "<split> stream of <store>: tokens [begin, end)"
  uint64_t available = 0;  // tokens the split holds
};
SplitStream stream_from_split(const data::DataSet& ds, const std::string& split, int64_t tokens);

// Rows of stream positions [i0, i1) (stream-relative: position i is ids[first + i]): rows [i1-i0, heads].
// OpenMP-parallel over chunks (compute_addresses); identical for any thread count.
void stream_rows(const MemoryLayout& layout, const EvalStream& s, int64_t i0, int64_t i1, int64_t* rows);

// The distinct 4 KiB blocks each position of [i0, i1) reads (docs/model.md §7): every head's row, a unit spanning
// several blocks contributing all of them, duplicates within a position dropped (a token reads a block once),
// kept in head order of first appearance. Appends the blocks to `blocks` and, per position, the running end
// offset into `blocks` to `ends` (when not null). Block ids must fit in uint32 (checked).
void stream_blocks(const MemoryLayout& layout, const EvalStream& s, int64_t i0, int64_t i1,
                   std::vector<uint32_t>& blocks, std::vector<uint64_t>* ends = nullptr);

}  // namespace pg
