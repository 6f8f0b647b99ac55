// `bench generate` (infer/bench.h) on a tiny trained model: a row per source, the table file written once and
// removed at the end, kept on request and then reused while it holds the same table, written again when it does not.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "infer/bench.h"
#include "tests/tiny_run.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

TEST(BenchGenerate, ReusesATableFileHoldingTheSameTableAndRemovesWhatItWrote) {
  testing::TinyRun run("benchgen", {"train.steps=4", "train.eval_interval=0", "train.checkpoint_interval=0",
                                    "memory.layout=pagegram", "memory.target_params=200000"});
  testing::TinyRun::train_run(run.config("run"));
  GenBenchConfig g;
  g.checkpoints = {(run.dir() / "run" / "checkpoint.h5").string()};
  g.table_dir = (run.dir() / "tables").string();
  g.sources = {"ram", "mmap"};
  g.prompt_tokens = 8;
  g.decode_tokens = 4;
  g.sessions = 3;
  g.batch_steps = 2;
  g.progress = false;
  const fs::path file = fs::path(g.table_dir) / "run.nf4.pgt";

  GenBenchResult a = run_generate_bench(g);  // written, then removed
  ASSERT_EQ(a.rows.size(), 2u);
  EXPECT_GT(a.rows[1].decodeN_tok_s, 0);
  EXPECT_EQ(a.tables_written, std::vector<std::string>{file.string()});
  EXPECT_TRUE(a.tables_reused.empty());
  EXPECT_FALSE(fs::exists(file));
  EXPECT_NE(format_generate_bench(a).find("(removed)"), std::string::npos);

  g.keep_tables = true;  // written and kept
  GenBenchResult b = run_generate_bench(g);
  EXPECT_EQ(b.tables_written.size(), 1u);
  ASSERT_TRUE(fs::exists(file));
  const auto written_at = fs::last_write_time(file);

  g.keep_tables = false;  // reused, and not removed: this run did not write it
  GenBenchResult c = run_generate_bench(g);
  EXPECT_TRUE(c.tables_written.empty());
  EXPECT_EQ(c.tables_reused, std::vector<std::string>{file.string()});
  EXPECT_TRUE(fs::exists(file));
  EXPECT_EQ(fs::last_write_time(file), written_at);
  // The same tokens from the reused file as from the written one: the rows read the same blocks.
  EXPECT_EQ(c.rows[1].decodeN_reads, b.rows[1].decodeN_reads);

  std::ofstream(file, std::ios::trunc) << "not a table";  // another file under the name: written again, removed
  GenBenchResult d = run_generate_bench(g);
  EXPECT_EQ(d.tables_written.size(), 1u);
  EXPECT_TRUE(d.tables_reused.empty());
  EXPECT_FALSE(fs::exists(file));
  run.remove();
}

}  // namespace
}  // namespace pg
