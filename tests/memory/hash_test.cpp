// Golden values of the n-gram hash (format version 1): a hash is part of the checkpoint format, so these
// numbers were computed once and are frozen here. Plus primes and Engram's vocabulary normalization.
#include "memory/hash.h"

#include <gtest/gtest.h>

#include "memory/layout.h"
#include "memory/ngram.h"
#include "memory/normalize.h"

namespace pg {
namespace {

using namespace memhash;

// The numbers below are version 1's; a table of any other hash version (a config built in code, or read from a
// checkpoint) is refused by make_layout instead of being addressed with these hashes.
TEST(HashGolden, TablesOfAnotherVersionAreRefused) {
  MemoryConfig c;
  c.layout = "flat";
  c.target_params = 2 * 384 * 1000;
  ASSERT_NE(make_layout(c, 384), nullptr);
  c.hash.version = kHashVersion + 1;
  try {
    make_layout(c, 384);
    FAIL() << "hash version " << c.hash.version << " was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("memory.hash.version"), std::string::npos) << e.what();
  }
}

TEST(HashGolden, SeedsKeysAndSignWords) {
  EXPECT_EQ(derive_seed(0, 2, 0, Role::kRow), 0xe0642cf5cba631c9ULL);
  EXPECT_EQ(derive_seed(0, 3, 7, Role::kSign), 0x844ad6b8e3435d2fULL);
  EXPECT_EQ(derive_seed(42, 2, 0, Role::kPage), 0xf0e19e3aae22b737ULL);
  const uint64_t ctx[4] = {17, 4242, kBoundaryToken, 9};  // x_t, x_{t-1}, boundary, x_{t-3}
  EXPECT_EQ(ngram_key(ctx, 2), 0xbfea674c75645150ULL);
  EXPECT_EQ(ngram_key(ctx, 3), 0x9e557de1a72ed841ULL);
  EXPECT_EQ(ngram_key(ctx, 4), 0x57f40082c6ebca37ULL);
  EXPECT_EQ(keyed_hash(ngram_key(ctx, 2), derive_seed(0, 2, 0, Role::kRow)), 0x6ab6b9166b77f299ULL);
  EXPECT_EQ(sign_word(ngram_key(ctx, 2), derive_seed(0, 2, 0, Role::kSign), 0), 0x067d4f229e46f434ULL);
  EXPECT_EQ(sign_word(ngram_key(ctx, 2), derive_seed(0, 2, 0, Role::kSign), 5), 0x40fa9c28c3c83d62ULL);
}

TEST(HashGolden, KeysSeeOnlyTheirNTokensInOrder) {
  const uint64_t a[3] = {1, 2, 3}, b[3] = {1, 2, 4}, c[3] = {2, 1, 3};
  EXPECT_EQ(ngram_key(a, 2), ngram_key(b, 2));  // the bigram ignores x_{t-2}
  EXPECT_NE(ngram_key(a, 3), ngram_key(b, 3));
  EXPECT_NE(ngram_key(a, 2), ngram_key(c, 2));  // order matters
  EXPECT_NE(ngram_key(a, 2), ngram_key(a, 3));
}

// Rows of positions 0, 3, 4, 9 of a two-document stream under the report's 200M config (d = 384, K = 8,
// r = 64, S = 4, hash seed 0). Positions 0 and 4 start documents (boundary-padded n-grams).
struct GoldenRows {
  const char* layout;
  std::vector<std::vector<int64_t>> rows;
  uint64_t sign_4_0_0, sign_9_last;
};

TEST(HashGolden, AddressesOfEveryLayout) {
  const std::vector<uint32_t> toks = {5, 100, 7, 65535, 3, 3, 3, 12, 9000, 1};
  const std::vector<uint64_t> docs = {0, 4, 10};
  const GoldenRows golden[] = {
      {"flat",
       {{94232, 383165}, {34735, 289939}, {158537, 476483}, {234518, 426509}},
       0x44ccb76c7544509fULL,
       0x2eafd53d1b14c24aULL},
      {"engram",
       {{72175, 376543, 582544, 741198, 892616, 977813, 1366995, 1394714, 1657527, 1898713, 2074657, 2329994, 2424487,
         2711990, 2795366, 2991913},
        {167949, 219747, 491515, 671680, 878938, 1113358, 1255974, 1433269, 1592185, 1815573, 2069707, 2341591, 2502168,
         2544793, 2764461, 3091847},
        {161150, 272462, 578854, 715376, 805759, 1025103, 1214749, 1426366, 1677900, 1898023, 2000747, 2206763, 2459923,
         2705038, 2853998, 2986414},
        {193489, 380125, 491022, 725962, 800791, 1144993, 1188990, 1478135, 1669927, 1953094, 2089532, 2197549, 2363920,
         2570082, 2822802, 2980808}},
       0x44ccb76c7544509fULL,
       0x014fe192cd54734bULL},
      {"pagegram",
       {{955264, 955270, 955275, 955278, 955282, 955286, 955288, 955292, 2090273, 2090277, 2090280, 2090285, 2090288,
         2090294, 2090298, 2090301},
        {207555, 207557, 207563, 207567, 207570, 207575, 207578, 207583, 2706211, 2706213, 2706218, 2706220, 2706225,
         2706228, 2706233, 2706238},
        {18849, 18852, 18856, 18860, 18865, 18871, 18873, 18876, 2387651, 2387654, 2387657, 2387660, 2387666, 2387671,
         2387674, 2387677},
        {499650, 499653, 499658, 499662, 499666, 499668, 499672, 499677, 2241601, 2241605, 2241608, 2241614, 2241619,
         2241620, 2241626, 2241628}},
       0x44ccb76c7544509fULL,
       0x014fe192cd54734bULL},
  };
  for (const GoldenRows& g : golden) {
    MemoryConfig c;
    c.layout = g.layout;
    auto l = make_layout(c, 384);
    Addresses a;
    a.resize(static_cast<int64_t>(toks.size()), *l);
    compute_addresses(*l, std::span<const uint32_t>(toks), std::span<const uint64_t>(docs), 0,
                      static_cast<int64_t>(toks.size()), a.rows.data(), a.signs.data());
    const int pos[4] = {0, 3, 4, 9};
    for (int i = 0; i < 4; ++i)
      for (int64_t h = 0; h < a.heads; ++h)
        EXPECT_EQ(a.rows[static_cast<size_t>(pos[i] * a.heads + h)],
                  g.rows[static_cast<size_t>(i)][static_cast<size_t>(h)])
            << g.layout << " position " << pos[i] << " head " << h;
    EXPECT_EQ(a.sign_ptr(4, 0)[0], g.sign_4_0_0) << g.layout;
    EXPECT_EQ(a.sign_ptr(9, a.heads - 1)[a.sign_words - 1], g.sign_9_last) << g.layout;
  }
}

TEST(Primes, PrimalityAndSelection) {
  EXPECT_FALSE(is_prime(0));
  EXPECT_FALSE(is_prime(1));
  EXPECT_TRUE(is_prime(2));
  EXPECT_TRUE(is_prime(48823));
  EXPECT_TRUE(is_prime(48821));
  EXPECT_FALSE(is_prime(48827));  // 157 * 311
  EXPECT_TRUE(is_prime(18446744073709551557ULL));  // largest 64-bit prime
  EXPECT_FALSE(is_prime(3215031751ULL));  // strong pseudoprime to bases 2, 3, 5, 7
  EXPECT_EQ(nearest_primes(48828.125, 3), (std::vector<int64_t>{48823, 48821, 48817}));
  EXPECT_EQ(nearest_primes(10.0, 4), (std::vector<int64_t>{11, 7, 13, 5}));
  EXPECT_EQ(nearest_primes(1.0, 2), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(consecutive_primes(100, 3), (std::vector<int64_t>{101, 103, 107}));
  EXPECT_EQ(consecutive_primes(101, 1), (std::vector<int64_t>{101}));
}

TEST(EngramNormalize, ChainOnCoveredRanges) {
  EXPECT_EQ(engram_normalize("Hello"), "hello");
  EXPECT_EQ(engram_normalize("  Hello\t\n World  "), "hello world");
  EXPECT_EQ(engram_normalize(" "), " ");  // a lone space is kept
  EXPECT_EQ(engram_normalize("\t\n"), " ");  // collapses to a lone space, kept
  EXPECT_EQ(engram_normalize(" the"), "the");
  EXPECT_EQ(engram_normalize("Éçole"), "ecole");
  EXPECT_EQ(engram_normalize("Straße"), "straße");
  EXPECT_EQ(engram_normalize("ÆØÅ"), "æøa");
  EXPECT_EQ(engram_normalize("Łódź"), "łodz");
  EXPECT_EQ(engram_normalize("İstanbul"), "istanbul");
  EXPECT_EQ(engram_normalize("e\xCC\x81"), "e");  // e + combining acute
  EXPECT_EQ(engram_normalize("ＡＢＣ１"), "abc1");  // fullwidth
  EXPECT_EQ(engram_normalize("ﬁne"), "fine");  // ligature
  EXPECT_EQ(engram_normalize("a\xC2\xA0"
                             "b"),
            "a b");  // NBSP
  EXPECT_EQ(engram_normalize("x²"), "x2");
  EXPECT_EQ(engram_normalize("…"), "...");
  EXPECT_EQ(engram_normalize("Ёлка Йод"), "елка иод");
  EXPECT_EQ(engram_normalize("ΆΣΩ"), "ασω");
  EXPECT_EQ(engram_normalize("がギ"), "かキ");
  EXPECT_EQ(engram_normalize("ぱ"), "は");
  EXPECT_EQ(engram_normalize("中文"), "中文");
  EXPECT_EQ(engram_normalize("\xFF\xFE"), "\xFF\xFE");  // invalid UTF-8 unchanged
}

TEST(EngramNormalize, CompressedVocabularyByFirstAppearance) {
  const std::vector<std::string> pieces = {"<unk>",  "\xE2\x96\x81The", "\xE2\x96\x81the", "THE",
                                           "<0xE3>", "<0xE4>",          "\xE2\x96\x81",    "Über",
                                           "uber",   "<0x0A>"};
  const auto texts = sentencepiece_piece_texts(pieces);
  EXPECT_EQ(texts[1], " The");
  EXPECT_EQ(texts[4], "\xEF\xBF\xBD");
  EXPECT_EQ(texts[9], "\n");
  const CompressedVocab v = compress_vocabulary(texts, pieces);
  ASSERT_EQ(v.map.size(), pieces.size());
  EXPECT_EQ(v.map[0], 0u);  // "<unk>"
  EXPECT_EQ(v.map[1], 1u);  // "the"
  EXPECT_EQ(v.map[2], 1u);
  EXPECT_EQ(v.map[3], 1u);
  EXPECT_EQ(v.map[4], 2u);  // U+FFFD: raw piece "<0xE3>"
  EXPECT_EQ(v.map[5], 3u);  // raw piece "<0xE4>": distinct
  EXPECT_EQ(v.map[6], 4u);  // lone space
  EXPECT_EQ(v.map[7], 5u);  // "uber"
  EXPECT_EQ(v.map[8], 5u);
  EXPECT_EQ(v.map[9], 4u);  // "\n" collapses to the lone space
  EXPECT_EQ(v.size, 6u);
}

}  // namespace
}  // namespace pg
