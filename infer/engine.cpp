// Implementation of infer/engine.h.
#include "infer/engine.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "core/error.h"
#include "core/text.h"
#include "core/timer.h"
#include "memory/sparse_grad.h"

namespace pg {

Engine::Engine(TrainedModel tm, std::unique_ptr<TableSource> source, int64_t max_batch, bool overlap)
    : tm_(std::move(tm)), source_(std::move(source)), max_batch_(max_batch) {
  PG_CHECK(max_batch >= 1);
  if (MemoryInjector* mem = tm_.mem()) {
    if (!source_) source_ = ram_table_source(mem->table().layout(), mem->table().values().data());
  } else if (source_) {
    throw UserError("generate: a table source was given but the checkpoint has no memory table (memory.layout none)");
  }
  dec_ = std::make_unique<Decoder>(tm_.model(), max_batch);
  if (overlap && tm_.mem()) io_ = std::make_unique<BackgroundTask>();
}

void Engine::reset_stats() {
  stats_ = {};
  if (source_) source_->reset_stats();
}

Engine::Sess& Engine::get(int64_t id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) throw UserError(str("no session ", id, " (hint: open one first)"));
  return it->second;
}
const Engine::Sess& Engine::get(int64_t id) const {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) throw UserError(str("no session ", id, " (hint: open one first)"));
  return it->second;
}

void check_sampling(const SamplingOptions& so) {
  if (so.temperature < 0 || !std::isfinite(so.temperature) || so.top_k < 0)
    throw UserError(str("sampling: temperature ", so.temperature, " and top-k ", so.top_k, " must be >= 0"));
  if (!(so.top_p > 0 && so.top_p <= 1)) throw UserError(str("sampling: top_p ", so.top_p, " must be in (0, 1]"));
  if (!(so.min_p >= 0 && so.min_p <= 1)) throw UserError(str("sampling: min_p ", so.min_p, " must be in [0, 1]"));
  if (!(so.repetition_penalty > 0 && std::isfinite(so.repetition_penalty)))
    throw UserError(str("sampling: repetition_penalty ", so.repetition_penalty, " must be > 0 (1 = off)"));
  if (so.repeat_last_n < 0) throw UserError(str("sampling: repeat_last_n ", so.repeat_last_n, " must be >= 0"));
  if (so.logprobs < -1 || so.logprobs > 20)
    throw UserError(str("sampling: logprobs ", so.logprobs, " must be in 0..20 (or -1: off)"));
}

int64_t Engine::open(const SamplingOptions& so) {
  check_sampling(so);
  const int64_t id = next_id_++;
  Sess& s = sessions_[id];
  s.docs = {0};
  s.cache = std::make_unique<KvCache>(tm_.cfg().model);
  s.rng = RngStream(so.seed, "generate");
  s.sampling = so;
  return id;
}

void Engine::close(int64_t id) {
  get(id);
  sessions_.erase(id);
}

void Engine::reset(int64_t id) {
  Sess& s = get(id);
  s.history.clear();
  s.docs = {0};
  s.cache->clear();
  s.cache_start = 0;
  s.logits.clear();
}

int64_t Engine::fork(int64_t id, const SamplingOptions& so) {
  const int64_t nid = open(so);
  Sess& src = get(id);
  Sess& dst = get(nid);
  dst.history = src.history;
  dst.docs = src.docs;
  dst.cache->copy_prefix(*src.cache, src.cache->length());
  dst.cache_start = src.cache_start;
  dst.stale = src.stale;
  dst.logits = src.logits;
  return nid;
}

void Engine::boundary(int64_t id) {
  Sess& s = get(id);
  const uint64_t p = s.history.size();
  if (s.docs.back() != p) s.docs.push_back(p);
}

int64_t Engine::length(int64_t id) const { return static_cast<int64_t>(get(id).history.size()); }
const std::vector<uint64_t>& Engine::documents(int64_t id) const { return get(id).docs; }
const MemoryLayout& Engine::checkpoint_layout() const {
  if (!tm_.mem()) throw UserError("this model has no memory table (memory.layout none)");
  return tm_.mem()->table().layout();
}

std::span<const float> Engine::logits(int64_t id) const {
  const Sess& s = get(id);
  if (s.logits.empty()) throw UserError(str("session ", id, " has no tokens yet (hint: feed a prompt first)"));
  return s.logits;
}

bool Engine::start_memory(const std::vector<std::pair<Sess*, std::pair<int64_t, int64_t>>>& parts, int64_t rows) {
  MemoryInjector* mem = tm_.mem();
  if (!mem) return false;
  const Timer t;
  const MemoryLayout& L = mem->table().layout();
  addr_.resize(rows, L);
  int64_t at = 0;
  for (const auto& [s, range] : parts) {
    const auto [p0, p1] = range;
    compute_addresses(L, std::span<const int32_t>(s->history), std::span<const uint64_t>(s->docs), p0, p1,
                      addr_.rows.data() + at * addr_.heads, addr_.signs.data() + at * addr_.heads * addr_.sign_words);
    at += p1 - p0;
  }
  // Every position's rows in one fetch (deduplicated inside the source), on the reads' thread when overlapping.
  rows_.resize(static_cast<size_t>(rows * addr_.heads * L.width()));
  if (io_) {
    io_->start([this] {
      const Timer f;
      source_->fetch(addr_, rows_.data());
      fetch_bg_ = f.seconds();
    });
  } else {
    const Timer r;
    source_->fetch(addr_, rows_.data());
    stats_.memory_wait_seconds += r.seconds();  // the forward waits for every read
    stats_.fetch_seconds += r.seconds();
  }
  memory_pending_ = true;
  stats_.memory_seconds += t.seconds();
  return true;
}

void Engine::finish_memory(int64_t rows) {
  MemoryInjector* mem = tm_.mem();
  const Timer t;
  memory_pending_ = false;
  if (io_) {
    io_->wait();
    stats_.memory_wait_seconds += io_->last_wait_seconds();
    stats_.fetch_seconds += fetch_bg_;
  }
  // The signed gather from the fetched rows: the same signs, rows renumbered into the fetched buffer (addr_ is not
  // read again: its signs move, no copy).
  const MemoryLayout& L = mem->table().layout();
  const int64_t E = rows * addr_.heads, W = L.width();
  ident_.n = addr_.n;
  ident_.heads = addr_.heads;
  ident_.sign_words = addr_.sign_words;
  ident_.signs.swap(addr_.signs);
  ident_.rows.resize(static_cast<size_t>(E));
  std::iota(ident_.rows.begin(), ident_.rows.end(), int64_t{0});
  u_.resize(static_cast<size_t>(rows * L.readout_width()));
  gather_signed(ident_, rows_.data(), W, L.sums_heads(), u_.data());
  mem->prepare_gathered(u_, rows);
  stats_.memory_seconds += t.seconds();
}

void Engine::run(const std::vector<std::pair<Sess*, std::pair<int64_t, int64_t>>>& parts, bool want_logits) {
  int64_t rows = 0;
  tok_.clear();
  caches_.clear();
  for (const auto& [s, range] : parts)
    for (int64_t p = range.first; p < range.second; ++p) {
      tok_.push_back(s->history[static_cast<size_t>(p)]);
      caches_.push_back(s->cache.get());
      ++rows;
    }
  PG_CHECK(rows >= 1 && rows <= max_batch_);
  std::function<void()> ready;
  if (start_memory(parts, rows)) ready = [this, rows] { finish_memory(rows); };
  const int64_t V = tm_.cfg().model.vocab;
  out_.resize(static_cast<size_t>(parts.size() * V));
  try {
    dec_->forward(tok_, caches_, want_logits ? out_.data() : nullptr, /*last_only=*/true, ready);
  } catch (...) {
    if (memory_pending_ && io_) {  // the forward failed before the injection: let the reads end before rows_ moves
      memory_pending_ = false;
      try {
        io_->wait();
      } catch (...) {
      }
    }
    throw;
  }
  PG_CHECK(!memory_pending_, "Engine::run: the forward never reached an injecting block");
  if (!want_logits) return;
  for (size_t i = 0; i < parts.size(); ++i)
    parts[i].first->logits.assign(out_.begin() + static_cast<std::ptrdiff_t>(i * V),
                                  out_.begin() + static_cast<std::ptrdiff_t>((i + 1) * V));
}

void Engine::run_one(Sess& s, int64_t p0, int64_t p1) {
  const int64_t cap = tm_.cfg().model.context;
  while (p0 < p1) {
    if (s.stale || s.cache->length() == cap) {  // restart the cache from the last cap/2 tokens before p0
      const int64_t keep = std::min<int64_t>(cap / 2, p0);
      s.cache->clear();
      s.cache_start = p0 - keep;
      s.stale = true;  // until the restart is complete
      ++stats_.restarts;
      for (int64_t q = s.cache_start; q < p0;) {
        const int64_t e = std::min({p0, q + max_batch_});
        run({{&s, {q, e}}}, false);
        q = e;
      }
      s.stale = false;
    }
    const int64_t room = cap - s.cache->length();
    const int64_t e = std::min({p1, p0 + max_batch_, p0 + room});
    run({{&s, {p0, e}}}, e == p1);
    p0 = e;
  }
}

void Engine::feed(int64_t id, std::span<const int32_t> tokens) {
  Sess& s = get(id);
  const int64_t V = tm_.cfg().model.vocab;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= V)
      throw UserError(str("token ", i, " of the prompt: id ", tokens[i], " outside the vocabulary [0, ", V, ")"));
  if (tokens.empty()) return;
  const Timer t;
  const Mark before = mark(s);
  const int64_t p0 = static_cast<int64_t>(s.history.size());
  s.history.insert(s.history.end(), tokens.begin(), tokens.end());
  cut_after_eos(s, static_cast<size_t>(p0));
  try {
    run_one(s, p0, static_cast<int64_t>(s.history.size()));
  } catch (...) {  // a failed read (corrupt block): the session stays as before the call
    roll_back(s, before);
    throw;
  }
  stats_.prefill_tokens += static_cast<int64_t>(tokens.size());
  stats_.prefill_seconds += t.seconds();
}

int32_t Engine::eos_id() const { return tokenizer() ? static_cast<int32_t>(tokenizer()->eos_id()) : 2; }

void Engine::cut_after_eos(Sess& s, size_t from) const {
  const int32_t eos = eos_id();
  for (size_t q = from; q < s.history.size(); ++q)
    if (s.history[q] == eos && s.docs.back() != q + 1) s.docs.push_back(q + 1);
}

void Engine::roll_back(Sess& s, const Mark& m) {
  s.history.resize(m.hist);
  s.docs.resize(m.docs);
  if (!s.stale && s.cache_start == m.cache_start && s.cache->length() >= m.cache_len) s.cache->truncate(m.cache_len);
  else s.stale = true;
}

void Engine::record_logprobs(Sess& s, int32_t tok) const {
  const std::vector<float>& lg = s.logits;
  const size_t V = lg.size();
  const double mx = *std::max_element(lg.begin(), lg.end());
  double sum = 0;
  for (size_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(lg[i]) - mx);
  const double lse = mx + std::log(sum);
  s.last.token = tok;
  s.last.logprob = lg[static_cast<size_t>(tok)] - lse;
  s.last.top.clear();
  const size_t n = std::min(static_cast<size_t>(s.sampling.logprobs), V);
  if (n == 0) return;
  std::vector<int32_t> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(n), idx.end(),
                    [&](int32_t a, int32_t b) { return lg[a] != lg[b] ? lg[a] > lg[b] : a < b; });
  for (size_t i = 0; i < n; ++i) s.last.top.push_back({idx[i], lg[static_cast<size_t>(idx[i])] - lse});
}

const TokenLogprobs& Engine::last_logprobs(int64_t id) const {
  const Sess& s = get(id);
  if (s.sampling.logprobs < 0) throw UserError(str("session ", id, " was opened without logprobs"));
  return s.last;
}

int32_t Engine::sample_filtered(Sess& s) {
  const std::vector<float>& lg = s.logits;
  const int64_t V = static_cast<int64_t>(lg.size());
  const SamplingOptions& so = s.sampling;
  w_.assign(lg.begin(), lg.end());
  if (so.repetition_penalty != 1.0) {  // every distinct token of the last repeat_last_n, once
    const size_t h = s.history.size(), n = std::min(h, static_cast<size_t>(so.repeat_last_n));
    seen_.assign(s.history.end() - static_cast<std::ptrdiff_t>(n), s.history.end());
    std::sort(seen_.begin(), seen_.end());
    seen_.erase(std::unique(seen_.begin(), seen_.end()), seen_.end());
    for (int32_t t : seen_) w_[t] = w_[t] > 0 ? w_[t] / so.repetition_penalty : w_[t] * so.repetition_penalty;
  }
  idx_.resize(static_cast<size_t>(V));
  std::iota(idx_.begin(), idx_.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return w_[a] != w_[b] ? w_[a] > w_[b] : a < b; };
  if (so.temperature == 0.0) return *std::min_element(idx_.begin(), idx_.end(), better);
  const int64_t k = so.top_k > 0 ? std::min(so.top_k, V) : V;
  std::partial_sort(idx_.begin(), idx_.begin() + k, idx_.end(), better);
  p_.resize(static_cast<size_t>(k));
  const double mx = w_[idx_[0]];
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) sum += (p_[i] = std::exp((w_[idx_[i]] - mx) / so.temperature));
  int64_t keep = k;  // top-p: the shortest prefix whose probability reaches top_p
  if (so.top_p < 1.0) {
    double c = 0;
    for (int64_t i = 0; i < k; ++i)
      if ((c += p_[i]) >= so.top_p * sum) {
        keep = i + 1;
        break;
      }
  }
  if (so.min_p > 0) {  // p_[0] is the most probable token's (unnormalized) probability
    int64_t m = 1;
    while (m < keep && p_[m] >= so.min_p * p_[0]) ++m;
    keep = m;
  }
  sum = 0;
  for (int64_t i = 0; i < keep; ++i) sum += p_[i];
  double u = s.rng.uniform() * sum;
  for (int64_t i = 0; i < keep; ++i) {
    u -= p_[i];
    if (u < 0) return idx_[i];
  }
  return idx_[keep - 1];
}

int32_t Engine::sample(Sess& s) {
  const int32_t tok = s.sampling.top_p < 1.0 || s.sampling.min_p > 0 || s.sampling.repetition_penalty != 1.0
                          ? sample_filtered(s)
                          : sample_plain(s);
  if (s.sampling.logprobs >= 0) record_logprobs(s, tok);
  return tok;
}

int32_t Engine::sample_plain(Sess& s) {
  const std::vector<float>& lg = s.logits;
  const int64_t V = static_cast<int64_t>(lg.size());
  const SamplingOptions& so = s.sampling;
  if (so.temperature == 0.0) return static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
  const int64_t k = so.top_k > 0 ? std::min(so.top_k, V) : V;
  if (k == V) {  // the whole vocabulary in id order: no sort
    const double mx = *std::max_element(lg.begin(), lg.end());
    p_.resize(static_cast<size_t>(V));
    double sum = 0;
    for (int64_t i = 0; i < V; ++i)
      sum += (p_[static_cast<size_t>(i)] = std::exp((lg[static_cast<size_t>(i)] - mx) / so.temperature));
    double u = s.rng.uniform() * sum;
    for (int64_t i = 0; i < V; ++i)
      if ((u -= p_[static_cast<size_t>(i)]) < 0) return static_cast<int32_t>(i);
    return static_cast<int32_t>(V - 1);
  }
  idx_.resize(static_cast<size_t>(V));
  std::iota(idx_.begin(), idx_.end(), 0);
  // the k largest logits, ties to the lower id (a total order: the same choice on every machine)
  auto better = [&](int32_t a, int32_t b) { return lg[a] != lg[b] ? lg[a] > lg[b] : a < b; };
  std::partial_sort(idx_.begin(), idx_.begin() + k, idx_.end(), better);
  p_.resize(static_cast<size_t>(k));
  const double mx = lg[idx_[0]];
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) sum += (p_[i] = std::exp((lg[idx_[i]] - mx) / so.temperature));
  double u = s.rng.uniform() * sum;
  for (int64_t i = 0; i < k; ++i) {
    u -= p_[i];
    if (u < 0) return idx_[i];
  }
  return idx_[k - 1];
}

std::vector<int32_t> Engine::step(std::span<const int64_t> ids) {
  const Timer t;
  std::vector<int32_t> out;
  std::vector<Sess*> ss;
  std::vector<Mark> marks;
  for (int64_t id : ids) {
    Sess& s = get(id);
    if (s.logits.empty()) throw UserError(str("session ", id, " has no tokens yet (hint: feed a prompt first)"));
    if (std::find(ss.begin(), ss.end(), &s) != ss.end())
      throw UserError(str("session ", id, " listed twice in one step"));
    marks.push_back(mark(s));
    const int32_t tok = sample(s);
    out.push_back(tok);
    s.history.push_back(tok);
    cut_after_eos(s, s.history.size() - 1);  // a generated EOS ends the document, as in training
    ss.push_back(&s);
  }
  // Sessions whose cache is full restart alone; the others decode as batches of max_batch.
  const int64_t cap = tm_.cfg().model.context;
  std::vector<std::pair<Sess*, std::pair<int64_t, int64_t>>> batch;
  auto flush = [&] {
    if (!batch.empty()) run(batch, true);
    batch.clear();
  };
  try {
    for (Sess* s : ss) {
      const int64_t p = static_cast<int64_t>(s->history.size()) - 1;
      if (s->stale || s->cache->length() == cap) {
        run_one(*s, p, p + 1);
        continue;
      }
      batch.push_back({s, {p, p + 1}});
      if (static_cast<int64_t>(batch.size()) == max_batch_) flush();
    }
    flush();
  } catch (...) {
    // A failed read: the sessions whose token has not run (their cache does not reach it) drop it, as before the
    // call (their sampling stream moved on); sessions run in an earlier batch of this call keep theirs.
    for (size_t i = 0; i < ss.size(); ++i)
      if (ss[i]->stale || ss[i]->cache_start + ss[i]->cache->length() < static_cast<int64_t>(ss[i]->history.size()))
        roll_back(*ss[i], marks[i]);
    throw;
  }
  stats_.decode_tokens += static_cast<int64_t>(ids.size());
  stats_.decode_seconds += t.seconds();
  return out;
}

const data::Tokenizer& Engine::need_tokenizer() const {
  if (const data::Tokenizer* tk = tokenizer()) return *tk;
  throw UserError(
      tokenizer_note_.empty()
          ? "the checkpoint's tokenizer is not available (hint: pagegram data tokenizer --config <its config>)"
          : tokenizer_note_);
}

std::vector<int32_t> Engine::encode(const std::string& text) const {
  const data::Tokenizer* tk = &need_tokenizer();
  std::vector<uint32_t> ids = tk->encode_document(text);
  if (!ids.empty() && ids.back() == tk->eos_id()) ids.pop_back();  // a prompt is an unfinished document
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string Engine::decode(std::span<const int32_t> ids) const {
  const data::Tokenizer* tk = &need_tokenizer();
  // An end-of-document token is not text: each document decoded alone, a document's end written as a newline.
  std::string out;
  std::vector<uint32_t> u;
  for (size_t i = 0; i <= ids.size(); ++i) {
    if (i == ids.size() || ids[i] == static_cast<int32_t>(tk->eos_id())) {
      out += tk->decode(u);
      if (i < ids.size()) out += "\n";
      u.clear();
    } else {
      u.push_back(static_cast<uint32_t>(ids[i]));
    }
  }
  return out;
}

std::string Engine::decode_tail(int64_t id, int64_t n) const {
  const int64_t len = length(id);
  return decode_range(id, len - std::clamp<int64_t>(n, 0, len), len);
}

std::string Engine::decode_range(int64_t id, int64_t from, int64_t to) const {
  const Sess& s = get(id);
  const int64_t len = static_cast<int64_t>(s.history.size());
  if (from < 0 || from > to || to > len)
    throw UserError(str("decode: positions ", from, "..", to, " outside the session's ", len, " tokens"));
  const int64_t ctx = std::min<int64_t>(from, 8);  // a few tokens before, for the spacing
  const std::span<const int32_t> h(s.history);
  const std::string before = decode(h.subspan(static_cast<size_t>(from - ctx), static_cast<size_t>(ctx)));
  const std::string all = decode(h.subspan(static_cast<size_t>(from - ctx), static_cast<size_t>(to - from + ctx)));
  return all.compare(0, before.size(), before) == 0
             ? all.substr(before.size())
             : decode(h.subspan(static_cast<size_t>(from), static_cast<size_t>(to - from)));
}

}  // namespace pg
