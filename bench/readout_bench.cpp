// Memory readout throughput: the W_V projection (forward, backward) and the table's sparse path (gather, sparse
// gradient, row-wise update) at one micro-batch of shape B, on pinned threads.
//   bench_readout_bench [--tokens N] [--d C] [--heads H] [--width r] [--orders n] [--rows R] [--iters I]
//                       [--threads 1,2]
// Defaults: shape B (8,192 tokens of d 192), 2 orders x 8 heads x r 64 (D = 1,024), 156,250 rows per table
// (10M parameters). Addresses are uniform random rows (a real corpus repeats n-grams: fewer unique rows).
// GFLOP/s counts 2·N·C·D per projection GEMM (forward 1, backward 2). "sparse grad" is sort + reduce + the add of
// a step's first micro-batch (a swap; later micro-batches merge). Figures are medians over iterations.
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
#include "memory/readout.h"
#include "memory/rowwise_optimizer.h"
#include "memory/sparse_grad.h"

namespace {

template <class F>
double median_ms(int iters, F&& f) {
  f();  // warm-up: faults in every buffer
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    pg::Timer timer;
    f();
    t.push_back(timer.seconds() * 1e3);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t N = 8192, C = 192, H = 8, w = 64, orders = 2, R = 156250;
  int iters = 7;
  std::vector<int> threads = {1, 2};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "readout_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--tokens") N = std::atoll(next());
    else if (a == "--d") C = std::atoll(next());
    else if (a == "--heads") H = std::atoll(next());
    else if (a == "--width") w = std::atoll(next());
    else if (a == "--orders") orders = std::atoll(next());
    else if (a == "--rows") R = std::atoll(next());
    else if (a == "--iters") iters = std::atoi(next());
    else if (a == "--threads") threads = pg::bench::parse_list(next());
    else {
      std::fprintf(stderr, "readout_bench: unknown option %s (hint: see the comment at the top of the source)\n",
                   a.c_str());
      return 2;
    }
  }
  if (N <= 0 || C <= 0 || H <= 0 || w <= 0 || orders <= 0 || R <= 0 || iters <= 0) {
    std::fprintf(stderr, "readout_bench: sizes and --iters must be positive\n");
    return 2;
  }
  const int64_t heads = orders * H, D = heads * w;
  std::mt19937_64 gen(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto randn = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = nd(gen);
    return v;
  };
  const auto u = randn(N * D), wv = randn(C * D), de = randn(N * C);
  std::vector<float> e(static_cast<size_t>(N * C)), du(static_cast<size_t>(N * D)), dw(static_cast<size_t>(C * D));
  pg::readout::ProjectionScratch<float> scratch;

  pg::Addresses addr;
  addr.n = N;
  addr.heads = heads;
  addr.sign_words = (w + 63) / 64;
  addr.rows.resize(static_cast<size_t>(N * heads));
  addr.signs.resize(static_cast<size_t>(N * heads * addr.sign_words));
  std::uniform_int_distribution<int64_t> row(0, R - 1);
  for (auto& r : addr.rows) r = row(gen);
  for (auto& s : addr.signs) s = gen();
  std::vector<float> table(static_cast<size_t>(R * w), 0.01f);
  pg::SparseGrad g;
  pg::SparseGradScratch sg_scratch;
  pg::SparseGradAccumulator acc(R, w);
  pg::RowwiseRmsOptimizer opt(R, w, pg::RowwiseRmsSettings{});
  opt.set_schedule(pg::LrSchedule::constant(1e-3));
  int64_t step = 0;

  const double gflop = 2.0 * static_cast<double>(N * C * D) / 1e9;
  std::printf("readout: %ld tokens, d %ld, D %ld (%ld orders x %ld heads x %ld), %ld rows per table\n", long(N),
              long(C), long(D), long(orders), long(H), long(w), long(R));
  std::printf("| threads | forward ms (GFLOP/s) | backward ms (GFLOP/s) | gather ms | sparse grad ms | update ms |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|\n");
  for (int t : threads) {
    const pg::ThreadInfo ts = pg::setup_threads(t);
    const double f =
        median_ms(iters, [&] { pg::readout::project_forward(e.data(), u.data(), wv.data(), N, C, D, scratch); });
    const double b = median_ms(iters, [&] {
      pg::readout::project_backward(du.data(), false, dw.data(), de.data(), u.data(), wv.data(), N, C, D, scratch);
    });
    const double ga = median_ms(iters, [&] { pg::gather_signed(addr, table.data(), w, false, du.data()); });
    const double sg = median_ms(iters, [&] {
      pg::sparse_grad(addr, du.data(), w, false, g, sg_scratch);
      acc.add(g);
      acc.clear();
    });
    pg::sparse_grad(addr, du.data(), w, false, g, sg_scratch);
    acc.add(g);
    const double up = median_ms(iters, [&] { opt.update(table.data(), acc.rows(), acc.values(), ++step); });
    acc.clear();
    std::printf("| %d%s | %.2f (%.0f) | %.2f (%.0f) | %.2f | %.2f | %.2f |\n", ts.threads, ts.pinned ? " pinned" : "",
                f, gflop / (f / 1e3), b, 2 * gflop / (b / 1e3), ga, sg, up);
  }
  return 0;
}
