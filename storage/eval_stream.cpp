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
  if (begin > total) throw UserError(str("token store ", store.path(), ": stream start ", begin, " beyond its ", total, " tokens"));
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

// ---- ProgressLine.

namespace {
double now_s() {
  static const Timer clock;
  return clock.seconds();
}
}  // namespace

ProgressLine::ProgressLine(std::string what, int64_t total, bool enabled, double interval_s)
    : what_(std::move(what)), total_(total), enabled_(enabled), interval_(interval_s) {
  t0_ = last_ = now_s();
}

void ProgressLine::update(int64_t done) {
  done_ = done;
  if (!enabled_) return;
  const double t = now_s();
  if (t - last_ < interval_) return;
  last_ = t;
  const double el = t - t0_, rate = el > 0 ? static_cast<double>(done) / el : 0.0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0;
  std::fprintf(stderr, "  %s %lld/%lld (%.1f%%, %.3g/s, eta %.0f s)\n", what_.c_str(), static_cast<long long>(done),
               static_cast<long long>(total_), total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0,
               rate, eta);
}

void ProgressLine::finish() {
  if (!enabled_) return;
  std::fprintf(stderr, "  %s done: %lld in %.1f s\n", what_.c_str(), static_cast<long long>(done_), now_s() - t0_);
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// ---- Sizes.

namespace {
bool parse_number(const std::string& t, double& value, std::string& suffix) {
  size_t pos = 0;
  try {
    value = std::stod(t, &pos);
  } catch (...) {
    return false;
  }
  suffix = t.substr(pos);
  suffix.erase(0, suffix.find_first_not_of(' '));
  return std::isfinite(value);
}
}  // namespace

double parse_count(const std::string& text, const std::string& what) {
  double v = 0;
  std::string suf;
  if (!parse_number(text, v, suf))
    throw UserError(str(what, ": '", text, "' is not a number (hint: e.g. 3.2e9, 10B, 200M)"));
  double mult = 1;
  if (suf == "K" || suf == "k") mult = 1e3;
  else if (suf == "M") mult = 1e6;
  else if (suf == "B" || suf == "G") mult = 1e9;
  else if (suf == "T") mult = 1e12;
  else if (!suf.empty())
    throw UserError(str(what, ": unknown suffix '", suf, "' in '", text, "' (hint: K, M, B or T, or 3.2e9)"));
  v *= mult;
  if (!(v >= 1)) throw UserError(str(what, ": '", text, "' must be at least 1"));
  if (v > 1e15) throw UserError(str(what, ": '", text, "' is too large (hint: at most 1e15)"));
  return v;
}

int64_t parse_bytes(const std::string& text, const std::string& what) {
  double v = 0;
  std::string suf;
  if (!parse_number(text, v, suf))
    throw UserError(str(what, ": '", text, "' is not a size (hint: e.g. 0, 256MiB, 1GiB, 4096)"));
  double mult = 1;
  if (suf.empty() || suf == "B") mult = 1;
  else if (suf == "KiB" || suf == "K") mult = 1024.0;
  else if (suf == "MiB" || suf == "M") mult = 1024.0 * 1024;
  else if (suf == "GiB" || suf == "G") mult = 1024.0 * 1024 * 1024;
  else if (suf == "TiB" || suf == "T") mult = 1024.0 * 1024 * 1024 * 1024;
  else if (suf == "KB") mult = 1e3;
  else if (suf == "MB") mult = 1e6;
  else if (suf == "GB") mult = 1e9;
  else if (suf == "TB") mult = 1e12;
  else
    throw UserError(str(what, ": unknown unit '", suf, "' in '", text, "' (hint: KiB, MiB, GiB or plain bytes)"));
  v *= mult;
  if (v < 0 || v > 9.0e18) throw UserError(str(what, ": '", text, "' is out of range"));
  return static_cast<int64_t>(std::llround(v));
}

std::string format_bytes(int64_t b) {
  if (b == 0) return "0";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  if (v == std::floor(v)) std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}


}  // namespace pg
