// Implementation of train/trainer.h.
#include "train/trainer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/rng.h"
#include "core/text.h"
#include "core/threads.h"
#include "core/timer.h"
#include "train/checkpoint.h"
#include "train/dist.h"
#include "train/run_dir.h"
#include "train/run_log.h"
#include "train/session.h"

namespace pg {

int64_t peak_rss_kb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  return 0;
}

namespace {

// The divergence rule besides non-finite values (docs/robustness.md, "Divergence"): over windows of kDivergeWindow
// steps, a run has diverged when its mean training loss rises more than kDivergeNats above the lowest window mean so
// far (or above its first step's loss, if that is lower). Healthy runs move well under 1 nat between such windows.
constexpr int64_t kDivergeWindow = 10;
constexpr double kDivergeNats = 2.0;
class DivergenceWatch {
 public:
  // Returns a reason when the run has diverged after this step's loss.
  std::string add(int64_t step, double loss) {
    if (first_ < 0) first_ = loss;
    window_.push_back(loss);
    if (static_cast<int64_t>(window_.size()) > kDivergeWindow) window_.erase(window_.begin());
    if (static_cast<int64_t>(window_.size()) < kDivergeWindow) return "";
    double m = 0;
    for (double x : window_) m += x;
    m /= static_cast<double>(window_.size());
    best_ = std::min(best_, m);
    const double ref = std::min(best_, first_);
    if (m > ref + kDivergeNats)
      return str("mean training loss of steps ", step - kDivergeWindow + 1, "-", step, " is ", m, " nats, more than ",
                 kDivergeNats, " above ", ref, " (its best ", kDivergeWindow, "-step mean or first loss)");
    return "";
  }

 private:
  double first_ = -1, best_ = 1e300;
  std::vector<double> window_;
};

}  // namespace

namespace {

// Training progress on stderr: an updating line on a terminal, plain lines otherwise (at most every ~10 s).
class TrainProgress {
 public:
  explicit TrainProgress(bool on) : on_(on), tty_(isatty(STDERR_FILENO) != 0) {}
  void step(int64_t step, int64_t total, int64_t tokens, double loss, double tok_s, double eta_s) {
    if (!on_) return;
    if (!tty_ && step != total && since_.seconds() < 10.0) return;
    since_.reset();
    std::fprintf(stderr, "%sstep %ld/%ld  tokens %.2fM  loss %.4f  %.0f tok/s  ETA %s%s", tty_ ? "\r\033[K" : "",
                 long(step), long(total), tokens / 1e6, loss, tok_s, fmt_duration(eta_s).c_str(), tty_ ? "" : "\n");
    std::fflush(stderr);
  }
  // "eval k/n windows, r windows/s, ETA" once evaluation has run for 2 s: updating on a terminal, else every 10 s.
  void eval(int64_t done, int64_t total, double seconds) {
    if (!on_ || seconds < 2.0 || done == total) return;
    if (since_.seconds() < (tty_ ? 0.5 : 10.0)) return;
    since_.reset();
    const double rate = static_cast<double>(done) / seconds;
    std::fprintf(stderr, "%seval %ld/%ld windows  %.1f windows/s  ETA %s%s", tty_ ? "\r\033[K" : "", long(done),
                 long(total), rate, fmt_duration(static_cast<double>(total - done) / rate).c_str(), tty_ ? "" : "\n");
    std::fflush(stderr);
  }
  void line(const std::string& s) {
    if (!on_) return;
    std::fprintf(stderr, "%s%s\n", tty_ ? "\r\033[K" : "", s.c_str());
  }

 private:
  bool on_, tty_;
  Timer since_;
};

// Every rank must train the same thing from the same state (else their sums are garbage).
void check_ranks_agree(PeerLink& link, const ExperimentConfig& cfg, const TrainState& st, bool resumed) {
  ExperimentConfig norm = cfg;
  norm.train.threads = 0;
  norm.train.out_dir = "";
  check_same_on_all_ranks(link, hash_name(cfg::dump(norm)), "the config (train.threads and out_dir aside)");
  check_same_on_all_ranks(link, hash_name(str(st.step, " ", st.sampler_counter, " ", resumed)),
                          "the checkpoint to resume from (step and data position)");
}

// Before a resume at `step` > 0 reads it: the log must be this run's (it is flushed before each checkpoint).
void check_log_before_resume(const std::string& log_path, const std::string& ckpt, int64_t step,
                             const ExperimentConfig& cfg) {
  if (!std::filesystem::exists(log_path))
    throw IoError(str(log_path, ": missing, but ", ckpt, " is at step ", step,
                      " (hint: the log cannot be rebuilt; remove checkpoint.h5 to start the run over, or use "
                      "another train.out_dir)"));
  if (!same_results(parse_experiment(h5::File::open(log_path).root().attr_string("config"), log_path + ":/config"),
                    cfg))
    throw IoError(str(log_path,
                      ": the log belongs to a run with another config (hint: never copy logs between "
                      "runs; remove checkpoint.h5 and log.h5 to start over)"));
}

// After loading it: the log's training rows are steps 1..step, one by one.
void check_log_covers(const RunLog& log, const std::string& log_path, const std::string& ckpt, int64_t step) {
  const std::vector<int64_t>& steps = log.train_steps();
  bool contiguous = static_cast<int64_t>(steps.size()) == step;
  for (size_t i = 0; contiguous && i < steps.size(); ++i) contiguous = steps[i] == static_cast<int64_t>(i) + 1;
  if (!contiguous)
    throw IoError(str(log_path, ": its training rows (", steps.size(), " rows, last step ",
                      steps.empty() ? 0 : steps.back(), ") do not cover steps 1..", step, " of ", ckpt,
                      " one by one (hint: the log was edited or belongs to another run; remove checkpoint.h5 and "
                      "log.h5 to start over)"));
}

// The memory's per-step scalars (gates, context-gate means, touched rows) and, on observed logged steps, its
// collision statistics.
void log_memory_step(RunLog& log, const StepStats& ss, int64_t step, const MemoryConfig& mc, bool collisions) {
  const MemoryInjectorStats& ms = ss.memory;
  for (size_t j = 0; j < ms.gates.size(); ++j) log.scalar(str("memory/gate", j), step, ms.gates[j]);
  for (size_t j = 0; j < ms.mean_alpha.size(); ++j) log.scalar(str("memory/mean_alpha", j), step, ms.mean_alpha[j]);
  log.scalar("memory/touched_rows", step, static_cast<double>(ms.touched_rows));
  if (collisions) log.collisions(step, ss.collisions, mc.orders, mc.collision_owners);
}

// The validation windows of each evaluation; ConfigError when there is none (every evaluation would be a mean over
// no window, NaN, and the run would look finished).
int64_t eval_window_count(const ExperimentConfig& cfg, const data::ValidationWindows& val) {
  const int64_t T = cfg.model.context, eval_n = std::min<int64_t>(cfg.train.eval_windows, val.count());
  if (eval_n < 1)
    throw ConfigError(str("data.val_tokens = ", cfg.data.val_tokens, " holds no validation window of T + 1 = ", T + 1,
                          " tokens (hint: data.val_tokens >= (model.context + 1) x train.eval_windows, e.g. ",
                          (T + 1) * std::min<int64_t>(cfg.train.eval_windows, 2048), ")"));
  return eval_n;
}

// What the session knows about the run when it ends: memory, phase times, exchange, sizes.
void add_session_facts(TrainSummary& sum, Session& session) {
  MemoryInjector* mem = session.memory();
  sum.peak_rss_kb = peak_rss_kb();
  if (mem) sum.memory_times = mem->phase_times();
  if (mem && mem->collision_counter()) sum.collision_owner_bytes = mem->collision_counter()->owner_bytes();
  sum.exchange = session.exchange_stats();
  sum.tree_bytes = session.tree_bytes();
  sum.dense_grad_floats = static_cast<int64_t>(session.model().grads().size() + (mem ? mem->dense_grads().size() : 0));
  sum.table_width = mem ? mem->table().layout().width() : 0;
}

// The first progress line: steps, batch, ranks, threads, where a resume starts.
std::string start_line(const ExperimentConfig& cfg, const ThreadInfo& threads, int ranks, int64_t step) {
  const TrainConfig& tc = cfg.train;
  const int64_t T = cfg.model.context, accum = tc.accum_steps(T);
  return str("train ", cfg.name, ": ", tc.total_steps(), " steps x ", tc.tokens_per_step, " tokens (", accum,
             " micro-batches of ", tc.micro_batch, "x", T, "), ",
             ranks > 1 ? str(ranks, " ranks x ", accum / ranks, " micro-batches, ") : std::string(), threads.threads,
             " threads", ranks > 1 ? " per rank" : "", threads.pinned ? " pinned" : "",
             step > 0 ? str(", resuming at step ", step) : std::string());
}

// The run's summary attributes of the log (/summary): speed, memory, the memory's share of the step time.
void log_summary(RunLog& log, const TrainSummary& sum, const ExperimentConfig& cfg, bool has_memory) {
  log.set_summary("train_tok_per_s", sum.train_tok_per_s);
  log.set_summary("peak_rss_kb", static_cast<double>(sum.peak_rss_kb));
  if (has_memory && sum.train_seconds > 0) {  // the memory's own work (phase timers) as a share of the training steps
    const MemoryPhaseTimes& m = sum.memory_times;
    log.set_summary("memory_work_fraction", m.total() / sum.train_seconds);
    log.set_summary("memory_projection_fraction", (m.project + m.project_back) / sum.train_seconds);
    log.set_summary("memory_table_fraction",
                    (m.address + m.gather + m.table_grad + m.table_update) / sum.train_seconds);
    if (cfg.memory.collision_stats) log.set_summary("collision_stats_fraction", m.collisions / sum.train_seconds);
  }
  if (sum.collision_owner_bytes > 0)
    log.set_summary("collision_owner_bytes", static_cast<double>(sum.collision_owner_bytes));
  if (!log.eval_loss().empty()) log.set_summary("final_eval_loss", log.eval_loss().back());
}

}  // namespace

TrainSummary train(const ExperimentConfig& cfg, const data::DataSet& ds, const TrainOptions& opt) {
  const ThreadInfo threads = setup_threads(static_cast<int>(cfg.train.threads));
  const TrainConfig& tc = cfg.train;
  const int64_t T = cfg.model.context, total_steps = tc.total_steps();
  if (ds.tokenizer && ds.tokenizer->vocab_size() != cfg.model.vocab)
    throw ConfigError(str("model.vocab = ", cfg.model.vocab, " but the tokenizer has ", ds.tokenizer->vocab_size(),
                          " pieces (hint: set model.vocab and tokenizer.vocab_size to the same value)"));

  const int ranks = opt.link ? opt.link->size() : 1, rank = opt.link ? opt.link->rank() : 0;
  if (opt.link) check_ranks(cfg, ranks);
  const bool root = rank == 0;
  const bool write_files = opt.write_files && root;  // rank 0 writes the run directory, the others nothing
  if (write_files) check_run_dir(cfg, opt.resume, opt.force);  // before any work: what the directory may hold
  // Refused before allocating, not by the kernel's OOM killer; every rank checks before any rank allocates (a rank
  // that allocated first would shrink what the last one sees available).
  check_fits_in_memory(cfg, tc.out_dir, ranks, opt.link && dist::world().mpi ? dist::world().local_size : 1);
  if (opt.link) {
    double checked = 0;
    tree_allreduce(*opt.link, checked);  // a barrier
  }
  Session session(cfg, {.optimizer = true, .tokenizer = ds.tokenizer.get(), .link = opt.link});
  session.set_measure_exchange(opt.measure_exchange);
  MemoryInjector* mem = session.memory();
  TrainState& st = session.state();
  data::WindowSampler sampler = ds.sampler(T, static_cast<uint64_t>(tc.seed));
  data::ValidationWindows val = ds.validation(T);
  const int64_t eval_n = eval_window_count(cfg, val);

  const std::string ckpt = tc.out_dir + "/checkpoint.h5", log_path = tc.out_dir + "/log.h5";
  std::unique_ptr<RunDirLock> lock;
  if (write_files) {
    lock = std::make_unique<RunDirLock>(tc.out_dir, opt.command);
    remove_stale_temporaries(tc.out_dir);  // core/text.h: those of dead processes (ESRCH), never a live one's
    // Table shard files the checkpoint does not map: of a save killed before its commit, or after it and before
    // its clean-up (nothing is removed beside a checkpoint that cannot be read).
    if (std::filesystem::exists(ckpt)) {
      try {
        remove_stale_table_shards(ckpt, checkpoint_shard_files(ckpt));
      } catch (const std::exception&) {  // the resume (or a restart's --force check) reports what is wrong with it
      }
    } else {
      remove_stale_table_shards(ckpt, {});
    }
  }
  const bool resumed = opt.resume && std::filesystem::exists(ckpt);
  if (resumed) {
    // Thread count and run directory do not change results (bit-identical for any thread count).
    if (!same_results(checkpoint_config(ckpt), cfg))
      throw ConfigError(str(ckpt, ": the checkpoint was written with a different config (hint: resume with the ",
                            "same config, or use a new train.out_dir)"));
    session.load(ckpt);
    sampler.set_counter(st.sampler_counter);
  }
  if (opt.link) check_ranks_agree(*opt.link, cfg, st, resumed);
  RunMeta meta{cfg::dump(cfg), opt.command, threads.threads,  threads.pinned,
               threads.cpus,   ranks,       cfg.train.bf16(), data::dataset_fingerprint(ds)};
  // Without a checkpoint a "resume" starts over, and so does the log (no duplicate step-0 rows).
  const bool check_log = resumed && write_files && st.step > 0;
  if (check_log) check_log_before_resume(log_path, ckpt, st.step, cfg);
  // Every rank reads a resumed log (its losses feed the divergence rule, which every rank applies alike).
  RunLog log(log_path, meta, resumed ? st.step : -1);
  if (check_log) check_log_covers(log, log_path, ckpt, st.step);
  if (write_files) write_text_atomic(tc.out_dir + "/config.yaml", cfg::dump(cfg) + "\n");

  TrainProgress progress(opt.progress && root);
  progress.line(start_line(cfg, threads, ranks, st.step));

  TrainSummary sum;
  sum.start_step = st.step;
  sum.total_steps = total_steps;
  sum.out_dir = tc.out_dir;
  Timer wall;
  auto run_eval = [&](int64_t step) {
    Timer t;
    const double l = session.evaluate(val, eval_n, *ds.heldout,
                                      [&](int64_t done, int64_t total) { progress.eval(done, total, t.seconds()); });
    log.eval_row(step, st.tokens, l);
    progress.line(str("eval step ", step, ": held-out loss ", l, " over ", eval_n, " windows (", t.seconds(), " s)"));
    return l;
  };
  if (st.step == 0) sum.first_eval = run_eval(0);

  double train_seconds = 0.0;
  int64_t steps_this_call = 0;
  double last_loss = 0.0;
  DivergenceWatch watch;
  for (size_t i = 0; i < log.train_steps().size(); ++i) watch.add(log.train_steps()[i], log.train_losses()[i]);
  auto diverged = [&](const std::string& why) {
    log.set_status("diverged");
    if (write_files) log.flush();
    return UserError(str("training diverged at step ", st.step, ": ", why,
                         " (hint: lower train.lr; the last good checkpoint is ",
                         std::filesystem::exists(ckpt) ? ckpt : std::string("not written yet"), ")"));
  };
  while (st.step < total_steps && (opt.stop_after < 0 || steps_this_call < opt.stop_after)) {
    if (steps_this_call == opt.untimed_steps) {  // time the timed steps only
      if (mem) mem->reset_phase_times();
      session.reset_exchange_stats();
    }
    Timer step_timer;
    // Collision statistics: reported on the steps that reach the log file; every step is observed when the
    // owners' running counts are tracked (they count every lookup of the run).
    const bool log_step = (st.step + 1) % tc.log_interval == 0 || st.step + 1 == total_steps ||
                          (opt.stop_after >= 0 && steps_this_call + 1 == opt.stop_after);
    const bool observe = root && mem && cfg.memory.collision_stats && (log_step || cfg.memory.collision_owners);
    const StepStats ss =
        session.step(*ds.train, sampler, {.observe_collisions = observe, .report_collisions = log_step});
    const double loss = ss.loss, gnorm = ss.grad_norm, lr = ss.lr;
    // A diverged step is reported, never checkpointed (its update is discarded with the process).
    if (!std::isfinite(loss) || !std::isfinite(gnorm)) throw diverged(str("loss ", loss, ", grad norm ", gnorm));
    if (const std::string why = watch.add(st.step, loss); !why.empty()) throw diverged(why);
    if (mem) {
      log_memory_step(log, ss, st.step, cfg.memory, observe && log_step);
      sum.touched_rows = ss.memory.touched_rows;
    }
    const double dt = step_timer.seconds();
    st.elapsed_s += dt;
    ++steps_this_call;
    if (steps_this_call > opt.untimed_steps) {
      train_seconds += dt;
      sum.step_seconds.push_back(dt);
    }
    last_loss = loss;
    const auto timed_steps = static_cast<int64_t>(sum.step_seconds.size());
    const double tok_s =
        static_cast<double>(tc.tokens_per_step) * std::max<int64_t>(timed_steps, 1) / std::max(train_seconds, dt);
    log.train_row(st.step, st.tokens, loss, lr, gnorm, static_cast<double>(tc.tokens_per_step) / dt, st.elapsed_s);
    progress.step(st.step, total_steps, st.tokens, loss, tok_s,
                  static_cast<double>(total_steps - st.step) * tc.tokens_per_step / tok_s);
    const bool last = st.step == total_steps;
    if (last || (tc.eval_interval > 0 && st.step % tc.eval_interval == 0)) sum.final_eval = run_eval(st.step);
    const bool stop = last || (opt.stop_after >= 0 && steps_this_call == opt.stop_after);
    const bool checkpoint =
        opt.write_files && (stop || (tc.checkpoint_interval > 0 && st.step % tc.checkpoint_interval == 0));
    // The log is flushed before a checkpoint, so it always holds every step the checkpoint has (a kill between
    // the two leaves extra rows, which a resume truncates); "finished" is written only after the final checkpoint.
    if (write_files && (checkpoint || st.step % tc.log_interval == 0)) log.flush();
    if (checkpoint && (root || session.table_sharded())) {  // a sharded table: every rank sends rank 0 its rows
      if (!session.finite()) throw diverged("non-finite parameters or optimizer state after the update");
      session.save(ckpt, !last);  // the run's last save keeps no earlier shard files
    }
    if (write_files && last) {
      log.set_status("finished");
      log.flush();
    }
  }
  if (st.step == total_steps) log.set_status("finished");  // also when resumed after the last step
  if (steps_this_call == 0 && !log.eval_loss().empty()) sum.final_eval = log.eval_loss().back();
  sum.steps_done = steps_this_call;
  sum.tokens = st.tokens;
  sum.seconds = wall.seconds();
  const double timed_tokens = static_cast<double>(sum.step_seconds.size()) * static_cast<double>(tc.tokens_per_step);
  sum.train_tok_per_s = train_seconds > 0 ? timed_tokens / train_seconds : 0;
  sum.final_train_loss = last_loss;
  sum.train_seconds = train_seconds;
  sum.ranks = ranks, sum.rank = rank;
  sum.table_sharding = cfg.train.table_sharding;
  add_session_facts(sum, session);
  if (opt.link && ranks > 1) {  // every rank's peak RSS to rank 0 (what sharding saves is per rank)
    sum.rank_peak_rss_kb.assign(static_cast<size_t>(ranks), 0);
    sum.rank_peak_rss_kb[static_cast<size_t>(rank)] = sum.peak_rss_kb;
    for (int q = 1; q < ranks; ++q)
      if (root) opt.link->sendrecv(q, {}, bytes_of(&sum.rank_peak_rss_kb[static_cast<size_t>(q)], 1));
      else if (rank == q) opt.link->sendrecv(0, bytes_of(&sum.peak_rss_kb, 1), {});
  }
  if (write_files) {
    log_summary(log, sum, cfg, mem != nullptr);
    log.flush();
  }
  return sum;
}

}  // namespace pg
