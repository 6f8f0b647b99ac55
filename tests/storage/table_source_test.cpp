// A cold mmap table source reads what it needs: with the file's pages dropped from the page cache, a few hundred
// scattered lookups make the device read within a small factor of the 4 KiB blocks they want (MADV_RANDOM; the
// kernel's default readahead would read ≈32x more per fault), and the source counts those bytes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "core/rng.h"
#include "core/sysinfo.h"
#include "memory/layout.h"
#include "memory/ngram.h"
#include "storage/eval_stream.h"
#include "storage/table_file.h"
#include "storage/table_source.h"

namespace pg {
namespace {

TEST(TableSource, ColdMmapReadsAboutTheBlocksItWants) {
  if (thread_read_bytes() < 0) GTEST_SKIP() << "no /proc/thread-self/io";
  MemoryConfig m;
  m.layout = "engram";
  m.target_params = 100000000;  // ≈ 53 MiB of NF4 rows: far more blocks than the lookups touch
  auto L = make_layout(m, 384);
  // A disk file system next to the build (/tmp may be tmpfs, where nothing is read from a device).
  const std::string dir = str(PG_BINARY_DIR, "/table_source_test_", getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/t.pgt";
  write_random_table_file(path, *L, 7);
  {  // drop the file's pages from the page cache (clean after fsync)
    const int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ::fsync(fd);
    ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    ::close(fd);
  }
  RngStream r(3, "cold mmap");
  std::vector<uint32_t> ids(24);
  for (auto& x : ids) x = static_cast<uint32_t>(r.below(50000));
  const EvalStream s = stream_from_ids(ids, {0});
  Addresses a;
  a.resize(s.size(), *L);
  stream_rows(*L, s, 0, s.size(), a.rows.data());
  std::vector<float> out(static_cast<size_t>(a.n * a.heads * L->width()));
  auto src = mmap_table_source(path, *L, false);
  src->fetch(a, out.data());
  const TableReadStats& st = src->stats();
  EXPECT_GT(st.device_reads,
            100);  // 24 positions x 16 heads, a few shared  // blocks first touched: what the lookups want
  ASSERT_GE(st.device_bytes, 0);
  if (st.device_bytes == 0) GTEST_SKIP() << "the file system reports no device reads (tmpfs, or the cache kept it)";
  // The kernel may map a few neighbours per fault and read the file's header once; not megabytes per fault.
  EXPECT_LE(st.device_bytes, 4 * st.device_reads * 4096 + (1 << 20))
      << st.device_bytes << " bytes read for " << st.device_reads << " blocks wanted";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pg
