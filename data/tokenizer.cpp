// sentencepiece-backed Tokenizer, the deterministic training sample and spm training (data/tokenizer.h).
#include "data/tokenizer.h"

#include <iostream>

#include <cstdio>

#include <thread>

#include <chrono>

#include <atomic>

#include <unistd.h>

#include <fcntl.h>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <unordered_map>

#include "core/error.h"
#include "core/rng.h"
#include "data/corpus_reader.h"
#include "data/hash.h"
#include "data/mapped_file.h"

// Present in libsentencepiece but not in its installed headers: the INFO/WARNING log threshold.
namespace sentencepiece::logging {
int GetMinLogLevel();
void SetMinLogLevel(int v);
}  // namespace sentencepiece::logging

namespace pg::data {

Tokenizer::Tokenizer(const std::string& model_path)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()), path_(model_path) {
  model_hash_ = hash_file(model_path);  // also reports a missing file as IoError
  auto st = sp_->Load(model_path);
  if (!st.ok())
    throw IoError(str("cannot load tokenizer ", model_path, ": ", st.ToString(),
                      " (hint: delete its directory and rerun `pagegram data tokenize`)"));
  vocab_size_ = sp_->GetPieceSize();
  const int nl = sp_->PieceToId("<0x0A>");
  if (nl <= 0 || !sp_->IsByte(nl))
    throw IoError(str("tokenizer ", model_path,
                      " has no byte piece <0x0A> for newlines (trained without "
                      "byte_fallback?; hint: retrain with tokenizer.byte_fallback=true)"));
  if (sp_->eos_id() < 0)
    throw IoError(str("tokenizer ", model_path, " has no </s> piece (hint: retrain with `pagegram data tokenize`)"));
  newline_id_ = static_cast<uint32_t>(nl);
  eos_id_ = static_cast<uint32_t>(sp_->eos_id());
  unk_id_ = static_cast<uint32_t>(sp_->unk_id());
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

bool Tokenizer::encode_document(std::string_view text, std::vector<uint32_t>& out, std::string* err) const noexcept {
  try {
    thread_local std::vector<int> ids;
    bool ok = true, first = true;
    for_each_line(text, [&](std::string_view line) {
      if (!ok) return;
      if (!first) out.push_back(newline_id_);
      first = false;
      if (line.empty()) return;
      ids.clear();
      auto st = sp_->Encode(line, &ids);
      if (!st.ok()) {
        ok = false;
        if (err) *err = st.ToString();
        return;
      }
      for (int id : ids) out.push_back(static_cast<uint32_t>(id));
    });
    if (ok) out.push_back(eos_id_);
    return ok;
  } catch (const std::exception& e) {
    if (err) *err = e.what();
    return false;
  }
}

std::vector<uint32_t> Tokenizer::encode_document(std::string_view text) const {
  std::vector<uint32_t> out;
  std::string err;
  if (!encode_document(text, out, &err)) throw IoError(str("tokenizer ", path_, ": cannot encode a document: ", err));
  return out;
}

std::string Tokenizer::decode(std::span<const uint32_t> ids, std::string_view eos_text) const {
  std::string out, piece_text;
  std::vector<int> line;
  auto flush = [&] {
    if (line.empty()) return;
    piece_text.clear();
    auto st = sp_->Decode(line, &piece_text);
    if (!st.ok()) throw IoError(str("tokenizer ", path_, ": cannot decode ids: ", st.ToString()));
    out += piece_text;
    line.clear();
  };
  for (uint32_t id : ids) {
    if (static_cast<int64_t>(id) >= vocab_size_)
      throw UserError(str("tokenizer ", path_, ": id ", id, " is outside the vocabulary of ", vocab_size_));
    if (id == newline_id_) {
      flush();
      out += '\n';
    } else if (id == eos_id_) {
      flush();
      out += eos_text;
    } else {
      line.push_back(static_cast<int>(id));
    }
  }
  flush();
  return out;
}

std::string Tokenizer::piece(uint32_t id) const {
  PG_CHECK(static_cast<int64_t>(id) < vocab_size_, "id ", id, " vocab ", vocab_size_);
  return sp_->IdToPiece(static_cast<int>(id));
}

std::vector<std::string> Tokenizer::pieces() const {
  std::vector<std::string> out;
  for (int64_t i = 0; i < vocab_size(); ++i) out.push_back(piece(static_cast<uint32_t>(i)));
  return out;
}

TrainingSample sample_training_lines(const Corpus& corpus, const TokenizerConfig& cfg) {
  const auto max_len = static_cast<size_t>(cfg.max_sentence_length);
  auto eligible = [&](std::string_view line) { return !line.empty() && line.size() <= max_len; };
  TrainingSample s;
  for (const auto& d : corpus.documents())
    for_each_line(corpus.text(d), [&](std::string_view line) { s.eligible_lines += eligible(line); });
  const double p = s.eligible_lines == 0
                       ? 0.0
                       : static_cast<double>(cfg.input_sentence_size) / static_cast<double>(s.eligible_lines);
  const RngStream rng(static_cast<uint64_t>(cfg.seed), "tokenizer.sample");
  uint64_t i = 0;
  for (const auto& d : corpus.documents())
    for_each_line(corpus.text(d), [&](std::string_view line) {
      if (!eligible(line)) return;
      const double u = static_cast<double>(rng.at(i++) >> 11) * 0x1.0p-53;
      if (u < p) {
        s.lines.push_back(line);
        s.bytes += line.size();
      }
    });
  return s;
}

namespace {

class SampleIterator : public sentencepiece::SentenceIterator {
 public:
  explicit SampleIterator(const std::vector<std::string_view>& lines) : lines_(lines) { load(); }
  bool done() const override { return i_ >= lines_.size(); }
  void Next() override {
    ++i_;
    load();
  }
  const std::string& value() const override { return cur_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void load() {
    if (i_ < lines_.size()) cur_.assign(lines_[i_]);
  }
  const std::vector<std::string_view>& lines_;
  size_t i_ = 0;
  std::string cur_;
};

}  // namespace

void train_sentencepiece(const TrainingSample& sample, const TokenizerConfig& cfg, const std::string& model_prefix) {
  if (sample.lines.empty())
    throw IoError(str("tokenizer training: the corpus sample is empty (", sample.eligible_lines,
                      " eligible lines; hint: check the corpus and tokenizer.max_sentence_length)"));
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  // No model_prefix: the model comes back serialized, so the spec stored inside it names no output path.
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", cfg.model_type},
      {"vocab_size", std::to_string(cfg.vocab_size)},
      {"character_coverage", str(cfg.character_coverage)},
      {"byte_fallback", b(cfg.byte_fallback)},
      {"input_sentence_size", "0"},  // use the whole (already sampled) input
      {"shuffle_input_sentence", "false"},
      {"max_sentence_length", std::to_string(cfg.max_sentence_length)},
      {"num_threads", std::to_string(cfg.num_threads)},
      {"normalization_rule_name", cfg.normalization},
      {"remove_extra_whitespaces", "false"},
      {"split_digits", b(cfg.split_digits)},
      {"allow_whitespace_only_pieces", b(cfg.allow_whitespace_only_pieces)},
      {"hard_vocab_limit", "true"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
  };
  // spm only draws random numbers when it samples or shuffles its input (both off); seed it anyway.
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(cfg.seed));
  // spm's INFO log (hundreds of lines) goes to <model_prefix>.train.log, not into the command's output: stderr is
  // redirected there while it trains, and a line on the real stderr says every ~10 s that it is still working.
  const int old_level = sentencepiece::logging::GetMinLogLevel();
  sentencepiece::logging::SetMinLogLevel(0);
  const std::string log_path = model_prefix + ".train.log";
  std::fflush(stderr);
  std::cerr.flush();
  const int saved = ::dup(STDERR_FILENO);
  const int logfd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (saved >= 0 && logfd >= 0) ::dup2(logfd, STDERR_FILENO);
  std::atomic<bool> done{false};
  std::thread beat([&] {
    const auto t0 = std::chrono::steady_clock::now();
    int64_t shown = 0;
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const auto secs = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - t0).count();
      if (secs >= shown + 10 && saved >= 0) {
        shown = secs;
        const std::string line =
            str("[data] tokenizer: sentencepiece training, ", secs, " s so far (its log: ", log_path, ")\n");
        if (::write(saved, line.data(), line.size()) < 0) break;
      }
    }
  });
  SampleIterator it(sample.lines);
  std::string serialized;
  auto st = sentencepiece::SentencePieceTrainer::Train(args, &it, &serialized);
  done = true;
  beat.join();
  std::cerr.flush();
  if (saved >= 0) {
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
  }
  if (logfd >= 0) ::close(logfd);
  sentencepiece::logging::SetMinLogLevel(old_level);
  if (!st.ok())
    throw IoError(str("sentencepiece training failed for ", model_prefix, ": ", st.ToString(),
                      " (hint: a small corpus needs a smaller tokenizer.vocab_size)"));
  write_file(model_prefix + ".model", serialized);
  sentencepiece::SentencePieceProcessor sp;
  st = sp.LoadFromSerializedProto(serialized);
  if (!st.ok())
    throw IoError(str("sentencepiece produced an unreadable model for ", model_prefix, ": ", st.ToString()));
  std::string vocab;
  for (int i = 0; i < sp.GetPieceSize(); ++i) vocab += str(sp.IdToPiece(i), "\t", sp.GetScore(i), "\n");
  write_file(model_prefix + ".vocab", vocab);
}

}  // namespace pg::data
