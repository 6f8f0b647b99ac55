// Token store: one split of a tokenized corpus as a flat binary file (.pgtok), its writer and its
// validating mmap reader. The format is frozen and documented here and in data/FORMATS.md.
//
// Layout (little-endian; every section 8-byte aligned):
//   offset  size  field
//        0     8  magic "PGTOKENS"
//        8     4  u32 format_version (1)
//       12     4  u32 id_bytes: 2 (uint16 ids, when vocab_size <= 65536) or 4 (uint32 ids)
//       16     8  u64 vocab_size
//       24     8  u64 n_docs
//       32     8  u64 n_tokens
//       40     8  u64 tokenizer_hash   xxh64 of the sentencepiece .model file bytes
//       48     8  u64 manifest_hash    corpus_identity of the corpus manifest.json
//       56     8  u64 split_seed
//       64     8  f64 heldout_fraction
//       72     4  u32 split            0 train, 1 heldout, 2 other
//       76     4  u32 eos_id           (the id ending every document)
//       80     8  u64 text_bytes       UTF-8 bytes of the documents (for bytes/token and bits/byte)
//       88     4  u32 newline_id       (the id joining lines, <0x0A>)
//       92    28  reserved, zero
//      120     8  u64 header_hash      xxh64 of bytes [0, 120)
//      128  8(n_docs+1)  u64 doc_offsets: document d is tokens [doc_offsets[d], doc_offsets[d+1]);
//                         doc_offsets[0] = 0, non-decreasing, doc_offsets[n_docs] = n_tokens
//        …  n_tokens*id_bytes  ids, then zero padding to a multiple of 8 bytes
//   size-8     8  u64 payload_hash     xxh64 of bytes [128, size-8)
// xxh64 = XXH64 with seed 0 (data/hash.h). File size = 128 + 8(n_docs+1) + pad8(n_tokens*id_bytes) + 8.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/mapped_file.h"

namespace pg::data {

inline constexpr char kTokenStoreMagic[8] = {'P', 'G', 'T', 'O', 'K', 'E', 'N', 'S'};
inline constexpr uint32_t kTokenStoreVersion = 1;
inline constexpr size_t kTokenStoreHeaderBytes = 128;
enum class Split : uint32_t { kTrain = 0, kHeldout = 1, kOther = 2 };

// Everything in the header but the sizes and hashes computed by the writer.
struct TokenStoreInfo {
  uint64_t vocab_size = 0;
  uint64_t tokenizer_hash = 0;
  uint64_t manifest_hash = 0;
  uint64_t split_seed = 0;
  double heldout_fraction = 0.0;
  Split split = Split::kOther;
  uint32_t eos_id = 0;
  uint32_t newline_id = 0;
};

// The full header as read from a file.
struct TokenStoreHeader {
  TokenStoreInfo info;
  uint32_t version = 0;
  uint32_t id_bytes = 0;
  uint64_t n_docs = 0;
  uint64_t n_tokens = 0;
  uint64_t text_bytes = 0;
};

// id width for a vocabulary: 2 bytes up to 65,536 ids, else 4.
inline uint32_t id_bytes_for_vocab(uint64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

// Streams documents into `path` (staged as path + ".tmp-*", renamed into place by finish(), so a reader
// never sees a partial file). The number of documents is fixed up front (it places the id section).
class TokenStoreWriter {
 public:
  TokenStoreWriter(std::string path, const TokenStoreInfo& info, uint64_t n_docs);
  ~TokenStoreWriter();  // removes the staged file if finish() was not reached
  TokenStoreWriter(const TokenStoreWriter&) = delete;
  TokenStoreWriter& operator=(const TokenStoreWriter&) = delete;

  // Appends one document's ids (each < vocab_size) and records its text size.
  void add_document(std::span<const uint32_t> ids, uint64_t text_bytes);
  // Writes offsets, header and checksums, then renames into place. Call once, after n_docs documents.
  void finish();

 private:
  void flush();
  std::string path_, tmp_;
  TokenStoreInfo info_;
  uint64_t n_docs_;
  uint32_t id_bytes_;
  int fd_ = -1;
  uint64_t n_tokens_ = 0, text_bytes_ = 0, ids_begin_ = 0, write_pos_ = 0;
  std::vector<uint64_t> offsets_;
  std::vector<uint8_t> buf_;
  bool finished_ = false;
};

struct TokenStoreOpenOptions {
  // When set, the header's tokenizer_hash must equal it.
  std::optional<uint64_t> tokenizer_hash;
  // When set, the header's vocab_size must equal it.
  std::optional<uint64_t> vocab_size;
  // Named in every error's hint: the command that rebuilds the file.
  std::string rebuild_command = "pagegram data tokenize --config <config.yaml>";
};

// A validated, memory-mapped token store. open() checks magic, version, id width, sizes against the file
// length, both checksums, the offsets, every id < vocab_size and the options; any failure throws IoError
// "token store <path>: <field> at byte offset <o>: <what> (hint: rebuild with `<command>`)".
class TokenStore {
 public:
  TokenStore() = default;
  static TokenStore open(const std::string& path, const TokenStoreOpenOptions& opt = {});
  // Reads and checks only the header (cheap; no payload checksum).
  static TokenStoreHeader read_header(const std::string& path, const TokenStoreOpenOptions& opt = {});

  const std::string& path() const { return file_.path(); }
  const TokenStoreHeader& header() const { return h_; }
  uint64_t n_tokens() const { return h_.n_tokens; }
  uint64_t n_docs() const { return h_.n_docs; }
  uint32_t id_bytes() const { return h_.id_bytes; }
  uint64_t vocab_size() const { return h_.info.vocab_size; }

  // Raw id sections; exactly one is non-empty (by id_bytes()).
  std::span<const uint16_t> ids16() const { return ids16_; }
  std::span<const uint32_t> ids32() const { return ids32_; }
  // Calls f(span) with the typed id section (std::span<const uint16_t> or <const uint32_t>).
  template <class F>
  decltype(auto) with_ids(F&& f) const {
    return h_.id_bytes == 2 ? f(ids16_) : f(ids32_);
  }
  uint32_t id(uint64_t pos) const { return h_.id_bytes == 2 ? ids16_[pos] : ids32_[pos]; }
  // out[0..n) = ids [pos, pos + n) widened to int32 (pos + n <= n_tokens()).
  void copy(uint64_t pos, uint64_t n, int32_t* out) const;
  // doc_offsets()[d] is the first token of document d; size n_docs + 1.
  std::span<const uint64_t> doc_offsets() const { return offsets_; }
  // The document holding token `pos` (pos < n_tokens()).
  uint64_t doc_of(uint64_t pos) const;

 private:
  MappedFile file_;
  TokenStoreHeader h_;
  std::span<const uint64_t> offsets_;
  std::span<const uint16_t> ids16_;
  std::span<const uint32_t> ids32_;
};

}  // namespace pg::data
