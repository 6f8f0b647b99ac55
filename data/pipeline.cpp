// The data stages (data/pipeline.h): corpus build, cached tokenizer training, parallel tokenization into
// token stores, dataset opening with actionable errors.
#include "data/pipeline.h"

#include <tuple>

#include <omp.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "core/progress.h"
#include "core/text.h"
#include "core/timer.h"
#include "data/corpus_reader.h"
#include "data/hash.h"

extern char** environ;

namespace pg::data {
namespace fs = std::filesystem;
namespace {

// Bumped when the document encoding or split rule changes: old token stores then miss the cache.
constexpr const char* kEncodingVersion = "lines-joined-by-<0x0A>+eos;split-xxh64;v1";

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string corpus_hint(const DataConfig& cfg) {
  if (cfg.corpus == "corpus-quick") return "run `pagegram data corpus --quick`";
  if (cfg.corpus == "corpus") return "run `pagegram data corpus`";
  return "build it with data/corpus/build_corpus.sh, or point data.corpus at a built corpus";
}

std::string rebuild_command(const std::string& config_path) {
  return str("pagegram data tokenize --config ", config_path.empty() ? "<config.yaml>" : config_path);
}

// key=value lines of a config's fields, the canonical text behind cache keys.
struct KeyText {
  std::string s;
  template <class T, class C = cfg::NoCheck>
  void operator()(const char* key, T& field, const char*, const C& = C{}) {
    s += str(key, "=", YAML::Dump(cfg::encode(field)), "\n");
  }
};

TokenizerPaths paths_for(const DataConfig& cfg, const TokenizerConfig& tcfg, uint64_t manifest_hash) {
  TokenizerPaths p;
  p.key = tokenizer_key(tcfg, manifest_hash);
  p.dir = (fs::path(cache_dir(cfg)) / "tokenizers" / p.key).string();
  p.model = p.dir + "/spm.model";
  p.vocab = p.dir + "/spm.vocab";
  return p;
}

TokenizerPaths train_tokenizer_on(const DataConfig& cfg, const TokenizerConfig& tcfg, const Corpus& corpus) {
  Timer t;
  TokenizerPaths p = paths_for(cfg, tcfg, corpus.manifest_hash());
  if (path_exists(p.model)) {
    p.model_hash = hash_file(p.model);
    p.cache_hit = true;
    Note() << "[data] tokenizer " << p.key << ": cache hit (" << p.dir << ")\n";
    return p;
  }
  Note() << "[data] tokenizer " << p.key << ": training " << tcfg.model_type << " vocab " << tcfg.vocab_size << " on "
         << corpus.dir() << "\n";
  const std::string tmp = staging_path(p.dir);
  make_dirs(tmp);
  try {
    Timer ts;
    const TrainingSample sample = sample_training_lines(corpus, tcfg);
    Note() << "[data] tokenizer: sampled " << format_count(sample.lines.size()) << " of "
           << format_count(sample.eligible_lines) << " lines (" << fmt("%.1f", sample.bytes / 1e6) << " MB) in "
           << fmt("%.1f", ts.seconds()) << " s\n";
    Timer tt;
    train_sentencepiece(sample, tcfg, tmp + "/spm");
    std::ostringstream y;
    y << "# tokenizer " << p.key << ": written by `pagegram data tokenizer` / `data tokenize` (data/pipeline.cpp)\n"
      << "corpus_dir: " << corpus.dir() << "\nmanifest_hash: " << hex64(corpus.manifest_hash())
      << "\nsample_lines: " << sample.lines.size() << "\neligible_lines: " << sample.eligible_lines
      << "\nsample_bytes: " << sample.bytes << "\ntrain_seconds: " << fmt("%.1f", tt.seconds()) << "\nconfig:\n";
    std::istringstream lines(cfg::dump(tcfg));
    for (std::string line; std::getline(lines, line);) y << "  " << line << "\n";
    write_file(tmp + "/tokenizer.yaml", y.str());
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  if (!publish_dir(tmp, p.dir)) Note() << "[data] tokenizer " << p.key << ": another process built it first\n";
  p.model_hash = hash_file(p.model);
  Note() << "[data] tokenizer " << p.key << ": trained in " << fmt("%.1f", t.seconds()) << " s (" << p.dir << ")\n";
  return p;
}

// Throttled progress line on stderr: docs, MB, MB/s, ETA.
class EncodeProgress {
 public:
  EncodeProgress(std::string what, uint64_t docs, uint64_t bytes)
      : what_(std::move(what)), docs_(docs), bytes_(bytes) {}
  void update(uint64_t docs_done, uint64_t bytes_done, bool force = false) {
    const double s = t_.seconds();
    if (!force && s - last_ < 5.0) return;
    last_ = s;
    const double rate = bytes_done / std::max(s, 1e-9);
    const double eta = rate > 0 ? (bytes_ - bytes_done) / rate : 0.0;
    Note() << "[data] " << what_ << ": " << docs_done << "/" << docs_ << " docs, " << fmt("%.1f", bytes_done / 1e6)
           << "/" << fmt("%.1f", bytes_ / 1e6) << " MB, " << fmt("%.1f", rate / 1e6) << " MB/s, ETA "
           << fmt("%.0f", eta) << " s\n";
  }

 private:
  std::string what_;
  uint64_t docs_, bytes_;
  Timer t_;
  double last_ = 0.0;
};

struct SourceStats {
  uint64_t docs[2] = {}, bytes[2] = {}, tokens[2] = {};
};

// Encodes `order` (corpus document indices) into one store; returns its summary.
SplitSummary write_split(const Corpus& corpus, const Tokenizer& tok, const std::vector<uint32_t>& order,
                         const std::string& path, const TokenStoreInfo& info, const char* name,
                         std::vector<SourceStats>& sources) {
  const auto& docs = corpus.documents();
  const int s = info.split == Split::kHeldout ? 1 : 0;
  uint64_t total_bytes = 0;
  for (uint32_t d : order) total_bytes += docs[d].end - docs[d].begin;
  TokenStoreWriter w(path, info, order.size());
  EncodeProgress progress(str("tokenize ", name), order.size(), total_bytes);
  constexpr uint64_t kBatchBytes = uint64_t{32} << 20;
  std::vector<std::vector<uint32_t>> ids;
  std::vector<std::string> errs;
  uint64_t done_bytes = 0;
  SplitSummary sum;
  for (size_t b0 = 0; b0 < order.size();) {
    size_t b1 = b0;
    for (uint64_t bytes = 0; b1 < order.size() && (b1 == b0 || bytes < kBatchBytes) && b1 - b0 < 65536; ++b1)
      bytes += docs[order[b1]].end - docs[order[b1]].begin;
    const auto n = static_cast<int64_t>(b1 - b0);
    ids.resize(n);
    errs.assign(n, {});
    // Each document is encoded independently into its own slot: the output does not depend on scheduling.
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < n; ++i) {
      ids[i].clear();
      std::string err;
      if (!tok.encode_document(corpus.text(docs[order[b0 + i]]), ids[i], &err)) errs[i] = err.empty() ? "?" : err;
    }
    for (int64_t i = 0; i < n; ++i) {
      const CorpusDocument& d = docs[order[b0 + i]];
      if (!errs[i].empty())
        throw IoError(str("cannot tokenize a document of ", corpus.source_name(d.file), " (bytes ", d.begin, "..",
                          d.end, "): ", errs[i]));
      const uint64_t bytes = d.end - d.begin;
      w.add_document(ids[i], bytes);
      sum.docs += 1;
      sum.tokens += ids[i].size();
      sum.text_bytes += bytes;
      SourceStats& st = sources[d.file];
      st.docs[s] += 1;
      st.bytes[s] += bytes;
      st.tokens[s] += ids[i].size();
      done_bytes += bytes;
    }
    b0 = b1;
    progress.update(b0, done_bytes);
  }
  w.finish();
  return sum;
}

SplitSummary summary_of(const TokenStoreHeader& h) { return {h.n_docs, h.n_tokens, h.text_bytes}; }

void print_summary(const TokenizeSummary& s) {
  auto line = [](const char* name, const SplitSummary& x) {
    Note() << "[data]   " << name << ": " << format_count(x.tokens) << " tokens (" << x.tokens << "), " << x.docs
           << " docs, " << fmt("%.1f", x.text_bytes / 1e6) << " MB, " << fmt("%.3f", x.bytes_per_token())
           << " bytes/token\n";
  };
  Note() << "[data] token store " << s.store_dir << (s.cache_hit ? " (cache hit)" : "") << "\n";
  line("train  ", s.train);
  line("heldout", s.heldout);
}

}  // namespace

std::string cache_dir(const DataConfig& cfg) {
  const char* home = std::getenv("HOME");
  if (!cfg.cache_dir.empty()) {
    if (cfg.cache_dir.rfind("~/", 0) == 0 && home) return std::string(home) + cfg.cache_dir.substr(1);
    return cfg.cache_dir;
  }
  if (const char* env = std::getenv("PAGEGRAM_CACHE"); env && *env) return env;
  if (!home || !*home)
    throw ConfigError(
        "data.cache_dir is empty and neither $PAGEGRAM_CACHE nor $HOME is set (hint: set data.cache_dir)");
  return std::string(home) + "/.cache/pagegram";
}

std::string corpus_dir(const DataConfig& cfg) {
  if (cfg.corpus == "corpus" || cfg.corpus == "corpus-quick") return (fs::path(cache_dir(cfg)) / cfg.corpus).string();
  return cfg.corpus;
}

void build_corpus(const DataConfig& cfg, bool quick, const std::string& source_dir) {
  Timer t;
  const std::string script = (fs::path(source_dir) / "data" / "corpus" / "build_corpus.sh").string();
  if (!path_exists(script))
    throw IoError(str("corpus build script not found: ", script, " (hint: pass the pagegram source directory)"));
  const std::string cache = cache_dir(cfg);
  std::vector<std::string> args = {"bash", script, "--cache", cache};
  if (quick) args.push_back("--quick");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  {
    Note n;
    n << "[data] corpus: running";
    for (const auto& a : args) n << " " << a;
  }
  pid_t pid;
  if (int rc = posix_spawnp(&pid, "bash", nullptr, nullptr, argv.data(), environ); rc != 0)
    throw IoError(str("cannot start bash for ", script, ": ", std::strerror(rc)));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw IoError(str("waiting for ", script, ": ", std::strerror(errno)));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw IoError(str("corpus build failed (", WIFEXITED(status) ? str("exit ", WEXITSTATUS(status)) : "killed",
                      "): ", script, " (hint: see its messages above; rerun `pagegram data corpus",
                      quick ? " --quick" : "", "` to resume)"));
  const std::string dir = (fs::path(cache) / (quick ? "corpus-quick" : "corpus")).string();
  Note() << "[data] corpus: " << dir << " ready in " << fmt("%.1f", t.seconds()) << " s\n";
  if (cfg.corpus != (quick ? "corpus-quick" : "corpus"))
    Note() << "[data] note: data.corpus is '" << cfg.corpus << "', not this corpus\n";
}

std::vector<std::string> remove_stale_staging(const DataConfig& cfg) {
  const fs::path root = cache_dir(cfg);
  std::vector<fs::path> dirs = {root / "tokenizers", root / "tokens"};
  std::error_code ec;
  for (fs::directory_iterator it(root / "tokens", ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code d;
    if (it->is_directory(d)) dirs.push_back(it->path());  // <cache>/tokens/<tkey>: the stores' staging folders
  }
  std::vector<std::string> removed;
  for (const fs::path& d : dirs)
    for (std::string& p : remove_stale_temporaries(d.string())) {
      Note() << "[data] removed " << p << " (left by a process that no longer runs)\n";
      removed.push_back(std::move(p));
    }
  return removed;
}

std::string tokenizer_key(const TokenizerConfig& tcfg, uint64_t manifest_hash) {
  KeyText k;
  const_cast<TokenizerConfig&>(tcfg).visit(k);
  return hex64(xxh64(std::string(str("pagegram-tokenizer-v1\n", k.s, "manifest_hash=", hex64(manifest_hash), "\n"))));
}

std::string split_key(const DataConfig& cfg) {
  return hex64(xxh64(std::string(str("pagegram-split-v1\nsplit_seed=", cfg.split_seed, "\nheldout_fraction=",
                                     fmt("%.17g", cfg.heldout_fraction), "\nencoding=", kEncodingVersion, "\n"))));
}

TokenizerPaths tokenizer_paths(const DataConfig& cfg, const TokenizerConfig& tcfg) {
  const std::string manifest = read_corpus_manifest(corpus_dir(cfg), corpus_hint(cfg));
  TokenizerPaths p = paths_for(cfg, tcfg, xxh64(manifest));
  if (path_exists(p.model)) {
    p.model_hash = hash_file(p.model);
    p.cache_hit = true;
  }
  return p;
}

TokenizerPaths train_tokenizer(const DataConfig& cfg, const TokenizerConfig& tcfg) {
  cfg.validate("data config");
  tcfg.validate("tokenizer config");
  remove_stale_staging(cfg);
  const Corpus corpus = Corpus::open(corpus_dir(cfg), corpus_hint(cfg));
  return train_tokenizer_on(cfg, tcfg, corpus);
}

uint64_t document_split_hash(std::string_view text, uint64_t split_seed) { return xxh64(text, split_seed); }

TokenizeSummary tokenize(const DataConfig& cfg, const TokenizerConfig& tcfg, const std::string& config_path) {
  cfg.validate("data config");
  tcfg.validate("tokenizer config");
  Timer t;
  TokenizeSummary sum;
  remove_stale_staging(cfg);
  const Corpus corpus = Corpus::open(corpus_dir(cfg), corpus_hint(cfg));
  sum.tokenizer = train_tokenizer_on(cfg, tcfg, corpus);
  const TokenizerPaths& tp = sum.tokenizer;
  sum.store_dir = (fs::path(cache_dir(cfg)) / "tokens" / tp.key / split_key(cfg)).string();
  sum.train_path = sum.store_dir + "/train.pgtok";
  sum.heldout_path = sum.store_dir + "/heldout.pgtok";

  TokenStoreOpenOptions opt;
  opt.tokenizer_hash = tp.model_hash;
  opt.rebuild_command = rebuild_command(config_path);
  if (path_exists(sum.store_dir)) {
    try {
      const TokenStore tr = TokenStore::open(sum.train_path, opt);
      const TokenStore he = TokenStore::open(sum.heldout_path, opt);
      sum.train = summary_of(tr.header());
      sum.heldout = summary_of(he.header());
      sum.cache_hit = true;
      sum.seconds = t.seconds();
      print_summary(sum);
      Note() << "[data] tokenize: cache hit, checked in " << fmt("%.1f", sum.seconds) << " s\n";
      return sum;
    } catch (const IoError& e) {
      Note() << "[data] tokenize: cached store unusable, rebuilding: " << e.what() << "\n";
      remove_tree(sum.store_dir);
    }
  }

  const Tokenizer tok(tp.model);
  const auto& docs = corpus.documents();
  const auto n = static_cast<int64_t>(docs.size());
  std::vector<uint64_t> h(docs.size());
#pragma omp parallel for schedule(dynamic, 256)
  for (int64_t i = 0; i < n; ++i)
    h[i] = document_split_hash(corpus.text(docs[i]), static_cast<uint64_t>(cfg.split_seed));
  std::vector<uint32_t> order[2];
  for (int64_t i = 0; i < n; ++i)
    order[is_heldout(h[i], cfg.heldout_fraction) ? 1 : 0].push_back(static_cast<uint32_t>(i));
  for (auto& o : order)
    std::sort(o.begin(), o.end(), [&](uint32_t a, uint32_t b) { return h[a] != h[b] ? h[a] < h[b] : a < b; });
  Note() << "[data] tokenize: " << docs.size() << " documents (" << fmt("%.1f", corpus.total_bytes() / 1e6)
         << " MB) -> train " << order[0].size() << ", heldout " << order[1].size() << " (fraction "
         << cfg.heldout_fraction << ", split_seed " << cfg.split_seed << "), " << omp_get_max_threads() << " threads\n";

  TokenStoreInfo info;
  info.vocab_size = static_cast<uint64_t>(tok.vocab_size());
  info.tokenizer_hash = tok.model_hash();
  info.manifest_hash = corpus.manifest_hash();
  info.split_seed = static_cast<uint64_t>(cfg.split_seed);
  info.heldout_fraction = cfg.heldout_fraction;
  info.eos_id = tok.eos_id();
  info.newline_id = tok.newline_id();

  const std::string tmp = staging_path(sum.store_dir);
  make_dirs(tmp);
  std::vector<SourceStats> sources(corpus.file_count());
  double encode_seconds = 0.0;
  try {
    Timer te;
    info.split = Split::kHeldout;
    sum.heldout = write_split(corpus, tok, order[1], tmp + "/heldout.pgtok", info, "heldout", sources);
    info.split = Split::kTrain;
    sum.train = write_split(corpus, tok, order[0], tmp + "/train.pgtok", info, "train", sources);
    encode_seconds = te.seconds();
    std::ostringstream tsv;
    tsv << "source\ttrain_docs\ttrain_bytes\ttrain_tokens\theldout_docs\theldout_bytes\theldout_tokens\n";
    for (size_t f = 0; f < sources.size(); ++f) {
      const SourceStats& st = sources[f];
      tsv << corpus.source_name(f) << "\t" << st.docs[0] << "\t" << st.bytes[0] << "\t" << st.tokens[0] << "\t"
          << st.docs[1] << "\t" << st.bytes[1] << "\t" << st.tokens[1] << "\n";
    }
    write_file(tmp + "/sources.tsv", tsv.str());
    std::ostringstream y;
    y << "# token store: written by `pagegram data tokenize` (data/pipeline.cpp); format in data/FORMATS.md\n"
      << "tokenizer_key: " << tp.key << "\ntokenizer_model: " << tp.model
      << "\ntokenizer_hash: " << hex64(tok.model_hash()) << "\ncorpus_dir: " << corpus.dir()
      << "\nmanifest_hash: " << hex64(corpus.manifest_hash()) << "\nsplit_seed: " << cfg.split_seed
      << "\nheldout_fraction: " << fmt("%.17g", cfg.heldout_fraction) << "\nencoding: " << kEncodingVersion
      << "\ntrain: {docs: " << sum.train.docs << ", tokens: " << sum.train.tokens << ", bytes: " << sum.train.text_bytes
      << "}\nheldout: {docs: " << sum.heldout.docs << ", tokens: " << sum.heldout.tokens
      << ", bytes: " << sum.heldout.text_bytes << "}\nencode_seconds: " << fmt("%.1f", encode_seconds)
      << "\nthreads: " << omp_get_max_threads() << "\n";
    write_file(tmp + "/store.yaml", y.str());
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  // The corpus is mapped, not copied: a rebuild that replaces its files (rename) leaves this run consistent
  // with the manifest it started from, but the result then belongs to an outdated corpus. Say so.
  if (std::string now = read_corpus_manifest(corpus.dir(), corpus_hint(cfg));
      corpus_identity(now) != corpus.manifest_hash())
    Note() << "[data] warning: " << corpus.dir() << " was rebuilt while tokenizing; this store belongs to the "
           << "previous corpus (rerun `" << rebuild_command(config_path) << "`)\n";
  if (!publish_dir(tmp, sum.store_dir)) Note() << "[data] tokenize: another process built the store first\n";
  sum.seconds = t.seconds();
  print_summary(sum);
  const double mb = (sum.train.text_bytes + sum.heldout.text_bytes) / 1e6;
  Note() << "[data] tokenize: encoded " << fmt("%.1f", mb) << " MB in " << fmt("%.1f", encode_seconds) << " s ("
         << fmt("%.1f", mb / std::max(encode_seconds, 1e-9)) << " MB/s); stage done in " << fmt("%.1f", sum.seconds)
         << " s\n";
  return sum;
}

DataSet open_dataset(const DataConfig& cfg, const TokenizerConfig& tcfg, const std::string& config_path) {
  cfg.validate("data config");
  tcfg.validate("tokenizer config");
  Timer t;
  DataSet ds;
  remove_stale_staging(cfg);
  const std::string cmd = rebuild_command(config_path);
  ds.tokenizer_paths = tokenizer_paths(cfg, tcfg);
  const TokenizerPaths& tp = ds.tokenizer_paths;
  if (!tp.cache_hit) throw IoError(str("tokenizer ", tp.key, " not found: ", tp.model, " (hint: run `", cmd, "`)"));
  ds.tokenizer = std::make_shared<const Tokenizer>(tp.model);
  if (ds.tokenizer->vocab_size() != tcfg.vocab_size)
    throw IoError(str("tokenizer ", tp.model, ": has ", ds.tokenizer->vocab_size(), " pieces, the config asks for ",
                      "tokenizer.vocab_size = ", tcfg.vocab_size, " (hint: the cached model was replaced; remove ",
                      tp.dir, " and run `", cmd, "`)"));
  ds.store_dir = (fs::path(cache_dir(cfg)) / "tokens" / tp.key / split_key(cfg)).string();
  if (!path_exists(ds.store_dir + "/train.pgtok") || !path_exists(ds.store_dir + "/heldout.pgtok"))
    throw IoError(str("token store for tokenizer ", tp.key, " not found: ", ds.store_dir, " (hint: run `", cmd, "`)"));
  TokenStoreOpenOptions opt;
  opt.tokenizer_hash = ds.tokenizer->model_hash();
  opt.vocab_size = static_cast<uint64_t>(ds.tokenizer->vocab_size());
  opt.rebuild_command = cmd;
  ds.train = std::make_shared<const TokenStore>(TokenStore::open(ds.store_dir + "/train.pgtok", opt));
  ds.heldout = std::make_shared<const TokenStore>(TokenStore::open(ds.store_dir + "/heldout.pgtok", opt));
  for (const auto& [store, want, name] :
       {std::tuple{ds.train.get(), Split::kTrain, "train"}, std::tuple{ds.heldout.get(), Split::kHeldout, "heldout"}})
    if (store->header().info.split != want)
      throw IoError(str("token store ", store->path(), ": header field 'split' at byte offset 72 is ",
                        static_cast<uint32_t>(store->header().info.split), ", not ", static_cast<uint32_t>(want), " (",
                        name, ") (hint: a split file was copied over another; rebuild with `", cmd, "`)"));
  ds.val_tokens = cfg.val_tokens;
  if (ds.heldout->n_tokens() < static_cast<uint64_t>(cfg.val_tokens))
    throw ConfigError(str("data.val_tokens = ", cfg.val_tokens, " exceeds the ", ds.heldout->n_tokens(),
                          " held-out tokens of ", ds.heldout->path(),
                          " (hint: lower data.val_tokens or raise data.heldout_fraction and re-tokenize)"));
  Note() << "[data] dataset: train " << format_count(ds.train->n_tokens()) << " tokens, heldout "
         << format_count(ds.heldout->n_tokens()) << " (val " << format_count(ds.val_tokens) << ", test "
         << format_count(ds.heldout->n_tokens() - ds.val_tokens) << "), vocab " << ds.tokenizer->vocab_size()
         << ", opened in " << fmt("%.2f", t.seconds()) << " s\n";
  return ds;
}

namespace {
std::string fingerprint_of(const TokenStoreHeader& tr, const TokenStoreHeader& he) {
  return str("train ", tr.n_tokens, " tokens ", tr.n_docs, " docs; heldout ", he.n_tokens, " tokens ", he.n_docs,
             " docs; vocab ", tr.info.vocab_size, "; tokenizer ", hex64(tr.info.tokenizer_hash), "; manifest ",
             hex64(tr.info.manifest_hash), "; split_seed ", tr.info.split_seed);
}
}  // namespace

std::string dataset_fingerprint(const DataSet& ds) {
  PG_CHECK(ds.train && ds.heldout, "dataset_fingerprint: the dataset is not open");
  return fingerprint_of(ds.train->header(), ds.heldout->header());
}

std::string dataset_fingerprint(const DataConfig& cfg, const TokenizerConfig& tcfg) {
  const TokenizerPaths tp = tokenizer_paths(cfg, tcfg);
  if (!tp.cache_hit) return "";
  const std::string dir = (fs::path(cache_dir(cfg)) / "tokens" / tp.key / split_key(cfg)).string();
  if (!path_exists(dir + "/train.pgtok") || !path_exists(dir + "/heldout.pgtok")) return "";
  return fingerprint_of(TokenStore::read_header(dir + "/train.pgtok"), TokenStore::read_header(dir + "/heldout.pgtok"));
}

}  // namespace pg::data
