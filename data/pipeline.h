// The data stages as the CLI runs them: build the corpus, train the tokenizer, tokenize into token stores,
// open a dataset. Every stage is cached under the cache root, prints its wall time to stderr and reports
// cache hits; a missing prerequisite is an IoError naming the command that builds it.
//
// Cache layout (<cache> = data.cache_dir, else $PAGEGRAM_CACHE, else ~/.cache/pagegram):
//   <cache>/corpus[-quick]/{text/*.txt, manifest.json, DONE}       data/corpus/build_corpus.sh
//   <cache>/tokenizers/<tkey>/{spm.model, spm.vocab, tokenizer.yaml} train_tokenizer()
//   <cache>/tokens/<tkey>/<skey>/{train.pgtok, heldout.pgtok, store.yaml, sources.tsv}   tokenize()
// tkey = hex xxh64 of the tokenizer config fields + the corpus manifest hash (tokenizer_key());
// skey = hex xxh64 of the split fields (split_key()). Directories are staged and renamed into place.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/config.h"
#include "data/sampler.h"
#include "data/token_store.h"
#include "data/tokenizer.h"

namespace pg::data {

// The resolved cache root.
std::string cache_dir(const DataConfig& cfg);
// The corpus directory of data.corpus: <cache>/corpus, <cache>/corpus-quick or the absolute path itself.
std::string corpus_dir(const DataConfig& cfg);

// Runs `bash <source_dir>/data/corpus/build_corpus.sh --cache <cache> [--quick]` (output goes to the
// terminal). Throws IoError when the script is missing or fails.
void build_corpus(const DataConfig& cfg, bool quick, const std::string& source_dir);

struct TokenizerPaths {
  std::string key;  // 16 hex digits
  std::string dir;  // <cache>/tokenizers/<key>
  std::string model;  // <dir>/spm.model
  std::string vocab;  // <dir>/spm.vocab
  uint64_t model_hash = 0;  // xxh64 of the model file (0 until it exists)
  bool cache_hit = false;
};

// The cache key of a tokenizer: hex xxh64 of "pagegram-tokenizer-v1", every TokenizerConfig field as
// key=value and the corpus manifest hash.
std::string tokenizer_key(const TokenizerConfig& tcfg, uint64_t manifest_hash);
// Removes the staging temporaries that dead processes left in the cache ("<key>.tmp-<pid>-<n>" folders under
// <cache>/tokenizers and <cache>/tokens/<tkey>, and any "*.tmp.<pid>" / "*.tmp-<pid>-<n>" there or in
// <cache>/tokens), one "[data] removed ..." line on stderr each; a live process's staging stays (kill(pid, 0):
// core/text.h remove_stale_temporaries). Run by train_tokenizer, tokenize and open_dataset; a file that cannot be
// read or removed is skipped (only cache_dir's own ConfigError can escape).
std::vector<std::string> remove_stale_staging(const DataConfig& cfg);
// The key of a document split: hex xxh64 of the split fields and the document encoding version.
std::string split_key(const DataConfig& cfg);
// Where the tokenizer of (cfg, tcfg) lives; reads only the corpus manifest, trains nothing.
TokenizerPaths tokenizer_paths(const DataConfig& cfg, const TokenizerConfig& tcfg);
// Trains the tokenizer on a sample of the corpus unless it is cached.
TokenizerPaths train_tokenizer(const DataConfig& cfg, const TokenizerConfig& tcfg);

// Document-level split rule (frozen, data/FORMATS.md): h = xxh64(document bytes, seed = split_seed); the
// document is held out iff (h >> 11) * 2^-53 < heldout_fraction. Within a split, documents are stored in
// increasing (h, corpus index) order: a seeded shuffle, so any prefix (the validation tokens) mixes sources.
uint64_t document_split_hash(std::string_view text, uint64_t split_seed);
inline bool is_heldout(uint64_t split_hash, double heldout_fraction) {
  return static_cast<double>(split_hash >> 11) * 0x1.0p-53 < heldout_fraction;
}

struct SplitSummary {
  uint64_t docs = 0, tokens = 0, text_bytes = 0;
  double bytes_per_token() const { return tokens ? static_cast<double>(text_bytes) / tokens : 0.0; }
};
struct TokenizeSummary {
  TokenizerPaths tokenizer;
  std::string store_dir, train_path, heldout_path;
  SplitSummary train, heldout;
  double seconds = 0.0;  // wall time of this call (tokenizer training included)
  bool cache_hit = false;
};
// Trains the tokenizer if needed, then splits and encodes the corpus (OpenMP over documents; output order
// does not depend on the thread count) into train.pgtok and heldout.pgtok, unless they are cached.
// `config_path` only appears in hints.
TokenizeSummary tokenize(const DataConfig& cfg, const TokenizerConfig& tcfg, const std::string& config_path = "");

// Everything training and evaluation read. Stores and tokenizer are shared_ptr so samplers and windows
// (which point at a store) stay valid when the DataSet moves.
struct DataSet {
  TokenizerPaths tokenizer_paths;
  std::string store_dir;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::shared_ptr<const TokenStore> train, heldout;
  int64_t val_tokens = 0;

  WindowSampler sampler(int64_t T, uint64_t seed) const { return WindowSampler(*train, T, seed); }
  ValidationWindows validation(int64_t T) const { return ValidationWindows(*heldout, T, val_tokens); }
  TestStream test_stream() const { return TestStream(*heldout, val_tokens); }
};
// Opens the tokenizer and both stores (fully validated, tokenizer hash checked). Throws IoError naming the
// command that builds whatever is missing, ConfigError when data.val_tokens exceeds the held-out tokens.
DataSet open_dataset(const DataConfig& cfg, const TokenizerConfig& tcfg, const std::string& config_path = "");
// One line naming the data a run trains on, e.g. "train 260332022 tokens 544795 docs; heldout 38940744 tokens 80919
// docs; vocab 8192; tokenizer <hex>; manifest <hex>; split_seed 0" (from the stores' headers). Two corpus builds
// differ in it even when only a few documents changed (the token and document counts, and the manifest hash,
// which includes the build's time): runs whose fingerprints differ trained on other windows.
std::string dataset_fingerprint(const DataSet& ds);
// The same line from the stores' headers alone (no payload read: cheap), for the data a config would train on;
// empty when its tokenizer or token stores are not built yet. IoError when a header is unreadable.
std::string dataset_fingerprint(const DataConfig& cfg, const TokenizerConfig& tcfg);

}  // namespace pg::data
