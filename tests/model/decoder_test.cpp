// The incremental decoder (model/decoder.h) against the training forward pass and against itself: the per-token
// loss of a one-shot prefill equals Transformer::forward_loss's token losses, prefill + one-token decoding equals
// recomputing the whole sequence, a batch of sequences equals each decoded alone, and 1 or 2 threads give the
// same bits. Decoding vs recomputation and batch vs alone are bit-exact (every row is computed the same way);
// against the training forward pass the tolerance is 2e-5 absolute on losses of O(1) (float rounding of a
// different attention summation order; the linear layers, norms and GELU are the training kernels).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "model/decoder.h"
#include "model/transformer.h"

namespace pg {
namespace {

constexpr double kTol = 2e-5;

ModelConfig config() {
  ModelConfig c;
  c.layers = 2;
  c.d_model = 32;
  c.heads = 2;
  c.vocab = 53;
  c.context = 24;
  c.init_std = 0.2;
  return c;
}

std::vector<int32_t> tokens(int64_t n, uint32_t seed, int64_t vocab) {
  std::mt19937 g(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(g() % static_cast<uint32_t>(vocab));
  return t;
}

double ce(const float* logits, int64_t V, int32_t target) {
  double mx = -1e300;
  for (int64_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(logits[v]));
  double s = 0;
  for (int64_t v = 0; v < V; ++v) s += std::exp(static_cast<double>(logits[v]) - mx);
  return mx + std::log(s) - logits[target];
}

TEST(Decoder, PrefillLossesEqualTheTrainingForwardPass) {
  const ModelConfig c = config();
  Transformer m(c, 1);
  m.init(3);
  const std::vector<int32_t> w = tokens(c.context + 1, 7, c.vocab);
  m.forward_loss(w.data(), 1);
  const std::span<const double> ref = m.token_losses();
  KvCache cache(c);
  Decoder dec(m, c.context);
  std::vector<float> logits(static_cast<size_t>(c.context * c.vocab));
  std::vector<KvCache*> cs(static_cast<size_t>(c.context), &cache);
  dec.forward(std::span<const int32_t>(w.data(), static_cast<size_t>(c.context)), cs, logits.data());
  EXPECT_EQ(cache.length(), c.context);
  for (int64_t t = 0; t < c.context; ++t)
    EXPECT_NEAR(ce(logits.data() + t * c.vocab, c.vocab, w[static_cast<size_t>(t + 1)]), ref[static_cast<size_t>(t)],
                kTol)
        << "position " << t;
}

TEST(Decoder, IncrementalDecodingEqualsRecomputingTheSequence) {
  const ModelConfig c = config();
  Transformer m(c, 1);
  m.init(5);
  const int64_t n = c.context, V = c.vocab;
  const std::vector<int32_t> w = tokens(n, 11, V);
  // Reference: the whole sequence in one forward, logits of every row.
  KvCache full(c);
  Decoder dec(m, n);
  std::vector<float> ref(static_cast<size_t>(n * V));
  std::vector<KvCache*> cs(static_cast<size_t>(n), &full);
  dec.forward(w, cs, ref.data());
  // A prompt of 5 in one forward (last row's logits), then one token at a time.
  KvCache inc(c);
  std::vector<float> out(static_cast<size_t>(V));
  const int64_t prompt = 5;
  std::vector<KvCache*> pc(static_cast<size_t>(prompt), &inc);
  dec.forward(std::span<const int32_t>(w.data(), static_cast<size_t>(prompt)), pc, out.data(), /*last_only=*/true);
  double worst = 0;
  for (int64_t v = 0; v < V; ++v) worst = std::max(worst, std::abs(double(out[v]) - ref[(prompt - 1) * V + v]));
  KvCache* one[1] = {&inc};
  for (int64_t t = prompt; t < n; ++t) {
    dec.forward(std::span<const int32_t>(&w[static_cast<size_t>(t)], 1), one, out.data());
    for (int64_t v = 0; v < V; ++v) worst = std::max(worst, std::abs(double(out[v]) - ref[t * V + v]));
  }
  EXPECT_EQ(worst, 0.0) << "every row is computed the same way in a prefill and a decode step";
  EXPECT_EQ(inc.length(), n);
}

TEST(Decoder, ABatchOfSequencesEqualsEachAloneAndThreadCountsAgree) {
  const ModelConfig c = config();
  Transformer m(c, 1);
  m.init(9);
  const int64_t S = 3, V = c.vocab;
  std::vector<std::vector<int32_t>> seqs;
  for (int64_t s = 0; s < S; ++s) seqs.push_back(tokens(6 + s, 20 + static_cast<uint32_t>(s), V));
  auto run_batched = [&](int threads) {
    omp_set_num_threads(threads);
    Decoder dec(m, 16);
    std::vector<KvCache> caches(static_cast<size_t>(S), KvCache(c));
    std::vector<float> logits(static_cast<size_t>(S * V));
    for (int64_t s = 0; s < S; ++s) {  // prefill all but the last token of each
      const auto& q = seqs[static_cast<size_t>(s)];
      std::vector<KvCache*> cs(q.size() - 1, &caches[static_cast<size_t>(s)]);
      dec.forward(std::span<const int32_t>(q.data(), q.size() - 1), cs, nullptr);
    }
    std::vector<int32_t> last;
    std::vector<KvCache*> cs;
    for (int64_t s = 0; s < S; ++s)
      last.push_back(seqs[static_cast<size_t>(s)].back()), cs.push_back(&caches[static_cast<size_t>(s)]);
    dec.forward(last, cs, logits.data());
    omp_set_num_threads(2);
    return logits;
  };
  const std::vector<float> b1 = run_batched(1), b2 = run_batched(2);
  EXPECT_EQ(0, std::memcmp(b1.data(), b2.data(), b1.size() * sizeof(float))) << "1 vs 2 threads";
  Decoder dec(m, 16);
  for (int64_t s = 0; s < S; ++s) {
    const auto& q = seqs[static_cast<size_t>(s)];
    KvCache cache(c);
    std::vector<KvCache*> cs(q.size(), &cache);
    std::vector<float> out(static_cast<size_t>(V));
    dec.forward(q, cs, out.data(), true);
    EXPECT_EQ(0, std::memcmp(out.data(), b1.data() + s * V, static_cast<size_t>(V) * sizeof(float)))
        << "sequence " << s;
  }
}

TEST(Decoder, RefusesPositionsPastTheContextAndBadTokens) {
  const ModelConfig c = config();
  Transformer m(c, 1);
  m.init(1);
  Decoder dec(m, c.context);
  KvCache cache(c);
  std::vector<int32_t> w = tokens(c.context, 2, c.vocab);
  std::vector<KvCache*> cs(w.size(), &cache);
  dec.forward(w, cs, nullptr);
  KvCache* one[1] = {&cache};
  const int32_t t = 1;
  EXPECT_THROW(dec.forward(std::span<const int32_t>(&t, 1), one, nullptr), UserError);
  KvCache fresh(c);
  KvCache* f[1] = {&fresh};
  const int32_t bad = static_cast<int32_t>(c.vocab);
  EXPECT_THROW(dec.forward(std::span<const int32_t>(&bad, 1), f, nullptr), UserError);
  EXPECT_EQ(fresh.length(), 0);
}

}  // namespace
}  // namespace pg
