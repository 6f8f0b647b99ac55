// Generation with the memory table wherever it lives (the zLLM path of ../shared/seeds/engram-in-zllm.txt): a trained
// model (train/trained_model.h), a table source (storage/table_source.h: RAM, mmap'd .pgt, or O_DIRECT + LRU) and
// any number of conversations ("sessions") decoded together.
//
// Per session: the token history (the n-gram state: addresses of a new token need the n-1 before it, across calls),
// its document boundaries (a boundary cuts the n-grams, as a document start does in training), a KV cache and the
// logits of its last token. Feeding tokens (prefill) computes every new position's addresses first, fetches the
// rows of all of them in one read (a row needed twice is read once), then runs the backbone over all positions in
// one forward; W_V runs batched. The reads run on a thread of their own while the backbone computes the blocks before
// the first one that injects (with injection at block 0 only the embedding overlaps them). A decode step samples one
// token per session from its logits, addresses and fetches the rows of all sampled tokens at once (the reads start the
// moment the tokens are known), and runs one batched forward. Past the model's context (the trained RoPE range) a
// session's cache restarts from its last context/2 tokens (re-prefilled); the n-gram history is unaffected.
//
// Sampling is seeded per session (RngStream(seed, "generate"), one uniform per sampled token): repetition penalty,
// temperature, top-k, top-p, min-p (SamplingOptions); temperature 0 is greedy. The same model, table contents, prompt
// and seed give the same tokens with any source and thread count.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/background.h"
#include "core/rng.h"
#include "model/decoder.h"
#include "storage/table_source.h"
#include "train/trained_model.h"

namespace pg {

// How a session picks its next token from the logits of its last one. The filters apply in this order: repetition
// penalty on the logits, temperature, top-k, top-p, min-p; then one uniform draw among the tokens left. With the
// defaults of top_p, min_p and repetition_penalty the draw is the one of temperature and top-k alone (same bits).
struct SamplingOptions {
  double temperature = 0.8;  // 0 = greedy (argmax of the penalized logits, lowest id on ties)
  int64_t top_k = 40;  // 0 = the whole vocabulary
  uint64_t seed = 0;
  double top_p = 1.0;  // nucleus: the most probable tokens whose probabilities first reach top_p (1 = off)
  double min_p = 0.0;  // drop tokens less probable than min_p x the most probable one (0 = off)
  // CTRL-style: the logit of every token among the session's last repeat_last_n tokens is divided by the penalty
  // when positive, multiplied when negative (1 = off; llama.cpp's rule).
  double repetition_penalty = 1.0;
  int64_t repeat_last_n = 64;
  // >= 0: record each sampled token's log-probability and the `logprobs` most probable tokens' (at most 20), from
  // the model's logits before any penalty or temperature (last_logprobs). -1 = off.
  int64_t logprobs = -1;
};
// The checks of open/fork: one line naming the option and its range.
void check_sampling(const SamplingOptions& so);

// A sampled token's log-probability under the model (log-softmax of the logits), and the most probable tokens'.
struct TokenLogprobs {
  int32_t token = -1;
  double logprob = 0;
  std::vector<std::pair<int32_t, double>> top;  // most probable first, ties to the lower id
};

struct EngineStats {
  int64_t prefill_tokens = 0, decode_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;  // wall time of prefill / decode calls (I/O included)
  double memory_seconds = 0;  // the forward's time on memory work: addressing, waiting for the reads, gather
  double memory_wait_seconds = 0;  // of which waiting for table reads that the earlier blocks did not hide
  // wall time of the table fetches (address plan, device reads, decoding the rows), on the reads' thread when
  // overlapping: what the blocks before the first injection can hide; memory_wait_seconds is the part they did not
  double fetch_seconds = 0;
  int64_t restarts = 0;  // caches restarted past the context
};

class Engine {
 public:
  // The model of `tm` (its memory injector, if any, gets rows from `source`; null source = the checkpoint's fp32
  // table in RAM). max_batch: rows per forward (sessions decoded together, prefill chunk). overlap: table reads run
  // in the background while the blocks before the first injection compute (false: read, then compute; the same
  // bits either way).
  Engine(TrainedModel tm, std::unique_ptr<TableSource> source, int64_t max_batch = 64, bool overlap = true);
  bool overlaps() const { return io_ != nullptr; }

  const ExperimentConfig& config() const { return tm_.cfg(); }
  const data::Tokenizer* tokenizer() const { return tm_.data ? tm_.data->tokenizer.get() : nullptr; }
  // Why there is no tokenizer (its expected path and a hint), for the error of a request that needs one.
  void set_tokenizer_note(std::string note) { tokenizer_note_ = std::move(note); }
  TableSource* source() { return source_.get(); }
  // Rows of the checkpoint's fp32 table this engine holds in RAM: all of them when it serves from RAM, none when it
  // serves a table file (open_engine then never loads them).
  int64_t fp32_table_rows() const { return tm_.mem() ? tm_.mem()->table().shard().size() : 0; }
  const EngineStats& stats() const { return stats_; }
  void reset_stats();

  // ---- sessions (ids are never reused)
  int64_t open(const SamplingOptions& s);
  void close(int64_t id);
  // Forgets the history: the next token starts a new document.
  void reset(int64_t id);
  // A new session with a copy of id's history, cache and logits (its own sampling stream).
  int64_t fork(int64_t id, const SamplingOptions& s);
  // A document boundary after the last token: the n-grams of later tokens start here.
  void boundary(int64_t id);
  bool has(int64_t id) const { return sessions_.count(id) != 0; }
  int64_t length(int64_t id) const;
  // The session's document starts (history positions; the first is 0): where the n-grams are cut.
  const std::vector<uint64_t>& documents(int64_t id) const;
  // The layout of the checkpoint's table (the addresses every source is read with).
  const MemoryLayout& checkpoint_layout() const;  // tokens fed or generated so far

  // Appends tokens (the prompt) to a session and runs them (prefill); the session's logits are then those of the
  // last token. UserError for an id outside the vocabulary.
  void feed(int64_t id, std::span<const int32_t> tokens);
  // One decode step for every session in ids (each must have been fed at least one token): samples its next
  // token, appends it, runs all of them as one batch. Returns the sampled tokens in the order of ids.
  std::vector<int32_t> step(std::span<const int64_t> ids);
  // The logits of a session's last token [vocab].
  std::span<const float> logits(int64_t id) const;
  // With sampling.logprobs >= 0: the log-probabilities of the token the last step sampled for the session.
  const TokenLogprobs& last_logprobs(int64_t id) const;

  // Tokenizer round trip (UserError when the checkpoint's tokenizer is not available).
  std::vector<int32_t> encode(const std::string& text) const;
  std::string decode(std::span<const int32_t> ids) const;
  // The text of a session's last n tokens as they read after the tokens before them (a piece's leading-space
  // marker is kept, which decoding the n tokens alone would drop).
  std::string decode_tail(int64_t id, int64_t n) const;
  // The same for history positions [from, to).
  std::string decode_range(int64_t id, int64_t from, int64_t to) const;
  // The end-of-document id: the tokenizer's, or 2 (</s>, the vocabulary's convention) without one.
  int32_t eos_id() const;

 private:
  // The tokenizer, or a UserError saying why there is none (set_tokenizer_note).
  const data::Tokenizer& need_tokenizer() const;
  struct Sess {
    std::vector<int32_t> history;  // every token, the n-gram state
    std::vector<uint64_t> docs;  // document starts (positions in history), sorted, first 0
    std::unique_ptr<KvCache> cache;
    int64_t cache_start = 0;  // history position of cache position 0
    bool stale = false;  // a failed call left the cache unusable: the next run restarts it (as past the context)
    std::vector<float> logits;
    SamplingOptions sampling;
    RngStream rng{0, "generate"};
    TokenLogprobs last;  // of the last sampled token (sampling.logprobs >= 0)
  };
  Sess& get(int64_t id);
  const Sess& get(int64_t id) const;
  // Runs history positions [p0, p1) of each listed session (rows of one session consecutive) as one forward.
  void run(const std::vector<std::pair<Sess*, std::pair<int64_t, int64_t>>>& parts, bool logits);
  // Runs [p0, p1) of one session in chunks, restarting its cache when it would pass the context.
  void run_one(Sess& s, int64_t p0, int64_t p1);
  // Addresses of every row, then the reads (started in the background when overlapping); finish_memory waits for
  // them and prepares the injector. start_memory returns false without a memory table.
  bool start_memory(const std::vector<std::pair<Sess*, std::pair<int64_t, int64_t>>>& parts, int64_t rows);
  void finish_memory(int64_t rows);
  int32_t sample(Sess& s);
  int32_t sample_plain(Sess& s);  // temperature and top-k only
  int32_t sample_filtered(
      Sess& s);  // with top-p, min-p or a repetition penalty  // with top-p, min-p or a repetition penalty
  void record_logprobs(Sess& s, int32_t tok) const;
  // After a failed feed/step (a corrupt block): the session as it was before the call (history of length hist; the
  // cache cut back to cache_len, or restarted by the next run when the call had restarted it).
  struct Mark {
    size_t hist, docs;
    int64_t cache_len, cache_start;
  };
  static Mark mark(const Sess& s) { return {s.history.size(), s.docs.size(), s.cache->length(), s.cache_start}; }
  // Documents as in training: a document ends with its end-of-document token, so the token after an EOS at
  // history positions [from, end) starts a new document (its n-grams begin at the boundary, as in the token store).
  void cut_after_eos(Sess& s, size_t from) const;
  static void roll_back(Sess& s, const Mark& m);

  TrainedModel tm_;
  std::unique_ptr<TableSource> source_;
  int64_t max_batch_;
  std::unique_ptr<BackgroundTask> io_;  // the reads' thread (null: no overlap)
  bool memory_pending_ = false;
  double fetch_bg_ = 0;  // the last background fetch's wall time (written by the reads' thread, read after wait)
  std::unique_ptr<Decoder> dec_;
  std::map<int64_t, Sess> sessions_;
  int64_t next_id_ = 1;
  EngineStats stats_;
  std::string tokenizer_note_;
  Addresses addr_, ident_;
  std::vector<float> rows_, u_, out_;
  std::vector<int32_t> tok_, idx_, seen_;
  std::vector<double> p_, w_;
  std::vector<KvCache*> caches_;
};

}  // namespace pg
