// Implementation of storage/flash_sim.h.
#include "storage/flash_sim.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "core/progress.h"
#include "core/sysinfo.h"
#include "core/text.h"
#include "core/error.h"
#include "core/h5.h"
#include "core/timer.h"
#include "memory/layout.h"

namespace pg {

// ---- FlashCacheSimulator.

FlashCacheSimulator::FlashCacheSimulator(int64_t universe, int64_t capacity, int64_t log_slack)
    : universe_(universe), capacity_(std::max<int64_t>(0, capacity)) {
  PG_CHECK(universe >= 0 && universe < static_cast<int64_t>(kNone), "block universe ", universe, " exceeds uint32 ids");
  capacity_ = std::min(capacity_, universe_);  // a cache larger than the table holds the whole table
  if (capacity_ > 0) {
    log_cap_ = std::min<int64_t>(2 * capacity_ + std::max<int64_t>(1, log_slack), static_cast<int64_t>(kNone) - 1);
    last_.resize(static_cast<size_t>(universe_));
    log_.resize(static_cast<size_t>(log_cap_));
  }
  reset();
}

void FlashCacheSimulator::reset() {
  size_ = accesses_ = misses_ = 0;
  log_size_ = lru_ = 0;
  std::fill(last_.begin(), last_.end(), kNone);
}

bool FlashCacheSimulator::contains(uint32_t block) const { return block < last_.size() && last_[block] != kNone; }

std::vector<uint32_t> FlashCacheSimulator::mru_order() const {
  std::vector<uint32_t> out;
  for (int64_t s = log_size_ - 1; s >= lru_; --s) {
    const uint32_t x = log_[static_cast<size_t>(s)];
    if (last_[x] == static_cast<uint32_t>(s)) out.push_back(x);
  }
  return out;
}

// Moves the live entries [lru_, log_size_) to the front of the log, in order, and re-indexes last_[].
void FlashCacheSimulator::compact() {
  uint32_t* L = log_.data();
  uint32_t* last = last_.data();
  int64_t w = 0;
  for (int64_t s = lru_; s < log_size_; ++s) {
    if (s + 16 < log_size_) __builtin_prefetch(&last[L[s + 16]], 1, 3);
    const uint32_t x = L[s];
    if (last[x] == static_cast<uint32_t>(s)) {
      L[w] = x;
      last[x] = static_cast<uint32_t>(w);
      ++w;
    }
  }
  PG_CHECK(w == size_, "LRU log compaction kept ", w, " entries for ", size_, " cached blocks");
  log_size_ = w;
  lru_ = 0;
}

int64_t FlashCacheSimulator::access(std::span<const uint32_t> blocks) {
  const int64_t n = static_cast<int64_t>(blocks.size());
  accesses_ += n;
  if (capacity_ == 0) {
    misses_ += n;
    return n;
  }
  const uint32_t* b = blocks.data();
  uint32_t max_id = 0;
  for (int64_t i = 0; i < n; ++i) max_id = std::max(max_id, b[i]);
  PG_CHECK(n == 0 || max_id < static_cast<uint64_t>(universe_), "block id ", max_id, " outside the table's ", universe_,
           " blocks");

  uint32_t* last = last_.data();
  const int64_t cap = capacity_;
  int64_t size = size_, miss = 0;
  constexpr int64_t kAhead = 24;  // prefetch distance (accesses) for last_[] of upcoming blocks
  int64_t i = 0;
  while (i < n) {
    if (log_size_ == log_cap_) {
      size_ = size;
      compact();
    }
    // Run up to the end of the input or of the log's room, whichever comes first.
    const int64_t stop = std::min(n, i + (log_cap_ - log_size_));
    uint32_t* L = log_.data();
    int64_t t = log_size_, lru = lru_;
    for (; i < stop; ++i, ++t) {
      if (i + kAhead < n) __builtin_prefetch(&last[b[i + kAhead]], 1, 3);
      const uint32_t x = b[i];
      const uint32_t prev = last[x];
      last[x] = static_cast<uint32_t>(t);
      L[t] = x;
      if (prev != kNone) {  // hit
        if (prev != static_cast<uint32_t>(lru)) continue;
        // The least recent block was hit: its entry died; advance to the next live one (the entry just written
        // at t is live, so this stops).
      } else {  // miss
        ++miss;
        if (++size <= cap) continue;
        --size;
        last[L[lru]] = kNone;  // evict the least recent block
      }
      do {
        ++lru;
        if (lru + kAhead < t) __builtin_prefetch(&last[L[lru + kAhead]], 0, 3);
      } while (last[L[lru]] != static_cast<uint32_t>(lru));
    }
    log_size_ = t;
    lru_ = lru;
  }
  size_ = size;
  misses_ += miss;
  return miss;
}

FlashSweepSummary run_flash_sweep(const FlashSweepConfig& cfg, const EvalStream& stream) {
  struct Job {
    size_t layout, size;
  };
  std::vector<Job> jobs;
  for (size_t l = 0; l < cfg.layouts.size(); ++l)
    for (size_t z = 0; z < cfg.sizes.size(); ++z) jobs.push_back({l, z});
  // Heaviest tables first (Engram-style reads ~8x more blocks per token) for a balanced dynamic schedule.
  std::stable_sort(jobs.begin(), jobs.end(), [&](const Job& a, const Job& b) {
    return (cfg.layouts[a.layout].layout == "engram") > (cfg.layouts[b.layout].layout == "engram");
  });
  const size_t nc = cfg.caches.size();
  FlashSweepSummary sum;
  sum.results.resize(cfg.layouts.size() * cfg.sizes.size() * nc);
  // Build every layout first (cheap: primes only) so configuration errors surface before any work.
  std::vector<std::unique_ptr<MemoryLayout>> layouts(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j)
    layouts[j] = make_storage_layout(cfg.memory, cfg.d_model, cfg.layouts[jobs[j].layout], cfg.sizes[jobs[j].size]);
  // Tables the simulator cannot hold are bad input, refused before any work: block ids are 32-bit, and each cache
  // simulator keeps 4 bytes per block of the table plus a log of twice its capacity.
  int64_t sim_bytes = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const int64_t blocks = layouts[j]->num_blocks();
    if (blocks >= static_cast<int64_t>(FlashCacheSimulator::kNone))
      throw UserError(str("flashsim --sizes ", format_count(cfg.sizes[jobs[j].size]), ": the table has ", blocks,
                          " blocks of 4 KiB, more than the simulator's 32-bit block ids (hint: at most about 3e13 "
                          "parameters)"));
    int64_t b = 0;
    for (int64_t c : cfg.caches)
      if (c / kBlockBytes > 0) b += 4 * (blocks + 2 * std::min(blocks, c / kBlockBytes));
    sim_bytes = std::max(sim_bytes, b);
  }
  const int64_t need = sim_bytes * std::min<int64_t>(static_cast<int64_t>(jobs.size()), omp_get_max_threads());
  const int64_t have = available_memory_bytes();
  if (have > 0 && need > have)
    throw UserError(str("flashsim --sizes/--caches: simulating these tables needs about ", format_bytes(need),
                        " of memory but ", format_bytes(have),
                        " are available (hint: smaller --sizes, fewer "
                        "--caches, or --threads 1)"));

  const int64_t T = stream.size(), chunk = std::max<int64_t>(1, cfg.chunk_tokens);
  const int64_t total_tokens = T * static_cast<int64_t>(jobs.size());
  int64_t done_tokens = 0;
  ProgressLine prog("flashsim tokens x tables", total_tokens, cfg.progress);
  std::vector<int64_t> lru_acc(jobs.size(), 0);
  std::vector<double> lru_sec(jobs.size(), 0.0);
  Timer wall;
  int threads = 1;
#pragma omp parallel
  {
#pragma omp single
    threads = omp_get_num_threads();
#pragma omp for schedule(dynamic, 1)
    for (size_t j = 0; j < jobs.size(); ++j) {
      const MemoryLayout& L = *layouts[j];
      const FlashLayoutSpec& spec = cfg.layouts[jobs[j].layout];
      std::vector<FlashCacheSimulator> sims;
      for (int64_t c : cfg.caches) sims.emplace_back(L.num_blocks(), c / kBlockBytes);
      std::vector<double> sec(nc, 0.0);
      std::vector<uint32_t> blocks;
      blocks.reserve(static_cast<size_t>(chunk * L.heads() * 2));
      for (int64_t i0 = 0; i0 < T; i0 += chunk) {
        const int64_t i1 = std::min(T, i0 + chunk);
        blocks.clear();
        stream_blocks(L, stream, i0, i1, blocks);
        for (size_t c = 0; c < nc; ++c) {
          const double t0 = thread_cpu_seconds();
          sims[c].access(blocks);
          sec[c] += thread_cpu_seconds() - t0;
        }
        int64_t d;
#pragma omp atomic capture
        d = done_tokens += i1 - i0;
        if (omp_get_thread_num() == 0) prog.update(d);
      }
      for (size_t c = 0; c < nc; ++c) {
        FlashResult& r = sum.results[(jobs[j].layout * cfg.sizes.size() + jobs[j].size) * nc + c];
        r.layout = spec.label();
        r.slots = spec.slots;
        r.target_params = cfg.sizes[jobs[j].size];
        r.params = L.params();
        r.num_blocks = L.num_blocks();
        r.cache_bytes = cfg.caches[c];
        r.cache_blocks = cfg.caches[c] / kBlockBytes;
        r.tokens = T;
        r.accesses = sims[c].accesses();
        r.misses = sims[c].misses();
        r.lru_seconds = sec[c];
        if (sims[c].capacity() > 0) {
          lru_acc[j] += sims[c].accesses();
          lru_sec[j] += sec[c];
        }
      }
    }
  }
  prog.update(total_tokens);
  prog.finish();
  sum.threads = threads;
  sum.wall_seconds = wall.seconds();
  for (size_t j = 0; j < jobs.size(); ++j) {
    sum.lru_accesses += lru_acc[j];
    sum.lru_seconds += lru_sec[j];
  }
  return sum;
}

std::string format_flash_table(const FlashSweepSummary& s) {
  // Columns: layouts in first-appearance order; lines: (size, cache) in first-appearance order.
  std::vector<std::string> cols;
  std::vector<std::pair<double, int64_t>> lines;
  std::map<std::tuple<std::string, double, int64_t>, const FlashResult*> at;
  for (const FlashResult& r : s.results) {
    if (std::find(cols.begin(), cols.end(), r.layout) == cols.end()) cols.push_back(r.layout);
    const auto key = std::make_pair(r.target_params, r.cache_bytes);
    if (std::find(lines.begin(), lines.end(), key) == lines.end()) lines.push_back(key);
    at[{r.layout, r.target_params, r.cache_bytes}] = &r;
  }
  std::string out;
  char buf[256];
  const int64_t tokens = s.results.empty() ? 0 : s.results[0].tokens;
  out += str("Flash reads per token (report Table 6): misses of an exact LRU cache over 4 KiB blocks, ", tokens,
             " test tokens.\n");
  out +=
      "Definitions: a token reads the distinct 4 KiB blocks holding its rows (all orders and heads) of the\n"
      "page-aligned NF4 file (34 B per 64-wide head row; a PageGram page never straddles a block); each block\n"
      "goes through one LRU cache of the given size (0 = none); a miss is one flash read. Tables are 4-bit.\n";
  std::snprintf(buf, sizeof buf, "%-8s %-10s", "table", "cache");
  out += buf;
  for (const auto& c : cols) {
    std::snprintf(buf, sizeof buf, " %15s", c.c_str());
    out += buf;
  }
  out += "\n";
  double last_size = -1;
  for (const auto& [size, cache] : lines) {
    if (size != last_size) {
      // File size of each layout at this table size.
      std::snprintf(buf, sizeof buf, "%-8s %-10s", format_count(size).c_str(), "(file)");
      out += buf;
      for (const auto& c : cols) {
        auto it = at.find({c, size, cache});
        std::snprintf(buf, sizeof buf, " %15s",
                      it == at.end() ? "-" : format_bytes(it->second->num_blocks * kBlockBytes).c_str());
        out += buf;
      }
      out += "\n";
      last_size = size;
    }
    std::snprintf(buf, sizeof buf, "%-8s %-10s", "", format_bytes(cache).c_str());
    out += buf;
    for (const auto& c : cols) {
      auto it = at.find({c, size, cache});
      if (it == at.end()) std::snprintf(buf, sizeof buf, " %15s", "-");
      else std::snprintf(buf, sizeof buf, " %15.3f", it->second->reads_per_token());
      out += buf;
    }
    out += "\n";
  }
  std::snprintf(buf, sizeof buf,
                "LRU simulation: %.3g block accesses in %.2f CPU-s = %.1fM accesses/s per core (%d threads, %.1f s "
                "wall)\n",
                static_cast<double>(s.lru_accesses), s.lru_seconds, s.accesses_per_second_per_core() / 1e6, s.threads,
                s.wall_seconds);
  out += buf;
  return out;
}

void write_flash_h5(const std::string& path, const FlashSweepSummary& s,
                    const std::vector<std::pair<std::string, std::string>>& attrs) {
  h5::write_atomic(path, [&](const h5::Group& root) {
    for (const auto& [k, v] : attrs) root.set_attr(k, v);
    root.set_attr("format", std::string("pagegram-flashsim"));  // core/output.h: what the file is
    const h5::Group g = root.create("flashsim");
    g.set_attr("definition",
               std::string("reads_per_token = misses / tokens of an exact LRU cache of cache_bytes over the 4 KiB "
                           "blocks of the page-aligned NF4 file; a token reads the distinct blocks of its rows"));
    g.write_rows(s.results);
    g.set_attr("lru_accesses", s.lru_accesses);
    g.set_attr("lru_seconds", s.lru_seconds);
    g.set_attr("accesses_per_second_per_core", s.accesses_per_second_per_core());
  });
}

}  // namespace pg
