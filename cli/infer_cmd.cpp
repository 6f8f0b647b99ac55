// `pagegram generate` and `pagegram serve` (infer/).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "core/error.h"
#include "kernels/kernels.h"
#include "core/sysinfo.h"
#include "core/text.h"
#include "core/threads.h"
#include "core/timer.h"
#include "infer/bench.h"
#include "infer/completion.h"
#include "infer/http.h"
#include "infer/serve.h"
#include "storage/eval_stream.h"

namespace pg::cli {
namespace {
void add_engine_options(CLI::App* c, EngineOptions& o, std::string& cache, int64_t& threads) {
  c->add_option("--checkpoint", o.checkpoint, "checkpoint.h5 of a run (or --model)");
  c->add_option("--model", o.model_dir,
                "a model folder (export --model-dir): its checkpoint.h5, tokenizer.model and table.pgt");
  c->add_option("--table", o.table,
                "the memory table as an exported .pgt file (default: the checkpoint's fp32 table in RAM)");
  c->add_option("--table-mode", o.table_mode,
                "how --table is read: mmap, mmap-warm (every page read at load) or direct "
                "(O_DIRECT + io_uring, with --cache)")
      ->capture_default_str();
  c->add_option("--tokenizer", o.tokenizer,
                "the sentencepiece model (default: tokenizer.model beside the checkpoint, else the data cache's)");
  c->add_option("--cache", cache, "direct: LRU page cache size, e.g. 1GiB (0 = none: every lookup reads the disk)")
      ->capture_default_str();
  c->add_option("--batch", o.max_batch, "rows per forward: sessions decoded together, prefill chunk")
      ->capture_default_str();
  c->add_flag(
      "--no-overlap", [&o](int64_t) { o.overlap = false; },
      "read the table rows before the forward instead of beside the blocks before the first injection");
  c->add_option("--threads", threads, "threads (0 = all allowed CPUs, pinned)")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}));
}

// serve --http: the server runs until SIGINT or SIGTERM. The handlers (installed whatever the signals' inherited
// disposition: a server started in the background of a script inherits SIGINT ignored) write the signal to a pipe;
// a thread of its own reads it and stops the server cleanly. Whichever thread the kernel hands the signal to (the
// OpenMP workers started before this point included), it reaches the pipe.
int g_stop_pipe[2] = {-1, -1};
extern "C" void on_serve_stop_signal(int sig) {
  const int saved = errno;
  const char c = static_cast<char>(sig);
  const ssize_t n = ::write(g_stop_pipe[1], &c, 1);  // non-blocking: a full pipe already holds a stop
  (void)n;
  errno = saved;
}

void serve_http(EngineOptions& o, HttpOptions& h) {
  if (h.model_name.empty()) {  // the model folder's name, or the checkpoint's run directory's
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::absolute(
        !o.model_dir.empty() ? std::filesystem::path(o.model_dir) / "x" : std::filesystem::path(o.checkpoint), ec);
    h.model_name = !ec && !p.parent_path().filename().empty() ? p.parent_path().filename().string() : "pagegram";
  }
  std::unique_ptr<Engine> e = open_engine(o);
  HttpServer server(*e, h);
  const int port = server.bind();
  if (::pipe2(g_stop_pipe, O_CLOEXEC) != 0 || ::fcntl(g_stop_pipe[1], F_SETFL, O_NONBLOCK) != 0)
    throw ResourceError(str("serve: cannot make a pipe: ", std::strerror(errno)));
  struct sigaction sa = {}, old_int = {}, old_term = {};
  sa.sa_handler = on_serve_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  std::fprintf(stderr, "serving %s (%s) on http://%s:%d (model '%s', %lld decoded together); Ctrl-C stops\n",
               (o.model_dir.empty() ? o.checkpoint : o.model_dir).c_str(),
               e->source() ? e->source()->describe().c_str() : "no memory table", h.host.c_str(), port,
               h.model_name.c_str(), static_cast<long long>(h.max_active));
  std::atomic<bool> ran{false};
  std::thread waiter([&] {
    char sig = 0;
    while (::read(g_stop_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    if (sig == 0) return;  // the server stopped by itself
    std::fprintf(stderr, "serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    // A stop that comes before the listener runs is not seen by it: ask again until run() has returned.
    while (!ran.load()) {
      server.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  server.run();
  ran.store(true);
  const char done = 0;
  const ssize_t n = ::write(g_stop_pipe[1], &done, 1);  // wakes the waiter if no signal came
  (void)n;
  waiter.join();
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  ::close(g_stop_pipe[0]), ::close(g_stop_pipe[1]);
}

// `pagegram generate`.
void register_generate(CLI::App& app) {
  static EngineOptions o;
  static std::string cache = "0", prompt, prompt_file;
  static int64_t threads = 0, max_tokens = 64, top_k = 40;
  static double temperature = 0.8;
  static uint64_t seed = 0;
  static bool ids = false;
  CLI::App* c =
      app.add_subcommand("generate", "generate text from a trained model, its memory table in RAM or on disk");
  add_engine_options(c, o, cache, threads);
  c->add_option("--prompt", prompt, "prompt text");
  c->add_option("--prompt-file", prompt_file, "prompt text from a file");
  c->add_option("--max-tokens", max_tokens, "tokens to generate")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  c->add_option("--temperature", temperature, "sampling temperature (0 = greedy)")->capture_default_str();
  c->add_option("--top-k", top_k, "sample among the k most likely tokens (0 = all)")->capture_default_str();
  c->add_option("--seed", seed, "sampling seed")->capture_default_str();
  static SamplingOptions more;
  c->add_option("--top-p", more.top_p, "nucleus: sample among the most probable tokens reaching this probability")
      ->capture_default_str();
  c->add_option("--min-p", more.min_p, "drop tokens less probable than this x the most probable one")
      ->capture_default_str();
  c->add_option("--repetition-penalty", more.repetition_penalty,
                "divide (multiply, if negative) the logits of the last --repeat-last-n tokens by this (1 = off)")
      ->capture_default_str();
  c->add_option("--repeat-last-n", more.repeat_last_n, "tokens the repetition penalty looks back")
      ->capture_default_str();
  static std::vector<std::string> stops;
  c->add_option("--stop", stops, "stop before this text (repeatable)");
  c->add_flag("--ids", ids, "also print the generated token ids");
  static bool ignore_eos = false;
  c->add_flag("--ignore-eos", ignore_eos,
              "go on past an end-of-document token (default: stop there, as a document ends in training)");
  c->callback([] {
    if (prompt.empty() == prompt_file.empty())
      throw UserError("generate: give exactly one of --prompt or --prompt-file");
    std::string text = prompt;
    if (!prompt_file.empty()) {
      text = read_file_bounded(prompt_file, size_t{4} << 20, "--prompt-file");  // 4 MiB: far past any context
    }
    setup_threads(static_cast<int>(threads));
    o.cache_bytes = parse_bytes(cache, "--cache");
    std::unique_ptr<Engine> e = open_engine(o);
    const std::vector<int32_t> p = e->encode(text);
    if (p.empty()) throw UserError("generate: the prompt has no tokens");
    SamplingOptions so = more;
    so.temperature = temperature;
    so.top_k = top_k;
    so.seed = seed;
    const int64_t s = e->open(so);
    e->feed(s, p);
    std::vector<int32_t> out;
    const int64_t one[1] = {s};
    const int64_t start = e->length(s);
    bool ended = false, stopped = false;
    StopScan scan(stops);
    for (int64_t i = 0; i < max_tokens && !ended && !stopped; ++i) {
      out.push_back(e->step(one)[0]);
      ended = out.back() == e->eos_id() && !ignore_eos;
      if (!stops.empty()) scan.update(e->decode_range(s, start, e->length(s)), false, stopped);
    }
    const std::string gen = stopped ? scan.released() : e->decode_range(s, start, e->length(s));
    std::printf("%s%s\n", text.c_str(), gen.c_str());
    if (ended) std::fprintf(stderr, "(stopped at the end-of-document token; --ignore-eos goes on)\n");
    if (stopped) std::fprintf(stderr, "(stopped at a --stop string)\n");
    if (ids) {
      std::printf("ids:");
      for (int32_t t : out) std::printf(" %d", t);
      std::printf("\n");
    }
    const EngineStats& st = e->stats();
    std::fprintf(stderr, "prompt %lld tokens in %.3f s (%.0f tok/s); %lld tokens generated in %.3f s (%.1f tok/s)",
                 static_cast<long long>(st.prefill_tokens), st.prefill_seconds,
                 st.prefill_tokens / std::max(st.prefill_seconds, 1e-9), static_cast<long long>(st.decode_tokens),
                 st.decode_seconds, st.decode_tokens / std::max(st.decode_seconds, 1e-9));
    if (TableSource* src = e->source()) {
      const TableReadStats& r = src->stats();
      std::fprintf(
          stderr,
          "; table %s: %.2f block reads per token (%s read from the device per token), %.2f blocks "
          "accessed per token; device reads %.3f s, fetches (plan, reads, decoding) %.3f s, of which the forward "
          "waited %.3f s (%s)",
          src->describe().c_str(), r.reads_per_position(),
          r.device_bytes < 0 ? "bytes unknown" : format_bytes(static_cast<int64_t>(r.bytes_per_position())).c_str(),
          r.positions ? static_cast<double>(r.block_accesses) / static_cast<double>(r.positions) : 0.0, r.io_seconds,
          st.fetch_seconds, st.memory_wait_seconds,
          e->overlaps() ? "overlapping the blocks before the first injection" : "read before the forward");
    }
    std::fprintf(stderr, "\n");
  });
}

// `pagegram serve`: the line protocol, or --http.
void register_serve(CLI::App& app) {
  static EngineOptions o;
  static std::string cache = "0";
  static int64_t threads = 0;
  CLI::App* c =
      app.add_subcommand("serve", "serve generation sessions over a line protocol on stdin/stdout (infer/serve.h)");
  c->footer(
      "Protocol: one request per line, one reply line per request (docs/serving.md):\n"
      "  open [key=value ...]                         -> ok <session>\n"
      "      keys: seed, temperature, top_k, top_p, min_p, repetition_penalty, repeat_last_n\n"
      "  feed <s> <text>                              -> ok <tokens fed>\n"
      "  feed_ids <s> <id> <id> ...                   -> ok <tokens fed>\n"
      "  generate <s> <n>                             -> ok <json string>  (stops after an end-of-document token)\n"
      "  step <s> <s> ...                             -> ok <id> <id> ...  (one batched decode step)\n"
      "  boundary <s> | reset <s> | close <s>         -> ok\n"
      "  fork <s> [key=value ...]                     -> ok <new session>\n"
      "  stats                                        -> ok <json object>\n"
      "  quit                                         -> ok\n"
      "A bad request gets 'error <message>', changes nothing, and the server goes on.\n"
      "With --http PORT: an HTTP API instead (POST /v1/completions with \"stream\": true for server-sent events,\n"
      "/tokenize, /detokenize; GET /health, /metrics, /v1/models; docs/serving.md).");
  add_engine_options(c, o, cache, threads);
  static HttpOptions h;
  h.port = -1;
  h.model_name = "";
  c->add_option("--http", h.port,
                "serve an HTTP API on this port instead of the line protocol (0 = any free port; docs/serving.md)");
  c->add_option("--host", h.host, "--http: the address to listen on (0.0.0.0: every interface)")->capture_default_str();
  c->add_option("--max-active", h.max_active, "--http: completions decoded together (more wait for a place)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  c->add_option("--max-request", h.max_request_bytes, "--http: largest request body in bytes")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 30));
  c->add_option("--model-name", h.model_name, "--http: the model's name in replies (default: the run directory's)");
  c->add_option("--seed", h.seed, "--http: a request without a seed samples with seed + its request number")
      ->capture_default_str();
  c->callback([] {
    setup_threads(static_cast<int>(threads));
    o.cache_bytes = parse_bytes(cache, "--cache");
    o.progress = false;
    if (h.port < 0) {
      std::unique_ptr<Engine> e = open_engine(o);
      std::fprintf(stderr, "serving %s (%s); one request per line, 'quit' to stop\n",
                   (o.model_dir.empty() ? o.checkpoint : o.model_dir).c_str(),
                   e->source() ? e->source()->describe().c_str() : "no memory table");
      serve(*e, std::cin, std::cout);
      return;
    }
    serve_http(o, h);
  });
}

// `pagegram bench generate`.
void register_bench_generate(CLI::App& app) {
  static GenBenchConfig g;
  static int64_t threads = 0;
  g.table_dir = "runs/bench_generate";
  CLI::App* bench = app.get_subcommand("bench");
  CLI::App* c = bench->add_subcommand("generate",
                                      "generation speed with the table in RAM, on disk cold and behind a "
                                      "page cache, several models side by side (infer/bench.h)");
  c->add_option("--checkpoint", g.checkpoints,
                "trained model (repeatable); its table is exported as NF4 into --table-dir");
  c->add_option("--config", g.configs, "or an experiment config (repeatable): random model and random NF4 table");
  c->add_option("--set", g.config_sets, "override a key of every --config (repeatable)");
  c->add_option("--table-dir", g.table_dir, "where the table files go (on a disk: O_DIRECT needs one)")
      ->capture_default_str();
  c->add_option("--source", g.sources, "table sources: ram, mmap, direct:<cache> (e.g. direct:0, direct:1GiB)")
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--prompt-tokens", g.prompt_tokens, "prompt length")->capture_default_str();
  c->add_option("--decode-tokens", g.decode_tokens, "decode steps of one session")->capture_default_str();
  c->add_option("--sessions", g.sessions, "sessions decoded as one batch")->capture_default_str();
  static std::string synthetic;
  c->add_option("--synthetic-params", synthetic,
                "with --checkpoint: serve each trained table from a synthetic file "
                "of this many parameters (e.g. 20e9: the trained rows spread over a full-size table)");
  c->add_option("--batch-steps", g.batch_steps, "decode steps of the batch")->capture_default_str();
  c->add_flag(
      "--no-overlap", [](int64_t) { g.overlap = false; },
      "read the table rows before the forward instead of beside the blocks before the first injection");
  c->add_option("--seed", g.seed, "sampling and prompt seed")->capture_default_str();
  c->add_flag("--keep-tables", g.keep_tables,
              "keep the table files written in --table-dir (a later run reuses a file holding the same table; "
              "default: removed at the end)");
  c->add_option("--threads", threads, "threads (0 = all allowed CPUs, pinned)")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}));
  c->callback([] {
    setup_threads(static_cast<int>(threads));
    if (!synthetic.empty()) g.synthetic_params = parse_count(synthetic, "--synthetic-params");
    const GenBenchResult r = run_generate_bench(g);
    std::printf("bench generate: %d threads, kernels %s on %s; table files in %s on %s\n%s", r.threads,
                kern::active_name(), isa::cpu_description().c_str(), g.table_dir.c_str(),
                describe_disk(g.table_dir).c_str(), format_generate_bench(r).c_str());
  });
}
}  // namespace

void register_infer_commands(CLI::App& app) {
  register_generate(app);
  register_serve(app);
  register_bench_generate(app);
}

}  // namespace pg::cli
