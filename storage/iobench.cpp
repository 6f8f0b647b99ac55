// Implementation of storage/iobench.h (liburing; PG_HAVE_URING is defined by CMake when liburing is found).
#include "storage/iobench.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/h5.h"
#include "core/text.h"
#include "core/timer.h"
#include "storage/table_file.h"

#ifdef PG_HAVE_URING
#include <liburing.h>
#endif

namespace pg {

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
double percentile_us(std::vector<int64_t>& v, double p) {
  if (v.empty()) return 0.0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + static_cast<int64_t>(k), v.end());
  return static_cast<double>(v[k]) / 1000.0;
}
}  // namespace

IoBenchResult run_iobench(const std::string& path, uint64_t data_offset, const std::vector<uint32_t>& blocks,
                          const std::vector<uint64_t>& ends, int depth, int64_t max_lookups, double max_seconds) {
  IoBenchResult res;
  res.depth = depth;
  if (depth < 1 || depth > 4096) throw UserError(str("iobench: reads in flight must be in [1, 4096], got ", depth));
#ifndef PG_HAVE_URING
  (void)path, (void)data_offset, (void)blocks, (void)ends, (void)max_lookups, (void)max_seconds;
  throw UserError("iobench: this build has no io_uring (hint: install liburing-dev and re-run cmake)");
#else
  const int64_t T = max_lookups > 0 ? std::min<int64_t>(max_lookups, static_cast<int64_t>(ends.size()))
                                    : static_cast<int64_t>(ends.size());
  if (T == 0) return res;
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0)
    throw IoError(str("iobench: cannot open ", path, " with O_DIRECT: ", std::strerror(errno),
                      errno == EINVAL
                          ? " (hint: the file system does not support direct I/O, e.g. tmpfs; use --dir on a disk)"
                          : ""));
  struct Fd {
    int fd;
    ~Fd() { ::close(fd); }
  } fd_guard{fd};
  io_uring ring{};
  if (const int e = io_uring_queue_init(static_cast<unsigned>(depth), &ring, 0); e < 0)
    throw IoError(str("iobench: io_uring_queue_init(", depth, ") failed: ", std::strerror(-e),
                      " (hint: io_uring may be disabled: /proc/sys/kernel/io_uring_disabled)"));
  struct Ring {
    io_uring* r;
    ~Ring() { io_uring_queue_exit(r); }
  } ring_guard{&ring};
  void* mem = nullptr;
  if (posix_memalign(&mem, 4096, static_cast<size_t>(depth) * 4096) != 0) throw std::bad_alloc();
  struct Mem {
    void* p;
    ~Mem() { std::free(p); }
  } mem_guard{mem};
  auto* bufs = static_cast<uint8_t*>(mem);

  // Slot s: a read in flight (its token and submission time). Free slots on a stack.
  struct Slot {
    int64_t token, t_submit;
  };
  std::vector<Slot> slots(static_cast<size_t>(depth));
  std::vector<int> free_slots(static_cast<size_t>(depth));
  for (int i = 0; i < depth; ++i) free_slots[static_cast<size_t>(i)] = depth - 1 - i;
  std::vector<int64_t> pending(static_cast<size_t>(T)), first_submit(static_cast<size_t>(T), -1);
  for (int64_t t = 0; t < T; ++t)
    pending[static_cast<size_t>(t)] =
        static_cast<int64_t>(ends[static_cast<size_t>(t)] - (t ? ends[static_cast<size_t>(t - 1)] : 0));
  const int64_t total_reads = static_cast<int64_t>(ends[static_cast<size_t>(T - 1)]);
  std::vector<int64_t> read_lat, lookup_lat;
  read_lat.reserve(static_cast<size_t>(total_reads));
  lookup_lat.reserve(static_cast<size_t>(T));

  int64_t next_read = 0, next_token = 0, inflight = 0;
  // Tokens with zero reads complete immediately (cannot happen for table layouts; handled for completeness).
  const int64_t t0 = now_ns();
  int64_t t_last = t0;
  const int64_t deadline = max_seconds > 0 ? t0 + static_cast<int64_t>(max_seconds * 1e9) : INT64_MAX;
  bool stop = false;
  while (true) {
    // Issue reads while slots are free.
    int queued = 0;
    while (!stop && inflight < depth && next_read < total_reads) {
      while (next_token < T && static_cast<int64_t>(ends[static_cast<size_t>(next_token)]) <= next_read) ++next_token;
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (!sqe) break;
      const int s = free_slots.back();
      free_slots.pop_back();
      const uint64_t off = data_offset + 4096ULL * blocks[static_cast<size_t>(next_read)];
      io_uring_prep_read(sqe, fd, bufs + static_cast<size_t>(s) * 4096, 4096, off);
      io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(s));
      const int64_t ts = now_ns();
      slots[static_cast<size_t>(s)] = {next_token, ts};
      if (first_submit[static_cast<size_t>(next_token)] < 0) first_submit[static_cast<size_t>(next_token)] = ts;
      ++next_read;
      ++inflight;
      ++queued;
    }
    if (inflight == 0) break;
    const int e = queued ? io_uring_submit_and_wait(&ring, 1) : [&] {
      io_uring_cqe* c = nullptr;
      return io_uring_wait_cqe(&ring, &c);
    }();
    if (e < 0 && e != -EINTR) throw IoError(str("iobench: io_uring submit/wait failed: ", std::strerror(-e)));
    io_uring_cqe* cqe = nullptr;
    unsigned head = 0, seen = 0;
    const int64_t tc = now_ns();
    io_uring_for_each_cqe(&ring, head, cqe) {
      ++seen;
      const int s = static_cast<int>(io_uring_cqe_get_data64(cqe));
      if (cqe->res != 4096) {
        const int r = cqe->res;
        io_uring_cq_advance(&ring, seen);
        throw IoError(str("iobench: read of ", path,
                          " failed: ", r < 0 ? std::strerror(-r) : str("short read of ", r, " bytes"),
                          " (hint: is the file complete? re-create it without --keep'd leftovers)"));
      }
      const Slot sl = slots[static_cast<size_t>(s)];
      read_lat.push_back(tc - sl.t_submit);
      free_slots.push_back(s);
      --inflight;
      if (--pending[static_cast<size_t>(sl.token)] == 0) {
        lookup_lat.push_back(tc - first_submit[static_cast<size_t>(sl.token)]);
        ++res.lookups;
      }
      t_last = tc;
    }
    io_uring_cq_advance(&ring, seen);
    if (!stop && tc >= deadline) stop = true;
  }
  res.reads = static_cast<int64_t>(read_lat.size());
  res.seconds = static_cast<double>(t_last - t0) * 1e-9;
  res.read_p50_us = percentile_us(read_lat, 0.50);
  res.read_p99_us = percentile_us(read_lat, 0.99);
  res.lookup_p50_us = percentile_us(lookup_lat, 0.50);
  res.lookup_p99_us = percentile_us(lookup_lat, 0.99);
  return res;
#endif
}

std::string format_iobench_table(const std::vector<IoBenchResult>& r) {
  std::vector<std::string> layouts;
  std::vector<int> depths;
  std::map<std::pair<std::string, int>, const IoBenchResult*> at;
  for (const auto& x : r) {
    if (std::find(layouts.begin(), layouts.end(), x.layout) == layouts.end()) layouts.push_back(x.layout);
    if (std::find(depths.begin(), depths.end(), x.depth) == depths.end()) depths.push_back(x.depth);
    at[{x.layout, x.depth}] = &x;
  }
  std::string out =
      "Direct-I/O table lookups (report Fig. 4b): O_DIRECT 4 KiB reads through io_uring, N reads in flight;\n"
      "a lookup = all distinct blocks of one token (both orders, all heads). lookups/s, and read latency p50/p99 in "
      "us.\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-15s", "layout");
  out += buf;
  for (int d : depths) {
    std::snprintf(buf, sizeof buf, " | %-26s", str("depth ", d).c_str());
    out += buf;
  }
  out += "\n";
  for (const auto& l : layouts) {
    std::snprintf(buf, sizeof buf, "%-15s", l.c_str());
    out += buf;
    for (int d : depths) {
      auto it = at.find({l, d});
      if (it == at.end()) {
        std::snprintf(buf, sizeof buf, " | %-26s", "-");
      } else {
        const IoBenchResult& x = *it->second;
        std::snprintf(buf, sizeof buf, " | %8.0f/s %5.0f/%-6.0f us", x.lookups_per_second(), x.read_p50_us,
                      x.read_p99_us);
      }
      out += buf;
    }
    out += "\n";
  }
  out += "Per run: reads/s and lookup latency p50/p99 (us):\n";
  for (const auto& x : r) {
    std::snprintf(buf, sizeof buf,
                  "  %-15s depth %-3d %9lld lookups %10lld reads in %6.2f s: %9.0f reads/s, lookup %6.0f/%-6.0f us\n",
                  x.layout.c_str(), x.depth, static_cast<long long>(x.lookups), static_cast<long long>(x.reads),
                  x.seconds, x.reads_per_second(), x.lookup_p50_us, x.lookup_p99_us);
    out += buf;
  }
  return out;
}

void write_iobench_h5(const std::string& path, const std::vector<IoBenchResult>& r,
                      const std::vector<std::pair<std::string, std::string>>& attrs) {
  h5::write_atomic(path, [&](const h5::Group& root) {
    for (const auto& [k, v] : attrs) root.set_attr(k, v);
    root.set_attr("format", std::string("pagegram-iobench"));  // core/output.h: what the file is
    const h5::Group g = root.create("iobench");
    g.write_rows(r);
  });
}

IoBenchSuiteResult run_iobench_suite(const IoBenchSuiteConfig& cfg, const EvalStream& stream,
                                     const std::function<void(const std::string&)>& log) {
  auto say = [&](const std::string& line) {
    if (log) log(line);
  };
  const std::string& d = cfg.dir;
  std::error_code ec;
  const bool made_dir = std::filesystem::create_directories(d, ec);
  if (ec)
    throw IoError(str("iobench --dir ", d, ": cannot create it: ", ec.message(),
                      " (hint: a writable folder on the disk to test)"));
  IoBenchSuiteResult out;
  try {
    for (const FlashLayoutSpec& spec : cfg.layouts) {
      auto L = make_storage_layout(cfg.memory, cfg.d_model, spec, cfg.params, cfg.vocab);
      const std::string path =
          str(d, "/", spec.layout, spec.slots ? str("_s", spec.slots) : "", "_", format_count(cfg.params), ".pgt");
      TableFileHeader h;
      bool reused = false;
      if (std::filesystem::exists(path)) {
        try {
          const TableFileReader r = TableFileReader::open(path, *L);
          r.verify_all(true);  // a file kept from an earlier run is read only if every block checks out
          h = r.header();
          reused = true;
        } catch (const IoError& e) {
          say(str("[iobench] re-creating ", path, ": ", e.what()));
        }
      }
      if (!reused) {
        TableWriteOptions opt;
        opt.progress = true;
        opt.info = {{"source", "pagegram iobench (random NF4 content)"}};
        Timer tw;
        out.created.push_back(path);
        h = write_random_table_file(path, *L, 1, opt);
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.2f GiB, %.1f s", static_cast<double>(h.file_bytes()) / (1 << 30),
                      tw.seconds());
        say(str("[iobench] wrote ", path, " (", buf, ")"));
      } else {
        say(str("[iobench] reusing ", path));
      }
      std::vector<uint32_t> blocks;
      std::vector<uint64_t> ends;
      stream_blocks(*L, stream, 0, stream.size(), blocks, &ends);
      for (int depth : cfg.depths) {
        IoBenchResult r = run_iobench(path, h.data_offset(), blocks, ends, depth, 0, cfg.seconds);
        r.layout = spec.label();
        char buf[160];
        std::snprintf(buf, sizeof buf, "[iobench] %s depth %d: %.0f lookups/s, read p50 %.0f us p99 %.0f us",
                      r.layout.c_str(), depth, r.lookups_per_second(), r.read_p50_us, r.read_p99_us);
        say(buf);
        out.results.push_back(r);
      }
    }
  } catch (...) {
    if (!cfg.keep)
      for (const auto& p : out.created) std::filesystem::remove(p);
    throw;
  }
  if (!cfg.keep) {
    for (const auto& p : out.created) std::filesystem::remove(p);
    std::error_code ec;
    if (made_dir && std::filesystem::is_empty(d, ec)) std::filesystem::remove(d, ec);
  }
  return out;
}

}  // namespace pg
