// Completions over one engine from many threads: continuous batching, stop strings, streaming chunks.
//
// `Completions` owns the engine's thread. Any thread submits a completion (prompt tokens, sampling, a token budget,
// stop strings) and reads its chunks as they come; the engine's thread admits new completions between decode steps
// (their prompt runs as one prefill), then decodes every running completion as one batched step (Engine::step over
// their sessions, at most max_active at a time), and hands each its token, its text and its log-probabilities.
// A completion ends at its budget ("length"), at a sampled end-of-document token or a stop string ("stop"; neither
// is part of the text), when its reader cancels it, or with an error (a failed table read: the message).
//
// Text is released as it becomes final: the tail that could still begin a stop string, and a trailing incomplete
// UTF-8 character (a byte-fallback piece waiting for the rest of its bytes), are held back until the next token
// decides them. The chunks' texts concatenated are the completion's text.
//
// Each completion samples from its own stream (its seed), and a session's tokens do not depend on which others share
// its steps (the decoder's rows are independent), so a seeded request gives the same text alone or under load.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "infer/engine.h"

namespace pg {

struct CompletionParams {
  std::vector<int32_t> prompt;  // at least one token
  SamplingOptions sampling;
  int64_t max_tokens = 16;
  std::vector<std::string> stop;  // stop strings (each non-empty; at most 16)
  bool ignore_eos = false;  // go on past a sampled end-of-document token
};
void check_completion(const CompletionParams& p, int64_t vocab);

// What one decode step added to a completion (the last chunk has a finish reason).
struct CompletionChunk {
  std::string text;  // text released by this step (may be empty while held back)
  std::vector<TokenLogprobs> logprobs;  // the step's token (with sampling.logprobs >= 0)
  std::string finish;  // "" while running; "length", "stop", "cancelled" or "error"
  std::string error;  // with finish "error"
  int64_t prompt_tokens = 0, completion_tokens = 0;  // so far
};

// The text of a completion so far, and what of it may be shown: stop strings and incomplete characters held back.
class StopScan {
 public:
  explicit StopScan(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // `text` is the whole completion text now (it may rewrite a held-back tail). Returns the newly released text;
  // `stopped` is set when a stop string appeared (the text before it is released, the rest never is). final: no
  // more tokens come, release everything.
  std::string update(const std::string& text, bool final, bool& stopped);
  const std::string& released() const { return out_; }

 private:
  std::vector<std::string> stops_;
  std::string out_;
};

struct CompletionsStats {
  EngineStats engine;
  TableReadStats table;
  bool has_table = false;
  int64_t requests = 0, running = 0, waiting = 0, finished = 0, errors = 0, cancelled = 0;
  int64_t steps = 0;  // batched decode steps
  double busy_seconds = 0;  // the engine thread's time in prefill and decode
};

class Completions {
 public:
  class Job;
  // max_active: completions decoded together (more wait for a place).
  Completions(Engine& e, int64_t max_active);
  ~Completions();
  Completions(const Completions&) = delete;
  Completions& operator=(const Completions&) = delete;

  // Checked (check_completion) then queued. UserError for bad parameters.
  std::shared_ptr<Job> submit(CompletionParams p);
  // Blocks until the job has a chunk; false when the job has ended and every chunk was read.
  bool next(Job& j, CompletionChunk& out);
  // Ends the job at the next step (the reader went away); its session is closed.
  void cancel(Job& j);
  CompletionsStats stats() const;
  // Ends every running and waiting completion with an error ("the server is stopping") and stops the engine thread;
  // later submits are refused. The destructor calls it.
  void stop();
  Engine& engine() { return e_; }

 private:
  void loop();
  void admit();
  void decode();
  void finish(Job& j, const std::string& reason, const std::string& error = "");
  void publish();

  Engine& e_;
  int64_t max_active_;
  mutable std::mutex m_;
  std::condition_variable work_cv_, chunk_cv_;
  std::deque<std::shared_ptr<Job>> waiting_;
  std::vector<std::shared_ptr<Job>> running_;  // engine thread only
  bool stopping_ = false;
  CompletionsStats stats_;  // under m_
  std::thread thread_;
};

}  // namespace pg
