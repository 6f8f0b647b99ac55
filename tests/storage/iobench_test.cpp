// Tests of storage/iobench.h on a tiny real table file: every lookup and read is counted at depths 1 and 4 (no timing
// assertions: the machine is shared).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/rng.h"
#include "storage/eval_stream.h"
#include "storage/iobench.h"
#include "storage/layout_spec.h"
#include "storage/table_file.h"
#include "memory/layout.h"

namespace pg {
namespace {

TEST(IoBench, CountsLookupsAndReads) {
  MemoryConfig m;
  m.target_params = 2000000;
  RngStream r(1, "iobench");
  std::vector<uint32_t> ids(400);
  for (auto& x : ids) x = static_cast<uint32_t>(r.below(1000));
  const EvalStream s = stream_from_ids(ids, {0, 100, 250});
  // The file lives next to the build (a disk file system: /tmp may be tmpfs without O_DIRECT).
  const std::string dir = str(PG_BINARY_DIR, "/iobench_test_", getpid());
  std::filesystem::create_directories(dir);
  for (const char* name : {"engram", "pagegram"}) {
    m.layout = name;
    auto L = make_layout(m, 384);
    const std::string path = dir + "/" + name + ".pgt";
    const TableFileHeader h = write_random_table_file(path, *L, 3);
    std::vector<uint32_t> blocks;
    std::vector<uint64_t> ends;
    stream_blocks(*L, s, 0, s.size(), blocks, &ends);
    for (int depth : {1, 4}) {
      IoBenchResult res;
      try {
        res = run_iobench(path, h.data_offset(), blocks, ends, depth);
      } catch (const IoError& e) {
        if (std::string(e.what()).find("O_DIRECT") != std::string::npos ||
            std::string(e.what()).find("io_uring") != std::string::npos)
          GTEST_SKIP() << e.what();
        throw;
      }
      res.layout = name;
      EXPECT_EQ(res.lookups, s.size());
      EXPECT_EQ(res.reads, static_cast<int64_t>(blocks.size()));
      EXPECT_GT(res.seconds, 0.0);
      EXPECT_GT(res.read_p50_us, 0.0);
      EXPECT_GE(res.read_p99_us, res.read_p50_us);
      EXPECT_GE(res.lookup_p99_us, res.lookup_p50_us);
      // A lookup limit counts whole lookups only.
      const IoBenchResult part = run_iobench(path, h.data_offset(), blocks, ends, depth, 37);
      EXPECT_EQ(part.lookups, 37);
      EXPECT_EQ(part.reads, static_cast<int64_t>(ends[36]));
      EXPECT_FALSE(format_iobench_table({res, part}).empty());
    }
  }
  EXPECT_THROW(run_iobench(dir + "/missing.pgt", 0, {0}, {1}, 1), IoError);
  EXPECT_THROW(run_iobench(dir + "/engram.pgt", 0, {0}, {1}, 0), UserError);
  std::filesystem::remove_all(dir);
}

// `iobench --keep` leaves its table files for the next run, which reuses a file only when every block checks out:
// a flipped byte in the data region makes it write the file again (it used to read the corrupt file).
TEST(IoBench, SuiteReusesOnlyIntactTableFiles) {
  RngStream r(2, "iobench");
  std::vector<uint32_t> ids(300);
  for (auto& x : ids) x = static_cast<uint32_t>(r.below(1000));
  const EvalStream s = stream_from_ids(ids, {0});
  IoBenchSuiteConfig cfg;
  cfg.memory.target_params = 2000000;
  cfg.d_model = 384;
  cfg.layouts = {parse_flash_layout("pagegram", 4)};
  cfg.params = 2e6;
  cfg.depths = {1};
  cfg.seconds = 0;  // no time limit: every lookup runs
  cfg.dir = str(PG_BINARY_DIR, "/iobench_suite_test_", getpid());
  cfg.keep = true;
  std::vector<std::string> log;
  auto run = [&] {
    log.clear();
    return run_iobench_suite(cfg, s, [&](const std::string& line) { log.push_back(line); });
  };
  auto said = [&](const std::string& what) {
    for (const auto& l : log)
      if (l.find(what) != std::string::npos) return true;
    return false;
  };
  IoBenchSuiteResult first;
  try {
    first = run();
  } catch (const IoError& e) {  // iobench measures io_uring queue depths: nothing to measure without it
    if (std::string(e.what()).find("io_uring_queue_init") != std::string::npos) {
      std::filesystem::remove_all(cfg.dir);
      GTEST_SKIP() << e.what();
    }
    throw;
  }
  ASSERT_EQ(first.created.size(), 1u);
  const std::string path = first.created[0];
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(first.results.at(0).lookups, s.size());

  const IoBenchSuiteResult second = run();  // intact: reused
  EXPECT_TRUE(second.created.empty());
  EXPECT_TRUE(said("reusing")) << log.front();

  auto L = make_storage_layout(cfg.memory, cfg.d_model, cfg.layouts[0], cfg.params);
  const TableFileHeader h = TableFileReader::open(path, *L).header();
  {
    std::FILE* f = std::fopen(path.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    const long at = static_cast<long>(h.data_offset() + 1000);
    std::fseek(f, at, SEEK_SET);
    const int c = std::fgetc(f);
    std::fseek(f, at, SEEK_SET);
    std::fputc(c ^ 0x5A, f);
    std::fclose(f);
  }
  const IoBenchSuiteResult third = run();  // corrupt: written again, and the new file checks out
  EXPECT_EQ(third.created.size(), 1u);
  EXPECT_TRUE(said("re-creating")) << log.front();
  EXPECT_NO_THROW(TableFileReader::open(path, *L).verify_all(true));
  std::filesystem::remove_all(cfg.dir);
}

}  // namespace
}  // namespace pg
