// MemoryInjector (train/memory_injector.h): the memory as the Transformer's ResidualInjector. A zero table leaves
// the stream bit-identical; gate, W_V/W_K, gate-norm and table gradients match finite differences for every
// gate form; results are identical for 1 and 2 threads; save/load round trip.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <ostream>

#include "core/rng.h"
#include "train/memory_injector.h"

namespace pg {
namespace {

constexpr int64_t kC = 16, kT = 12, kB = 3, kLayers = 3;

MemoryConfig small_config(const char* layout, const char* gate) {
  MemoryConfig m;
  m.layout = layout;
  m.gate = gate;
  m.heads = 2;
  m.head_dim = 8;
  m.slots = 2;
  m.target_params = 4000;
  m.inject_layers = {0, 2};
  m.weight_decay = 0.01;
  return m;
}

struct Data {
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> docs;
  std::vector<int64_t> starts;
};
Data make_data() {
  Data d;
  RngStream r(1, "test.inj");
  for (int i = 0; i < 400; ++i) d.tokens.push_back(static_cast<uint32_t>(r.below(30)));
  for (uint64_t p = 0; p < 400; p += 1 + r.below(25)) d.docs.push_back(p);
  d.starts = {0, 57, 300};
  return d;
}

std::vector<float> randn(size_t n, uint64_t seed) {
  RngStream r(seed, "test.inj.x");
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(r.normal());
  return v;
}

// L = Σ_layers <R_j, x_j after injection> for fixed inputs x_j; returns L in double.
double forward_loss(MemoryInjector& inj, const Data& d, const std::vector<std::vector<float>>& xs,
                    const std::vector<std::vector<float>>& rs) {
  inj.prepare(std::span<const uint32_t>(d.tokens), std::span<const uint64_t>(d.docs),
              std::span<const int64_t>(d.starts), kT);
  double L = 0;
  for (size_t j = 0; j < xs.size(); ++j) {
    std::vector<float> x = xs[j];
    inj.inject_forward(inj.config().inject_layers[j], x.data(), kB * kT);
    for (size_t i = 0; i < x.size(); ++i) L += static_cast<double>(x[i]) * rs[j][i];
  }
  return L;
}

// A layout and a gate mode (first, second: as the pair this replaced, printed by name).
struct GateCase {
  const char* first;
  const char* second;
};
void PrintTo(const GateCase& c, std::ostream* os) { *os << c.first << " with gate " << c.second; }
class InjectorGates : public ::testing::TestWithParam<GateCase> {};

TEST_P(InjectorGates, ZeroTableLeavesTheStreamBitIdentical) {
  MemoryInjector inj(small_config(GetParam().first, GetParam().second), kC, kLayers, 5);
  const Data d = make_data();
  inj.prepare(std::span<const uint32_t>(d.tokens), std::span<const uint64_t>(d.docs),
              std::span<const int64_t>(d.starts), kT);
  EXPECT_TRUE(inj.injects(0));
  EXPECT_FALSE(inj.injects(1));
  EXPECT_TRUE(inj.injects(2));
  for (int64_t layer : {0, 2}) {
    const auto x0 = randn(kB * kT * kC, 10 + layer);
    auto x = x0;
    inj.inject_forward(layer, x.data(), kB * kT);
    EXPECT_EQ(0, std::memcmp(x.data(), x0.data(), x.size() * sizeof(float)));
  }
}

TEST_P(InjectorGates, GradientsMatchFiniteDifferences) {
  MemoryInjector inj(small_config(GetParam().first, GetParam().second), kC, kLayers, 5);
  const Data d = make_data();
  // A non-zero table so every path carries signal.
  RngStream r(3, "test.inj.table");
  for (float& v : inj.table().values()) v = static_cast<float>(r.normal() * 0.5);
  const int64_t N = kB * kT;
  std::vector<std::vector<float>> xs = {randn(N * kC, 1), randn(N * kC, 2)}, rs = {randn(N * kC, 3), randn(N * kC, 4)};
  // Analytic: forward, then backward in reverse layer order with dx = R_j.
  inj.zero_dense_grads();
  forward_loss(inj, d, xs, rs);
  std::vector<std::vector<float>> dxs = rs;
  inj.inject_backward(2, dxs[1].data(), N);
  inj.inject_backward(0, dxs[0].data(), N);
  const bool ctx = inj.config().gate != "scalar";
  // Dense parameters.
  for (ParamView& v : inj.dense_params()) {
    for (size_t i = 0; i < v.n; i += 1 + v.n / 23) {
      const float p0 = v.param[i];
      const float h = 1e-3f;  // small: the signed-sqrt gate is steep near s = 0
      v.param[i] = p0 + h;
      const double lp = forward_loss(inj, d, xs, rs);
      v.param[i] = p0 - h;
      const double lm = forward_loss(inj, d, xs, rs);
      v.param[i] = p0;
      const double fd = (lp - lm) / (static_cast<double>(p0 + h) - static_cast<double>(p0 - h));
      EXPECT_NEAR(v.grad[i], fd, 2e-2 * (1.0 + std::fabs(fd))) << v.name << "[" << i << "]";
    }
    EXPECT_EQ(v.decay, v.name == "memory.w_v" || v.name == "memory.w_k") << v.name;
  }
  // Stream gradient of the context gates (dx holds dL/dx before injection; scalar: unchanged R).
  for (size_t j = 0; j < 2; ++j)
    for (size_t i = 0; i < xs[j].size(); i += 37) {
      const float x0 = xs[j][i];
      xs[j][i] = x0 + 1e-3f;
      const double lp = forward_loss(inj, d, xs, rs);
      xs[j][i] = x0 - 1e-3f;
      const double lm = forward_loss(inj, d, xs, rs);
      xs[j][i] = x0;
      const double fd = (lp - lm) / (static_cast<double>(x0 + 1e-3f) - static_cast<double>(x0 - 1e-3f));
      EXPECT_NEAR(dxs[j][i], fd, 2e-2 * (1.0 + std::fabs(fd))) << "dx layer slot " << j << " [" << i << "]";
      if (!ctx) {
        EXPECT_EQ(dxs[j][i], rs[j][i]);
      }
    }
  // Table: the pending sparse gradient.
  const auto& acc = inj.table().pending();
  ASSERT_GT(acc.touched(), 0);
  const int64_t w = inj.table().layout().width();
  for (int64_t u = 0; u < acc.touched(); u += 1 + acc.touched() / 7)
    for (int64_t j = 0; j < w; j += 3) {
      float& p = inj.table().values()[static_cast<size_t>(acc.rows()[static_cast<size_t>(u)] * w + j)];
      const float p0 = p;
      p = p0 + 1e-3f;
      const double lp = forward_loss(inj, d, xs, rs);
      p = p0 - 1e-3f;
      const double lm = forward_loss(inj, d, xs, rs);
      p = p0;
      const double fd = (lp - lm) / (static_cast<double>(p0 + 1e-3f) - static_cast<double>(p0 - 1e-3f));
      EXPECT_NEAR(acc.values()[u * w + j], fd, 2e-2 * (1.0 + std::fabs(fd)))
          << "table row " << acc.rows()[static_cast<size_t>(u)];
    }
}

TEST_P(InjectorGates, OneAndTwoThreadsGiveIdenticalBits) {
  const Data d = make_data();
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    MemoryInjector inj(small_config(GetParam().first, GetParam().second), kC, kLayers, 5);
    inj.set_schedule(LrSchedule{6e-3, 3, 1.0, 0.0});  // 2e-3 t over 3 steps
    const int64_t N = kB * kT;
    for (int64_t step = 1; step <= 3; ++step) {
      inj.zero_dense_grads();
      for (int mb = 0; mb < 2; ++mb) {
        auto x0 = randn(N * kC, 100 + step * 2 + mb), x2 = randn(N * kC, 200 + step);
        inj.prepare(std::span<const uint32_t>(d.tokens), std::span<const uint64_t>(d.docs),
                    std::span<const int64_t>(d.starts), kT);
        inj.inject_forward(0, x0.data(), N);
        inj.inject_forward(2, x2.data(), N);
        inj.inject_backward(2, x2.data(), N);
        inj.inject_backward(0, x0.data(), N);
      }
      for (ParamView& v : inj.dense_params())  // a plain SGD step stands in for AdamW
        for (size_t i = 0; i < v.n; ++i) v.param[i] -= 0.01f * v.grad[i];
      inj.step_table(step);
    }
    omp_set_num_threads(2);
    std::vector<float> all(inj.table().values().begin(), inj.table().values().end());
    for (ParamView& v : inj.dense_params()) all.insert(all.end(), v.param, v.param + v.n);
    return all;
  };
  const auto a = run(1), b = run(2);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  EXPECT_TRUE(std::any_of(a.begin(), a.end() - 1000, [](float x) { return x != 0.0f; })) << "the table moved";
}

TEST_P(InjectorGates, SaveLoadRoundTrip) {
  const auto path =
      (std::filesystem::temp_directory_path() / ("pg_injector_" + std::to_string(::getpid()) + ".h5")).string();
  MemoryInjector a(small_config(GetParam().first, GetParam().second), kC, kLayers, 5);
  RngStream r(4, "test.inj.save");
  for (float& v : a.table().values()) v = static_cast<float>(r.normal());
  for (ParamView& v : a.dense_params()) v.param[0] += 0.25f;
  h5::write_atomic(path, [&](const h5::Group& g) { a.save(g.create("memory")); });
  MemoryInjector b(small_config(GetParam().first, GetParam().second), kC, kLayers, 6);  // other init seed
  {
    h5::File f = h5::File::open(path);
    b.load(f.root().sub("memory"));
  }
  auto va = a.dense_params(), vb = b.dense_params();
  ASSERT_EQ(va.size(), vb.size());
  for (size_t i = 0; i < va.size(); ++i) EXPECT_EQ(0, std::memcmp(va[i].param, vb[i].param, va[i].n * sizeof(float)));
  EXPECT_EQ(
      0, std::memcmp(a.table().values().data(), b.table().values().data(), a.table().values().size() * sizeof(float)));
  // Another gate form is refused.
  MemoryConfig other = small_config(GetParam().first, GetParam().second);
  other.gate = other.gate == "scalar" ? "context" : "scalar";
  MemoryInjector c(other, kC, kLayers, 5);
  {
    h5::File f = h5::File::open(path);
    EXPECT_THROW(c.load(f.root().sub("memory")), IoError);
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Gates, InjectorGates,
                         ::testing::Values(GateCase{"pagegram", "scalar"}, GateCase{"pagegram", "context"},
                                           GateCase{"engram", "context_sqrt"}, GateCase{"flat", "scalar"},
                                           GateCase{"flat", "context"}),
                         [](const auto& i) { return std::string(i.param.first) + "_" + i.param.second; });

TEST(Injector, InitIsIndependentOfTheBackboneAndDeterministic) {
  MemoryConfig c = small_config("pagegram", "scalar");
  MemoryInjector a(c, kC, kLayers, 9), b(c, kC, kLayers, 9), other(c, kC, kLayers, 10);
  auto va = a.dense_params(), vb = b.dense_params(), vo = other.dense_params();
  ASSERT_EQ(va[0].name, "memory.w_v");
  EXPECT_EQ(0, std::memcmp(va[0].param, vb[0].param, va[0].n * sizeof(float)));
  EXPECT_NE(0, std::memcmp(va[0].param, vo[0].param, va[0].n * sizeof(float)));
  ASSERT_EQ(va[1].name, "memory.gates");
  EXPECT_EQ(va[1].n, 2u);
  EXPECT_EQ(va[1].param[0], 0.5f);
  EXPECT_EQ(va[1].param[1], 0.5f);
  // W_V [C, D] has orthogonal rows with gain sqrt(2C / D): D = 2 orders * 2 heads * 8 = 32.
  const int64_t D = 32;
  double d00 = 0, d01 = 0;
  for (int64_t k = 0; k < D; ++k)
    d00 += double(va[0].param[k]) * va[0].param[k], d01 += double(va[0].param[k]) * va[0].param[D + k];
  EXPECT_NEAR(d00, 2.0 * kC / D, 1e-5);
  EXPECT_NEAR(d01, 0.0, 1e-5);
  // Engram-faithful needs the tokenizer's compressed vocabulary.
  MemoryConfig f = small_config("engram", "scalar");
  f.hash.engram_faithful = true;
  EXPECT_THROW(MemoryInjector(f, kC, kLayers, 1), ConfigError);
}

}  // namespace
}  // namespace pg
