// Pins the frozen XXH64 used by the data formats and tests corpus reading (document separators, lines).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <unistd.h>

#include "core/error.h"
#include "data/corpus_reader.h"
#include "data/hash.h"
#include "tests/test_util.h"

namespace pg::data {
namespace {
namespace fs = std::filesystem;

TEST(Hash, Xxh64ReferenceVectors) {
  // Published XXH64 values (seed 0); the token store format depends on them never changing.
  using namespace std::string_view_literals;
  EXPECT_EQ(xxh64(""sv), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(xxh64("a"sv), 0xD24EC4F1A98C6E5BULL);
  EXPECT_EQ(xxh64("abc"sv), 0x44BC2CF5AD770999ULL);
  EXPECT_EQ(xxh64("Nobody inspects the spammish repetition"sv), 0xFBCEA83C8A378BF1ULL);
  EXPECT_EQ(xxh64_bytes("abc", 3), 0x44BC2CF5AD770999ULL);
}

TEST(Hash, SeedAndLengthMatter) {
  std::string s(100, 'x');
  EXPECT_NE(xxh64(s, 0), xxh64(s, 1));
  EXPECT_NE(xxh64(s.substr(0, 99)), xxh64(s));
  // Every tail length path (32-byte stripes, 8, 4, 1) gives distinct values.
  std::set<uint64_t> seen;
  for (size_t n = 0; n <= 70; ++n) seen.insert(xxh64_bytes(s.data(), n));
  EXPECT_EQ(seen.size(), 71u);
  EXPECT_EQ(hex64(0xabcULL), "0000000000000abc");
}

// The streaming form gives the one-shot digest for every length and every way of cutting the bytes.
TEST(Hash, StreamEqualsOneShotForAnySplit) {
  std::string s;
  for (int i = 0; i < 300; ++i) s += static_cast<char>((i * 131 + 7) % 251);
  for (const uint64_t seed : {uint64_t{0}, uint64_t{12345}})
    for (size_t n :
         {size_t{0}, size_t{1}, size_t{5}, size_t{31}, size_t{32}, size_t{33}, size_t{64}, size_t{100}, size_t{300}})
      for (size_t piece : {size_t{1}, size_t{3}, size_t{7}, size_t{31}, size_t{32}, size_t{33}, size_t{1000}}) {
        Xxh64Stream h(seed);
        for (size_t a = 0; a < n; a += piece) h.update(s.data() + a, std::min(piece, n - a));
        EXPECT_EQ(h.digest(), xxh64_bytes(s.data(), n, seed)) << "n " << n << " piece " << piece << " seed " << seed;
      }
  EXPECT_EQ(Xxh64Stream().digest(), 0xEF46DB3751D8E999ULL);
}

std::vector<std::string> docs_of(std::string_view bytes) {
  std::vector<CorpusDocument> d;
  split_documents(bytes, 0, d);
  std::vector<std::string> out;
  for (auto& x : d) out.emplace_back(bytes.substr(x.begin, x.end - x.begin));
  return out;
}

TEST(Corpus, SplitDocumentsOnSeparatorLines) {
  using V = std::vector<std::string>;
  EXPECT_EQ(docs_of("a\nb\n\x1e\nc\n\x1e\n"), (V{"a\nb", "c"}));
  EXPECT_EQ(docs_of("a\n\x1e\n\n\x1e\nb"), (V{"a", "b"}));  // empty document skipped, tail kept
  EXPECT_EQ(docs_of("x\x1ey\n\x1e\n"), (V{"x\x1ey"}));  // 0x1E inside a line is text
  EXPECT_EQ(docs_of("\x1e\nfirst\n\x1e\n"), (V{"first"}));  // leading separator
  EXPECT_EQ(docs_of("a\n\n\x1e\n"), (V{"a\n"}));  // a trailing blank line is content
  EXPECT_EQ(docs_of("a\n\x1e"), (V{"a"}));  // separator at end of file, no newline
  EXPECT_EQ(docs_of(""), V{});
}

TEST(Corpus, ForEachLineRestoresText) {
  for (std::string t : {"", "a", "a\n", "\n\nb\n", "x\ny\nz"}) {
    std::string joined;
    bool first = true;
    for_each_line(t, [&](std::string_view l) {
      if (!first) joined += '\n';
      first = false;
      joined += l;
    });
    EXPECT_EQ(joined, t);
  }
}

TEST(Corpus, OpensFixtureInFileOrder) {
  Corpus c = Corpus::open(PG_TEST_DATA "/corpus", "run `x`");
  ASSERT_EQ(c.file_count(), 7u);
  EXPECT_EQ(c.source_name(0), "code.code");
  EXPECT_EQ(c.documents().size(), 262u);
  EXPECT_GT(c.total_bytes(), 100000u);
  EXPECT_EQ(c.manifest_hash(), corpus_identity(read_file(PG_TEST_DATA "/corpus/manifest.json")));
  for (const auto& d : c.documents()) {
    std::string_view t = c.text(d);
    EXPECT_FALSE(t.empty());
    EXPECT_EQ(t.find("\n\x1e\n"), std::string_view::npos);
  }
}

// Two builds of the same text differ in `created` and `stage_seconds` only: one identity (cache keys and the runs'
// `data` fingerprint). Another content hash is another corpus; a manifest without one is keyed by its bytes.
TEST(Corpus, IdentityIsTheTextsContentHashNotTheBuildTime) {
  const std::string a =
      "{\n \"version\": 1,\n \"created\": \"2026-12-06T02:11:40+00:00\",\n \"total_docs\": 3,\n"
      " \"content_hash\": \"1f572963161d12d9c5f925c4e7be533a\",\n \"stage_seconds\": {\"extract\": 160.0}\n}\n";
  const std::string b =
      "{\n \"version\": 1,\n \"created\": \"2026-12-06T21:32:01+00:00\",\n \"total_docs\": 3,\n"
      " \"content_hash\":\"1f572963161d12d9c5f925c4e7be533a\",\n \"stage_seconds\": {\"extract\": 168.0}\n}\n";
  std::string c = a;
  c.replace(c.find("1f57"), 4, "2f57");
  EXPECT_NE(xxh64(a), xxh64(b));
  EXPECT_EQ(corpus_identity(a), corpus_identity(b));
  EXPECT_NE(corpus_identity(a), corpus_identity(c));
  EXPECT_NE(corpus_identity(a), xxh64(a));
  // No content hash, or one that is not lower-case hex: the bytes decide.
  const std::string old = "{\"version\": 1, \"created\": \"x\"}";
  EXPECT_EQ(corpus_identity(old), xxh64(old));
  const std::string odd = "{\"content_hash\": \"not hex\"}";
  EXPECT_EQ(corpus_identity(odd), xxh64(odd));
}

TEST(Corpus, MissingDoneIsCorpusNotBuilt) {
  pg::testing::TempDir tmp;
  const fs::path& dir = tmp.path;
  fs::create_directories(dir / "text");
  try {
    Corpus::open(dir.string(), "run `pagegram data corpus`");
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("corpus not built: " + dir.string()), std::string::npos) << m;
    EXPECT_NE(m.find("pagegram data corpus"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace pg::data
