// Storage and flash tools: `pagegram collisions`, `addresses`, `export`, `flashsim` and `iobench`.
// Each reads a config (or a checkpoint), a split of its token store, and prints a report-shaped table (+ HDF5).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "core/build_info.h"
#include "core/output.h"
#include "core/sysinfo.h"
#include "core/threads.h"
#include "core/timer.h"
#include "data/pipeline.h"
#include "infer/model_folder.h"
#include "infer/table_export.h"
#include "storage/collisions.h"
#include "storage/eval_stream.h"
#include "storage/flash_sim.h"
#include "storage/iobench.h"
#include "storage/layout_spec.h"
#include "storage/table_file.h"
#include "memory/layout.h"
#include "train/config.h"

namespace pg::cli {
namespace {

// Options shared by the commands that read a config and a token stream.
struct StreamArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string split = "test";
  int64_t tokens = 0;
  int64_t threads = 0;
};

void add_stream_options(CLI::App* c, StreamArgs& a, int64_t default_tokens, const std::string& tokens_help,
                        const std::string& default_split = "test") {
  a.tokens = default_tokens;
  a.split = default_split;
  c->add_option("--config", a.config, "experiment config YAML (data, tokenizer, model and memory sections)")
      ->required();
  c->add_option("--set", a.sets, "override a key: --set memory.slots=15 (repeatable)");
  c->add_option("--split", a.split,
                "token stream: test (held-out after the validation tokens), validation, heldout, train")
      ->capture_default_str()
      ->check(CLI::IsMember({"test", "validation", "heldout", "train"}));
  c->add_option("--tokens", a.tokens, tokens_help)->capture_default_str();
  c->add_option("--threads", a.threads, "threads (0 = all allowed CPUs, pinned)")->capture_default_str();
}

struct Loaded {
  ExperimentConfig cfg;
  data::DataSet ds;
  EvalStream stream;
  std::string stream_desc;
};

// Loads the config, opens the dataset and cuts the requested stream (tokens <= 0: the whole split).
Loaded load_stream(const StreamArgs& a) {
  if (a.tokens < 0) throw UserError(str("--tokens: must be >= 0, got ", a.tokens));  // before any work
  setup_threads(static_cast<int>(a.threads));
  Loaded l;
  l.cfg = load_experiment(a.config, a.sets);
  l.ds = data::open_dataset(l.cfg.data, l.cfg.tokenizer, config_args_hint(a.config, a.sets));
  Timer t;
  SplitStream s = stream_from_split(l.ds, a.split, a.tokens);
  l.stream = std::move(s.stream);
  l.stream_desc = std::move(s.desc);
  const uint64_t n = static_cast<uint64_t>(l.stream.size());
  std::fprintf(
      stderr, "[eval] %s (%llu tokens%s), read in %.1f s\n", l.stream_desc.c_str(), static_cast<unsigned long long>(n),
      a.tokens > 0 && static_cast<uint64_t>(a.tokens) > s.available ? str(", all ", s.available, " available").c_str()
                                                                    : "",
      t.seconds());
  return l;
}

// The layout `spec` of the config's memory section (params > 0: that many parameters), with Engram-faithful hashing
// from the dataset's tokenizer when the config asks for it.
std::unique_ptr<MemoryLayout> layout_of(const ExperimentConfig& cfg, const FlashLayoutSpec& spec,
                                        const data::DataSet* ds) {
  return make_storage_layout(cfg.memory, cfg.model.d_model, spec, 0,
                             ds && ds->tokenizer ? ds->tokenizer->pieces() : std::vector<std::string>{});
}

std::vector<std::pair<std::string, std::string>> run_attrs(const std::string& command, const Loaded* l) {
  std::vector<std::pair<std::string, std::string>> a = {{"command", command}, {"revision", build::kRevision}};
  if (l) {
    a.push_back({"stream", l->stream_desc});
    a.push_back({"config", cfg::dump(l->cfg)});
  }
  return a;
}

std::vector<FlashLayoutSpec> parse_layouts(const std::vector<std::string>& names, int64_t default_slots) {
  std::vector<FlashLayoutSpec> out;
  for (const auto& n : names) out.push_back(parse_flash_layout(n, default_slots));
  if (out.empty()) throw UserError("--layouts: give at least one layout");
  return out;
}

// The command line, for the HDF5 files (the commands do not get argv).
std::string cmdline() {
  static std::string command;
  if (!command.empty()) return command;
  std::string raw = read_file("/proc/self/cmdline");
  for (char& c : raw)
    if (c == '\0') c = ' ';
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return command = raw;
}

void register_collisions(CLI::App& app) {
  static StreamArgs a;
  static std::vector<std::string> layouts = layout_names();
  static std::string out;
  static bool per_head = false;
  CLI::App* c = app.add_subcommand("collisions", "collision statistics per order and head (report Table 3)");
  // Default: the validation tokens (2.1M, the report's held-out set); Foreign grows with the stream length.
  add_stream_options(c, a, 0, "stream tokens (0 = the whole split)", "validation");
  c->add_option("--layouts", layouts, "layouts: flat, engram, pagegram (config's slots) or pagegram:S")
      ->delimiter(',')
      ->capture_default_str();
  c->add_flag("--per-head", per_head, "also print one line per (layout, order, head)");
  c->add_option("--out", out, "HDF5 output (optional)");
  static bool force = false;
  c->add_flag("--force", force, "replace --out even when it is not a previous output of this command");
  c->callback([] {
    if (!out.empty()) check_output_path(out, "pagegram-collisions", force, "--out");
    Loaded l = load_stream(a);
    std::vector<LayoutCollisions> all;
    for (const FlashLayoutSpec& spec : parse_layouts(layouts, l.cfg.memory.slots)) {
      auto L = layout_of(l.cfg, spec, &l.ds);
      std::fprintf(stderr, "[eval] %s\n", L->parity_report().c_str());
      all.push_back(measure_collisions(*L, l.stream, true));
    }
    std::printf("%s", format_collision_table(all, per_head).c_str());
    if (!out.empty()) {
      write_collisions_h5(out, all, run_attrs(cmdline(), &l));
      std::printf("wrote %s\n", out.c_str());
    }
  });
}

void register_addresses(CLI::App& app) {
  static StreamArgs a;
  static std::string layout, out;
  static int64_t slots = 0;
  CLI::App* c = app.add_subcommand("addresses", "dump per-token rows and 4 KiB block ids of a layout to HDF5");
  add_stream_options(c, a, 1000000, "stream tokens (0 = the whole split; 16 heads x 24 B per token)");
  c->add_option("--layout", layout, "flat, engram or pagegram (default: the config's memory.layout)");
  c->add_option("--slots", slots, "PageGram slots S (default: the config's memory.slots)");
  c->add_option("--out", out, "HDF5 output")->required();
  static bool force = false;
  c->add_flag("--force", force, "replace --out even when it is not a previous output of this command");
  c->callback([] {
    check_output_path(out, "pagegram-addresses", force, "--out");
    Loaded l = load_stream(a);
    const std::string name = layout.empty() ? l.cfg.memory.layout : layout;
    if (name == "none")
      throw UserError("addresses: the config has memory.layout none (hint: --layout flat|engram|pagegram)");
    auto L = layout_of(l.cfg, FlashLayoutSpec{name, slots}, &l.ds);
    Timer t;
    write_addresses_h5(out, *L, l.stream, l.stream.size(), run_attrs(cmdline(), &l));
    std::printf("%s\nwrote %s: rows, block, offset [%lld, %lld] (%.1f s)\n", L->parity_report().c_str(), out.c_str(),
                static_cast<long long>(l.stream.size()), static_cast<long long>(L->heads()), t.seconds());
  });
}

void register_export(CLI::App& app) {
  static std::string checkpoint, config, out, fill = "zero", format = "nf4", synthetic;
  static std::vector<std::string> sets;
  static int64_t eval_windows = 0, threads = 0;
  static bool no_verify = false;
  CLI::App* c = app.add_subcommand(
      "export",
      "write the page-aligned NF4 or MXFP8 table file (.pgt, storage/FORMATS.md) of a checkpoint's memory table");
  c->add_option("--checkpoint", checkpoint, "checkpoint.h5 holding a memory table");
  c->add_option("--config", config, "instead of a checkpoint: a config whose memory layout gets a --fill table");
  c->add_option("--set", sets, "override a key of --config (repeatable)");
  c->add_option("--fill", fill, "with --config: zero or random table contents")
      ->capture_default_str()
      ->check(CLI::IsMember({"zero", "random"}));
  c->add_option("--out", out, "output .pgt file (or --model-dir)");
  static std::string model_dir, tokenizer;
  c->add_option("--model-dir", model_dir,
                "with --checkpoint: write a model folder that serves without the corpus (checkpoint.h5, "
                "tokenizer.model, table.pgt; generate/serve --model DIR)");
  c->add_option("--tokenizer", tokenizer,
                "--model-dir: the sentencepiece model to put in the folder (default: beside the checkpoint, else "
                "the data cache's)");
  c->add_option("--format", format,
                "quantization of the file: nf4 (4-bit NormalFloat, 64-value groups) or mxfp8 (OCP MX: E4M3 codes, "
                "an E8M0 scale per 32 values)")
      ->capture_default_str()
      ->check(CLI::IsMember({"nf4", "mxfp8"}));
  c->add_option("--eval-windows", eval_windows,
                "with --checkpoint: also compare held-out loss with the fp32, the NF4 and the MXFP8 table on this "
                "many validation windows (0 = skip; whichever --format is written)")
      ->capture_default_str();
  c->add_flag("--no-verify", no_verify, "skip reading the written file back");
  c->add_option("--synthetic-params", synthetic,
                "with --checkpoint: write a table of this many parameters (e.g. 20e9) of the same layout holding the "
                "trained rows spread over it (zeros elsewhere), so the model is served from a full-size file");
  c->add_option("--threads", threads, "threads (0 = all allowed CPUs, pinned)");
  static bool force = false;
  c->add_flag("--force", force, "replace --out even when it is not a table file (.pgt)");
  c->callback([] {
    if (out.empty() == model_dir.empty())
      throw UserError("export: give exactly one of --out FILE.pgt or --model-dir DIR");
    if (!model_dir.empty()) {
      if (!config.empty() || synthetic.size() || eval_windows > 0)
        throw UserError(
            "export --model-dir: takes --checkpoint (and --format, --tokenizer), not --config, "
            "--synthetic-params or --eval-windows (hint: export the table alone with --out)");
      setup_threads(static_cast<int>(threads));
      const ModelFolderResult r = write_model_folder({.checkpoint = checkpoint,
                                                      .dir = model_dir,
                                                      .tokenizer = tokenizer,
                                                      .quantization = parse_quantization(format),
                                                      .info = {{"revision", build::kRevision}, {"command", cmdline()}},
                                                      .force = force});
      std::printf("wrote the model folder %s: %s, %s%s\n(serve it: pagegram serve --model %s [--http 8080])\n",
                  model_dir.c_str(), r.paths.checkpoint.c_str(), r.paths.tokenizer.c_str(),
                  r.has_table ? (", " + r.paths.table + " (" + format + ")").c_str() : " (no memory table)",
                  model_dir.c_str());
      return;
    }
    check_output_path(out, "pagegram-table", force, "--out");
    setup_threads(static_cast<int>(threads));
    TableExportOptions o{.checkpoint = checkpoint,
                         .config = config,
                         .sets = sets,
                         .fill = fill,
                         .quantization = parse_quantization(format),
                         .eval_windows = eval_windows,
                         .verify = !no_verify,
                         .info = {{"revision", build::kRevision}, {"command", cmdline()}},
                         .synthetic_params = synthetic.empty() ? 0.0 : parse_count(synthetic, "--synthetic-params")};
    const TableExportResult r = export_table(o, out);
    const TableFileHeader& h = r.header;
    std::printf("%s\n", r.layout_report.c_str());
    std::printf("wrote %s (%s, %llu bytes per row): %llu data blocks + %llu header blocks = %.1f MiB (%.1f s)\n",
                out.c_str(), format.c_str(), static_cast<unsigned long long>(h.row_bytes),
                static_cast<unsigned long long>(h.data_blocks), static_cast<unsigned long long>(h.header_blocks),
                static_cast<double>(h.file_bytes()) / (1 << 20), r.write_seconds);
    if (o.verify)
      std::printf("verified %llu block checksums (%.1f s)\n", static_cast<unsigned long long>(h.data_blocks),
                  r.verify_seconds);
    if (r.loss) std::printf("%s\n", format_loss_comparison(*r.loss, r.eval_windows, r.eval_seconds).c_str());
  });
}

void register_flashsim(CLI::App& app) {
  static StreamArgs a;
  static std::vector<std::string> sizes = {"3.2e9", "10e9", "20e9"};
  static std::vector<std::string> caches = {"0", "256MiB", "1GiB", "4GiB"};
  static std::vector<std::string> layouts = layout_names();
  static std::string out;
  CLI::App* c = app.add_subcommand(
      "flashsim", "flash reads per token under an exact LRU page cache, per layout, table size and cache (Table 6)");
  add_stream_options(c, a, 20000000, "stream tokens (0 = the whole split; report: 20M)");
  c->add_option("--sizes", sizes, "table sizes in parameters (4-bit NF4 on flash)")
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--caches", caches, "LRU page cache sizes (0 = none)")->delimiter(',')->capture_default_str();
  c->add_option("--layouts", layouts, "flat, engram, pagegram (config's slots) or pagegram:S")
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--out", out, "HDF5 output (optional)");
  static bool force = false;
  c->add_flag("--force", force, "replace --out even when it is not a previous output of this command");
  c->callback([] {
    if (!out.empty()) check_output_path(out, "pagegram-flashsim", force, "--out");
    FlashSweepConfig fc;
    fc.sizes.clear();
    fc.caches.clear();
    for (const auto& s : sizes) fc.sizes.push_back(parse_count(s, "--sizes"));
    for (const auto& s : caches) fc.caches.push_back(parse_bytes(s, "--caches"));
    Loaded l = load_stream(a);
    fc.memory = l.cfg.memory;
    fc.d_model = l.cfg.model.d_model;
    fc.layouts = parse_layouts(layouts, l.cfg.memory.slots);
    const FlashSweepSummary s = run_flash_sweep(fc, l.stream);
    std::printf("%s", format_flash_table(s).c_str());
    if (!out.empty()) {
      write_flash_h5(out, s, run_attrs(cmdline(), &l));
      std::printf("wrote %s\n", out.c_str());
    }
  });
}

void register_iobench(CLI::App& app) {
  static StreamArgs a;
  static std::string size = "2e9", dir, out;
  static std::vector<std::string> layouts = layout_names();
  static std::vector<int> depths = {1, 4, 16, 64};
  static double seconds = 10;
  static bool keep = false;
  CLI::App* c = app.add_subcommand(
      "iobench", "O_DIRECT 4 KiB table lookups through io_uring with N reads in flight, on real table files (Fig. 4b)");
  add_stream_options(c, a, 200000, "lookups (stream tokens) per run at most");
  c->add_option("--size", size, "table size in parameters (NF4 file of ~0.53 B/param; report: 20e9)")
      ->capture_default_str();
  c->add_option("--layouts", layouts, "flat, engram, pagegram (config's slots) or pagegram:S")
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--depths", depths, "reads in flight")->delimiter(',')->capture_default_str();
  c->add_option("--seconds", seconds, "time limit per (layout, depth) run (0 = none)")->capture_default_str();
  c->add_option("--dir", dir, "where the table files live (default: <data cache>/iobench; must support O_DIRECT)");
  c->add_flag("--keep", keep, "keep the table files it created (a later run with the same --dir reuses them)");
  c->add_option("--out", out, "HDF5 output (optional)");
  static bool force = false;
  c->add_flag("--force", force, "replace --out even when it is not a previous output of this command");
  c->callback([] {
    if (!out.empty()) check_output_path(out, "pagegram-iobench", force, "--out");
    const double params = parse_count(size, "--size");
    for (int d : depths)
      if (d < 1 || d > 4096) throw UserError(str("--depths: reads in flight must be in [1, 4096], got ", d));
    if (seconds < 0) throw UserError(str("--seconds: must be >= 0, got ", seconds));
    Loaded l = load_stream(a);
    IoBenchSuiteConfig ic;
    ic.memory = l.cfg.memory;
    ic.d_model = l.cfg.model.d_model;
    ic.params = params;
    ic.depths = depths;
    ic.seconds = seconds;
    ic.dir = dir.empty() ? data::cache_dir(l.cfg.data) + "/iobench" : dir;
    ic.keep = keep;
    ic.layouts = parse_layouts(layouts, l.cfg.memory.slots);
    MemoryConfig engram = l.cfg.memory;  // the vocabulary of an engram table (nullptr unless one is faithful)
    engram.layout =
        std::any_of(ic.layouts.begin(), ic.layouts.end(), [](const FlashLayoutSpec& x) { return x.layout == "engram"; })
            ? "engram"
            : "none";
    const auto vocab = engram_vocab(engram, l.ds.tokenizer ? l.ds.tokenizer->pieces() : std::vector<std::string>{});
    ic.vocab = vocab.get();
    const IoBenchSuiteResult suite =
        run_iobench_suite(ic, l.stream, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
    const std::string& d = ic.dir;
    const std::vector<std::string>& created = suite.created;
    const std::vector<IoBenchResult>& results = suite.results;
    const std::string disk = describe_disk(d);
    std::printf("table files of %s params (%s on %s)%s\n", format_count(params).c_str(), d.c_str(), disk.c_str(),
                keep              ? ", kept"
                : created.empty() ? ", reused"
                                  : ", removed");
    std::printf("%s", format_iobench_table(results).c_str());
    if (!out.empty()) {
      auto attrs = run_attrs(cmdline(), &l);
      attrs.push_back({"table_params", format_count(params)});
      attrs.push_back({"disk", disk});
      write_iobench_h5(out, results, attrs);
      std::printf("wrote %s\n", out.c_str());
    }
  });
}

}  // namespace

void register_storage_commands(CLI::App& app) {
  register_collisions(app);
  register_addresses(app);
  register_export(app);
  register_flashsim(app);
  register_iobench(app);
}

}  // namespace pg::cli
