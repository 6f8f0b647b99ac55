// Generation (infer/engine.h) with the memory table in RAM, mmap'd and read with O_DIRECT: decoding equals
// recomputation, every source gives the same tokens for the same table contents, the reads per token equal the
// flash simulator's on the same stream (no cache and an LRU cache), corrupt blocks are refused, sessions carry their
// n-gram history (fork, reset, boundary), caches restart past the context, sampling is seeded, and the serve
// protocol answers every request.
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <thread>

#include "data/pipeline.h"
#include "infer/engine.h"
#include "infer/model_folder.h"
#include "infer/serve.h"
#include "infer/table_export.h"
#include "memory/ngram.h"
#include "storage/eval_stream.h"
#include "storage/export.h"
#include "storage/flash_sim.h"
#include "storage/nf4.h"
#include "tests/test_util.h"
#include "train/trainer.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::make_temp_dir("engine");
    // pagegram_late injects before block 1 only: its table reads overlap block 0.
    for (const std::string name : {"pagegram", "engram", "pagegram_late"}) {
      const std::string layout = name == "engram" ? "engram" : "pagegram";
      ExperimentConfig c = load_experiment(
          testing::kTinyConfig,
          testing::with_sets(testing::tiny_fixture_sets(dir_),
                             {"train.steps=6", "train.eval_interval=0", "train.eval_windows=8",
                              "train.checkpoint_interval=0", std::string("memory.layout=") + layout,
                              name == "pagegram_late" ? "memory.inject_layers=[1]" : "memory.inject_layers=[0, 1]",
                              "memory.target_params=200000", "train.out_dir=" + (dir_ / name).string()}));
      data::tokenize(c.data, c.tokenizer);
      data::DataSet ds = data::open_dataset(c.data, c.tokenizer);
      TrainOptions opt;
      opt.progress = false;
      train(c, ds, opt);
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string ckpt(const std::string& layout) { return (dir_ / layout / "checkpoint.h5").string(); }
  // The checkpoint's table exported as NF4 (the file every disk source reads).
  static std::string table(const std::string& layout, TableQuantization q = TableQuantization::kNf4) {
    const std::string p = (dir_ / (layout + "." + quantization_name(q) + ".pgt")).string();
    if (!fs::exists(p)) {
      TrainedModel tm = load_trained_model(ckpt(layout), {.open_data = false, .table_ready = true});
      TableWriteOptions o;
      o.quantization = q;
      export_table_file(p, tm.mem()->table().layout(), tm.mem()->table().values().data(), "zero", 0, o);
    }
    return p;
  }
  static std::unique_ptr<Engine> engine(const std::string& layout, const std::string& mode = "", int64_t cache = 0,
                                        bool overlap = true) {
    EngineOptions o;
    o.checkpoint = ckpt(layout);
    o.progress = false;
    o.max_batch = 16;
    o.overlap = overlap;
    if (!mode.empty()) {
      o.table = table(layout);
      o.table_mode = mode;
      o.cache_bytes = cache;
    }
    return open_engine(o);
  }
  static std::vector<int32_t> prompt(int64_t n, uint32_t seed) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    uint32_t x = seed;
    for (auto& t : p) t = static_cast<int32_t>((x = x * 1664525u + 1013904223u) >> 22);  // < 1024
    return p;
  }
  static inline fs::path dir_;
};

// Sets PAGEGRAM_DIRECT_IO (the direct source's read path) for its scope, then restores what was there.
struct EnvIo {
  explicit EnvIo(const char* v) {
    if (const char* o = std::getenv("PAGEGRAM_DIRECT_IO")) old = o, had = true;
    setenv("PAGEGRAM_DIRECT_IO", v, 1);
  }
  ~EnvIo() { had ? setenv("PAGEGRAM_DIRECT_IO", old.c_str(), 1) : unsetenv("PAGEGRAM_DIRECT_IO"); }
  std::string old;
  bool had = false;
};

// Greedy decoding for n steps; returns the tokens and the logits of every step.
std::vector<int32_t> greedy(Engine& e, const std::vector<int32_t>& p, int64_t n,
                            std::vector<std::vector<float>>* logits = nullptr) {
  const int64_t s = e.open({0.0, 0, 0});
  e.feed(s, p);
  std::vector<int32_t> out;
  const int64_t ids[1] = {s};
  for (int64_t i = 0; i < n; ++i) {
    if (logits) logits->emplace_back(e.logits(s).begin(), e.logits(s).end());
    out.push_back(e.step(ids)[0]);
  }
  e.close(s);
  return out;
}

TEST_F(EngineTest, DecodingEqualsRecomputingTheSequenceWithTheMemory) {
  for (const char* layout : {"pagegram", "engram"}) {
    std::unique_ptr<Engine> e = engine(layout);
    const std::vector<int32_t> p = prompt(6, 3);
    std::vector<std::vector<float>> inc;
    const std::vector<int32_t> gen = greedy(*e, p, 10, &inc);
    // Recompute: a fresh session fed prompt + the first i generated tokens in one prefill.
    for (size_t i = 0; i < gen.size(); ++i) {
      std::vector<int32_t> seq = p;
      seq.insert(seq.end(), gen.begin(), gen.begin() + static_cast<std::ptrdiff_t>(i));
      const int64_t s = e->open({});
      e->feed(s, seq);
      const std::span<const float> ref = e->logits(s);
      double worst = 0;
      for (size_t v = 0; v < ref.size(); ++v) worst = std::max(worst, std::abs(double(ref[v]) - inc[i][v]));
      EXPECT_EQ(worst, 0.0) << layout << ", step " << i;
      e->close(s);
    }
  }
}

TEST_F(EngineTest, EverySourceGivesTheSameTokensForTheSameTableAndAnyThreadCount) {
  const std::vector<int32_t> p = prompt(9, 5);
  std::vector<int32_t> ref;
  for (const std::string mode : {"mmap", "mmap-warm", "direct"}) {
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      std::unique_ptr<Engine> e = engine("pagegram", mode, mode == "direct" ? 1 << 20 : 0);
      const std::vector<int32_t> got = greedy(*e, p, 12);
      if (ref.empty()) ref = got;
      EXPECT_EQ(got, ref) << mode << ", " << threads << " threads";
    }
  }
  omp_set_num_threads(2);
  // The fp32 table gives the logits of the NF4 file up to the quantization error, not bit for bit.
  std::unique_ptr<Engine> ram = engine("pagegram"), file = engine("pagegram", "mmap");
  EXPECT_GT(ram->fp32_table_rows(), 0);
  EXPECT_EQ(file->fp32_table_rows(), 0);
  std::vector<std::vector<float>> a, b;
  greedy(*ram, p, 1, &a);
  greedy(*file, p, 1, &b);
  double diff = 0;
  for (size_t v = 0; v < a[0].size(); ++v) diff = std::max(diff, std::abs(double(a[0][v]) - b[0][v]));
  EXPECT_GT(diff, 0.0);
  EXPECT_LT(diff, 0.5);
}

TEST_F(EngineTest, AnMxfp8TableServesLikeNf4FromEverySource) {
  const std::vector<int32_t> p = prompt(7, 21);
  std::vector<std::vector<int32_t>> got;
  std::vector<std::vector<float>> first;
  for (const std::string mode : {"mmap", "direct"}) {
    EngineOptions o;
    o.checkpoint = ckpt("engram");
    o.table = table("engram", TableQuantization::kMxfp8);
    o.table_mode = mode;
    o.progress = false;
    std::unique_ptr<Engine> e = open_engine(o);
    EXPECT_NE(e->source()->describe().find("mxfp8"), std::string::npos);
    EXPECT_EQ(e->fp32_table_rows(), 0);  // served from the file: the checkpoint's fp32 table was never loaded
    std::vector<std::vector<float>> l;
    got.push_back(greedy(*e, p, 8, &l));
    first.push_back(l[0]);
  }
  EXPECT_EQ(got[0], got[1]);
  EXPECT_EQ(0, std::memcmp(first[0].data(), first[1].data(), first[0].size() * sizeof(float)));
  std::unique_ptr<Engine> nf4 = engine("engram", "mmap");
  std::vector<std::vector<float>> l;
  greedy(*nf4, p, 1, &l);
  double diff = 0;
  for (size_t v = 0; v < l[0].size(); ++v) diff = std::max(diff, std::abs(double(l[0][v]) - first[0][v]));
  EXPECT_GT(diff, 0.0);  // another quantization: other values
}

// `export` streams a checkpoint's table slab by slab and never holds it whole (a table trained sharded over ranks need
// not fit one process): the file is byte for byte the one written from the whole table loaded and materialized,
// with the table's weight decay on, so every row's replayed decay is part of what is compared.
TEST_F(EngineTest, ExportStreamsTheCheckpointsTableIntoTheFileOfTheWholeTable) {
  ExperimentConfig c = load_experiment(
      testing::kTinyConfig,
      testing::with_sets(testing::tiny_fixture_sets(dir_),
                         {"train.steps=5", "train.eval_interval=0", "train.eval_windows=8", "memory.layout=pagegram",
                          "memory.weight_decay=0.05", "memory.lr_mult=50", "memory.target_params=200000",
                          "train.out_dir=" + (dir_ / "decayed").string()}));
  data::DataSet ds = data::open_dataset(c.data, c.tokenizer);
  TrainOptions topt;
  topt.progress = false;
  train(c, ds, topt);
  const std::string ck = (dir_ / "decayed" / "checkpoint.h5").string();
  TrainedModel held = load_trained_model(ck, {.table_ready = true});
  TrainedModel saved = load_trained_model(ck, {.table_ready = false});
  const std::span<const float> v = held.mem()->table().values();
  int64_t decayed = 0;
  for (size_t i = 0; i < v.size(); ++i) decayed += v[i] != saved.mem()->table().values()[i];
  ASSERT_GT(decayed, 0) << "no row's decay was replayed: the comparison would not test the catch-up";
  TableWriteOptions o;
  o.info = {{"source", ck},
            {"table_xxh64", table_fingerprint(held.mem()->table())},
            {"step", std::to_string(held.state().step)},
            {"tokens", std::to_string(held.state().tokens)}};
  const std::string whole = (dir_ / "decayed.whole.pgt").string(), streamed = (dir_ / "decayed.streamed.pgt").string();
  export_table_file(whole, held.mem()->table().layout(), v.data(), "zero", 0, o);
  TableExportOptions eo;
  eo.checkpoint = ck;
  export_table(eo, streamed);
  EXPECT_EQ(read_file(streamed), read_file(whole));
  // The session export holds has no rows of the table.
  TrainedModel empty = load_trained_model(ck, {.table_rows = false});
  EXPECT_EQ(empty.mem()->table().values().size(), 0u);
  EXPECT_EQ(empty.mem()->table().layout().rows(), held.mem()->table().layout().rows());
}

// `export --synthetic-params`: the trained rows spread over a table 40x larger serve the same logits bit for bit
// (the same NF4 rows), from mmap and O_DIRECT, while the reads land in the large file.
TEST_F(EngineTest, ASyntheticLargeFileServesTheTrainedRows) {
  const std::vector<int32_t> p = prompt(9, 11);
  for (const std::string layout : {"pagegram", "engram"}) {
    const std::string big = (dir_ / (layout + ".synthetic.pgt")).string();
    TableExportOptions eo;
    eo.checkpoint = ckpt(layout);
    eo.synthetic_params = 8e6;
    const TableExportResult r = export_table(eo, big);
    EXPECT_GE(r.header.params, 7900000u) << layout;
    EXPECT_NE(TableFileReader::read_header(big).identity_value("info.synthetic_params"), "") << layout;
    std::vector<std::vector<float>> ref_logits;
    const std::vector<int32_t> ref = greedy(*engine(layout, "mmap"), p, 6, &ref_logits);
    for (const std::string mode : {"mmap", "direct"}) {
      EngineOptions o;
      o.checkpoint = ckpt(layout);
      o.table = big;
      o.table_mode = mode;
      o.progress = false;
      std::unique_ptr<Engine> e = open_engine(o);
      EXPECT_NE(e->source()->describe().find("synthetic"), std::string::npos) << e->source()->describe();
      std::vector<std::vector<float>> l;
      EXPECT_EQ(greedy(*e, p, 6, &l), ref) << layout << " " << mode;
      EXPECT_EQ(l, ref_logits) << layout << " " << mode;
      EXPECT_GT(e->source()->stats().device_reads, 0);
    }
  }
  // A table smaller than the trained one cannot hold it.
  TableExportOptions small;
  small.checkpoint = ckpt("engram");
  small.synthetic_params = 50000;
  EXPECT_THROW(export_table(small, (dir_ / "small.pgt").string()), UserError);
}

TEST_F(EngineTest, ReadsPerTokenEqualTheFlashSimulatorOnTheSameStream) {
  const std::vector<int32_t> p = prompt(12, 7);  // 12 + 15 positions: within the context (no cache restart)
  for (const int64_t cache_blocks : {int64_t{0}, int64_t{48}}) {
    std::unique_ptr<Engine> e = engine("pagegram", "direct", cache_blocks * 4096);
    const int64_t s = e->open({0.0, 0, 0});
    for (int32_t t : p) e->feed(s, std::span<const int32_t>(&t, 1));  // one position per fetch
    const int64_t ids[1] = {s};
    std::vector<int32_t> all = p;
    for (int i = 0; i < 15; ++i) all.push_back(e->step(ids)[0]);
    // The simulator on the same tokens: distinct blocks per position, through an exact LRU of the same size.
    TrainedModel tm = load_trained_model(ckpt("pagegram"), {});
    const MemoryLayout& L = tm.mem()->table().layout();
    std::vector<uint32_t> ids32(all.begin(), all.end());
    const EvalStream st = stream_from_ids(ids32, {0});
    std::vector<uint32_t> blocks;
    stream_blocks(L, st, 0, st.size(), blocks);
    FlashCacheSimulator sim(L.num_blocks(), cache_blocks);
    const int64_t misses = sim.access(blocks);
    const TableReadStats& r = e->source()->stats();
    EXPECT_EQ(r.positions, static_cast<int64_t>(all.size()));
    EXPECT_EQ(r.block_accesses, static_cast<int64_t>(blocks.size())) << "cache " << cache_blocks;
    EXPECT_EQ(r.device_reads, misses) << "cache " << cache_blocks;
    if (cache_blocks > 0) {
      EXPECT_LT(misses, static_cast<int64_t>(blocks.size()));
    }
  }
}

// Where io_uring is refused (a container's seccomp profile, a sysctl, an emulator), the direct source reads the
// same blocks by blocking pread: the same tokens and logits as mmap, the same device reads as the simulator counts
// with io_uring (a corrupt block: ACorruptBlockIsAnErrorNamingItNeverGarbage). PAGEGRAM_DIRECT_IO picks the path.
TEST_F(EngineTest, ThePreadFallbackReadsWhatIoUringReads) {
  const std::vector<int32_t> p = prompt(10, 17);
  std::vector<std::vector<float>> lm;
  const std::vector<int32_t> ref = greedy(*engine("pagegram", "mmap"), p, 8, &lm);
  int64_t reads_auto = -1;
  {
    const EnvIo io_auto("auto");
    std::unique_ptr<Engine> e = engine("pagegram", "direct", 0);
    EXPECT_EQ(greedy(*e, p, 8), ref);
    reads_auto = e->source()->stats().device_reads;
  }
  const EnvIo io("pread");
  std::unique_ptr<Engine> e = engine("pagegram", "direct", 0);
  EXPECT_NE(e->source()->describe().find("pread, one read at a time (PAGEGRAM_DIRECT_IO=pread)"), std::string::npos)
      << e->source()->describe();
  std::vector<std::vector<float>> lp;
  EXPECT_EQ(greedy(*e, p, 8, &lp), ref);
  EXPECT_EQ(lp, lm);
  EXPECT_EQ(e->source()->stats().device_reads, reads_auto);
  EXPECT_GT(reads_auto, 0);
  // An unknown value is a clear error.
  const EnvIo wrong("uringg");
  try {
    engine("pagegram", "direct", 0);
    ADD_FAILURE() << "PAGEGRAM_DIRECT_IO=uringg accepted";
  } catch (const UserError& err) {
    EXPECT_NE(std::string(err.what()).find("auto, uring or pread"), std::string::npos) << err.what();
  }
}

TEST_F(EngineTest, ReadsOverlappingTheEarlierBlocksGiveTheBitsOfReadingFirst) {
  for (const std::string name : {"pagegram_late", "pagegram", "engram"})
    for (const std::string mode : {"", "direct"}) {
      std::unique_ptr<Engine> a = engine(name, mode, 0, /*overlap=*/true), b = engine(name, mode, 0, /*overlap=*/false);
      EXPECT_TRUE(a->overlaps());
      EXPECT_FALSE(b->overlaps());
      std::vector<std::vector<float>> la, lb;
      const std::vector<int32_t> p = prompt(7, 13);
      EXPECT_EQ(greedy(*a, p, 9, &la), greedy(*b, p, 9, &lb)) << name << " " << mode;
      EXPECT_EQ(la, lb) << name << " " << mode;
      // Several sessions decoded as one batch, sampled.
      std::vector<int64_t> ia, ib;
      for (uint32_t k = 0; k < 5; ++k) {
        ia.push_back(a->open({0.9, 20, k}));
        ib.push_back(b->open({0.9, 20, k}));
        a->feed(ia.back(), prompt(3 + k, 40 + k));
        b->feed(ib.back(), prompt(3 + k, 40 + k));
      }
      for (int i = 0; i < 6; ++i) EXPECT_EQ(a->step(ia), b->step(ib)) << name << " " << mode << ", step " << i;
      for (size_t k = 0; k < ia.size(); ++k) {
        const std::span<const float> x = a->logits(ia[k]), y = b->logits(ib[k]);
        EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << name << " " << mode << ", session " << k;
      }
      EXPECT_GT(a->stats().memory_seconds, 0.0);
    }
}

// A source that fails on demand (a corrupt block, a device error) in front of the checkpoint's fp32 table.
class FailingSource : public TableSource {
 public:
  explicit FailingSource(std::unique_ptr<TableSource> s) : s_(std::move(s)) {}
  std::string describe() const override { return "failing " + s_->describe(); }
  void fetch(const Addresses& a, float* out) override {
    if (fail) throw IoError("test: injected read failure");
    s_->fetch(a, out);
  }
  bool fail = false;

 private:
  std::unique_ptr<TableSource> s_;
};

TEST_F(EngineTest, AFailedReadLeavesEverySessionAsBeforeTheCall) {
  for (const std::string name : {"pagegram_late", "pagegram"})
    for (const bool overlap : {true, false}) {
      TrainedModel tm = load_trained_model(ckpt(name), {.open_data = false, .table_ready = true, .micro_batch = 1});
      auto fs = std::make_unique<FailingSource>(
          ram_table_source(tm.mem()->table().layout(), tm.mem()->table().values().data()));
      FailingSource* failing = fs.get();
      Engine e(std::move(tm), std::move(fs), 16, overlap);
      std::unique_ptr<Engine> ref = engine(name);
      const std::vector<int32_t> p = prompt(6, 17), more = prompt(4, 18);
      const int64_t s = e.open({0.0, 0, 0}), r = ref->open({0.0, 0, 0});
      e.feed(s, p);
      ref->feed(r, p);
      const int64_t ids[1] = {s}, rids[1] = {r};
      for (int i = 0; i < 3; ++i) ASSERT_EQ(e.step(ids), ref->step(rids));
      const int64_t len = e.length(s);
      failing->fail = true;
      EXPECT_THROW(e.step(ids), IoError);
      EXPECT_EQ(e.length(s), len) << name;
      EXPECT_THROW(e.feed(s, more), IoError);
      EXPECT_EQ(e.length(s), len) << name;
      failing->fail = false;
      // The session goes on as one that never saw the failed calls: the same tokens and logits, bit for bit.
      e.feed(s, more);
      ref->feed(r, more);
      for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(e.step(ids), ref->step(rids)) << name << ", overlap " << overlap << ", step " << i;
        const std::span<const float> x = e.logits(s), y = ref->logits(r);
        EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << name << ", overlap " << overlap;
      }
    }
}

TEST_F(EngineTest, APrefillReadsARowNeededTwiceOnce) {
  std::vector<int32_t> p = prompt(8, 9);
  p.insert(p.end(), p.begin(), p.end());  // the same n-grams twice
  std::unique_ptr<Engine> e = engine("pagegram", "direct", 0);
  const int64_t s = e->open({});
  e->feed(s, p);
  const TableReadStats& r = e->source()->stats();
  EXPECT_EQ(r.positions, 16);
  EXPECT_LT(r.device_reads, r.block_accesses);
}

TEST_F(EngineTest, ACorruptBlockIsAnErrorNamingItNeverGarbage) {
  const std::string bad = (dir_ / "corrupt.pgt").string();
  fs::copy_file(table("pagegram"), bad, fs::copy_options::overwrite_existing);
  const TableFileHeader h = TableFileReader::read_header(bad);
  {  // flip one byte in every data block
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    for (uint64_t b = 0; b < h.data_blocks; ++b) {
      f.seekg(static_cast<std::streamoff>(h.data_offset() + b * 4096 + 100));
      char c = 0;
      f.read(&c, 1);
      c = static_cast<char>(c ^ 0x5a);
      f.seekp(static_cast<std::streamoff>(h.data_offset() + b * 4096 + 100));
      f.write(&c, 1);
    }
  }
  for (const std::string mode : {"mmap", "direct", "direct pread"}) {
    const EnvIo io(mode == "direct pread" ? "pread" : "auto");
    EngineOptions o;
    o.checkpoint = ckpt("pagegram");
    o.table = bad;
    o.table_mode = mode == "mmap" ? "mmap" : "direct";
    o.progress = false;
    std::unique_ptr<Engine> e = open_engine(o);
    const int64_t s = e->open({});
    const std::vector<int32_t> p = prompt(3, 1);
    try {
      e->feed(s, p);
      ADD_FAILURE() << mode << ": no error";
    } catch (const IoError& err) {
      const std::string m = err.what();
      EXPECT_NE(m.find("checksum mismatch"), std::string::npos) << m;
      EXPECT_NE(m.find("data block"), std::string::npos) << m;
      EXPECT_NE(m.find(bad), std::string::npos) << m;
    }
  }
}

TEST_F(EngineTest, SessionsCarryTheirHistoryForkResetAndBoundary) {
  std::unique_ptr<Engine> e = engine("engram");
  const std::vector<int32_t> a = prompt(5, 11), b = prompt(4, 12);
  // The n-gram state carries across calls: feeding in two calls equals feeding at once.
  const int64_t s1 = e->open({}), s2 = e->open({});
  e->feed(s1, a);
  e->feed(s1, b);
  std::vector<int32_t> ab = a;
  ab.insert(ab.end(), b.begin(), b.end());
  e->feed(s2, ab);
  std::vector<float> l1(e->logits(s1).begin(), e->logits(s1).end());
  for (size_t v = 0; v < l1.size(); ++v) ASSERT_NEAR(l1[v], e->logits(s2)[v], 2e-5);
  // Fork: two continuations of one prefix with the same seed agree, and the parent is untouched.
  const int64_t f1 = e->fork(s1, {0.9, 20, 4}), f2 = e->fork(s1, {0.9, 20, 4});
  const int64_t one[1] = {f1}, two[1] = {f2};
  std::vector<int32_t> c1, c2;
  for (int i = 0; i < 6; ++i) c1.push_back(e->step(one)[0]), c2.push_back(e->step(two)[0]);
  EXPECT_EQ(c1, c2);
  EXPECT_EQ(e->length(s1), 9);
  EXPECT_EQ(e->length(f1), 15);
  // A boundary cuts the n-grams: after it, b's logits differ from b fed right after a (same attention context).
  const int64_t s3 = e->open({});
  e->feed(s3, a);
  e->boundary(s3);
  e->feed(s3, b);
  double diff = 0;
  for (size_t v = 0; v < l1.size(); ++v) diff = std::max(diff, std::abs(double(l1[v]) - e->logits(s3)[v]));
  EXPECT_GT(diff, 1e-6);
  // Reset: a session starts over.
  e->reset(s3);
  EXPECT_EQ(e->length(s3), 0);
  EXPECT_THROW(e->logits(s3), UserError);
  e->feed(s3, ab);
  for (size_t v = 0; v < l1.size(); ++v) ASSERT_NEAR(l1[v], e->logits(s3)[v], 2e-5);
}

TEST_F(EngineTest, CachesRestartPastTheContextAndSamplingIsSeeded) {
  std::unique_ptr<Engine> e = engine("pagegram");
  const int64_t T = e->config().model.context;
  auto run = [&](uint64_t seed) {
    const int64_t s = e->open({0.8, 10, seed});
    e->feed(s, prompt(T - 3, 2));
    const int64_t ids[1] = {s};
    std::vector<int32_t> out;
    for (int64_t i = 0; i < T; ++i) out.push_back(e->step(ids)[0]);
    EXPECT_EQ(e->length(s), 2 * T - 3);
    e->close(s);
    return out;
  };
  const std::vector<int32_t> x = run(1), y = run(1), z = run(2);
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
  EXPECT_GE(e->stats().restarts, 3);
}

TEST_F(EngineTest, ATableFileOfAnotherCheckpointIsRefused) {
  // pagegram and pagegram_late have the same table geometry but other trained tables.
  const std::string late = (dir_ / "late_export.pgt").string();
  TableExportOptions x;
  x.checkpoint = ckpt("pagegram_late");
  x.verify = false;
  export_table(x, late);
  EXPECT_EQ(TableFileReader::read_header(late).identity_value("info.table_xxh64").size(), 16u);
  EngineOptions o;
  o.checkpoint = ckpt("pagegram");
  o.progress = false;
  o.table = late;
  o.table_mode = "mmap";
  try {
    open_engine(o);
    ADD_FAILURE() << "a table of another checkpoint was served";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("exported from another checkpoint"), std::string::npos) << e.what();
  }
  o.checkpoint = ckpt("pagegram_late");  // its own checkpoint serves it
  EXPECT_NE(open_engine(o), nullptr);
  // --cache with mmap would do nothing (the kernel's page cache is mmap's): refused, not ignored
  o.cache_bytes = 1 << 20;
  try {
    open_engine(o);
    ADD_FAILURE() << "--cache with --table-mode mmap was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("only --table-mode direct has its own cache"), std::string::npos) << e.what();
  }
}

// `generate --prompt-file` reads at most 4 MiB: /dev/zero and a 5 MiB file are one line each (exit 2), at once,
// before the model is loaded; a missing file names its path.
TEST_F(EngineTest, GeneratePromptFileIsBounded) {
  const std::string big = (dir_ / "big_prompt.txt").string();
  std::ofstream(big) << std::string(size_t{5} << 20, 'a');
  for (const auto& [file, says] : {std::pair{std::string("/dev/zero"), std::string("larger than 4194304 bytes")},
                                   {big, "larger than 4194304 bytes"},
                                   {(dir_ / "no_such_prompt.txt").string(), "cannot open"}}) {
    const std::string out = (dir_ / "generate.out").string();
    const int rc = std::system((std::string(PG_BINARY_DIR "/pagegram generate --checkpoint ") + ckpt("pagegram") +
                                " --prompt-file " + file + " > " + out + " 2>&1")
                                   .c_str());
    ASSERT_TRUE(WIFEXITED(rc));
    EXPECT_EQ(WEXITSTATUS(rc), 2) << file;
    const std::string text = testing::slurp(out);
    EXPECT_NE(text.find("--prompt-file " + file + ": " + says), std::string::npos) << text;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  }
}

// `pagegram serve --checkpoint <pagegram> --http 0` as a child process (stderr to `err`; SIGINT ignored as a script's
// background job has it); returns its pid and port once it says it serves (pid -1 if it never does).
std::pair<pid_t, int> start_http_server(const std::string& checkpoint, const std::string& err) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGINT, SIG_IGN);
    if (!std::freopen(err.c_str(), "w", stderr)) ::_exit(126);
    ::execl(PG_BINARY_DIR "/pagegram", "pagegram", "serve", "--checkpoint", checkpoint.c_str(), "--http", "0",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 600 && pid > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::string text = testing::slurp(err);
    const size_t at = text.find("on http://127.0.0.1:");
    if (at != std::string::npos) return {pid, std::atoi(text.c_str() + at + 20)};
  }
  if (pid > 0) ::kill(pid, SIGKILL), ::waitpid(pid, nullptr, 0);
  return {-1, 0};
}
// Waits up to 30 s for the child to end; its wait status, or -1 (then it is killed).
int wait_for_exit(pid_t pid) {
  int status = 0;
  for (int i = 0; i < 300; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(pid, SIGKILL), ::waitpid(pid, &status, 0);
  return -1;
}

// `serve --http` stops cleanly on SIGINT and on SIGTERM (exit 0, "stopping"), also when started as a script's
// background job, which inherits SIGINT ignored, and whichever of its threads the kernel hands the signal to.
TEST_F(EngineTest, ServeHttpStopsOnSigintAndSigtermAlsoStartedWithSigintIgnored) {
  for (const int sig : {SIGINT, SIGTERM}) {
    const std::string err = (dir_ / ("serve_signal_" + std::to_string(sig) + ".txt")).string();
    const auto [pid, port] = start_http_server(ckpt("pagegram"), err);
    ASSERT_GT(pid, 0) << testing::slurp(err);
    // The kernel may hand a process's signal to any thread that does not block it: send it to the oldest thread
    // besides the main one (an OpenMP worker started before the server), where a handler-less design loses it.
    pid_t target = pid;
    for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
      const pid_t tid = static_cast<pid_t>(std::stol(t.path().filename().string()));
      if (tid != pid && (target == pid || tid < target)) target = tid;
    }
    ::syscall(SYS_tgkill, pid, target, sig);
    const int status = wait_for_exit(pid);
    ASSERT_NE(status, -1) << "still serving 30 s after signal " << sig;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "signal " << sig << ", status " << status;
    EXPECT_NE(testing::slurp(err).find(sig == SIGINT ? "SIGINT, stopping" : "SIGTERM, stopping"), std::string::npos)
        << testing::slurp(err);
  }
}

// The HTTP API as another implementation of HTTP sees it (Python's http.client, not the server's own library): a
// completion, the same completion streamed (its events concatenated are the reply's text, then [DONE]), a body that
// is not JSON (400 with a JSON error, and the server goes on), /health, /tokenize and /detokenize.
TEST_F(EngineTest, ServeHttpAnswersPythonsHttpClient) {
  const std::string err = (dir_ / "serve_python.txt").string();
  const auto [pid, port] = start_http_server(ckpt("pagegram"), err);
  ASSERT_GT(pid, 0) << testing::slurp(err);
  const std::string script = (dir_ / "client.py").string();
  std::ofstream(script) << R"PY(import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=60)
def call(method, path, body=None):
    c.request(method, path, body, {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read().decode()
st, body = call("POST", "/v1/completions", json.dumps({"prompt": "hello", "max_tokens": 5, "seed": 1}))
reply = json.loads(body)
assert st == 200 and reply["usage"]["completion_tokens"] == 5, body
st, body = call("POST", "/v1/completions", json.dumps({"prompt": "hello", "max_tokens": 5, "seed": 1, "stream": True}))
events = [line[6:] for line in body.split("\n") if line.startswith("data: ")]
assert st == 200 and events[-1] == "[DONE]", body
assert "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1]) == reply["choices"][0]["text"], body
st, body = call("POST", "/v1/completions", "{not json")
assert st == 400 and json.loads(body)["error"]["code"] == 400, body
st, body = call("GET", "/health")
assert st == 200 and json.loads(body) == {"status": "ok"}, body
st, body = call("POST", "/tokenize", json.dumps({"content": "hello world"}))
tokens = json.loads(body)["tokens"]
st, body = call("POST", "/detokenize", json.dumps({"tokens": tokens}))
assert json.loads(body)["content"] == "hello world", body
print("python client ok")
)PY";
  const std::string out = (dir_ / "client.out").string();
  const int rc =
      std::system(("/usr/bin/python3 " + script + " " + std::to_string(port) + " > " + out + " 2>&1").c_str());
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_for_exit(pid), 0);
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 0) << testing::slurp(out);
  EXPECT_NE(testing::slurp(out).find("python client ok"), std::string::npos) << testing::slurp(out);
}

TEST_F(EngineTest, ServingNeedsTheTokenizerNotTheTokenStores) {
  const fs::path tokens = dir_ / "cache" / "tokens", away = dir_ / "tokens.away";
  fs::rename(tokens, away);  // a model folder copied without the corpus: only the tokenizer in the cache
  std::vector<int32_t> ids;
  {
    std::unique_ptr<Engine> e = engine("pagegram");
    ASSERT_NE(e->tokenizer(), nullptr);
    ids = e->encode("hello world");
    EXPECT_FALSE(ids.empty());
  }
  fs::path model;
  for (const auto& f : fs::recursive_directory_iterator(dir_ / "cache" / "tokenizers"))
    if (f.path().filename() == "spm.model") model = f.path();
  fs::rename(model, dir_ / "spm.model.away");
  {
    std::unique_ptr<Engine> e = engine("pagegram");  // ids-only use still opens
    try {
      e->encode("hello");
      ADD_FAILURE() << "encoded without a tokenizer";
    } catch (const UserError& ex) {
      EXPECT_NE(std::string(ex.what()).find(model.string() + " is not in the data cache"), std::string::npos)
          << ex.what();
    }
  }
  fs::rename(dir_ / "spm.model.away", model);
  fs::rename(away, tokens);
}

// `f` throws UserError whose message holds every part.
void expect_user_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no UserError";
  } catch (const UserError& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// A model folder copied to a machine without the data cache serves with the tokenizer.model beside its checkpoint,
// or with --tokenizer; a missing or foreign file is one clear error.
TEST_F(EngineTest, TheTokenizerBesideTheCheckpointOrGivenServesWithoutTheCache) {
  fs::path model;
  for (const auto& f : fs::recursive_directory_iterator(dir_ / "cache" / "tokenizers"))
    if (f.path().filename() == "spm.model") model = f.path();
  ASSERT_FALSE(model.empty());
  std::vector<int32_t> want;
  {
    std::unique_ptr<Engine> e = engine("pagegram");
    want = e->encode("hello world");
  }
  const fs::path folder = dir_ / "folder";
  fs::create_directories(folder);
  fs::copy_file(ckpt("pagegram"), folder / "checkpoint.h5", fs::copy_options::overwrite_existing);
  fs::copy_file(model, folder / "tokenizer.model", fs::copy_options::overwrite_existing);
  const fs::path away = dir_ / "tokenizers.away";
  fs::rename(dir_ / "cache" / "tokenizers", away);  // no tokenizer in the data cache now
  EngineOptions o;
  o.checkpoint = (folder / "checkpoint.h5").string();
  o.progress = false;
  {
    std::unique_ptr<Engine> e = open_engine(o);  // finds folder/tokenizer.model
    ASSERT_NE(e->tokenizer(), nullptr);
    EXPECT_EQ(e->encode("hello world"), want);
  }
  fs::rename(folder / "tokenizer.model", dir_ / "elsewhere.model");
  o.tokenizer = (dir_ / "elsewhere.model").string();
  {
    std::unique_ptr<Engine> e = open_engine(o);  // --tokenizer
    ASSERT_NE(e->tokenizer(), nullptr);
    EXPECT_EQ(e->encode("hello world"), want);
  }
  o.tokenizer = (dir_ / "missing.model").string();
  expect_user_error([&] { open_engine(o); }, {"--tokenizer", "missing.model", "no such file"});
  o.tokenizer = ckpt("pagegram");  // an HDF5 file, not a sentencepiece model
  expect_user_error([&] { open_engine(o); }, {"not a sentencepiece model"});
  fs::rename(away, dir_ / "cache" / "tokenizers");
}

// export --model-dir writes a folder that serves on a machine without the corpus or the data cache: the same
// tokens as the checkpoint with its table file; a folder missing a file is one clear error.
TEST_F(EngineTest, AModelFolderServesWithoutTheDataCache) {
  std::vector<int32_t> want, ids;
  {
    std::unique_ptr<Engine> e = engine("pagegram", "mmap");
    ids = e->encode("hello world, again");
    want = greedy(*e, ids, 8);
  }
  const fs::path folder = dir_ / "model_folder";
  auto options = [](const std::string& checkpoint, const fs::path& dir) {
    ModelFolderOptions o;
    o.checkpoint = checkpoint;
    o.dir = dir.string();
    return o;
  };
  const ModelFolderResult r = write_model_folder(options(ckpt("pagegram"), folder));
  EXPECT_TRUE(r.has_table);
  for (const char* f : {"checkpoint.h5", "tokenizer.model", "table.pgt"}) EXPECT_TRUE(fs::is_regular_file(folder / f));
  const fs::path copied = dir_ / "elsewhere" / "model";
  fs::create_directories(copied.parent_path());
  fs::copy(folder, copied, fs::copy_options::recursive);
  fs::rename(dir_ / "cache", dir_ / "cache.away");  // no corpus, token stores or tokenizers now
  {
    EngineOptions o;
    o.model_dir = copied.string();
    o.progress = false;
    std::unique_ptr<Engine> e = open_engine(o);
    ASSERT_NE(e->source(), nullptr);
    EXPECT_NE(e->source()->describe().find("table.pgt"), std::string::npos) << e->source()->describe();
    EXPECT_EQ(e->encode("hello world, again"), ids);
    EXPECT_EQ(greedy(*e, ids, 8), want);
    o.checkpoint = ckpt("pagegram");
    expect_user_error([&] { open_engine(o); }, {"--model or --checkpoint"});
  }
  // Without the cache, a folder cannot be written from a checkpoint that has no tokenizer beside it.
  expect_user_error([&] { write_model_folder(options(ckpt("engram"), dir_ / "mf2")); },
                    {"tokenizer", "not in the data cache"});
  fs::rename(dir_ / "cache.away", dir_ / "cache");
  fs::remove(copied / "tokenizer.model");
  EngineOptions o;
  o.model_dir = copied.string();
  expect_user_error([&] { open_engine(o); }, {"--model", "no tokenizer.model in the folder"});
  o.model_dir = (dir_ / "nowhere").string();
  expect_user_error([&] { open_engine(o); }, {"--model", "not a folder"});
}

TEST_F(EngineTest, AnEndOfDocumentTokenCutsTheNgramsAsADocumentStartDoes) {
  std::unique_ptr<Engine> e = engine("pagegram");
  const int32_t eos = e->eos_id();
  ASSERT_EQ(eos, static_cast<int32_t>(e->tokenizer()->eos_id()));
  std::vector<int32_t> doc1 = prompt(6, 11), doc2 = prompt(5, 12);
  for (int32_t& t : doc1) t = t == eos ? eos + 1 : t;
  for (int32_t& t : doc2) t = t == eos ? eos + 1 : t;
  doc1.push_back(eos);  // a document ends with its EOS, as the token store holds it
  std::vector<int32_t> both = doc1;
  both.insert(both.end(), doc2.begin(), doc2.end());
  // fed in one piece (the EOS inside), and in two with an explicit boundary after the EOS: the same documents
  const int64_t a = e->open({0.0, 0, 1}), b = e->open({0.0, 0, 1}), c = e->open({0.0, 0, 1});
  e->feed(a, both);
  e->feed(b, doc1);
  e->boundary(b);
  e->feed(b, doc2);
  std::vector<int32_t> no_eos(both);  // the control: the same tokens with the EOS replaced, one document
  no_eos[doc1.size() - 1] = eos + 1;
  e->feed(c, no_eos);
  const std::span<const float> la = e->logits(a), lb = e->logits(b);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)));
  // The n-grams of doc2 as the trainer addresses them (document offsets of the store: 0 and |doc1|).
  const MemoryLayout& L = e->checkpoint_layout();
  const std::vector<uint64_t> docs = {0, doc1.size()};
  Addresses want, got;
  want.resize(static_cast<int64_t>(both.size()), L);
  compute_addresses(L, std::span<const int32_t>(both), std::span<const uint64_t>(docs), 0,
                    static_cast<int64_t>(both.size()), want.rows.data(), want.signs.data());
  const std::vector<uint64_t> one = {0};
  got.resize(static_cast<int64_t>(both.size()), L);
  compute_addresses(L, std::span<const int32_t>(both), std::span<const uint64_t>(one), 0,
                    static_cast<int64_t>(both.size()), got.rows.data(), got.signs.data());
  EXPECT_NE(want.rows, got.rows);  // the cut matters for these tokens (else the logits check proves nothing)
  EXPECT_EQ(e->documents(a), docs);  // the engine cut where the store's document offsets are
  EXPECT_EQ(e->documents(c), one);  // without the EOS: one document
  const std::span<const float> lc = e->logits(c);
  EXPECT_NE(0, std::memcmp(la.data(), lc.data(), la.size() * sizeof(float)));
  // A sampled EOS goes through the same cut (Engine::step calls cut_after_eos on the token it appends).
}

TEST_F(EngineTest, ServeAnswersEveryRequestAndSurvivesBadOnes) {
  std::unique_ptr<Engine> e = engine("pagegram", "mmap");
  std::istringstream in(
      "open seed=3 temperature=0\n"
      "feed_ids 1 5 6 7 8\n"
      "step 1\n"
      "fork 1 temperature=0\n"
      "step 1 2\n"
      "bogus\n"
      "feed_ids 9 1\n"
      "feed_ids 1 99999\n"
      "open temperature=-1\n"
      "boundary 1\n"
      "reset 2\n"
      "stats\n"
      "close 1 2\n"
      "generate 1 2 3\n"
      "stats now\n"
      "close 1\n"
      "quit\n"
      "open\n");
  std::ostringstream out;
  serve(*e, in, out);
  std::vector<std::string> lines;
  std::istringstream r(out.str());
  for (std::string l; std::getline(r, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 17u) << out.str();
  EXPECT_EQ(lines[0], "ok 1");
  EXPECT_EQ(lines[1], "ok 4");
  EXPECT_EQ(lines[2].rfind("ok ", 0), 0u);
  EXPECT_EQ(lines[3], "ok 2");
  // greedy continuations of one state agree
  std::istringstream st(lines[4].substr(3));
  int32_t t1 = -1, t2 = -2;
  st >> t1 >> t2;
  EXPECT_EQ(t1, t2);
  EXPECT_EQ(lines[5].rfind("error unknown request", 0), 0u) << lines[5];
  EXPECT_EQ(lines[6].rfind("error no session 9", 0), 0u) << lines[6];
  EXPECT_EQ(lines[7].rfind("error ", 0), 0u) << lines[7];
  EXPECT_EQ(lines[8].rfind("error ", 0), 0u) << lines[8];
  EXPECT_EQ(lines[9], "ok");
  EXPECT_EQ(lines[10], "ok");
  EXPECT_NE(lines[11].find("\"device_reads\""), std::string::npos) << lines[11];
  EXPECT_NE(lines[11].find("\"memory_wait_seconds\""), std::string::npos) << lines[11];
  EXPECT_NE(lines[11].find("\"overlap\":true"), std::string::npos) << lines[11];
  // wrong arity: refused before acting (session 2 is not closed, and `close 1` below still finds session 1)
  EXPECT_EQ(lines[12].rfind("error close: unexpected '2' after the request", 0), 0u) << lines[12];
  EXPECT_EQ(lines[13].rfind("error generate: unexpected '3'", 0), 0u) << lines[13];
  EXPECT_EQ(lines[14].rfind("error stats: unexpected 'now'", 0), 0u) << lines[14];
  EXPECT_TRUE(e->has(2));
  EXPECT_EQ(lines[15], "ok");
  EXPECT_EQ(lines[16], "ok");
}

}  // namespace
}  // namespace pg
