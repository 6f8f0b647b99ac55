// `pagegram bench generate`: prefill and decode speed of generation with the memory table in RAM, on disk cold
// (O_DIRECT, no cache) and on disk behind an LRU page cache, for several models side by side in one run.
//
// Per model and table source: prefill tok/s (one session, prompts of prompt_tokens), decode tok/s of one session and
// the aggregate of `sessions` sessions decoded as one batch, per-token latency p50/p99 (one decode step), and the
// block reads per decoded token actually issued (storage/table_source.h counts them as the flash simulator does), and
// per decode step the time the table source spent reading and the part of it the forward waited for (the rest
// overlapped the blocks before the first injection). Lookup throughput = looked-up tokens per second of read time.
// Models come from checkpoints or from configs (random initialization and a random table file: the work per token
// is the same); prompts are held-out tokens when the model's tokenizer data is there, else random ids.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pg {

struct GenBenchConfig {
  std::vector<std::string> checkpoints;  // trained models (their tables exported as NF4 into table_dir)
  std::vector<std::string> configs;  // or experiment configs (random model, random NF4 table file)
  std::vector<std::string> config_sets;  // --set overrides for every config
  std::string table_dir;  // where table files go (a disk: O_DIRECT needs one; not tmpfs)
  std::vector<std::string> sources = {"ram", "direct:0", "direct:1GiB"};  // ram | mmap | direct:<cache>
  int64_t prompt_tokens = 64;
  int64_t decode_tokens = 32;  // decode steps of the one-session run
  int64_t sessions = 64;
  int64_t batch_steps = 8;  // decode steps of the many-session run
  uint64_t seed = 0;
  bool progress = true;
  bool overlap = true;  // table reads beside the blocks before the first injection (infer/engine.h)
  double synthetic_params = 0;  // > 0: a trained model's table is written as a synthetic file of this size
                                // (infer/table_export.h: the trained rows spread over a full-size table)
  // Table files: one in table_dir that holds the same values (its info.bench_key) is reused; the files written are
  // removed at the end unless keep_tables (then the next run reuses them).
  bool keep_tables = false;
};

struct GenBenchRow {
  std::string model, layout, source;
  std::string spec;  // the source as given (ram, mmap, direct:<cache>)
  double prefill_tok_s = 0;
  double decode1_tok_s = 0, decode1_p50_ms = 0, decode1_p99_ms = 0, decode1_reads = 0;  // reads per token
  double decodeN_tok_s = 0, decodeN_p50_ms = 0, decodeN_p99_ms = 0, decodeN_reads = 0;  // aggregate over sessions
  double decode1_read_ms = 0, decode1_wait_ms = 0;  // per step: the source's read time; the forward's wait for it
  double decode1_kib = 0, decodeN_kib = 0;  // KiB the device read per token (-1: unknown)
  double decode1_fetch_ms = 0, decodeN_fetch_ms = 0;  // per step: the whole fetch (plan, reads, decoding the rows)
  double decodeN_read_ms = 0, decodeN_wait_ms = 0;
};

struct GenBenchResult {
  std::vector<GenBenchRow> rows;
  bool overlap = true;
  int64_t sessions = 0;
  int threads = 0;
  std::vector<std::string> tables_written, tables_reused;
  bool tables_kept = false;
};

GenBenchResult run_generate_bench(const GenBenchConfig& cfg);
// A Markdown table of the rows, with the ratios the issue asks for (disk vs RAM per model; PageGram vs Engram-style
// aggregate decode per source).
std::string format_generate_bench(const GenBenchResult& r);

}  // namespace pg
