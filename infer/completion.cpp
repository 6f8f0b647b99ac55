// Implementation of infer/completion.h.
#include "infer/completion.h"

#include <algorithm>

#include "core/error.h"
#include "core/text.h"
#include "core/threads.h"
#include "core/timer.h"

namespace pg {

struct Completions::Job {
  CompletionParams p;
  int64_t session = -1;  // engine thread
  int64_t generated = 0;  // engine thread
  int64_t start = 0;  // engine thread: the history position of the first generated token
  StopScan scan{{}};
  std::deque<CompletionChunk> chunks;  // under m_
  bool ended = false;  // under m_: the last chunk is queued
  bool cancel = false;  // under m_
};

void check_completion(const CompletionParams& p, int64_t vocab) {
  if (p.prompt.empty()) throw UserError("prompt: no tokens (hint: a completion continues at least one token)");
  for (size_t i = 0; i < p.prompt.size(); ++i)
    if (p.prompt[i] < 0 || p.prompt[i] >= vocab)
      throw UserError(str("prompt: token ", i, " is ", p.prompt[i], ", outside the vocabulary 0..", vocab - 1));
  if (p.max_tokens < 0 || p.max_tokens > 1000000)
    throw UserError(str("max_tokens: ", p.max_tokens, " (expected 0..1000000)"));
  if (p.stop.size() > 16) throw UserError(str("stop: ", p.stop.size(), " strings (at most 16)"));
  for (const std::string& s : p.stop)
    if (s.empty() || s.size() > 1024) throw UserError("stop: every stop string must have 1..1024 bytes");
  check_sampling(p.sampling);
}

namespace {
// Bytes at the end of `t` that may still change or complete: an incomplete UTF-8 sequence, or a replacement
// character (U+FFFD, what decoding gives for a byte piece whose character is not complete yet).
size_t unsettled_tail(const std::string& t) {
  size_t n = t.size();
  if (n >= 3 && t.compare(n - 3, 3, "\xEF\xBF\xBD") == 0) return 3;
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const unsigned char c = static_cast<unsigned char>(t[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back for the lead
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}
}  // namespace

std::string StopScan::update(const std::string& text, bool final, bool& stopped) {
  stopped = false;
  size_t end = text.size();
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, text.find(s));
  if (first != std::string::npos) {
    end = first;
    stopped = true;
  } else if (!final) {
    // hold back the longest tail that is the start of a stop string, and an unsettled character
    size_t hold = unsettled_tail(text);
    for (const std::string& s : stops_)
      for (size_t k = std::min(s.size() - 1, text.size()); k > hold; --k)
        if (text.compare(text.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    end = text.size() - hold;
  }
  // Released text is never taken back (a held-back tail that would decode otherwise later stays held back).
  if (end <= out_.size() || text.compare(0, out_.size(), out_) != 0) return "";
  std::string add = text.substr(out_.size(), end - out_.size());
  out_ += add;
  return add;
}

Completions::Completions(Engine& e, int64_t max_active) : e_(e), max_active_(std::max<int64_t>(1, max_active)) {
  thread_ = std::thread([this] {
    adopt_thread_setup();  // the engine's OpenMP team as the command set it up
    loop();
  });
}

Completions::~Completions() { stop(); }

void Completions::stop() {
  {
    std::lock_guard<std::mutex> l(m_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Completions::Job> Completions::submit(CompletionParams p) {
  check_completion(p, e_.config().model.vocab);
  auto j = std::make_shared<Job>();
  j->scan = StopScan(p.stop);
  j->p = std::move(p);
  {
    std::lock_guard<std::mutex> l(m_);
    if (stopping_) throw UserError("the server is stopping");
    waiting_.push_back(j);
    ++stats_.requests;
    stats_.waiting = static_cast<int64_t>(waiting_.size());
  }
  work_cv_.notify_all();
  return j;
}

bool Completions::next(Job& j, CompletionChunk& out) {
  std::unique_lock<std::mutex> l(m_);
  chunk_cv_.wait(l, [&] { return !j.chunks.empty() || j.ended; });
  if (j.chunks.empty()) return false;
  out = std::move(j.chunks.front());
  j.chunks.pop_front();
  return true;
}

void Completions::cancel(Job& j) {
  {
    std::lock_guard<std::mutex> l(m_);
    j.cancel = true;
  }
  work_cv_.notify_all();
}

CompletionsStats Completions::stats() const {
  std::lock_guard<std::mutex> l(m_);
  return stats_;
}

// Under m_: the job's last chunk.
void Completions::finish(Job& j, const std::string& reason, const std::string& error) {
  CompletionChunk c;
  c.finish = reason;
  c.error = error;
  c.prompt_tokens = static_cast<int64_t>(j.p.prompt.size());
  c.completion_tokens = j.generated;
  if (!j.chunks.empty() && j.chunks.back().finish.empty() && reason != "error") {
    j.chunks.back().finish = reason;  // the last step's chunk carries the reason
  } else {
    j.chunks.push_back(std::move(c));
  }
  j.ended = true;
  ++stats_.finished;
  if (reason == "error") ++stats_.errors;
  if (reason == "cancelled") ++stats_.cancelled;
}

void Completions::publish() {  // under m_
  stats_.engine = e_.stats();
  if (e_.source()) {
    stats_.table = e_.source()->stats();
    stats_.has_table = true;
  }
  stats_.running = static_cast<int64_t>(running_.size());
  stats_.waiting = static_cast<int64_t>(waiting_.size());
}

void Completions::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> l(m_);
      work_cv_.wait(l, [&] { return stopping_ || !waiting_.empty() || !running_.empty(); });
      if (stopping_) {
        for (auto& j : running_) finish(*j, "error", "the server is stopping");
        for (auto& j : waiting_) finish(*j, "error", "the server is stopping");
        waiting_.clear();
        chunk_cv_.notify_all();
        break;
      }
    }
    const Timer t;
    admit();
    decode();
    std::lock_guard<std::mutex> l(m_);
    stats_.busy_seconds += t.seconds();
    publish();
  }
  for (auto& j : running_)
    if (e_.has(j->session)) e_.close(j->session);
}

// New completions take the free places: each opens a session and runs its prompt.
void Completions::admit() {
  for (;;) {
    std::shared_ptr<Job> j;
    {
      std::lock_guard<std::mutex> l(m_);
      if (waiting_.empty() || static_cast<int64_t>(running_.size()) >= max_active_) return;
      j = waiting_.front();
      waiting_.pop_front();
      if (j->cancel) {
        finish(*j, "cancelled");
        chunk_cv_.notify_all();
        continue;
      }
    }
    std::string error;
    try {
      j->session = e_.open(j->p.sampling);
      e_.feed(j->session, j->p.prompt);
      j->start = e_.length(j->session);
    } catch (const std::exception& ex) {
      error = ex.what();
    }
    std::lock_guard<std::mutex> l(m_);
    if (!error.empty() || j->p.max_tokens == 0) {
      if (j->session >= 0 && e_.has(j->session)) e_.close(j->session);
      finish(*j, error.empty() ? "length" : "error", error);
      chunk_cv_.notify_all();
      continue;
    }
    running_.push_back(j);
  }
}

// One batched decode step over the running completions; each gets its chunk, the ended ones leave.
void Completions::decode() {
  {
    std::lock_guard<std::mutex> l(m_);
    std::vector<std::shared_ptr<Job>> keep;
    for (auto& j : running_) {
      if (j->cancel) {
        e_.close(j->session);
        finish(*j, "cancelled");
      } else {
        keep.push_back(j);
      }
    }
    running_.swap(keep);
    chunk_cv_.notify_all();
  }
  if (running_.empty()) return;
  std::vector<int64_t> ids;
  for (auto& j : running_) ids.push_back(j->session);
  std::vector<int32_t> toks;
  std::string error;
  try {
    toks = e_.step(ids);
  } catch (const std::exception& ex) {
    error = ex.what();
  }
  std::lock_guard<std::mutex> l(m_);
  ++stats_.steps;
  std::vector<std::shared_ptr<Job>> keep;
  for (size_t i = 0; i < running_.size(); ++i) {
    Job& j = *running_[i];
    if (!error.empty()) {  // a failed read: every completion of the step ends with the message
      e_.close(j.session);
      finish(j, "error", error);
      continue;
    }
    ++j.generated;
    CompletionChunk c;
    if (j.p.sampling.logprobs >= 0) c.logprobs.push_back(e_.last_logprobs(j.session));
    const bool eos = toks[i] == e_.eos_id() && !j.p.ignore_eos;
    const bool budget = j.generated >= j.p.max_tokens;
    // the text of the generated tokens, without a final end-of-document token
    const int64_t n = j.generated - (eos ? 1 : 0);
    const std::string text = e_.tokenizer() ? e_.decode_range(j.session, j.start, j.start + n) : std::string();
    bool stopped = false;
    c.text = j.scan.update(text, eos || budget, stopped);
    c.prompt_tokens = static_cast<int64_t>(j.p.prompt.size());
    c.completion_tokens = j.generated;
    j.chunks.push_back(std::move(c));
    if (stopped || eos || budget) {
      e_.close(j.session);
      finish(j, stopped || eos ? "stop" : "length");
    } else {
      keep.push_back(running_[i]);
    }
  }
  running_.swap(keep);
  chunk_cv_.notify_all();
}

}  // namespace pg
