// The whole backbone (model/transformer.h): gradient check, determinism across runs and thread counts,
// init, overfitting, the residual injector hook, and input/config validation.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/config.h"
#include "model/transformer.h"

namespace pg {
namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.layers = 2;
  c.d_model = 16;
  c.heads = 2;
  c.vocab = 37;
  c.context = 8;
  c.init_std = 0.3;  // larger than the default so every path carries signal in the gradient check
  return c;
}

std::vector<int32_t> random_windows(const ModelConfig& c, int64_t B, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<int32_t> w(B * (c.context + 1));
  for (auto& x : w) x = static_cast<int32_t>(g() % c.vocab);
  return w;
}

template <class A, class B>
double rel_diff(const A& a, const B& b) {
  double err = 0, scale = 1e-300;
  for (size_t i = 0; i < b.size(); ++i) {
    err = std::max(err, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return err / scale;
}

bool bit_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Central differences of forward_loss for a spread sample of every tensor, against forward_backward.
template <class F>
double model_fd_check(TransformerT<F>& m, const std::vector<int32_t>& w, int64_t B, double h, int per_tensor,
                      const std::set<int32_t>& used_tokens) {
  m.zero_grads();
  m.forward_backward(w.data(), B, 1.0f);
  std::vector<F> g(m.grads().begin(), m.grads().end());
  double worst = 0;
  for (const ParamInfo& info : m.param_infos()) {
    std::vector<size_t> idx;
    if (info.name == "tok_emb") {  // rows of tokens that occur (others have zero gradient)
      for (int32_t t : used_tokens)
        for (int64_t c = 0; c < info.shape[1] && static_cast<int>(idx.size()) < per_tensor; c += 5)
          idx.push_back(t * info.shape[1] + c);
    } else {
      for (int i = 0; i < per_tensor; ++i) idx.push_back((i * 7919 + 13) % info.size);
    }
    double err = 0, scale = 1e-300;
    for (size_t i : idx) {
      F& p = m.params()[info.offset + i];
      const F p0 = p;
      p = p0 + static_cast<F>(h);
      const double lp = m.forward_loss(w.data(), B);
      p = p0 - static_cast<F>(h);
      const double lm = m.forward_loss(w.data(), B);
      p = p0;
      const double fd = (lp - lm) / (2 * h);
      err = std::max(err, std::abs(fd - double(g[info.offset + i])));
      scale = std::max(scale, std::abs(fd));
    }
    const double rel = err / scale;
    std::printf("[fd] %-12s %-22s max rel error %.3g (grad scale %.3g)\n", sizeof(F) == 8 ? "double" : "float",
                info.name.c_str(), rel, scale);
    worst = std::max(worst, rel);
  }
  return worst;
}

// Tests that run the model many times on tiny inputs use one thread (thread-count independence is its own test).
struct OneThread {
  int saved = omp_get_max_threads();
  OneThread() { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(saved); }
};

TEST(ModelTransformer, GradientCheckDouble) {
  OneThread one;
  const ModelConfig c = tiny_config();
  TransformerT<double> m(c, 2);
  m.init(7);
  const auto w = random_windows(c, 2, 1);
  std::set<int32_t> used;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < c.context; ++t) used.insert(w[b * (c.context + 1) + t]);
  const double e = model_fd_check(m, w, 2, 1e-5, 12, used);
  std::printf("[fd] whole model (double): max rel error %.3g\n", e);
  EXPECT_LT(e, 1e-6);
}

TEST(ModelTransformer, FloatMatchesDoubleAndLooseFd) {
  OneThread one;
  const ModelConfig c = tiny_config();
  TransformerT<double> md(c, 2);
  Transformer mf(c, 2);
  md.init(7);
  mf.init(7);
  for (size_t i = 0; i < mf.params().size(); ++i) md.params()[i] = mf.params()[i];  // identical float values
  const auto w = random_windows(c, 2, 1);
  md.zero_grads();
  mf.zero_grads();
  const double ld = md.forward_backward(w.data(), 2, 1.0f), lf = mf.forward_backward(w.data(), 2, 1.0f);
  EXPECT_NEAR(lf, ld, 1e-6 * ld);
  const double e = rel_diff(mf.grads(), md.grads());
  std::printf("[fd] float vs double gradients: max rel error %.3g\n", e);
  EXPECT_LT(e, 1e-4);

  std::set<int32_t> used;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < c.context; ++t) used.insert(w[b * (c.context + 1) + t]);
  const double ef = model_fd_check(mf, w, 2, 1e-2, 4, used);
  std::printf("[fd] whole model (float, h = 1e-2): max rel error %.3g\n", ef);
  EXPECT_LT(ef, 5e-2);
}

TEST(ModelTransformer, ParamLayoutAndFlops) {
  ModelConfig c;  // the paper shape: 61.0M parameters, 10.6M inside blocks (docs/model.md §2)
  EXPECT_EQ(Transformer::count_params(c), 2 * 65536 * 384 + 6 * (2 * 384 + 12 * 384 * 384) + 384);
  EXPECT_NEAR(Transformer::count_params(c) / 1e6, 61.0, 0.1);
  EXPECT_NEAR(Transformer::flops_per_token(c) / 1e6, 243.0, 1.0);  // PERFORMANCE.md shape A

  const ModelConfig t = tiny_config();
  Transformer m(t, 1);
  size_t off = 0;
  for (const ParamInfo& p : m.param_infos()) {
    EXPECT_EQ(p.offset, off) << p.name;
    off += p.size;
    EXPECT_EQ(p.decay, p.shape.size() == 2) << p.name;
  }
  EXPECT_EQ(off, m.params().size());
  EXPECT_EQ(m.param_infos().front().name, "tok_emb");
  EXPECT_EQ(m.param_infos()[2].name, "blocks.0.w_qkv");
  EXPECT_EQ(m.param_infos().back().name, "lm_head");
  EXPECT_EQ(m.param_info("blocks.1.w_proj").shape, (std::vector<int64_t>{16, 64}));
  EXPECT_THROW(m.param_info("nope"), InternalError);
}

TEST(ModelTransformer, InitDeterministicPerSeedAndScheme) {
  const ModelConfig c = tiny_config();
  Transformer a(c, 1), b(c, 1), d(c, 1);
  a.init(42);
  b.init(42);
  d.init(43);
  EXPECT_TRUE(bit_equal(a.params(), b.params()));
  EXPECT_FALSE(bit_equal(a.params(), d.params()));
  for (float v : a.param("blocks.0.attn_norm")) EXPECT_EQ(v, 1.0f);
  for (float v : a.param("final_norm")) EXPECT_EQ(v, 1.0f);
  auto stdev = [](std::span<float> s) {
    double q = 0;
    for (float v : s) q += double(v) * v;
    return std::sqrt(q / s.size());
  };
  EXPECT_NEAR(stdev(a.param("lm_head")), c.init_std, 0.05 * c.init_std);
  EXPECT_NEAR(stdev(a.param("blocks.0.w_fc")), c.init_std, 0.05 * c.init_std);
  EXPECT_NEAR(stdev(a.param("blocks.0.w_proj")), c.init_std / 2.0, 0.1 * c.init_std / 2.0);  // 1/sqrt(2L), L = 2
  // a tensor's values depend only on (seed, name): a deeper model shares the first blocks' init
  ModelConfig c3 = c;
  c3.layers = 3;
  Transformer e(c3, 1);
  e.init(42);
  for (const char* name : {"tok_emb", "blocks.0.w_qkv", "blocks.1.w_fc"})
    EXPECT_TRUE(bit_equal(a.param(name), e.param(name))) << name;
}

// A model big enough that every layer splits into several tasks (token blocks, query blocks, vocab blocks,
// LM-head token chunks), run with 1 and 2 threads and twice: all bits must agree.
TEST(ModelTransformer, BitIdenticalAcrossThreadCountsAndRuns) {
  ModelConfig c;
  c.layers = 2;
  c.d_model = 64;
  c.heads = 2;
  c.vocab = 2100;
  c.context = 130;
  const int64_t B = 5;  // N = 650 > one LM-head chunk (504 rows)
  const auto w = random_windows(c, B, 3);
  const int saved = omp_get_max_threads();
  std::vector<float> grads[3];
  double loss[3];
  for (int run = 0; run < 3; ++run) {
    omp_set_num_threads(run == 1 ? 2 : 1);
    Transformer m(c, B);
    m.init(11);
    m.zero_grads();
    loss[run] = m.forward_backward(w.data(), B, 1.0f);
    m.forward_backward(w.data(), B, 0.5f);  // accumulation too
    grads[run].assign(m.grads().begin(), m.grads().end());
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(std::memcmp(&loss[0], &loss[1], sizeof(double)), 0) << loss[0] << " vs " << loss[1];
  EXPECT_EQ(std::memcmp(&loss[0], &loss[2], sizeof(double)), 0);
  EXPECT_TRUE(bit_equal(grads[0], grads[1])) << "1 vs 2 threads";
  EXPECT_TRUE(bit_equal(grads[0], grads[2])) << "run to run";
}

TEST(ModelTransformer, ForwardLossEqualsForwardBackwardAndGradsAccumulate) {
  ModelConfig c = tiny_config();
  c.init_std = 0.02;
  Transformer m(c, 3);
  m.init(5);
  const auto w = random_windows(c, 3, 9);
  const double l0 = m.forward_loss(w.data(), 3);
  m.zero_grads();
  const double l1 = m.forward_backward(w.data(), 3, 1.0f);
  EXPECT_EQ(l0, l1);
  std::vector<float> g1(m.grads().begin(), m.grads().end());
  m.forward_backward(w.data(), 3, 1.0f);
  // a second call adds the same gradient again (equal up to the order of the embedding scatter-adds)
  for (size_t i = 0; i < g1.size(); ++i) ASSERT_NEAR(m.grads()[i], 2.0f * g1[i], 1e-6f * (1 + std::abs(g1[i]))) << i;
  EXPECT_NEAR(l0, std::log(37.0), 0.5);  // near-uniform predictions at init
  // a window's loss does not depend on its batch mates (B < micro_batch works)
  std::vector<double> per(m.token_losses().begin(), m.token_losses().end());
  m.forward_loss(w.data(), 1);
  ASSERT_EQ(m.token_losses().size(), size_t(c.context));
  for (int64_t t = 0; t < c.context; ++t) EXPECT_EQ(m.token_losses()[t], per[t]);
}

TEST(ModelTransformer, OverfitsAShortSequenceWithAdam) {
  OneThread one;
  ModelConfig c = tiny_config();
  c.init_std = 0.02;
  c.context = 16;
  Transformer m(c, 2);
  m.init(1);
  std::vector<int32_t> w(2 * 17);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int32_t>((i * 5 + i * i) % 37);
  std::vector<float> mom(m.params().size(), 0.f), var(m.params().size(), 0.f);
  double first = 0, last = 0;
  const float lr = 1e-2f, b1 = 0.9f, b2 = 0.99f;
  for (int step = 1; step <= 100; ++step) {
    m.zero_grads();
    last = m.forward_backward(w.data(), 2, 1.0f);
    if (step == 1) first = last;
    auto p = m.params();
    auto g = m.grads();
    const float c1 = 1 - std::pow(b1, step), c2 = 1 - std::pow(b2, step);
    for (size_t i = 0; i < p.size(); ++i) {
      mom[i] = b1 * mom[i] + (1 - b1) * g[i];
      var[i] = b2 * var[i] + (1 - b2) * g[i] * g[i];
      p[i] -= lr * (mom[i] / c1) / (std::sqrt(var[i] / c2) + 1e-8f);
    }
  }
  std::printf("[overfit] loss %.4f -> %.4f (ln V = %.4f)\n", first, last, std::log(37.0));
  EXPECT_NEAR(first, std::log(37.0), 0.1);
  EXPECT_LT(last, 0.1);
}

// x += g * e[layer] for the configured layers; e fixed, g learned.
struct TestInjector : ResidualInjector {
  std::vector<int64_t> layers;
  std::vector<std::vector<float>> e;  // per layer [N, C]
  std::vector<float> g, dg;
  int64_t C;
  bool injects(int64_t l) const override { return std::find(layers.begin(), layers.end(), l) != layers.end(); }
  void inject_forward(int64_t l, float* x, int64_t N) override {
    for (int64_t i = 0; i < N * C; ++i) x[i] += g[l] * e[l][i];
  }
  void inject_backward(int64_t l, float* dx, int64_t N) override {
    double s = 0;
    for (int64_t i = 0; i < N * C; ++i) s += double(dx[i]) * e[l][i];
    dg[l] += static_cast<float>(s);  // dx unchanged: d(x + g e)/dx = I
  }
};

TEST(ModelTransformer, ResidualInjectorGradientAndZeroInjection) {
  const ModelConfig c = tiny_config();
  const int64_t B = 2, N = B * c.context;
  Transformer m(c, B);
  m.init(3);
  const auto w = random_windows(c, B, 4);
  TestInjector inj;
  inj.layers = {0, 1};
  inj.C = c.d_model;
  inj.g = {0.5f, 0.5f};
  inj.dg = {0.f, 0.f};
  std::mt19937 gen(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int l = 0; l < 2; ++l) {
    inj.e.emplace_back(N * c.d_model);
    for (auto& v : inj.e.back()) v = nd(gen);
  }
  // zero injection: bit-identical loss to no injector
  const double base = m.forward_loss(w.data(), B);
  TestInjector zero = inj;
  for (auto& e : zero.e) std::fill(e.begin(), e.end(), 0.f);
  m.set_injector(&zero);
  EXPECT_EQ(m.forward_loss(w.data(), B), base);
  // dL/dg against finite differences
  m.set_injector(&inj);
  m.zero_grads();
  m.forward_backward(w.data(), B, 1.0f);
  for (int l = 0; l < 2; ++l) {
    const float h = 1e-2f, g0 = inj.g[l];
    inj.g[l] = g0 + h;
    const double lp = m.forward_loss(w.data(), B);
    inj.g[l] = g0 - h;
    const double lm = m.forward_loss(w.data(), B);
    inj.g[l] = g0;
    const double fd = (lp - lm) / (2 * h);
    std::printf("[fd] injector gate %d: analytic %.6g, fd %.6g\n", l, inj.dg[l], fd);
    EXPECT_NEAR(inj.dg[l], fd, 2e-3 * std::max(1.0, std::abs(fd)));
  }
  m.set_injector(nullptr);
  EXPECT_EQ(m.forward_loss(w.data(), B), base);
}

TEST(ModelTransformer, RejectsBadTokenIds) {
  const ModelConfig c = tiny_config();
  Transformer m(c, 2);
  m.init(1);
  auto w = random_windows(c, 2, 2);
  w[1 * (c.context + 1) + 3] = 37;
  try {
    m.forward_backward(w.data(), 2, 1.0f);
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("token id 37"), std::string::npos) << msg;
    EXPECT_NE(msg.find("window 1, position 3"), std::string::npos) << msg;
  }
  w[1 * (c.context + 1) + 3] = -1;
  EXPECT_THROW(m.forward_loss(w.data(), 2), UserError);
  w[1 * (c.context + 1) + 3] = 0;
  w[c.context] = 99;  // the last target of window 0
  EXPECT_THROW(m.forward_loss(w.data(), 2), UserError);
}

TEST(ModelTransformer, ConfigValidation) {
  ModelConfig c = tiny_config();
  c.heads = 3;  // 16 % 3 != 0
  try {
    c.validate("run.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("run.yaml: key 'model.heads'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Transformer(c, 1), ConfigError);
  c.d_model = 24;
  c.heads = 8;  // head width 3: odd, RoPE needs pairs
  EXPECT_THROW(c.validate("x"), ConfigError);
  c.heads = 6;
  EXPECT_NO_THROW(c.validate("x"));
}

}  // namespace
}  // namespace pg
