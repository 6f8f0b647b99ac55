// Tokenizer training and round trip, caches, the document-level split, and open_dataset's errors, on the
// small fixture corpus (tests/fixtures/corpus).
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "core/error.h"
#include "tests/test_util.h"
#include "data/corpus_reader.h"
#include "data/hash.h"
#include "data/pipeline.h"

namespace pg::data {
namespace {
namespace fs = std::filesystem;

using pg::testing::TempDir;

const std::string kFixture = PG_TEST_DATA "/corpus";

DataConfig data_cfg(const TempDir& tmp, const std::string& sub = "cache") {
  DataConfig c;
  c.cache_dir = (tmp.path / sub).string();
  c.corpus = kFixture;
  c.heldout_fraction = 0.2;
  c.split_seed = 5;
  c.val_tokens = 1000;
  return c;
}

TokenizerConfig tok_cfg() {
  TokenizerConfig t;
  t.vocab_size = 1024;  // 259 reserved + byte pieces, ≈ 300 characters of the multilingual fixture, the rest pieces
  t.input_sentence_size = 3000;
  t.num_threads = 2;
  return t;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Tokenizer, TrainsAndRoundTripsTextWithNewlines) {
  TempDir tmp;
  TokenizerPaths p = train_tokenizer(data_cfg(tmp), tok_cfg());
  EXPECT_FALSE(p.cache_hit);
  EXPECT_TRUE(fs::exists(p.model));
  EXPECT_TRUE(fs::exists(p.vocab));
  EXPECT_EQ(p.key.size(), 16u);
  Tokenizer tok(p.model);
  EXPECT_EQ(tok.vocab_size(), 1024);
  EXPECT_EQ(tok.unk_id(), 0u);
  EXPECT_EQ(tok.eos_id(), 2u);
  EXPECT_EQ(tok.piece(tok.newline_id()), "<0x0A>");
  EXPECT_EQ(tok.model_hash(), p.model_hash);

  const std::string text =
      "The table maps every pair.\n\n  indented line\twith a tab\n"
      "哈希函数把键均匀地分布。 Ωμέγα 🙂 Übung\nfor (int i = 0; i < n; ++i) {\n    x += 1;\n}\n";
  std::vector<uint32_t> ids = tok.encode_document(text);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), tok.eos_id());
  EXPECT_NE(ids.front(), 1u) << "no <s> is added";
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tok.newline_id()), std::count(text.begin(), text.end(), '\n'));
  EXPECT_EQ(tok.decode(ids, ""), text);
  EXPECT_EQ(tok.decode(ids), text + "\n\x1e\n");

  // Every fixture document comes back byte for byte (identity normalization + byte fallback).
  Corpus c = Corpus::open(kFixture, "x");
  for (const auto& d : c.documents()) {
    std::string_view t = c.text(d);
    ASSERT_EQ(tok.decode(tok.encode_document(t), ""), t);
  }
}

TEST(Tokenizer, CacheHitDoesNotRetrainAndTrainingIsDeterministic) {
  TempDir tmp;
  TokenizerPaths a = train_tokenizer(data_cfg(tmp), tok_cfg());
  const auto mtime = fs::last_write_time(a.model);
  TokenizerPaths b = train_tokenizer(data_cfg(tmp), tok_cfg());
  EXPECT_TRUE(b.cache_hit);
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.model_hash, b.model_hash);
  EXPECT_EQ(fs::last_write_time(b.model), mtime);
  EXPECT_EQ(tokenizer_paths(data_cfg(tmp), tok_cfg()).model_hash, a.model_hash);
  // Same config in a fresh cache: the same model bytes.
  TokenizerPaths c = train_tokenizer(data_cfg(tmp, "cache2"), tok_cfg());
  EXPECT_FALSE(c.cache_hit);
  EXPECT_EQ(c.key, a.key);
  EXPECT_EQ(c.model_hash, a.model_hash);
  // Any tokenizer field changes the key.
  TokenizerConfig t2 = tok_cfg();
  t2.vocab_size = 1000;
  EXPECT_NE(tokenizer_key(t2, 1), tokenizer_key(tok_cfg(), 1));
  EXPECT_NE(tokenizer_key(tok_cfg(), 2), tokenizer_key(tok_cfg(), 1));
}

TEST(Tokenizer, TrainingSampleIsSeeded) {
  Corpus c = Corpus::open(kFixture, "x");
  TokenizerConfig t = tok_cfg();
  t.input_sentence_size = 500;
  TrainingSample a = sample_training_lines(c, t), b = sample_training_lines(c, t);
  t.seed = 2;
  TrainingSample d = sample_training_lines(c, t);
  EXPECT_EQ(a.lines, b.lines);
  EXPECT_NE(a.lines, d.lines);
  EXPECT_GT(a.eligible_lines, 1500u);
  EXPECT_NEAR(static_cast<double>(a.lines.size()), 500.0, 100.0);
  for (auto l : a.lines) EXPECT_FALSE(l.empty());
}

TEST(Tokenizer, BadModelFileIsIoError) {
  TempDir tmp;
  const std::string bad = (tmp.path / "bad.model").string();
  write_file(bad, "not a model");
  std::string m = message_of([&] { Tokenizer t(bad); });
  EXPECT_NE(m.find(bad), std::string::npos) << m;
}

// The documents of a store, decoded.
std::vector<std::string> decoded_docs(const TokenStore& s, const Tokenizer& tok) {
  std::vector<std::string> out;
  std::vector<uint32_t> ids;
  for (uint64_t d = 0; d < s.n_docs(); ++d) {
    ids.clear();
    for (uint64_t p = s.doc_offsets()[d]; p < s.doc_offsets()[d + 1]; ++p) ids.push_back(s.id(p));
    EXPECT_EQ(ids.back(), tok.eos_id());
    ids.pop_back();
    out.push_back(tok.decode(ids, ""));
  }
  return out;
}

TEST(Pipeline, SplitIsDisjointCompleteAndDeterministic) {
  TempDir tmp;
  const DataConfig cfg = data_cfg(tmp);
  TokenizeSummary s = tokenize(cfg, tok_cfg());
  EXPECT_FALSE(s.cache_hit);
  EXPECT_GT(s.train.tokens, 10 * s.heldout.tokens / 10);
  EXPECT_GT(s.heldout.docs, 20u);
  EXPECT_GT(s.train.bytes_per_token(), 1.0);

  Tokenizer tok(s.tokenizer.model);
  TokenStore tr = TokenStore::open(s.train_path), he = TokenStore::open(s.heldout_path);
  EXPECT_EQ(tr.header().info.split, Split::kTrain);
  EXPECT_EQ(he.header().info.split, Split::kHeldout);
  EXPECT_EQ(tr.n_tokens(), s.train.tokens);
  auto train_docs = decoded_docs(tr, tok), held_docs = decoded_docs(he, tok);
  std::multiset<std::string> corpus_docs, stored;
  Corpus c = Corpus::open(kFixture, "x");
  for (const auto& d : c.documents()) corpus_docs.emplace(c.text(d));
  std::set<std::string> train_set(train_docs.begin(), train_docs.end());
  for (const auto& d : held_docs) EXPECT_EQ(train_set.count(d), 0u) << "held-out document also in train";
  stored.insert(train_docs.begin(), train_docs.end());
  stored.insert(held_docs.begin(), held_docs.end());
  EXPECT_EQ(stored, corpus_docs);
  // The rule in pipeline.h decides membership.
  for (const auto& d : held_docs) EXPECT_TRUE(is_heldout(document_split_hash(d, 5), 0.2));
  const double frac = static_cast<double>(held_docs.size()) / c.documents().size();
  EXPECT_GT(frac, 0.1);
  EXPECT_LT(frac, 0.3);

  // Second call: cache hit.
  TokenizeSummary again = tokenize(cfg, tok_cfg());
  EXPECT_TRUE(again.cache_hit);
  EXPECT_TRUE(again.tokenizer.cache_hit);
  EXPECT_EQ(again.heldout.tokens, s.heldout.tokens);

  // Same config in a fresh cache with one thread: byte-identical stores.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  TokenizeSummary one = tokenize(data_cfg(tmp, "cache2"), tok_cfg());
  omp_set_num_threads(threads);
  EXPECT_EQ(read_file(one.train_path), read_file(s.train_path));
  EXPECT_EQ(read_file(one.heldout_path), read_file(s.heldout_path));

  // Another split seed: another held-out set, same tokenizer.
  DataConfig other = cfg;
  other.split_seed = 6;
  TokenizeSummary o = tokenize(other, tok_cfg());
  EXPECT_TRUE(o.tokenizer.cache_hit);
  EXPECT_NE(o.store_dir, s.store_dir);
  auto other_held = decoded_docs(TokenStore::open(o.heldout_path), tok);
  EXPECT_NE(std::set<std::string>(other_held.begin(), other_held.end()),
            std::set<std::string>(held_docs.begin(), held_docs.end()));
}

TEST(Pipeline, OpenDatasetNamesTheMissingStep) {
  TempDir tmp;
  DataConfig cfg = data_cfg(tmp);
  // No corpus.
  DataConfig none = cfg;
  none.corpus = "corpus-quick";
  std::string m = message_of([&] { open_dataset(none, tok_cfg(), "my.yaml"); });
  EXPECT_NE(m.find("corpus not built: " + (tmp.path / "cache" / "corpus-quick").string()), std::string::npos) << m;
  EXPECT_NE(m.find("pagegram data corpus --quick"), std::string::npos) << m;
  // No tokenizer.
  const std::string key = tokenizer_paths(cfg, tok_cfg()).key;
  m = message_of([&] { open_dataset(cfg, tok_cfg(), "my.yaml"); });
  EXPECT_NE(m.find("tokenizer " + key + " not found"), std::string::npos) << m;
  EXPECT_NE(m.find("pagegram data tokenize --config my.yaml"), std::string::npos) << m;
  // Tokenizer but no token store.
  train_tokenizer(cfg, tok_cfg());
  m = message_of([&] { open_dataset(cfg, tok_cfg(), "my.yaml"); });
  EXPECT_NE(m.find("token store for tokenizer " + key + " not found"), std::string::npos) << m;
  EXPECT_NE(m.find("pagegram data tokenize --config my.yaml"), std::string::npos) << m;
}

TEST(Pipeline, OpenDatasetServesWindowsAndRefusesTampering) {
  TempDir tmp;
  DataConfig cfg = data_cfg(tmp);
  TokenizeSummary s = tokenize(cfg, tok_cfg());
  DataSet ds = open_dataset(cfg, tok_cfg(), "my.yaml");
  EXPECT_EQ(ds.train->n_tokens(), s.train.tokens);
  EXPECT_EQ(ds.heldout->n_tokens(), s.heldout.tokens);
  EXPECT_EQ(ds.tokenizer->vocab_size(), 1024);

  const int64_t T = 31;
  ValidationWindows v = ds.validation(T);
  EXPECT_EQ(v.count(), 1000 / 32);
  std::vector<int32_t> w(T + 1);
  v.window(v.count() - 1, w.data());
  EXPECT_LE(v.start(v.count() - 1) + T + 1, 1000u);
  for (int64_t t = 0; t <= T; ++t) EXPECT_EQ(static_cast<uint32_t>(w[t]), ds.heldout->id(v.start(v.count() - 1) + t));
  TestStream ts = ds.test_stream();
  EXPECT_EQ(ts.begin(), 1000u);
  EXPECT_EQ(ts.size(), s.heldout.tokens - 1000);

  WindowSampler sm = ds.sampler(T, 9);
  std::vector<int32_t> batch(4 * (T + 1));
  auto next_batch = [&] {
    for (int64_t b = 0; b < 4; ++b) sm.store().copy(sm.next_start(), T + 1, batch.data() + b * (T + 1));
  };
  next_batch();
  for (int32_t id : batch) EXPECT_LT(id, 1024);
  DataSet moved = std::move(ds);  // samplers point at the shared stores, not at the DataSet
  next_batch();

  // Validation larger than the held-out split is a config error.
  DataConfig big = cfg;
  big.val_tokens = static_cast<int64_t>(s.heldout.tokens) + 1;
  std::string m = message_of([&] { open_dataset(big, tok_cfg()); });
  EXPECT_NE(m.find("data.val_tokens"), std::string::npos) << m;

  // A flipped id byte in the train store: refused, naming the file and the payload checksum offset.
  std::string bytes = read_file(s.train_path);
  bytes[bytes.size() - 20] ^= 0x01;
  write_file(s.train_path, bytes);
  m = message_of([&] { open_dataset(cfg, tok_cfg(), "my.yaml"); });
  EXPECT_NE(m.find(s.train_path), std::string::npos) << m;
  EXPECT_NE(m.find("payload_hash at byte offset " + std::to_string(bytes.size() - 8)), std::string::npos) << m;
  EXPECT_NE(m.find("pagegram data tokenize --config my.yaml"), std::string::npos) << m;
  // tokenize notices the damage and rebuilds.
  TokenizeSummary re = tokenize(cfg, tok_cfg());
  EXPECT_FALSE(re.cache_hit);
  EXPECT_NO_THROW(open_dataset(cfg, tok_cfg()));
}

TEST(Pipeline, ACachedTokenizerOfAnotherSizeIsRefused) {
  TempDir tmp;
  DataConfig cfg = data_cfg(tmp);
  const TokenizeSummary s = tokenize(cfg, tok_cfg());
  TokenizerConfig small = tok_cfg();
  small.vocab_size = 1100;
  const TokenizeSummary o = tokenize(cfg, small);  // another key: another model in the cache
  ASSERT_NE(o.tokenizer.model, s.tokenizer.model);
  std::filesystem::copy_file(o.tokenizer.model, s.tokenizer.model, std::filesystem::copy_options::overwrite_existing);
  const std::string m = message_of([&] { open_dataset(cfg, tok_cfg(), "my.yaml"); });
  EXPECT_NE(m.find("has 1100 pieces, the config asks for tokenizer.vocab_size = 1024"), std::string::npos) << m;
  EXPECT_NE(m.find(s.tokenizer.model), std::string::npos) << m;
}

TEST(Pipeline, CacheAndCorpusDirectories) {
  DataConfig c;
  c.cache_dir = "/x/cache";
  EXPECT_EQ(cache_dir(c), "/x/cache");
  EXPECT_EQ(corpus_dir(c), "/x/cache/corpus");
  c.corpus = "corpus-quick";
  EXPECT_EQ(corpus_dir(c), "/x/cache/corpus-quick");
  c.corpus = "/data/my-corpus";
  EXPECT_EQ(corpus_dir(c), "/data/my-corpus");
  c.corpus = "relative/dir";
  EXPECT_THROW(c.validate("t.yaml"), ConfigError);
  TokenizerConfig t;
  t.byte_fallback = false;
  EXPECT_THROW(t.validate("t.yaml"), ConfigError);
  DataConfig e;
  ::setenv("PAGEGRAM_CACHE", "/env/cache", 1);
  EXPECT_EQ(cache_dir(e), "/env/cache");
  ::unsetenv("PAGEGRAM_CACHE");
  EXPECT_EQ(cache_dir(e), std::string(std::getenv("HOME")) + "/.cache/pagegram");
}

TEST(Pipeline, BuildCorpusRunsTheScriptAndReportsFailure) {
  TempDir tmp;
  // A stand-in source tree whose build script records its arguments and fails for --quick.
  const fs::path src = tmp.path / "src";
  fs::create_directories(src / "data" / "corpus");
  write_file((src / "data" / "corpus" / "build_corpus.sh").string(),
             "mkdir -p \"$2\" && echo \"$@\" > \"$2/args.txt\"\n[ \"${3:-}\" = --quick ] && exit 3\nexit 0\n");
  DataConfig cfg = data_cfg(tmp);
  build_corpus(cfg, false, src.string());
  EXPECT_EQ(read_file(cfg.cache_dir + "/args.txt"), "--cache " + cfg.cache_dir + "\n");
  std::string m = message_of([&] { build_corpus(cfg, true, src.string()); });
  EXPECT_NE(m.find("exit 3"), std::string::npos) << m;
  EXPECT_NE(m.find("pagegram data corpus --quick"), std::string::npos) << m;
  m = message_of([&] { build_corpus(cfg, false, (tmp.path / "nowhere").string()); });
  EXPECT_NE(m.find("build_corpus.sh"), std::string::npos) << m;
}

TEST(Pipeline, ConfigRoundTripsThroughYaml) {
  DataConfig d;
  d.heldout_fraction = 0.07;
  TokenizerConfig t;
  t.model_type = "bpe";
  EXPECT_TRUE(cfg::equal(cfg::from_yaml<DataConfig>(cfg::to_yaml(d), "x"), d));
  EXPECT_TRUE(cfg::equal(cfg::from_yaml<TokenizerConfig>(cfg::to_yaml(t), "x"), t));
  EXPECT_THROW(cfg::from_yaml<TokenizerConfig>(YAML::Load("model_type: word"), "x"), ConfigError);
  EXPECT_THROW(cfg::from_yaml<DataConfig>(YAML::Load("heldout_fraction: 1.5"), "x"), ConfigError);
}

// Staging temporaries of the data cache whose process is gone (a `data tokenize` killed while it
// trained a tokenizer or encoded a store) are removed the next time the pipeline runs: train_tokenizer, tokenize
// (a cache hit too) and open_dataset. A live process's temporaries stay, and so do names that carry no pid.
TEST(Pipeline, StaleStagingTemporariesOfDeadProcessesAreRemoved) {
  TempDir tmp;
  const DataConfig cfg = data_cfg(tmp);
  const TokenizeSummary s = tokenize(cfg, tok_cfg());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // reaped: its pid is no longer alive
  const fs::path tokenizers = tmp.path / "cache" / "tokenizers", stores = fs::path(s.store_dir).parent_path();
  const std::string dead = std::to_string(child), parent = std::to_string(::getppid()), me = std::to_string(::getpid());
  auto make = [&] {
    fs::create_directories(tokenizers / (s.tokenizer.key + ".tmp-" + dead + "-0"));
    write_file((tokenizers / (s.tokenizer.key + ".tmp-" + dead + "-0") / "spm.model").string(), "partial");
    const fs::path store = stores / (fs::path(s.store_dir).filename().string() + ".tmp-" + dead + "-3");
    fs::create_directories(store);
    write_file((store / ("train.pgtok.tmp-" + dead + "-4")).string(), "partial");
    write_file((stores / ("store.yaml.tmp." + dead)).string(), "partial");
    write_file((tmp.path / "cache" / "tokens" / ("x.tmp-" + dead + "-1")).string(), "partial");
  };
  const std::vector<fs::path> stale = {tokenizers / (s.tokenizer.key + ".tmp-" + dead + "-0"),
                                       stores / (fs::path(s.store_dir).filename().string() + ".tmp-" + dead + "-3"),
                                       stores / ("store.yaml.tmp." + dead),
                                       tmp.path / "cache" / "tokens" / ("x.tmp-" + dead + "-1")};
  const std::vector<fs::path> kept = {tokenizers / (s.tokenizer.key + ".tmp-" + parent + "-0"),  // a live process
                                      tokenizers / (s.tokenizer.key + ".tmp-" + me + "-1"),  // this one
                                      stores / ("notes.tmp"), stores / ("DONE.tmp-x-1"), stores / "a.tmp.12ab"};
  for (const fs::path& k : kept) write_file(k.string(), "keep");
  for (const auto& [what, run] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"open_dataset", [&] { open_dataset(cfg, tok_cfg()); }},
           {"tokenize", [&] { EXPECT_TRUE(tokenize(cfg, tok_cfg()).cache_hit); }},
           {"train_tokenizer", [&] { EXPECT_TRUE(train_tokenizer(cfg, tok_cfg()).cache_hit); }}}) {
    make();
    for (const fs::path& p : stale) ASSERT_TRUE(fs::exists(p)) << p;
    run();
    for (const fs::path& p : stale) EXPECT_FALSE(fs::exists(p)) << what << " left " << p;
    for (const fs::path& k : kept) EXPECT_TRUE(fs::exists(k)) << what << " removed " << k;
  }
  // the cache itself is untouched
  EXPECT_TRUE(fs::exists(s.train_path));
  EXPECT_TRUE(fs::exists(s.tokenizer.model));
  EXPECT_TRUE(remove_stale_staging(cfg).empty());
}

}  // namespace
}  // namespace pg::data
