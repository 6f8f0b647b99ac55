// Implementation of infer/bench.h.
#include "infer/bench.h"
#include "infer/table_export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/progress.h"
#include "core/rng.h"
#include "core/text.h"
#include "core/threads.h"
#include "core/timer.h"
#include "infer/engine.h"
#include "storage/eval_stream.h"
#include "storage/export.h"
#include "storage/table_file.h"

namespace pg {
namespace {

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

// KiB the device read per decoded token (-1: the source cannot tell).
double kib_per_token(const TableReadStats& st, int64_t tokens) {
  return st.device_bytes < 0 ? -1.0 : static_cast<double>(st.device_bytes) / 1024.0 / static_cast<double>(tokens);
}

struct Model {
  std::string name, layout;
  std::string checkpoint;  // or
  ExperimentConfig cfg;
  std::string table;  // NF4 file
};

TrainedModel build(const Model& m) {
  if (!m.checkpoint.empty()) {
    TrainedModel tm = load_trained_model(m.checkpoint, {.open_data = false, .table_ready = true, .micro_batch = 1});
    try {
      tm.data = std::make_unique<data::DataSet>(data::open_dataset(tm.cfg().data, tm.cfg().tokenizer));
    } catch (const UserError&) {
    }
    return tm;
  }
  TrainedModel tm;
  tm.session = std::make_unique<Session>(m.cfg, SessionOptions{.optimizer = false, .micro_batch = 1});
  return tm;
}

}  // namespace

// The files bench generate wrote, removed when it ends (unless kept); and the ones it found and reused.
struct Tables {
  std::vector<std::string> written, reused;
  bool keep = false;
  ~Tables() {
    if (keep) return;
    for (const std::string& f : written) {
      std::error_code ec;
      std::filesystem::remove(f, ec);
    }
  }
};

// The NF4 file a model's table is served from, in table_dir. A file there whose info.bench_key says it holds these
// values (the checkpoint table's xxh64 and the synthetic size; or the config's random table and seed, the geometry
// checked when it is opened) is reused; otherwise it is written.
std::string table_file(const Model& m, const GenBenchConfig& cfg, const MemoryInjector& mem, Tables& tables) {
  const MemoryLayout& L = mem.table().layout();
  const bool synthetic = !m.checkpoint.empty() && cfg.synthetic_params > 0;
  const std::string file =
      synthetic ? m.name + ".synthetic-" + format_count(cfg.synthetic_params) + ".nf4.pgt" : m.name + ".nf4.pgt";
  const std::string path = (std::filesystem::path(cfg.table_dir) / file).string();
  const std::string key = !m.checkpoint.empty() ? str("table_xxh64 ", table_fingerprint(mem.table()),
                                                      synthetic ? str(" synthetic ", cfg.synthetic_params) : "")
                                                : str("random ", L.name(), " seed ", cfg.seed);
  if (std::filesystem::exists(path)) {
    std::string found;
    try {
      found = TableFileReader::read_header(path).identity_value("info.bench_key");
    } catch (const std::exception&) {  // not a table file, or a damaged one: written again
    }
    if (found == key) {
      if (cfg.progress) Note() << "bench generate: reusing " << path << " (" << key << ")";
      tables.reused.push_back(path);
      return path;
    }
  }
  TableWriteOptions wo;
  wo.progress = cfg.progress;
  wo.info.push_back({"bench_key", key});
  if (synthetic) {
    TableExportOptions eo;
    eo.checkpoint = m.checkpoint;
    eo.synthetic_params = cfg.synthetic_params;
    eo.verify = false;
    eo.info = wo.info;
    export_table(eo, path);
  } else if (!m.checkpoint.empty()) {
    export_table_file(path, L, mem.table().values().data(), "zero", 0, wo);
  } else {
    write_random_table_file(path, L, cfg.seed, wo);
  }
  tables.written.push_back(path);
  return path;
}

GenBenchResult run_generate_bench(const GenBenchConfig& cfg) {
  if (cfg.checkpoints.empty() && cfg.configs.empty())
    throw UserError("bench generate: give --checkpoint or --config (repeatable)");
  if (cfg.prompt_tokens < 1 || cfg.decode_tokens < 1 || cfg.sessions < 1 || cfg.batch_steps < 1)
    throw UserError("bench generate: prompt tokens, decode tokens, sessions and steps must be >= 1");
  std::filesystem::create_directories(cfg.table_dir);
  std::vector<Model> models;
  for (const std::string& c : cfg.checkpoints) {
    Model m;
    m.checkpoint = c;
    m.cfg = checkpoint_config(c);
    const std::filesystem::path cp(c);  // the run directory's name (runs/<sweep>/<run>-<hash>/checkpoint.h5)
    m.name = cp.has_parent_path() && !cp.parent_path().filename().empty() ? cp.parent_path().filename().string()
                                                                          : m.cfg.name;
    models.push_back(m);
  }
  for (const std::string& c : cfg.configs) {
    Model m;
    m.cfg = load_experiment(c, cfg.config_sets);
    m.name = m.cfg.name;
    models.push_back(m);
  }
  Tables tables;
  tables.keep = cfg.keep_tables;
  GenBenchResult res;
  res.sessions = cfg.sessions;
  res.overlap = cfg.overlap;
  res.threads = thread_count();
  for (size_t i = 0; i < models.size(); ++i)  // unique names: table files and table rows are keyed by them
    for (size_t j = 0; j < i; ++j)
      if (models[j].name == models[i].name) models[i].name += str("#", i);
  for (Model& m : models) {
    m.layout = m.cfg.memory.layout == "pagegram" ? str("pagegram S=", m.cfg.memory.slots) : m.cfg.memory.layout;
    const int64_t T = m.cfg.model.context;
    if (cfg.prompt_tokens + cfg.decode_tokens > T)
      throw UserError(str("bench generate: ", cfg.prompt_tokens, " prompt + ", cfg.decode_tokens,
                          " decoded tokens pass ", m.name, "'s context of ", T, " (hint: fewer tokens)"));
    for (const std::string& src : cfg.sources) {
      TrainedModel tm = build(m);
      const MemoryInjector* mem = tm.mem();
      std::unique_ptr<TableSource> source;
      if (src != "ram") {
        if (!mem) continue;  // no table: only the RAM row
        const MemoryLayout& L = mem->table().layout();
        if (m.table.empty()) m.table = table_file(m, cfg, *mem, tables);
        TableOpenOptions to;
        if (src == "mmap") {
          to.mode = "mmap";
        } else if (src.rfind("direct:", 0) == 0) {
          to.mode = "direct";
          to.cache_bytes = parse_bytes(src.substr(7), "bench generate source " + src);
        } else {
          throw UserError(str("bench generate: source '", src, "': expected ram, mmap or direct:<cache bytes>"));
        }
        source = open_table_file(
            m.table, L, tm.cfg().memory, tm.cfg().model.d_model,
            tm.data && tm.data->tokenizer ? tm.data->tokenizer->pieces() : std::vector<std::string>{}, to);
      }
      // Prompts: held-out tokens when the tokenizer data matches, else random ids.
      const int64_t V = m.cfg.model.vocab, P = cfg.prompt_tokens, S = cfg.sessions;
      std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(S + 1),
                                                std::vector<int32_t>(static_cast<size_t>(P)));
      if (tm.data && tm.data->tokenizer && tm.data->tokenizer->vocab_size() == V) {
        const data::TestStream ts = tm.data->test_stream();
        for (size_t i = 0; i < prompts.size(); ++i)
          ts.copy((static_cast<uint64_t>(i) * 7919 * static_cast<uint64_t>(P)) % (ts.size() - static_cast<uint64_t>(P)),
                  static_cast<uint64_t>(P), prompts[i].data());
      } else {
        RngStream r(cfg.seed, "bench.generate.prompts");
        for (auto& p : prompts)
          for (auto& t : p) t = static_cast<int32_t>(r.next_u64() % static_cast<uint64_t>(V));
      }
      Engine e(std::move(tm), std::move(source), std::max<int64_t>(P, S), cfg.overlap);
      GenBenchRow row;
      row.model = m.name;
      row.layout = m.layout;
      row.spec = src;
      row.source = e.source() ? e.source()->describe() : std::string("no table");
      if (src == "ram") row.source = mem ? "ram (fp32)" : "none";
      if (cfg.progress) Note() << "bench generate: " << m.name << ", " << row.source;
      const SamplingOptions so{1.0, 0, cfg.seed};  // full-vocabulary sampling: no repetition loops
      // Prefill of one session, then its decode, one token per step.
      e.reset_stats();
      const int64_t s = e.open(so);
      e.feed(s, prompts[0]);
      row.prefill_tok_s = static_cast<double>(P) / std::max(e.stats().prefill_seconds, 1e-9);
      if (e.source()) e.source()->reset_stats();
      double wait0 = e.stats().memory_wait_seconds, fetch0 = e.stats().fetch_seconds;
      std::vector<double> lat;
      const int64_t one[1] = {s};
      for (int64_t i = 0; i < cfg.decode_tokens; ++i) {
        const Timer t;
        e.step(one);
        lat.push_back(t.seconds());
      }
      double sum = 0;
      for (double x : lat) sum += x;
      row.decode1_tok_s = static_cast<double>(cfg.decode_tokens) / sum;
      row.decode1_p50_ms = 1e3 * percentile(lat, 0.5);
      row.decode1_p99_ms = 1e3 * percentile(lat, 0.99);
      row.decode1_wait_ms = 1e3 * (e.stats().memory_wait_seconds - wait0) / static_cast<double>(cfg.decode_tokens);
      row.decode1_fetch_ms = 1e3 * (e.stats().fetch_seconds - fetch0) / static_cast<double>(cfg.decode_tokens);
      if (e.source()) {
        row.decode1_reads =
            static_cast<double>(e.source()->stats().device_reads) / static_cast<double>(cfg.decode_tokens);
        row.decode1_read_ms = 1e3 * e.source()->stats().io_seconds / static_cast<double>(cfg.decode_tokens);
        row.decode1_kib = kib_per_token(e.source()->stats(), cfg.decode_tokens);
      }
      e.close(s);
      // S sessions: each prefilled (untimed), then decoded together.
      std::vector<int64_t> ids;
      for (int64_t i = 0; i < S; ++i) {
        ids.push_back(e.open({1.0, 0, cfg.seed + static_cast<uint64_t>(i) + 1}));
        e.feed(ids.back(), prompts[static_cast<size_t>(i + 1)]);
      }
      if (e.source()) e.source()->reset_stats();
      wait0 = e.stats().memory_wait_seconds;
      fetch0 = e.stats().fetch_seconds;
      lat.clear();
      for (int64_t i = 0; i < cfg.batch_steps; ++i) {
        const Timer t;
        e.step(ids);
        lat.push_back(t.seconds());
      }
      sum = 0;
      for (double x : lat) sum += x;
      row.decodeN_tok_s = static_cast<double>(S * cfg.batch_steps) / sum;
      row.decodeN_p50_ms = 1e3 * percentile(lat, 0.5);
      row.decodeN_p99_ms = 1e3 * percentile(lat, 0.99);
      row.decodeN_wait_ms = 1e3 * (e.stats().memory_wait_seconds - wait0) / static_cast<double>(cfg.batch_steps);
      row.decodeN_fetch_ms = 1e3 * (e.stats().fetch_seconds - fetch0) / static_cast<double>(cfg.batch_steps);
      if (e.source()) {
        row.decodeN_reads =
            static_cast<double>(e.source()->stats().device_reads) / static_cast<double>(S * cfg.batch_steps);
        row.decodeN_read_ms = 1e3 * e.source()->stats().io_seconds / static_cast<double>(cfg.batch_steps);
        row.decodeN_kib = kib_per_token(e.source()->stats(), S * cfg.batch_steps);
      }
      res.rows.push_back(row);
    }
  }
  res.tables_written = tables.written;
  res.tables_reused = tables.reused;
  res.tables_kept = cfg.keep_tables;
  return res;
}

namespace {
// The share of the read time the blocks before the first injection hid (every injecting block adds the same e_t, so
// all of a token's rows are wanted there and later injecting blocks read nothing).
std::string kib(double v) { return v < 0 ? " (? KiB)" : str(" (", fmt_fixed(v, 1), " KiB)"); }
std::string hidden(double fetch_ms, double wait_ms) {
  if (fetch_ms <= 0) return "";
  return str(" (", static_cast<int>(std::lround(100.0 * std::clamp(1.0 - wait_ms / fetch_ms, 0.0, 1.0))), "% hidden)");
}
}  // namespace

std::string format_generate_bench(const GenBenchResult& r) {
  std::string out = str(
      "Table reads ",
      r.overlap ? "overlap the blocks before the first injection" : "precede the forward (--no-overlap)",
      "; read / wait ms: per decode step, the table source's read time and the part the forward waited for (hidden: "
      "the rest, overlapped by the blocks before the first injecting block, where every injecting block's rows are "
      "read).\n\n"
      "| model | layout | table | prefill tok/s | decode tok/s, 1 session | p50 / p99 ms | reads/token (KiB) | read / "
      "fetch / wait ms | "
      "decode tok/s, ",
      r.sessions,
      " sessions | p50 / p99 ms per step | reads/token (KiB) | read / fetch / wait ms |\n"
      "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  char buf[1024];
  for (const GenBenchRow& w : r.rows) {
    std::snprintf(buf, sizeof(buf),
                  "| %s | %s | %s | %.0f | %.1f | %.2f / %.2f | %.2f%s | %.3f / %.3f / %.3f%s | %.1f | %.1f / %.1f | "
                  "%.2f%s | %.2f / %.2f / %.2f%s |\n",
                  w.model.c_str(), w.layout.c_str(), w.source.c_str(), w.prefill_tok_s, w.decode1_tok_s,
                  w.decode1_p50_ms, w.decode1_p99_ms, w.decode1_reads, kib(w.decode1_kib).c_str(), w.decode1_read_ms,
                  w.decode1_fetch_ms, w.decode1_wait_ms, hidden(w.decode1_fetch_ms, w.decode1_wait_ms).c_str(),
                  w.decodeN_tok_s, w.decodeN_p50_ms, w.decodeN_p99_ms, w.decodeN_reads, kib(w.decodeN_kib).c_str(),
                  w.decodeN_read_ms, w.decodeN_fetch_ms, w.decodeN_wait_ms,
                  hidden(w.decodeN_fetch_ms, w.decodeN_wait_ms).c_str());
    out += buf;
  }
  // Ratios: each model's disk rows against its RAM row; PageGram against Engram-style per source.
  std::map<std::string, const GenBenchRow*> ram;
  for (const GenBenchRow& w : r.rows)
    if (w.spec == "ram") ram[w.model] = &w;
  out += "\n";
  for (const GenBenchRow& w : r.rows) {
    if (w.spec == "ram" || !ram.count(w.model)) continue;
    std::snprintf(buf, sizeof(buf), "%s, %s: 1-session decode %.0f%% of RAM, %lld-session aggregate %.0f%% of RAM\n",
                  w.model.c_str(), w.spec.c_str(), 100.0 * w.decode1_tok_s / ram[w.model]->decode1_tok_s,
                  static_cast<long long>(r.sessions), 100.0 * w.decodeN_tok_s / ram[w.model]->decodeN_tok_s);
    out += buf;
  }
  for (const GenBenchRow& p : r.rows) {
    if (p.layout.rfind("pagegram", 0) != 0) continue;
    for (const GenBenchRow& q : r.rows) {
      if (q.layout != "engram" || q.spec != p.spec) continue;
      std::snprintf(buf, sizeof(buf), "%s vs %s, %s: %lld-session aggregate decode %.2fx, 1-session %.2fx",
                    p.model.c_str(), q.model.c_str(), p.spec.c_str(), static_cast<long long>(r.sessions),
                    p.decodeN_tok_s / q.decodeN_tok_s, p.decode1_tok_s / q.decode1_tok_s);
      out += buf;
      if (p.decodeN_read_ms > 0 && q.decodeN_read_ms > 0) {  // tokens per second of read time: the lookup throughput
        std::snprintf(buf, sizeof(buf), "; %lld-session lookup throughput (tokens per second of table reading) %.2fx",
                      static_cast<long long>(r.sessions), q.decodeN_read_ms / p.decodeN_read_ms);
        out += buf;
      }
      out += "\n";
    }
  }
  for (const std::string& f : r.tables_reused) out += str("table file reused: ", f, "\n");
  for (const std::string& f : r.tables_written)
    out += str("table file written: ", f, r.tables_kept ? " (kept: the next run reuses it)" : " (removed)", "\n");
  return out;
}

}  // namespace pg
