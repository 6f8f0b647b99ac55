// DataConfig (where the corpus and caches live, the held-out split, validation size) and TokenizerConfig
// (sentencepiece training). One field list each drives YAML parsing, dumping, help and the cache keys.
#pragma once
#include <cstdint>
#include <string>

#include "core/config.h"

namespace pg {

struct DataConfig {
  // Root of every cache (corpus, tokenizers, token stores). Empty: $PAGEGRAM_CACHE, else ~/.cache/pagegram.
  std::string cache_dir;
  // "corpus" (<cache>/corpus), "corpus-quick" (<cache>/corpus-quick) or an absolute corpus directory.
  std::string corpus = "corpus";
  // Document-level held-out share. 0.13 of the ≈187M-token corpus ≈ 24M tokens: the 2.1M validation tokens
  // plus a ≥ 20M-token test stream.
  double heldout_fraction = 0.13;
  int64_t split_seed = 1;
  // Leading held-out tokens tiled into the fixed validation windows; the test stream is the rest.
  int64_t val_tokens = 2048 * 1025;

  template <class V>
  void visit(V& v) {
    v("cache_dir", cache_dir, "cache root (empty: $PAGEGRAM_CACHE or ~/.cache/pagegram)");
    v("corpus", corpus, "corpus: 'corpus', 'corpus-quick' or an absolute directory");
    v("heldout_fraction", heldout_fraction, "share of documents held out (validation + test)", cfg::Range{1e-6, 0.9});
    v("split_seed", split_seed, "seed of the document-level train/held-out split", cfg::Range{0, 9.0e15});
    v("val_tokens", val_tokens, "leading held-out tokens used as fixed validation windows", cfg::Range{0, 1e12});
  }
  // Cross-field checks; throws ConfigError naming the key.
  void validate(const std::string& where) const;
};

struct TokenizerConfig {
  int64_t vocab_size = 65536;
  std::string model_type = "unigram";
  // Lines sampled (deterministically, from `seed`) from the corpus documents for training.
  int64_t input_sentence_size = 1500000;
  int64_t seed = 1;
  // Must stay true: newlines are encoded as the byte piece <0x0A> (see data/tokenizer.h).
  bool byte_fallback = true;
  double character_coverage = 0.9995;
  // Lines longer than this (bytes) are left out of the training sample (they are still encoded).
  int64_t max_sentence_length = 4192;
  // sentencepiece training threads; part of the cache key (EM sums depend on the partition).
  int64_t num_threads = 2;
  // "identity" keeps text byte-exact (lossless round trip, code indentation kept); nmt_nfkc is spm's default.
  std::string normalization = "identity";
  bool split_digits = false;
  bool allow_whitespace_only_pieces = true;

  template <class V>
  void visit(V& v) {
    v("vocab_size", vocab_size, "vocabulary size (ids 0 <unk>, 1 <s>, 2 </s>, then 256 byte pieces, ...)",
      cfg::Range{300, 1 << 24});
    v("model_type", model_type, "sentencepiece model", cfg::OneOf{"unigram", "bpe"});
    v("input_sentence_size", input_sentence_size, "lines sampled from the corpus for training", cfg::Range{1, 1e9});
    v("seed", seed, "seed of the training sample", cfg::Range{0, 4294967294.0});
    v("byte_fallback", byte_fallback, "unknown characters become UTF-8 byte pieces (required: true)");
    v("character_coverage", character_coverage, "share of characters covered by character pieces",
      cfg::Range{0.5, 1.0});
    v("max_sentence_length", max_sentence_length, "longest training line in bytes (longer ones skipped)",
      cfg::Range{16, 1 << 24});
    v("num_threads", num_threads, "sentencepiece training threads (part of the cache key)", cfg::Range{1, 256});
    v("normalization", normalization, "sentencepiece normalization rule",
      cfg::OneOf{"identity", "nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf"});
    v("split_digits", split_digits, "split every digit into its own piece");
    v("allow_whitespace_only_pieces", allow_whitespace_only_pieces,
      "allow pieces made of whitespace only (code indentation)");
  }
  // Cross-field checks; throws ConfigError naming the key.
  void validate(const std::string& where) const;
};

}  // namespace pg
