// Backbone forward+backward throughput (tok/s, GFLOP/s) for the PERFORMANCE.md shapes, 1 and 2 pinned threads.
//   bench_model_bench [--shape A|B|all] [--threads 1,2] [--iters N] [--mb N] [--forward]
// Shape A: 6 layers, d 384, 6 heads, vocab 65,536, T 1024, micro-batch 4 (243 MFLOP/token).
// Shape B: 6 layers, d 192, 6 heads, vocab 8,192, T 256, micro-batch 32 (28.9 MFLOP/token).
// GFLOP/s uses the nominal count 6*(params - tok_emb) + 12 L T C (causal attention does about half of the
// attention term). Figures are medians over iterations after one warm-up call.
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "core/threads.h"
#include "core/timer.h"
#include "model/transformer.h"

namespace {

struct Shape {
  const char* name;
  pg::ModelConfig cfg;
  int64_t micro_batch;
};

Shape shape(char which, int64_t mb) {
  pg::ModelConfig c;
  c.layers = 6;
  c.heads = 6;
  if (which == 'A') {
    c.d_model = 384;
    c.vocab = 65536;
    c.context = 1024;
    return {"A", c, mb > 0 ? mb : 4};
  }
  c.d_model = 192;
  c.vocab = 8192;
  c.context = 256;
  return {"B", c, mb > 0 ? mb : 32};
}

// CPU time of the whole process (all threads; includes OpenMP barrier spinning).
double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  // setup_threads pins the calling thread, which narrows the affinity the next call sees: restore the
  // original mask before each thread-count change.
  cpu_set_t original;
  CPU_ZERO(&original);
  sched_getaffinity(0, sizeof(original), &original);
  std::string shapes = "AB";
  std::vector<int> threads = {1, 2};
  int iters = 3;
  int64_t mb = 0;
  bool forward_only = false;
  for (int i = 1; i < argc; ++i) {
    auto arg = [&](const char* name) { return std::strcmp(argv[i], name) == 0 && i + 1 < argc; };
    if (arg("--shape")) {
      shapes = argv[++i];
      if (shapes == "all") shapes = "AB";
    } else if (arg("--threads")) {
      threads = pg::bench::parse_list(argv[++i]);
    } else if (arg("--iters")) {
      iters = std::max(1, std::atoi(argv[++i]));
    } else if (arg("--mb")) {
      mb = std::atoll(argv[++i]);
    } else if (std::strcmp(argv[i], "--forward") == 0) {
      forward_only = true;
    } else {
      std::fprintf(stderr, "usage: %s [--shape A|B|all] [--threads 1,2] [--iters N] [--mb N] [--forward]\n", argv[0]);
      return 2;
    }
  }
  // tok/s and GFLOP/s are wall-clock medians. On a shared machine the CPU-time column tells how much of the
  // wall time the process actually ran (cpu/wall near the thread count = not starved by other processes).
  std::printf("%-5s %4s %7s %8s %10s %9s %8s %8s  %s\n", "shape", "mb", "threads", "pinned", "tok/s", "GFLOP/s",
              "s/call", "cpu/wall", "(per-call wall seconds)");
  for (char s : shapes) {
    const Shape sh = shape(s, mb);
    pg::Transformer model(sh.cfg, sh.micro_batch);
    model.init(1);
    std::mt19937 g(1);
    std::vector<int32_t> windows(sh.micro_batch * (sh.cfg.context + 1));
    for (auto& w : windows) w = static_cast<int32_t>(g() % sh.cfg.vocab);
    const double tokens = static_cast<double>(sh.micro_batch * sh.cfg.context);
    const double flops = pg::Transformer::flops_per_token(sh.cfg) * (forward_only ? 1.0 / 3.0 : 1.0);
    for (int nt : threads) {
      pthread_setaffinity_np(pthread_self(), sizeof(original), &original);
      const pg::ThreadInfo info = pg::setup_threads(nt, true);
      model.zero_grads();
      auto call = [&] {
        if (forward_only) model.forward_loss(windows.data(), sh.micro_batch);
        else model.forward_backward(windows.data(), sh.micro_batch, 1.0f);
      };
      call();  // warm-up: first touch of thread-local scratch
      std::vector<double> t;
      const double cpu0 = process_cpu_seconds();
      pg::Timer total;
      for (int it = 0; it < iters; ++it) {
        pg::Timer timer;
        call();
        t.push_back(timer.seconds());
      }
      const double cpu_ratio = (process_cpu_seconds() - cpu0) / total.seconds();
      std::vector<double> sorted = t;
      std::sort(sorted.begin(), sorted.end());
      const double med = sorted[sorted.size() / 2];
      std::printf("%-5s %4lld %7d %8s %10.0f %9.1f %8.3f %8.2f  (", sh.name, static_cast<long long>(sh.micro_batch),
                  info.threads, info.pinned ? info.cpus.c_str() : "no", tokens / med, tokens * flops / med / 1e9, med,
                  cpu_ratio);
      for (double x : t) std::printf(" %.3f", x);
      std::printf(" )%s\n", forward_only ? " forward only" : "");
      std::fflush(stdout);
    }
  }
  return 0;
}
