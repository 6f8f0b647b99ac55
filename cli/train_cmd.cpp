// `pagegram train`, `pagegram eval`, `pagegram bench train` and `pagegram bench overhead`.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/progress.h"
#include "core/build_info.h"
#include "kernels/kernels.h"
#include "storage/eval_stream.h"
#include "core/threads.h"
#include "core/timer.h"
#include "data/pipeline.h"
#include "data/synthetic.h"
#include "eval/collision_class.h"
#include "train/dist.h"
#include "train/memory_injector.h"
#include "train/overhead.h"
#include "train/trained_model.h"
#include "train/run_dir.h"
#include "train/trainer.h"

namespace pg::cli {
namespace {
std::string joined_command(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}
// "address 0.1%  gather 0.4%  ...": each memory phase as a share of `seconds`.
std::string phase_shares(const MemoryPhaseTimes& m, double seconds) {
  char buf[256];
  const auto pct = [&](double x) { return 100.0 * x / seconds; };
  std::snprintf(buf, sizeof(buf),
                "address %.1f%%  gather %.1f%%  project %.1f%%  inject %.1f%%  project back %.1f%%  table grad %.1f%%  "
                "table update %.1f%%",
                pct(m.address), pct(m.gather), pct(m.project), pct(m.inject), pct(m.project_back), pct(m.table_grad),
                pct(m.table_update));
  return buf;
}
// "table sharded by rows; peak RSS per rank 812 / 790 MiB": how the ranks held the table and what each held at most.
std::string ranks_memory(const TrainSummary& s) {
  std::string rss;
  for (const int64_t kb : s.rank_peak_rss_kb)
    rss += str(rss.empty() ? "" : " / ", fmt_fixed(static_cast<double>(kb) / 1024.0, 0));
  return str("table ", s.table_sharding == "rows" ? "sharded by rows" : "replicated", "; peak RSS per rank ", rss,
             " MiB");
}
}  // namespace

namespace {
// `pagegram train`: a run from a config (resume, stop-after, force).
void register_train(CLI::App& app, const std::string& command_line) {
  static std::string command;  // read by the callbacks, which run after registration
  command = command_line;
  static std::string config;
  static std::vector<std::string> sets;
  static bool resume = false;
  static int64_t stop_after = -1;
  CLI::App* c = app.add_subcommand("train", "train a model from a config (log.h5, checkpoint.h5 in train.out_dir)");
  c->add_option("--config", config, "experiment config YAML")->required();
  c->add_option("--set", sets, "override a key: --set train.seed=1 (repeatable)");
  c->add_flag("--resume", resume, "continue from <out_dir>/checkpoint.h5 (bit-identical to an unbroken run)");
  c->add_option("--stop-after", stop_after, "stop after this many steps (with a checkpoint), for staged runs")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000000}));
  static bool force = false;
  c->add_flag("--force", force,
              "replace a run of another config in train.out_dir, or start over where --resume cannot resume");
  c->callback([] {
    ExperimentConfig cfg = load_experiment(config, sets);
    TrainOptions opt;
    opt.resume = resume;
    opt.force = force;
    opt.command = command;
    opt.stop_after = stop_after;
    opt.link = dist::world_link();  // mpirun / srun --mpi=pmix: data-parallel ranks
    // The run directory before any work (the data may need minutes to prepare); rank 0 writes it.
    if (!opt.link || opt.link->rank() == 0) check_run_dir(cfg, resume, force);
    // the config as the user gave it, for the hints of data errors
    data::DataSet ds = data::open_dataset(cfg.data, cfg.tokenizer, config_args_hint(config, sets));
    TrainSummary s = train(cfg, ds, opt);
    if (s.rank != 0) return;  // rank 0 reports
    std::printf("run         %s\n", s.out_dir.c_str());
    if (s.ranks > 1)
      std::printf("ranks       %d (data-parallel, %s), %s\n", s.ranks, dist::mpi_description().c_str(),
                  ranks_memory(s).c_str());
    std::printf("steps       %ld..%ld of %ld (%.2fM tokens seen)\n", long(s.start_step),
                long(s.start_step + s.steps_done), long(s.total_steps), s.tokens / 1e6);
    if (s.start_step == 0) std::printf("held-out    start %.4f nats\n", s.first_eval);
    if (s.start_step + s.steps_done == s.total_steps) std::printf("held-out    end   %.4f nats\n", s.final_eval);
    std::printf("throughput  %.0f tok/s (training steps only)\n", s.train_tok_per_s);
    std::printf("wall time   %.1f s, peak RSS %.0f MiB\n", s.seconds, s.peak_rss_kb / 1024.0);
  });
}

// `pagegram eval`: the held-out loss of a checkpoint, optionally split by collision class.
void register_eval(CLI::App& app, const std::string& command_line) {
  static std::string command;  // read by the callbacks, which run after registration
  command = command_line;
  static std::string checkpoint;
  static int64_t windows = 0;
  static int64_t threads = 0;
  static bool classes = false;
  CLI::App* c = app.add_subcommand("eval", "held-out loss of a checkpoint on the fixed validation windows");
  c->add_flag("--collision-classes", classes,
              "also split the held-out loss by the collision class of each position's n-grams (clean / some heads / "
              "all heads read rows that training gave other n-grams; replays the run's training windows)");
  c->add_option("--checkpoint", checkpoint, "checkpoint.h5 of a run")->required();
  c->add_option("--windows", windows, "validation windows (0 = the config's train.eval_windows)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000000}));
  c->add_option("--threads", threads, "threads (0 = all)")->check(CLI::Range(int64_t{0}, int64_t{1024}));
  c->callback([] {
    setup_threads(static_cast<int>(threads));
    // Under mpirun the ranks share the work of holding the table: each loads its rows and fetches the others'.
    PeerLink* link = dist::world_link();
    if (link && classes)
      throw UserError("eval --collision-classes reads the whole table: run it as one process (without mpirun)");
    TrainedModel tm = load_trained_model(checkpoint, {.open_data = true, .table_ready = false, .link = link});
    const ExperimentConfig& cfg = tm.cfg();
    const data::DataSet& ds = *tm.data;
    const TrainState& st = tm.state();
    data::ValidationWindows val = ds.validation(cfg.model.context);
    if (windows > val.count())
      throw UserError(str("--windows ", windows, ": the validation split holds ", val.count(), " windows of ",
                          cfg.model.context + 1, " tokens (hint: at most ", val.count(),
                          ", or raise data.val_tokens)"));
    const int64_t n = windows > 0 ? windows : std::min<int64_t>(cfg.train.eval_windows, val.count());
    Timer t;
    ProgressLine line("eval windows", n);
    const double loss = tm.session->evaluate(val, n, *ds.heldout, [&](int64_t done, int64_t) { line.update(done); });
    line.finish();
    if (link && link->rank() != 0) return;  // rank 0 reports
    std::printf("checkpoint  %s (step %ld, %.2fM tokens)\n", checkpoint.c_str(), long(st.step), st.tokens / 1e6);
    if (link) std::printf("ranks       %d%s\n", link->size(), tm.mem() ? ", table sharded by rows" : "");
    std::printf("held-out    %.6f nats over %ld windows of %ld tokens (%.1f s)\n", loss, long(n),
                long(cfg.model.context), t.seconds());
    if (classes) {
      Timer tc;
      ProgressLine cl("collision classes: windows", n);
      const CollisionClassReport r = loss_by_collision_class(tm, n, [&](int64_t done, int64_t) { cl.update(done); });
      cl.finish();
      std::printf("%s(%.1f s)\n", format_collision_class_table(r).c_str(), tc.seconds());
    }
  });
}

// `pagegram bench train`: steady-state training tokens/s and peak RSS.
void register_bench_train(CLI::App* bench) {
  static std::string config;
  static std::vector<std::string> sets;
  static int64_t steps = 5, warmup = 1;
  static bool synthetic = false;
  CLI::App* c = bench->add_subcommand("train", "steady-state training tokens/s and peak RSS (no files written)");
  c->add_option("--config", config, "experiment config YAML")->required();
  c->add_option("--set", sets, "override a key (repeatable)");
  c->add_option("--steps", steps, "timed optimizer steps")->capture_default_str();
  c->add_option("--warmup", warmup, "untimed warm-up steps")->capture_default_str();
  c->add_flag("--synthetic", synthetic,
              "random tokens in a temporary token store instead of the corpus "
              "(no data build needed; the same work per token)");
  c->callback([] {
    ExperimentConfig cfg = load_experiment(config, sets);
    cfg.train.eval_interval = 0;
    cfg.train.eval_windows = 1;
    std::unique_ptr<data::SyntheticDataSet> syn;
    if (synthetic)
      syn = std::make_unique<data::SyntheticDataSet>(cfg.model.vocab, cfg.model.context,
                                                     static_cast<uint64_t>(cfg.train.seed));
    data::DataSet ds =
        synthetic ? syn->dataset() : data::open_dataset(cfg.data, cfg.tokenizer, config_args_hint(config, sets));
    TrainOptions opt;
    opt.write_files = false;
    opt.progress = false;
    opt.stop_after = warmup + steps;
    opt.untimed_steps = warmup;  // the first steps fault in every buffer
    cfg.train.steps = std::max<int64_t>(cfg.train.total_steps(), warmup + steps + 1);
    opt.link = dist::world_link();  // under mpirun: every rank trains, rank 0 reports
    opt.measure_exchange = true;
    TrainSummary s = train(cfg, ds, opt);
    if (s.rank != 0) return;
    const double flops = Transformer::flops_per_token(cfg.model);
    std::printf("bench train %s: %ld steps x %ld tokens, %d threads%s\n", cfg.name.c_str(), long(steps),
                long(cfg.train.tokens_per_step), thread_count(),
                s.ranks > 1 ? str(" per rank, ", s.ranks, " ranks").c_str() : "");
    std::printf(
        "gradients %ld dense floats (%.2f MB), %ld table rows x %ld touched in the last step (%.2f MB as "
        "(row, gradient) pairs); gradient tree buffers %.1f MiB\n",
        long(s.dense_grad_floats), 4e-6 * static_cast<double>(s.dense_grad_floats), long(s.touched_rows),
        long(s.table_width), 1e-6 * static_cast<double>(s.touched_rows * (8 + 4 * s.table_width)),
        static_cast<double>(s.tree_bytes) / (1024.0 * 1024.0));
    if (s.ranks > 1 && s.train_seconds > 0) {
      const ExchangeStats& x = s.exchange;
      const double n = static_cast<double>(steps), xfer = x.seconds - x.wait_seconds;
      std::printf(
          "exchange %.1f%% of step time (rank 0, per step: %.2f ms transfer + additions, %.2f ms waiting for "
          "the slower rank): %.3f MB sent per step per rank in %.1f messages\n",
          100.0 * xfer / s.train_seconds, 1e3 * xfer / n, 1e3 * x.wait_seconds / n,
          static_cast<double>(x.bytes_sent) / 1e6 / n, static_cast<double>(x.messages) / n);
      std::printf("ranks %d, %s\n", s.ranks, ranks_memory(s).c_str());
    }
    const kern::PeakResult peak = kern::measure_peak();
    std::printf("kernels %s on %s\n", kern::run_kernels_name(cfg.train.bf16()).c_str(), isa::cpu_description().c_str());
    // In bf16 the share is of the bf16 peak of the kernels used: TDPBF16PS tiles, VDPBF16PS chains, or the FMA peak
    // where bf16 is emulated (one FMA per product).
    const bool bf = cfg.train.bf16();
    const std::string bname = kern::bf16_name();
    const bool amx = bname == "amx" && peak.amx_gflops > 0, native = bname == "vdpbf16ps" && peak.bf16_gflops > 0;
    const double pk = !bf ? peak.fma_gflops : amx ? peak.amx_gflops : native ? peak.bf16_gflops : peak.fma_gflops;
    std::printf(
        "tok/s %.0f  GFLOP/s %.1f (%.0f%% of the %s peak %.0f GFLOP/s; kernels/gemm alone %.0f)  peak RSS %.0f MiB\n",
        s.train_tok_per_s, s.train_tok_per_s * flops / 1e9, 100.0 * s.train_tok_per_s * flops / 1e9 / pk,
        !bf      ? "FMA"
        : amx    ? "bf16 (amx tiles)"
        : native ? "bf16 (vdpbf16ps)"
                 : "FMA (bf16 emulated with fp32 FMAs)",
        pk, bf ? peak.bf16_gemm_gflops : peak.gemm_gflops, s.peak_rss_kb / 1024.0);
    // The median step: what ../shared/bench/torch_reference_bench.py reports for PyTorch (its RESULT line), and
    // steadier than the mean on a VM whose neighbours take the cores for a step or two.
    if (!s.step_seconds.empty()) {
      const double tps = static_cast<double>(cfg.train.tokens_per_step);
      const double med = tps / median(s.step_seconds);
      const auto [lo, hi] = std::minmax_element(s.step_seconds.begin(), s.step_seconds.end());
      std::printf(
          "median step tok/s %.0f  GFLOP/s %.1f (%.0f%% of that peak); fastest step %.0f, slowest %.0f tok/s "
          "(%zu timed steps)\n",
          med, med * flops / 1e9, 100.0 * med * flops / 1e9 / pk, tps / *lo, tps / *hi, s.step_seconds.size());
    }
    const MemoryPhaseTimes& m = s.memory_times;
    if (m.total() > 0 && s.train_seconds > 0)
      std::printf("memory %.1f%% of step time: %s\n", 100.0 * m.total() / s.train_seconds,
                  phase_shares(m, s.train_seconds).c_str());
    if (cfg.memory.enabled() && cfg.memory.collision_stats && s.train_seconds > 0)
      std::printf(
          "collision statistics %.2f%% of step time (%.1f ms per step; memory.collision_stats=false "
          "turns them off); owner counts %.1f MiB\n",
          100.0 * m.collisions / s.train_seconds, 1e3 * m.collisions / static_cast<double>(steps),
          static_cast<double>(s.collision_owner_bytes) / (1024.0 * 1024.0));
  });
}

// `pagegram bench peak`: the machine's FMA and bf16 peaks and the GEMM's share of them.
void register_bench_peak(CLI::App* bench) {
  CLI::App* pk =
      bench->add_subcommand("peak", "the machine's fp32 FMA peak and kernels/gemm's share of it (this ISA's kernels)");
  static int64_t pthreads = 0;
  pk->add_option("--threads", pthreads, "threads (0 = all allowed CPUs)")->check(CLI::Range(int64_t{0}, int64_t{1024}));
  pk->callback([] {
    setup_threads(static_cast<int>(pthreads));
    const kern::PeakResult p = kern::measure_peak(5);
    std::printf("kernels %s on %s, %d threads\n", kern::active_name(), isa::cpu_description().c_str(), p.threads);
    std::printf("fma peak %.1f GFLOP/s  gemm (M %d/thread, K 192, N 768) %.1f GFLOP/s = %.0f%% of peak\n", p.fma_gflops,
                1024, p.gemm_gflops, 100.0 * p.gemm_gflops / p.fma_gflops);
    if (p.amx_gflops > 0)
      std::printf("amx peak %.1f GFLOP/s (tdpbf16ps)%s\n", p.amx_gflops,
                  kern::bf16_name() == "amx" ? "" : " (not the bf16 kernels in use: see PAGEGRAM_BF16)");
    if (p.amx_gflops > 0 && kern::bf16_name() == "amx")
      std::printf("gemm in bf16 (amx) %.1f GFLOP/s = %.0f%% of the amx peak\n", p.bf16_gemm_gflops,
                  100.0 * p.bf16_gemm_gflops / p.amx_gflops);
    else if (p.bf16_gflops > 0 && kern::bf16_name() == "vdpbf16ps")
      std::printf("bf16 peak %.1f GFLOP/s (vdpbf16ps)  gemm in bf16 %.1f GFLOP/s = %.0f%% of the bf16 peak\n",
                  p.bf16_gflops, p.bf16_gemm_gflops, 100.0 * p.bf16_gemm_gflops / p.bf16_gflops);
    else
      std::printf(
          "bf16 peak = fma peak (bf16 is emulated with fp32 FMAs, one per product)  gemm in bf16 (%s) %.1f "
          "GFLOP/s = %.0f%% of it\n",
          kern::bf16_name().c_str(), p.bf16_gemm_gflops, 100.0 * p.bf16_gemm_gflops / p.fma_gflops);
  });
}

// `pagegram bench overhead`: a memory table's cost, round-robin in one process.
void register_bench_overhead(CLI::App* bench) {
  static std::vector<std::string> configs, osets;
  static int64_t rounds = 10, owarmup = 2;
  CLI::App* o = bench->add_subcommand(
      "overhead", "memory-table overhead in one process: one step of each config in turn, round after round");
  o->add_option("--config", configs,
                "experiment configs (repeat): the first is the baseline (e.g. configs/b/none.yaml)")
      ->required();
  o->add_option("--set", osets, "override a key in every config (repeatable)");
  o->add_option("--rounds", rounds, "timed rounds")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  o->add_option("--warmup", owarmup, "untimed rounds")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  o->callback([] {
    std::vector<ExperimentConfig> cfgs;
    for (const std::string& c : configs) cfgs.push_back(load_experiment(c, osets));
    const OverheadResult r = measure_overhead(cfgs, rounds, owarmup, [](int64_t i) {
      std::fprintf(stderr, "round %ld/%ld\n", long(i + 1), long(rounds + owarmup));
    });
    std::printf("bench overhead: %ld rounds (+%ld untimed) x %zu configs, %ld tokens per step, %d threads; %s\n",
                long(rounds), long(owarmup), cfgs.size(), long(r.tokens_per_step), r.threads,
                (std::string("pagegram ") + build::kRevision).c_str());
    std::printf(
        "| config | layout | tok/s, median (min – max) | overhead vs %s: median of rounds (min – max) | "
        "memory work, %% of step | peak RSS (process) |\n|---|---|---:|---:|---:|---:|\n",
        r.variants[0].name.c_str());
    const std::vector<OverheadRow> rows = overhead_rows(r);
    for (size_t i = 0; i < r.variants.size(); ++i) {
      const OverheadVariant& v = r.variants[i];
      const OverheadRow& w = rows[i];
      std::printf("| %s | %s | %.0f (%.0f – %.0f) | %+.1f%% (%+.1f%% – %+.1f%%) | %.1f%% | %.0f MiB |\n",
                  v.name.c_str(), v.layout.c_str(), w.tok_s_median, w.tok_s_min, w.tok_s_max, w.overhead_median,
                  w.overhead_min, w.overhead_max, w.memory_share, r.peak_rss_kb / 1024.0);
    }
    for (size_t i = 0; i < r.variants.size(); ++i)
      if (r.variants[i].phases.total() > 0)
        std::printf("%s: %s of its step time\n", r.variants[i].name.c_str(),
                    phase_shares(r.variants[i].phases, rows[i].seconds).c_str());
  });
}

// `pagegram bench train|peak|overhead`.
void register_bench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  register_bench_train(bench);
  register_bench_peak(bench);
  register_bench_overhead(bench);
}

}  // namespace

void register_train_commands(CLI::App& app, int argc, char** argv) {
  static const std::string command = joined_command(argc, argv);
  register_train(app, command);
  register_eval(app, command);
  register_bench(app);
}

}  // namespace pg::cli
