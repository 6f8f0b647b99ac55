// Token store: write/read round trip, id widths, and refusal of corrupt, truncated or foreign files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/rng.h"
#include "data/hash.h"
#include "tests/test_util.h"
#include "data/mapped_file.h"
#include "data/token_store.h"

namespace pg::data {
namespace {
namespace fs = std::filesystem;

struct TempDir : testing::TempDir {
  std::string file(const std::string& n) const { return (path / n).string(); }
};

// Documents of pseudo-random ids below `vocab` with lengths 1..50 (no empty ones but the 3rd).
std::vector<std::vector<uint32_t>> make_docs(uint64_t vocab, int n_docs, uint64_t seed) {
  RngStream r(seed, "test.docs");
  std::vector<std::vector<uint32_t>> docs(n_docs);
  for (int d = 0; d < n_docs; ++d) {
    if (d == 2) continue;
    docs[d].resize(1 + r.below(50));
    for (auto& id : docs[d]) id = static_cast<uint32_t>(r.below(vocab));
  }
  return docs;
}

TokenStoreInfo info_for(uint64_t vocab) {
  TokenStoreInfo info;
  info.vocab_size = vocab;
  info.tokenizer_hash = 0x1234abcdULL;
  info.manifest_hash = 0x5678ULL;
  info.split_seed = 7;
  info.heldout_fraction = 0.25;
  info.split = Split::kHeldout;
  info.eos_id = 2;
  info.newline_id = 13;
  return info;
}

std::string write_store(const std::string& path, uint64_t vocab, const std::vector<std::vector<uint32_t>>& docs) {
  TokenStoreWriter w(path, info_for(vocab), docs.size());
  for (const auto& d : docs) w.add_document(d, d.size() * 3);
  w.finish();
  return path;
}

void check_round_trip(uint64_t vocab, uint32_t want_width) {
  TempDir tmp;
  auto docs = make_docs(vocab, 40, vocab);
  std::string path = write_store(tmp.file("s.pgtok"), vocab, docs);
  TokenStore s = TokenStore::open(path);
  EXPECT_EQ(s.id_bytes(), want_width);
  EXPECT_EQ(s.vocab_size(), vocab);
  EXPECT_EQ(s.n_docs(), docs.size());
  const TokenStoreHeader& h = s.header();
  EXPECT_EQ(h.info.tokenizer_hash, 0x1234abcdULL);
  EXPECT_EQ(h.info.manifest_hash, 0x5678ULL);
  EXPECT_EQ(h.info.split_seed, 7u);
  EXPECT_EQ(h.info.heldout_fraction, 0.25);
  EXPECT_EQ(h.info.split, Split::kHeldout);
  EXPECT_EQ(h.info.eos_id, 2u);
  EXPECT_EQ(h.info.newline_id, 13u);
  std::vector<uint32_t> all;
  for (const auto& d : docs) all.insert(all.end(), d.begin(), d.end());
  EXPECT_EQ(h.text_bytes, all.size() * 3);
  ASSERT_EQ(s.n_tokens(), all.size());
  for (uint64_t i = 0; i < all.size(); ++i) ASSERT_EQ(s.id(i), all[i]) << i;
  std::vector<int32_t> out(all.size());
  s.copy(0, all.size(), out.data());
  for (uint64_t i = 0; i < all.size(); ++i) ASSERT_EQ(static_cast<uint32_t>(out[i]), all[i]);
  EXPECT_EQ(want_width == 2 ? s.ids16().size() : s.ids32().size(), all.size());
  EXPECT_EQ(want_width == 2 ? s.ids32().size() : s.ids16().size(), 0u);
  // Document offsets and doc_of.
  uint64_t pos = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    EXPECT_EQ(s.doc_offsets()[d], pos);
    for (size_t k = 0; k < docs[d].size(); ++k) ASSERT_EQ(s.doc_of(pos + k), d);
    pos += docs[d].size();
  }
  EXPECT_EQ(s.doc_offsets()[docs.size()], pos);
  // File size as documented.
  const uint64_t ids_bytes = all.size() * want_width;
  EXPECT_EQ(fs::file_size(path), 128 + 8 * (docs.size() + 1) + ((ids_bytes + 7) / 8) * 8 + 8);
  // No staging leftovers.
  int files = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(tmp.path)) ++files;
  EXPECT_EQ(files, 1);
}

TEST(TokenStore, RoundTripUint16) { check_round_trip(65536, 2); }
TEST(TokenStore, RoundTripUint32) { check_round_trip(65537, 4); }
TEST(TokenStore, RoundTripSmallVocab) { check_round_trip(300, 2); }

TEST(TokenStore, EmptyStore) {
  TempDir tmp;
  std::string path = write_store(tmp.file("e.pgtok"), 100, {});
  TokenStore s = TokenStore::open(path);
  EXPECT_EQ(s.n_tokens(), 0u);
  EXPECT_EQ(s.n_docs(), 0u);
}

TEST(TokenStore, AbandonedWriterLeavesNothing) {
  TempDir tmp;
  {
    TokenStoreWriter w(tmp.file("x.pgtok"), info_for(100), 3);
    std::vector<uint32_t> ids = {1, 2, 3};
    w.add_document(ids, 3);
  }
  EXPECT_TRUE(fs::is_empty(tmp.path));
}

// Expects open() to throw IoError whose message names the file, the field and the byte offset.
void expect_refused(const std::string& path, const std::string& field, uint64_t offset,
                    const TokenStoreOpenOptions& opt = {}) {
  try {
    TokenStore::open(path, opt);
    FAIL() << "expected IoError for " << field;
  } catch (const IoError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find(field), std::string::npos) << m;
    EXPECT_NE(m.find("byte offset " + std::to_string(offset)), std::string::npos) << m;
    EXPECT_NE(m.find("pagegram data tokenize"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << "one line: " << m;
  }
}

std::string bytes_of(const std::string& path) { return read_file(path); }

void rehash_header(std::string& b) {
  uint64_t h = xxh64_bytes(b.data(), 120);
  std::memcpy(&b[120], &h, 8);
}
void rehash_payload(std::string& b) {
  uint64_t h = xxh64_bytes(b.data() + 128, b.size() - 136);
  std::memcpy(&b[b.size() - 8], &h, 8);
}

class CorruptStore : public ::testing::Test {
 protected:
  void SetUp() override {
    path = tmp.file("c.pgtok");
    write_store(path, 1000, make_docs(1000, 10, 3));
    good = bytes_of(path);
    n_docs = 10;
  }
  void put(const std::string& b) { write_file(path, b); }
  TempDir tmp;
  std::string path, good;
  uint64_t n_docs;
};

TEST_F(CorruptStore, GoodFileOpens) { EXPECT_NO_THROW(TokenStore::open(path)); }

TEST_F(CorruptStore, BadMagic) {
  std::string b = good;
  b[0] = 'X';
  put(b);
  expect_refused(path, "magic", 0);
}

TEST_F(CorruptStore, CorruptHeaderField) {
  std::string b = good;
  b[32] ^= 1;  // n_tokens
  put(b);
  expect_refused(path, "header_hash", 120);
}

TEST_F(CorruptStore, TruncatedFile) {
  put(good.substr(0, good.size() - 5));
  expect_refused(path, "file size", good.size() - 5);
}

TEST_F(CorruptStore, TruncatedHeader) {
  put(good.substr(0, 60));
  expect_refused(path, "header", 60);
}

TEST_F(CorruptStore, ExtendedFile) {
  put(good + std::string(8, '\0'));
  expect_refused(path, "file size", good.size());
}

TEST_F(CorruptStore, FlippedPayloadByte) {
  std::string b = good;
  b[128 + 8 * (n_docs + 1) + 5] ^= 0x40;  // an id byte
  put(b);
  expect_refused(path, "payload_hash", good.size() - 8);
}

TEST_F(CorruptStore, FutureVersion) {
  std::string b = good;
  b[8] = 2;
  rehash_header(b);
  put(b);
  expect_refused(path, "format_version", 8);
}

TEST_F(CorruptStore, BadOffsetsWithValidChecksums) {
  std::string b = good;
  uint64_t v = 1u << 30;
  std::memcpy(&b[128 + 8 * 4], &v, 8);  // doc_offsets[4] beyond n_tokens
  rehash_payload(b);
  put(b);
  expect_refused(path, "doc_offsets[4]", 128 + 8 * 4);
}

TEST_F(CorruptStore, IdOutOfVocabWithValidChecksums) {
  std::string b = good;
  uint16_t v = 1000;  // == vocab_size
  const uint64_t at = 128 + 8 * (n_docs + 1) + 2 * 7;
  std::memcpy(&b[at], &v, 2);
  rehash_payload(b);
  put(b);
  expect_refused(path, "ids[7]", at);
}

TEST_F(CorruptStore, WrongTokenizerHash) {
  TokenStoreOpenOptions opt;
  opt.tokenizer_hash = 0x999ULL;
  expect_refused(path, "tokenizer_hash", 40, opt);
  opt.tokenizer_hash = 0x1234abcdULL;
  EXPECT_NO_THROW(TokenStore::open(path, opt));
}

TEST_F(CorruptStore, ForeignFile) {
  put(std::string(4096, 'z'));
  expect_refused(path, "magic", 0);
}

TEST_F(CorruptStore, RebuildCommandInHint) {
  std::string b = good;
  b[0] = 'X';
  put(b);
  TokenStoreOpenOptions opt;
  opt.rebuild_command = "pagegram data tokenize --config configs/tiny.yaml";
  try {
    TokenStore::open(path, opt);
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("configs/tiny.yaml"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pg::data
