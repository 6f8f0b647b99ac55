// The fixed gradient tree (train/grad_tree.h) without MPI: sparse merges equal the dense sum, the tree has the
// documented shape, and ranks simulated by threads (an in-process PeerLink) give the single process's bits, for
// the raw tree over random leaves and for whole training runs of every memory layout (train() with the link).
// The real MPI runs are tests/mpi/mpi_train.sh.
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "core/h5.h"
#include "data/pipeline.h"
#include "train/config.h"
#include "train/grad_tree.h"
#include "train/session.h"
#include "train/trained_model.h"
#include "train/trainer.h"
#include "tests/test_util.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

// R ranks as threads: one FIFO mailbox per ordered pair of ranks.
class ThreadWorld {
 public:
  explicit ThreadWorld(int n) : n_(n), boxes_(static_cast<size_t>(n * n)) {}
  class Link final : public PeerLink {
   public:
    Link(ThreadWorld* w, int r) : w_(w), r_(r) {}
    int rank() const override { return r_; }
    int size() const override { return w_->n_; }
    void sendrecv(int partner, std::span<const std::byte> send, std::span<std::byte> recv) override {
      w_->box(r_, partner).put(send);
      w_->box(partner, r_).take(recv);
    }

   private:
    ThreadWorld* w_;
    int r_;
  };
  Link link(int r) { return Link(this, r); }

 private:
  struct Box {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::vector<std::byte>> q;
    void put(std::span<const std::byte> b) {
      std::lock_guard<std::mutex> l(mu);
      q.emplace_back(b.begin(), b.end());
      cv.notify_all();
    }
    void take(std::span<std::byte> out) {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return !q.empty(); });
      std::vector<std::byte> b = std::move(q.front());
      q.pop_front();
      ASSERT_EQ(b.size(), out.size());
      if (!b.empty()) std::memcpy(out.data(), b.data(), b.size());
    }
  };
  Box& box(int from, int to) { return boxes_[static_cast<size_t>(from * n_ + to)]; }
  int n_;
  std::vector<Box> boxes_;
};

SparseGrad random_sparse(std::mt19937& g, int64_t table_rows, int64_t width, int64_t n) {
  std::set<int64_t> rows;
  std::uniform_int_distribution<int64_t> pick(0, table_rows - 1);
  while (static_cast<int64_t>(rows.size()) < n) rows.insert(pick(g));
  SparseGrad s;
  s.width = width;
  s.rows.assign(rows.begin(), rows.end());
  std::normal_distribution<float> d;
  s.values.resize(static_cast<size_t>(n * width));
  for (float& x : s.values) x = d(g);
  return s;
}

TEST(GradTree, SparseMergeEqualsTheDenseSum) {
  std::mt19937 g(7);
  const int64_t rows = 5000, w = 12;
  for (int64_t na : {0, 1, 300, 2500}) {
    for (int64_t nb : {0, 7, 2000}) {
      const SparseGrad a = random_sparse(g, rows, w, na), b = random_sparse(g, rows, w, nb);
      SparseGrad out;
      merge_sparse(a, b, out);
      std::vector<float> dense(static_cast<size_t>(rows * w), 0.0f), got(dense.size(), 0.0f);
      std::vector<char> touched(static_cast<size_t>(rows), 0);
      for (const SparseGrad* s : {&a, &b})
        for (int64_t u = 0; u < s->size(); ++u) {
          touched[static_cast<size_t>(s->rows[static_cast<size_t>(u)])] = 1;
          for (int64_t j = 0; j < w; ++j)
            dense[static_cast<size_t>(s->rows[static_cast<size_t>(u)] * w + j)] +=
                s->values[static_cast<size_t>(u * w + j)];
        }
      ASSERT_EQ(out.size(), std::count(touched.begin(), touched.end(), 1));
      for (int64_t u = 0; u < out.size(); ++u) {
        if (u > 0) {
          ASSERT_LT(out.rows[static_cast<size_t>(u - 1)], out.rows[static_cast<size_t>(u)]);
        }
        for (int64_t j = 0; j < w; ++j)
          got[static_cast<size_t>(out.rows[static_cast<size_t>(u)] * w + j)] =
              out.values[static_cast<size_t>(u * w + j)];
      }
      // 0 + a + b = a + b exactly: the dense reference has the same bits.
      ASSERT_EQ(0, std::memcmp(got.data(), dense.data(), dense.size() * sizeof(float))) << na << " " << nb;
    }
  }
}

// The tree over n leaves as a string, and the slots it uses.
std::string tree_string(int64_t lo, int64_t n, int* max_slot) {
  std::vector<std::string> slots(16);
  std::string cur;
  tree_reduce(
      lo, n, [&](int64_t i) { cur = std::to_string(i); },
      [&](int d) {
        *max_slot = std::max(*max_slot, d);
        slots[static_cast<size_t>(d)] = cur;
      },
      [&](int d) { cur = "(" + slots[static_cast<size_t>(d)] + "+" + cur + ")"; });
  return cur;
}

TEST(GradTree, ShapeIsTheDocumentedBisection) {
  int m = -1;
  EXPECT_EQ(tree_string(0, 1, &m), "0");
  EXPECT_EQ(m, -1);
  EXPECT_EQ(tree_string(0, 4, &m), "((0+1)+(2+3))");
  EXPECT_EQ(tree_string(0, 3, &m), "((0+1)+2)");
  EXPECT_EQ(tree_string(0, 6, &m), "(((0+1)+2)+((3+4)+5))");
  // A rank's block is a subtree of the whole step's tree (the ranks complete the levels above it).
  EXPECT_EQ(tree_string(0, 12, &m), "(" + std::string("(") + tree_string(0, 3, &m) + "+" + tree_string(3, 3, &m) +
                                        ")+(" + tree_string(6, 3, &m) + "+" + tree_string(9, 3, &m) + "))");
  for (int64_t n = 1; n <= 40; ++n) {
    int used = -1;
    tree_string(0, n, &used);
    EXPECT_EQ(used + 1, tree_depth(n)) << n;
  }
}

// One tree node's value: a dense vector, a sparse list, a loss.
struct Node {
  std::vector<float> dense;
  SparseGrad sparse;
  double loss = 0;
};

// Leaves of a step: micro-batch i's random gradient (fixed by the seed and i).
Node leaf_of(int64_t i) {
  std::mt19937 g(static_cast<uint32_t>(1000 + i));
  Node n;
  n.dense.resize(1001);  // odd: the halving splits unevenly
  std::normal_distribution<float> d(0.0f, 1.0f + static_cast<float>(i));
  for (float& x : n.dense) x = d(g);
  n.sparse = random_sparse(g, 3000, 8, 200 + 37 * i);
  n.loss = 5.0 + std::normal_distribution<double>(0, 1)(g);
  return n;
}

// The tree over micro-batches [lo, lo + n) as one process computes it.
Node local_tree(int64_t lo, int64_t n) {
  Node cur;
  std::vector<Node> slots(static_cast<size_t>(tree_depth(n)));
  tree_reduce(
      lo, n, [&](int64_t i) { cur = leaf_of(i); }, [&](int d) { slots[static_cast<size_t>(d)] = cur; },
      [&](int d) {
        const Node& l = slots[static_cast<size_t>(d)];
        for (size_t k = 0; k < cur.dense.size(); ++k) cur.dense[k] = l.dense[k] + cur.dense[k];
        SparseGrad m;
        merge_sparse(l.sparse, cur.sparse, m);
        cur.sparse = m;
        cur.loss = l.loss + cur.loss;
      });
  return cur;
}

void expect_same_bits(const Node& a, const Node& b, const std::string& what) {
  ASSERT_EQ(a.dense.size(), b.dense.size()) << what;
  EXPECT_EQ(0, std::memcmp(a.dense.data(), b.dense.data(), a.dense.size() * sizeof(float))) << what << ": dense";
  EXPECT_EQ(a.sparse.rows, b.sparse.rows) << what;
  ASSERT_EQ(a.sparse.values.size(), b.sparse.values.size()) << what;
  EXPECT_EQ(0, std::memcmp(a.sparse.values.data(), b.sparse.values.data(), a.sparse.values.size() * sizeof(float)))
      << what << ": sparse";
  EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(double)), 0) << what << ": loss";
}

TEST(GradTree, SimulatedRanksGiveTheSingleProcessBits) {
  for (int64_t accum : {8, 12, 16}) {
    const Node one = local_tree(0, accum);
    // A sequential sum (the old accumulation) differs: the test would notice a tree that is not applied.
    Node seq = leaf_of(0);
    for (int64_t i = 1; i < accum; ++i) {
      const Node l = leaf_of(i);
      for (size_t k = 0; k < seq.dense.size(); ++k) seq.dense[k] += l.dense[k];
    }
    EXPECT_NE(0, std::memcmp(seq.dense.data(), one.dense.data(), seq.dense.size() * sizeof(float)));
    for (int R : {2, 4, 8}) {
      if (accum % R) continue;
      ThreadWorld world(R);
      std::vector<Node> got(static_cast<size_t>(R));
      std::vector<ExchangeStats> st(static_cast<size_t>(R));
      std::vector<std::thread> th;
      for (int r = 0; r < R; ++r)
        th.emplace_back([&, r] {
          ThreadWorld::Link link = world.link(r);
          Node n = local_tree(r * (accum / R), accum / R);
          std::vector<float> scratch;
          SparseGrad a, b;
          std::vector<std::byte> buf;
          tree_allreduce(link, std::span<float>(n.dense), scratch, &st[static_cast<size_t>(r)]);
          tree_allreduce(link, n.sparse, a, b, buf, &st[static_cast<size_t>(r)]);
          tree_allreduce(link, n.loss, &st[static_cast<size_t>(r)]);
          got[static_cast<size_t>(r)] = std::move(n);
        });
      for (auto& t : th) t.join();
      for (int r = 0; r < R; ++r)
        expect_same_bits(one, got[static_cast<size_t>(r)],
                         "accum " + std::to_string(accum) + ", rank " + std::to_string(r) + " of " + std::to_string(R));
      // Dense: recursive halving + doubling sends 2 (R-1)/R of the vector per rank (+-1 element per level).
      const double dense_bytes = 1001.0 * 4 * 2 * (R - 1) / R;
      EXPECT_GT(st[0].bytes_sent, dense_bytes - 64);
    }
  }
}

TEST(GradTree, RankCountsThatCannotSplitAStepAreRefused) {
  ExperimentConfig c = load_experiment(testing::kTinyConfig);  // 4 micro-batches per step
  EXPECT_NO_THROW(check_ranks(c, 1));
  EXPECT_NO_THROW(check_ranks(c, 2));
  EXPECT_NO_THROW(check_ranks(c, 4));
  for (int bad : {3, 8, 6}) {
    try {
      check_ranks(c, bad);
      ADD_FAILURE() << bad;
    } catch (const ConfigError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("hint"), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
}

// Whole training runs: ranks as threads through train() (rank 0 writes the run directory) against one process.
class SimulatedRanks : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::make_temp_dir("gradtree");
    base_ = load_experiment(
        testing::kTinyConfig,
        testing::with_sets(
            testing::tiny_fixture_sets(dir_),
            {"train.steps=6", "train.eval_interval=3", "train.eval_windows=8", "train.checkpoint_interval=0",
             "train.log_interval=1", "memory.target_params=100000", "memory.weight_decay=0.05", "train.threads=1"}));
    data::tokenize(base_.data, base_.tokenizer);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  // Every trained value of a run: checkpoint parameters, moments, the table and its optimizer; the log's losses.
  static std::map<std::string, std::vector<char>> datasets(const std::string& out_dir) {
    std::map<std::string, std::vector<char>> out;
    const auto put = [&](const std::string& k, const auto& v) {
      const char* p = reinterpret_cast<const char*>(v.data());
      out[k] = std::vector<char>(p, p + v.size() * sizeof(v[0]));
    };
    h5::File f = h5::File::open(out_dir + "/checkpoint.h5");
    for (const std::string path : {"params", "adam/m", "adam/v", "memory/dense", "memory/table"}) {
      h5::Group g = f.root();
      bool ok = true;
      for (size_t a = 0, b; ok && a <= path.size(); a = b + 1) {
        b = path.find('/', a);
        if (b == std::string::npos) b = path.size();
        const std::string part = path.substr(a, b - a);
        ok = g.has(part);
        if (ok) g = g.sub(part);
      }
      if (!ok) continue;
      if (path == "memory/table") {
        put(path + "/table", g.read<float>("table"));
        put(path + "/optimizer/v", g.sub("optimizer").read<float>("v"));
        put(path + "/optimizer/last", g.sub("optimizer").read<int32_t>("last"));
        continue;
      }
      for (const auto& name : g.children()) put(path + "/" + name, g.read<float>(name));
    }
    h5::File l = h5::File::open(out_dir + "/log.h5");
    put("log/train/loss", l.root().sub("train").read<double>("loss"));
    put("log/train/grad_norm", l.root().sub("train").read<double>("grad_norm"));
    put("log/eval/loss", l.root().sub("eval").read<double>("loss"));
    if (l.root().has("scalars") && l.root().sub("scalars").has("memory:touched_rows"))
      put("log/memory/touched_rows", l.root().sub("scalars").sub("memory:touched_rows").read<double>("value"));
    return out;
  }
  // Trains rc with R ranks as threads (one process for R = 1); returns the run directory.
  static std::string train_ranks(const ExperimentConfig& rc, int R, int64_t stop_after = -1, bool resume = false) {
    ThreadWorld world(R);
    std::vector<std::thread> th;
    for (int r = 0; r < R; ++r)
      th.emplace_back([&, r] {
        ThreadWorld::Link link = world.link(r);
        data::DataSet ds = data::open_dataset(rc.data, rc.tokenizer);
        TrainOptions opt;
        opt.progress = false;
        opt.link = R > 1 ? &link : nullptr;
        opt.stop_after = stop_after;
        opt.resume = resume;
        train(rc, ds, opt);
      });
    for (auto& t : th) t.join();
    return rc.train.out_dir;
  }
  static inline fs::path dir_;
  static inline ExperimentConfig base_;
};

// Both ways of holding the table over ranks (train.table_sharding): replicated, and rows (each rank holds 1/R of the
// rows and fetches the others from their owners) give one process's checkpoint and log, bit for bit.
TEST_P(SimulatedRanks, CheckpointsEqualTheSingleProcessRun) {
  ExperimentConfig c = base_;
  c.memory.layout = GetParam();
  const auto run = [&](const std::string& name, int R, const std::string& sharding = "replicated") {
    ExperimentConfig rc = c;
    rc.train.table_sharding = sharding;
    rc.train.out_dir = (dir_ / (GetParam() + "_" + name)).string();
    return train_ranks(rc, R);
  };
  const auto one = datasets(run("r1", 1));
  ASSERT_GT(one.size(), 10u);
  for (const std::string sharding : {"replicated", "rows"})
    for (int R : {2, 4}) {
      if (sharding == "rows" && GetParam() == "none") continue;
      const auto got = datasets(run("r" + std::to_string(R) + sharding, R, sharding));
      ASSERT_EQ(got.size(), one.size());
      for (const auto& [k, v] : one)
        EXPECT_TRUE(got.count(k) && got.at(k) == v) << GetParam() << " R=" << R << " " << sharding << ": " << k;
    }
}

// A sharded run stopped after 3 steps resumes with another rank count, sharded or not, and ends where the unbroken
// one-process run ends: the checkpoint of a sharded table is the same file whoever wrote it.
class ShardedRanks : public SimulatedRanks {};
TEST_P(ShardedRanks, CheckpointsResumeWithAnotherRankCount) {
  ExperimentConfig c = base_;
  c.memory.layout = GetParam();
  c.memory.collision_owners = false;  // owner counts start where a process starts (docs/robustness.md)
  const auto run = [&](const std::string& dir, int R, const std::string& sharding, int64_t stop_after, bool resume) {
    ExperimentConfig rc = c;
    rc.train.table_sharding = sharding;
    rc.train.out_dir = (dir_ / (GetParam() + "_resume_" + dir)).string();
    return train_ranks(rc, R, stop_after, resume);
  };
  const auto unbroken = datasets(run("unbroken", 1, "replicated", -1, false));
  run("2to4", 2, "rows", 3, false);
  const auto a = datasets(run("2to4", 4, "rows", -1, true));
  run("4to1", 4, "rows", 3, false);
  const auto b = datasets(run("4to1", 1, "replicated", -1, true));
  for (const auto& e : fs::directory_iterator(dir_ / (GetParam() + "_resume_4to1")))  // a whole table's save
    EXPECT_NE(e.path().filename().string().rfind("checkpoint.table-", 0), 0u) << "left: " << e.path();
  for (const auto& [k, v] : unbroken) {
    EXPECT_TRUE(a.count(k) && a.at(k) == v) << GetParam() << " rows 2 -> rows 4: " << k;
    EXPECT_TRUE(b.count(k) && b.at(k) == v) << GetParam() << " rows 4 -> 1 process: " << k;
  }
}

// The owners write a sharded table's checkpoint: one shard file per rank, named by the step and the save's id, which
// the checkpoint maps (virtual datasets). The checkpoint's rename commits a save: shards of a later save left by a
// kill before it are never read (the run resumes from the step the checkpoint names, and ends with the unbroken
// run's bits) and go at the next save; the shards of the checkpoint a save replaces stay until the save after (a
// reader of it keeps reading, even after they go); a missing shard, one of another save or a foreign file is
// refused with the file's name.
TEST_P(ShardedRanks, ShardFilesAreWrittenByTheirOwnersAndCommittedByTheCheckpoint) {
  ExperimentConfig c = base_;
  c.memory.layout = GetParam();
  c.memory.collision_owners = false;
  const auto run = [&](const std::string& dir, int R, int64_t stop_after, bool resume) {
    ExperimentConfig rc = c;
    rc.train.table_sharding = "rows";
    rc.train.out_dir = (dir_ / (GetParam() + "_owners_" + dir)).string();
    return train_ranks(rc, R, stop_after, resume);
  };
  const auto names = [](const std::string& dir) {  // the shard files (and their temporaries) in dir
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().rfind("checkpoint.table-", 0) == 0) out.insert(e.path().filename().string());
    return out;
  };
  const auto mapped = [](const std::string& dir) {  // the file names its checkpoint maps
    std::vector<std::string> out;
    for (const std::string& f : checkpoint_shard_files(dir + "/checkpoint.h5"))
      out.push_back(fs::path(f).filename().string());
    return out;
  };
  // checkpoint.table-<step>-<12 hex digits of the save id>-<q>of<R>.h5, one id for the save's R files.
  const auto one_save = [](const std::vector<std::string>& files, int step, int R) {
    const std::regex re("checkpoint\\.table-" + std::to_string(step) + "-([0-9a-f]{12})-([0-9]+)of" +
                        std::to_string(R) + "\\.h5");
    std::set<std::string> ids;
    for (size_t q = 0; q < files.size(); ++q) {
      std::smatch m;
      if (!std::regex_match(files[q], m, re) || m[2] != std::to_string(q)) return false;
      ids.insert(m[1]);
    }
    return static_cast<int>(files.size()) == R && ids.size() == 1;
  };
  const auto unbroken = datasets(run("unbroken", 1, -1, false));
  const std::string a = run("a", 2, 3, false);
  const std::vector<std::string> step3 = mapped(a);
  ASSERT_TRUE(one_save(step3, 3, 2)) << ::testing::PrintToString(step3);
  EXPECT_EQ(names(a), std::set<std::string>(step3.begin(), step3.end()));
  {
    h5::File f = h5::File::open(a + "/checkpoint.h5");
    const h5::Group t = f.root().sub("memory").sub("table");
    EXPECT_TRUE(t.is_virtual("table"));
    EXPECT_TRUE(t.sub("optimizer").is_virtual("v"));
    EXPECT_TRUE(t.sub("optimizer").is_virtual("last"));
  }
  // What a kill between the shard writes of a later save and the checkpoint's rename leaves: that save's shards
  // (and a temporary) beside step 3's checkpoint.
  const std::string later = run("later", 2, 5, false);
  const std::vector<std::string> step5 = mapped(later);
  for (const std::string& f : step5) fs::copy_file(later + "/" + f, a + "/" + f);
  fs::copy_file(later + "/" + step5[0], a + "/" + step5[0] + ".tmp.999999");
  // Refusals, on a copy: a missing shard; another save's shard under the name of step 3's (a later step, then the
  // same step of another run); a foreign file.
  const fs::path b = dir_ / (GetParam() + "_owners_b");
  fs::create_directories(b);
  for (const auto& e : fs::directory_iterator(a)) fs::copy_file(e.path(), b / e.path().filename());
  const auto refusal = [&] {
    try {
      load_trained_model((b / "checkpoint.h5").string(), {});
    } catch (const IoError& e) {
      return std::string(e.what());
    }
    return std::string("(loaded)");
  };
  fs::remove(b / step3[1]);
  std::string m = refusal();
  EXPECT_NE(m.find("table shard 1 of 2"), std::string::npos) << m;
  EXPECT_NE(m.find(step3[1] + ", which is missing"), std::string::npos) << m;
  EXPECT_NE(m.find("hint"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  fs::copy_file(b / step5[1], b / step3[1]);
  m = refusal();
  EXPECT_NE(m.find(step3[1] + ": a shard of save '"), std::string::npos) << m;
  const std::string other = run("other", 2, 3, false);  // the same config and step: other bits only in the save id
  fs::copy_file(other + "/" + mapped(other)[1], b / step3[1], fs::copy_options::overwrite_existing);
  m = refusal();
  EXPECT_NE(m.find(step3[1] + ": a shard of save '"), std::string::npos) << m;
  // Through a symlink from another folder, the checkpoint finds its shard files beside its target.
  fs::create_directories(dir_ / (GetParam() + "_owners_link"));
  const fs::path link = dir_ / (GetParam() + "_owners_link") / "best.h5";
  fs::create_symlink(fs::absolute(a) / "checkpoint.h5", link);
  EXPECT_NO_THROW(load_trained_model(link.string(), {}));
  { std::ofstream(b / step3[1], std::ios::trunc) << "not a shard"; }
  m = refusal();
  EXPECT_NE(m.find(step3[1]), std::string::npos) << m;
  // A reader of step 3's checkpoint, open while the run resumes (with 4 ranks) and saves at step 4: step 3's files
  // stay, the later save's orphans go.
  h5::File reader = h5::File::open(a + "/checkpoint.h5");
  const h5::Group rg = reader.root().sub("memory").sub("table");
  const std::vector<uint64_t> shape = rg.dataset_shape("table");
  const SavedTable saved(rg, static_cast<int64_t>(shape[0]), static_cast<int64_t>(shape[1]));
  run("a", 4, 1, true);
  const std::vector<std::string> step4 = mapped(a);
  EXPECT_TRUE(one_save(step4, 4, 4)) << ::testing::PrintToString(step4);
  std::set<std::string> want(step3.begin(), step3.end());
  want.insert(step4.begin(), step4.end());
  EXPECT_EQ(names(a), want);
  // The run ends as the unbroken run; its last save keeps no earlier shard; the reader still reads step 3's rows.
  const auto resumed = datasets(run("a", 4, -1, true));
  for (const auto& [k, v] : unbroken) EXPECT_TRUE(resumed.count(k) && resumed.at(k) == v) << GetParam() << ": " << k;
  const std::vector<std::string> step6 = mapped(a);
  EXPECT_TRUE(one_save(step6, 6, 4)) << ::testing::PrintToString(step6);
  EXPECT_EQ(names(a), std::set<std::string>(step6.begin(), step6.end()));
  // What a kill between the last save's commit and its clean-up would leave goes when the finished run is resumed.
  fs::copy_file(a + "/" + step6[0], a + "/checkpoint.table-5-0123456789ab-0of4.h5");
  run("a", 4, -1, true);
  EXPECT_EQ(names(a), std::set<std::string>(step6.begin(), step6.end()));
  std::vector<float> t(static_cast<size_t>(shape[0] * shape[1])), v(shape[0]);
  std::vector<int32_t> last(shape[0]);
  saved.read(0, static_cast<int64_t>(shape[0]), t.data(), v.data(), last.data());
  EXPECT_EQ(saved.completed_step(), 3);
  h5::File same = h5::File::open(other + "/checkpoint.h5");  // the other run's step 3: the same values
  const h5::Group sg = same.root().sub("memory").sub("table");
  EXPECT_EQ(t, sg.read<float>("table"));
  EXPECT_EQ(last, sg.sub("optimizer").read<int32_t>("last"));
  EXPECT_GT(*std::max_element(last.begin(), last.end()), 0);
}

// A fresh session of config c on each of R ranks (threads) saves to path(rank); each rank's error ("" if none).
std::vector<std::string> save_on_ranks(const ExperimentConfig& c, int R, const std::function<std::string(int)>& path) {
  ThreadWorld world(R);
  std::vector<std::string> errors(static_cast<size_t>(R));
  std::vector<std::thread> th;
  for (int r = 0; r < R; ++r)
    th.emplace_back([&, r] {
      ThreadWorld::Link link = world.link(r);
      Session s(c, {.link = &link});
      try {
        s.save(path(r));
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : th) t.join();
  return errors;
}

// A rank that cannot write its shard (here: its path runs through a file, as a folder not shared with rank 0 would
// fail) fails the save on every rank, and rank 0's error carries that rank's cause; no checkpoint is written.
TEST_P(ShardedRanks, AShardThatCannotBeWrittenFailsTheSaveOnEveryRankWithItsCause) {
  ExperimentConfig c = base_;
  c.memory.layout = GetParam();
  c.train.table_sharding = "rows";
  const fs::path d = dir_ / (GetParam() + "_failed_save");
  fs::create_directories(d);
  { std::ofstream(d / "afile") << "a file, not a folder"; }
  const std::vector<std::string> errors =
      save_on_ranks(c, 2, [&](int r) { return ((r == 0 ? d : d / "afile") / "checkpoint.h5").string(); });
  for (const std::string& m : errors) {
    EXPECT_NE(
        m.find("not written (the previous one is kept): 1 of 2 ranks could not write their table shard; rank 1: "),
        std::string::npos)
        << m;
    EXPECT_NE(m.find("afile"), std::string::npos) << m;  // rank 1's own cause
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(d / "checkpoint.h5"));
}

// When rank 0 cannot write the checkpoint itself (here: checkpoint.h5 is a folder), every rank's save fails with it:
// none goes on as if the save had been committed.
TEST_P(ShardedRanks, ACheckpointRankZeroCannotWriteFailsTheSaveOnEveryRank) {
  ExperimentConfig c = base_;
  c.memory.layout = GetParam();
  c.train.table_sharding = "rows";
  const fs::path d = dir_ / (GetParam() + "_failed_commit");
  fs::create_directories(d / "checkpoint.h5" / "in_the_way");
  const std::vector<std::string> errors = save_on_ranks(c, 2, [&](int) { return (d / "checkpoint.h5").string(); });
  EXPECT_NE(errors[0].find("checkpoint.h5"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("rank 0 could not write it"), std::string::npos) << errors[1];
  EXPECT_TRUE(fs::is_directory(d / "checkpoint.h5"));
}

INSTANTIATE_TEST_SUITE_P(Layouts, SimulatedRanks, ::testing::ValuesIn(memory_layout_choices()));
INSTANTIATE_TEST_SUITE_P(Layouts, ShardedRanks, ::testing::ValuesIn([] {
                           std::vector<std::string> v;
                           for (const std::string& l : memory_layout_choices())
                             if (l != "none") v.push_back(l);
                           return v;
                         }()));

}  // namespace
}  // namespace pg
