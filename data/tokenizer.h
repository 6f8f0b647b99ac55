// Tokenizer: a trained sentencepiece model plus this project's document encoding, and sentencepiece training
// on a deterministic line sample of a corpus.
//
// Document encoding (frozen; part of every token store, data/FORMATS.md): sentencepiece drops newlines, so
// each line of a document is encoded on its own and consecutive lines are joined by the byte-fallback piece
// <0x0A> (newline_id()); the document ends with </s> (eos_id()). No <s> is added. k newlines in a document
// give exactly k newline ids, so with the identity normalization decode(encode(doc)) == doc byte for byte.
// Reserved ids: <unk> 0, <s> 1, </s> 2, no <pad> (-1); then the 256 byte pieces <0x00>..<0xFF>.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/config.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace pg::data {

class Corpus;

class Tokenizer {
 public:
  // Loads a sentencepiece model; throws IoError naming the file (unreadable, not a model, no <0x0A> piece).
  explicit Tokenizer(const std::string& model_path);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  int64_t vocab_size() const { return vocab_size_; }
  uint32_t unk_id() const { return unk_id_; }
  uint32_t eos_id() const { return eos_id_; }
  uint32_t newline_id() const { return newline_id_; }
  uint64_t model_hash() const { return model_hash_; }  // xxh64 of the .model file bytes
  const std::string& path() const { return path_; }

  // Appends the ids of one document (lines joined by newline_id(), then eos_id()) to `out`. Never throws
  // (safe inside OpenMP): on a sentencepiece failure returns false and sets *err.
  bool encode_document(std::string_view text, std::vector<uint32_t>& out, std::string* err) const noexcept;
  // Same, returning the ids; throws IoError on failure.
  std::vector<uint32_t> encode_document(std::string_view text) const;
  // Inverse of the document encoding: newline ids become '\n', eos ids become `eos_text` (by default the
  // corpus document separator, so decoding a concatenation of documents restores the corpus file).
  std::string decode(std::span<const uint32_t> ids, std::string_view eos_text = "\n\x1e\n") const;
  std::string piece(uint32_t id) const;
  // Every piece in id order (piece(0), piece(1), ...).
  std::vector<std::string> pieces() const;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string path_;
  int64_t vocab_size_ = 0;
  uint32_t unk_id_ = 0, eos_id_ = 0, newline_id_ = 0;
  uint64_t model_hash_ = 0;
};

// The training sample: every non-empty corpus line no longer than max_sentence_length bytes is "eligible";
// eligible line i (in corpus order) is kept iff u(i) < input_sentence_size / eligible, where u(i) is
// uniform in [0,1) from RngStream(seed, "tokenizer.sample").at(i). A pure function of (corpus, seed).
struct TrainingSample {
  std::vector<std::string_view> lines;  // views into the corpus mapping
  uint64_t eligible_lines = 0;
  uint64_t bytes = 0;  // bytes of the kept lines
};
TrainingSample sample_training_lines(const Corpus& corpus, const TokenizerConfig& cfg);

// Trains sentencepiece on `sample` (which it uses whole: spm's own sampling and shuffling are off) and
// writes <model_prefix>.model and <model_prefix>.vocab ("piece<TAB>score" lines, as spm_train writes).
// The model bytes are a pure function of (sample, cfg): the trainer spec stored inside the model has an
// empty model_prefix, not the (temporary) output path. Throws IoError with spm's message on failure.
void train_sentencepiece(const TrainingSample& sample, const TokenizerConfig& cfg, const std::string& model_prefix);

}  // namespace pg::data
