// Conformance suite run on every layout (flat, engram, engram-faithful, pagegram S=1/4/15): addresses in
// range, document boundaries, window independence, gather and sparse gradient against references, storage
// blocks, thread-count independence, save/load round trip and refusal of mismatched or corrupt tables.
#include <gtest/gtest.h>

#include <ostream>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "core/h5.h"
#include "core/rng.h"
#include "memory/engram_layout.h"
#include "memory/normalize.h"
#include "memory/pagegram_layout.h"
#include "memory/table.h"

namespace pg {
namespace {

struct LayoutCase {
  const char* label;
  const char* layout;
  int64_t slots;
  bool faithful;
};
// How ctest and GoogleTest print a case (instead of its bytes).
void PrintTo(const LayoutCase& c, std::ostream* os) {
  *os << c.label << " (layout " << c.layout << ", S " << c.slots << (c.faithful ? ", Engram-faithful" : "") << ")";
}

const LayoutCase kCases[] = {
    {"flat", "flat", 4, false},
    {"engram", "engram", 4, false},
    {"engram_faithful", "engram", 4, true},
    {"pagegram_s1", "pagegram", 1, false},
    {"pagegram_s4", "pagegram", 4, false},
    {"pagegram_s15", "pagegram", 15, false},
};

constexpr int64_t kD = 96;  // model width (flat rows are 96 wide: a partial sign word)
constexpr int64_t kVocab = 500;  // small vocabulary: frequent repeats and collisions

MemoryConfig config_for(const LayoutCase& c, int64_t target = 600000) {
  MemoryConfig m;
  m.layout = c.layout;
  m.slots = c.slots;
  m.heads = 8;
  m.head_dim = 64;
  m.target_params = target;
  m.hash.engram_faithful = c.faithful;
  m.hash.seed = 7;
  return m;
}

// A synthetic compressed vocabulary: ids that differ by 250 share a compressed id (like case variants).
const CompressedVocab& test_vocab() {
  static const CompressedVocab v = [] {
    std::vector<std::string> texts, pieces;
    for (int i = 0; i < kVocab; ++i) {
      // (appended, not "w" + to_string(...): GCC 12 at -O3 warns falsely about that operator+ here)
      std::string t(1, i >= 250 ? 'W' : 'w');
      t += std::to_string(i % 250);
      texts.push_back(t);
      pieces.push_back(t);
    }
    return compress_vocabulary(texts, pieces);
  }();
  return v;
}

std::unique_ptr<MemoryLayout> layout_for(const LayoutCase& c, int64_t target = 600000) {
  return make_layout(config_for(c, target), kD, &test_vocab());
}

// A stream of n tokens with documents of random length 1..40.
struct Stream {
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> docs;
};
Stream random_stream(int64_t n, uint64_t seed) {
  RngStream r(seed, "test.stream");
  Stream s;
  for (int64_t i = 0; i < n; ++i) s.tokens.push_back(static_cast<uint32_t>(r.below(kVocab)));
  for (uint64_t p = 0; p < static_cast<uint64_t>(n); p += 1 + r.below(40)) s.docs.push_back(p);
  s.docs.push_back(static_cast<uint64_t>(n));
  return s;
}

Addresses addresses_of(const MemoryLayout& l, const Stream& s, int64_t p0, int64_t p1) {
  Addresses a;
  a.resize(p1 - p0, l);
  compute_addresses(l, std::span<const uint32_t>(s.tokens), std::span<const uint64_t>(s.docs), p0, p1, a.rows.data(),
                    a.signs.data());
  return a;
}

class LayoutConformance : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(LayoutConformance, AddressesInRangeOfTheirSubTable) {
  auto l = layout_for(GetParam());
  const Stream s = random_stream(5000, 1);
  const Addresses a = addresses_of(*l, s, 0, 5000);
  const int64_t K = l->heads_per_order();
  for (int64_t i = 0; i < a.n; ++i)
    for (int64_t h = 0; h < a.heads; ++h) {
      const int64_t row = a.rows[static_cast<size_t>(i * a.heads + h)], o = h / K, k = h % K;
      ASSERT_GE(row, 0);
      ASSERT_LT(row, l->rows());
      const int64_t idx = l->head_row_index(o, k, row);
      ASSERT_GE(idx, 0);
      ASSERT_LT(idx, l->head_row_count(o, k));
      if (auto* e = dynamic_cast<const EngramLayout*>(l.get())) {
        ASSERT_GE(row, e->base(o, k));
        ASSERT_LT(row, e->base(o, k) + e->sizes()[static_cast<size_t>(h)]);
      }
      if (auto* p = dynamic_cast<const PageGramLayout*>(l.get())) {
        ASSERT_GE(row, p->base(o));
        ASSERT_LT(row, p->base(o) + p->pages(o) * p->page_rows());
        ASSERT_EQ((row - p->base(o)) / p->slots() % K, k) << "head k must use its own slot group of the page";
      }
    }
  // Sign words: unused lanes of the last word are zero.
  if (l->width() % 64) {
    for (int64_t e = 0; e < a.n * a.heads; ++e)
      ASSERT_EQ(a.signs[static_cast<size_t>((e + 1) * a.sign_words - 1)] >> (l->width() % 64), 0u);
  }
}

TEST_P(LayoutConformance, NoNgramAcrossADocumentBoundary) {
  auto l = layout_for(GetParam());
  Stream s = random_stream(3000, 2);
  const Addresses before = addresses_of(*l, s, 0, 3000);
  // Rewrite every token of every other document; addresses of the untouched documents must not move.
  Stream t = s;
  std::vector<bool> changed(3000, false);
  for (size_t d = 0; d + 1 < s.docs.size(); d += 2)
    for (uint64_t p = s.docs[d]; p < s.docs[d + 1]; ++p) t.tokens[p] = (t.tokens[p] + 17) % kVocab, changed[p] = true;
  const Addresses after = addresses_of(*l, t, 0, 3000);
  int64_t checked = 0;
  for (int64_t p = 0; p < 3000; ++p) {
    if (changed[static_cast<size_t>(p)]) continue;
    ++checked;
    for (int64_t h = 0; h < before.heads; ++h)
      ASSERT_EQ(before.rows[static_cast<size_t>(p * before.heads + h)],
                after.rows[static_cast<size_t>(p * after.heads + h)])
          << "position " << p;
    for (int64_t w = 0; w < before.heads * before.sign_words; ++w)
      ASSERT_EQ(before.signs[static_cast<size_t>(p * before.heads * before.sign_words + w)],
                after.signs[static_cast<size_t>(p * after.heads * after.sign_words + w)]);
  }
  EXPECT_GT(checked, 1000);
}

TEST_P(LayoutConformance, AddressesDoNotDependOnTheWindowStart) {
  auto l = layout_for(GetParam());
  const Stream s = random_stream(4000, 3);
  const Addresses whole = addresses_of(*l, s, 0, 4000);
  const int64_t T = 64;
  std::vector<int64_t> starts = {0, 1, 2, 3, 17, 100, 2500, 4000 - T - 1};
  Addresses w;
  compute_window_addresses(*l, std::span<const uint32_t>(s.tokens), std::span<const uint64_t>(s.docs),
                           std::span<const int64_t>(starts), T, w);
  for (size_t b = 0; b < starts.size(); ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t p = starts[b] + t, i = static_cast<int64_t>(b) * T + t;
      for (int64_t h = 0; h < w.heads; ++h)
        ASSERT_EQ(w.rows[static_cast<size_t>(i * w.heads + h)], whole.rows[static_cast<size_t>(p * w.heads + h)]);
      ASSERT_EQ(0, std::memcmp(w.sign_ptr(i, 0), whole.sign_ptr(p, 0), sizeof(uint64_t) * w.heads * w.sign_words));
    }
}

// Fills a table with a deterministic random pattern.
void randomize(MemoryTable& t, uint64_t seed) {
  RngStream r(seed, "test.table");
  for (float& x : t.values()) x = static_cast<float>(r.normal());
}

TEST_P(LayoutConformance, GatherMatchesAScalarReference) {
  MemoryTable t(layout_for(GetParam()), {});
  randomize(t, 4);
  const Stream s = random_stream(700, 5);
  const Addresses a = addresses_of(t.layout(), s, 0, 700);
  std::vector<float> out(static_cast<size_t>(a.n * t.readout_width()));
  t.gather(a, out.data());
  const int64_t w = t.layout().width();
  for (int64_t i = 0; i < a.n; ++i)
    for (int64_t j = 0; j < t.readout_width(); ++j) {
      float ref = 0;
      if (t.layout().sums_heads()) {
        for (int64_t h = 0; h < a.heads; ++h) {
          const float v = t.values()[static_cast<size_t>(a.rows[static_cast<size_t>(i * a.heads + h)] * w + j)];
          const bool neg = (a.sign_ptr(i, h)[j / 64] >> (j % 64)) & 1;
          ref = h == 0 ? (neg ? -v : v) : ref + (neg ? -v : v);
        }
      } else {
        const int64_t h = j / w, c = j % w;
        const float v = t.values()[static_cast<size_t>(a.rows[static_cast<size_t>(i * a.heads + h)] * w + c)];
        ref = ((a.sign_ptr(i, h)[c / 64] >> (c % 64)) & 1) ? -v : v;
      }
      ASSERT_EQ(out[static_cast<size_t>(i * t.readout_width() + j)], ref);
    }
}

TEST_P(LayoutConformance, SparseGradientEqualsDenseScatterAdd) {
  auto l = layout_for(GetParam());
  const Stream s = random_stream(1500, 6);
  const Addresses a = addresses_of(*l, s, 0, 1500);
  RngStream r(6, "test.dout");
  std::vector<float> dout(static_cast<size_t>(a.n * l->readout_width()));
  for (float& x : dout) x = static_cast<float>(r.normal());
  SparseGrad g;
  SparseGradScratch scratch;
  sparse_grad(a, dout.data(), l->width(), l->sums_heads(), g, scratch);
  std::vector<float> dense(static_cast<size_t>(l->rows() * l->width()), 0.0f);
  dense_grad_reference(a, dout.data(), l->width(), l->sums_heads(), dense.data());
  ASSERT_TRUE(std::is_sorted(g.rows.begin(), g.rows.end()));
  ASSERT_EQ(std::adjacent_find(g.rows.begin(), g.rows.end()), g.rows.end()) << "rows must be unique";
  std::vector<float> from_sparse(dense.size(), 0.0f);
  for (int64_t u = 0; u < g.size(); ++u)
    std::memcpy(from_sparse.data() + g.rows[static_cast<size_t>(u)] * l->width(), g.values.data() + u * l->width(),
                sizeof(float) * l->width());
  for (size_t i = 0; i < dense.size(); ++i)
    ASSERT_EQ(from_sparse[i], dense[i]) << "element " << i;  // same order: exact
}

TEST_P(LayoutConformance, OneAndTwoThreadsGiveIdenticalBits) {
  const Stream s = random_stream(3000, 7);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    MemoryConfig cfg = config_for(GetParam());
    MemoryTable t(make_layout(cfg, kD, &test_vocab()), {0.95, 1e-8, 0.01});
    t.optimizer().set_schedule(LrSchedule{0.05, 3, 0.0, 1.0});  // decaying over the 3 steps
    RngStream r(8, "test.dout");
    std::vector<float> out, dout;
    for (int64_t step = 1; step <= 3; ++step)
      for (int64_t mb = 0; mb < 2; ++mb) {
        const int64_t p0 = (step * 2 + mb) * 300 % 2000;
        Addresses a = addresses_of(t.layout(), s, p0, p0 + 600);
        t.catch_up(a);
        out.resize(static_cast<size_t>(a.n * t.readout_width()));
        t.gather(a, out.data());
        dout.resize(out.size());
        for (size_t i = 0; i < out.size(); ++i) dout[i] = out[i] * 0.1f + static_cast<float>(r.normal());
        t.accumulate_grad(a, dout.data());
        if (mb == 1) t.apply_update(step);
      }
    omp_set_num_threads(2);
    return std::vector<float>(t.values().begin(), t.values().end());
  };
  const auto a = run(1), b = run(2);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST_P(LayoutConformance, UpdateMovesOnlyTouchedRows) {
  MemoryTable t(layout_for(GetParam()), {});
  t.optimizer().set_schedule(LrSchedule::constant(0.1));
  const Stream s = random_stream(300, 9);
  const Addresses a = addresses_of(t.layout(), s, 0, 300);
  std::vector<float> dout(static_cast<size_t>(a.n * t.readout_width()), 1.0f);
  t.accumulate_grad(a, dout.data());
  std::set<int64_t> touched(a.rows.begin(), a.rows.end());
  t.apply_update(1);
  int64_t moved = 0;
  for (int64_t r = 0; r < t.layout().rows(); ++r) {
    bool nz = false;
    for (int64_t j = 0; j < t.layout().width(); ++j)
      nz |= t.values()[static_cast<size_t>(r * t.layout().width() + j)] != 0.0f;
    if (nz) {
      ASSERT_TRUE(touched.count(r)) << "row " << r << " moved without a gradient";
      ++moved;
    }
  }
  EXPECT_GT(moved, 0);
  EXPECT_EQ(t.stats().touched_last, static_cast<int64_t>(touched.size()));
}

TEST_P(LayoutConformance, BlocksHoldWholeUnits) {
  auto l = layout_for(GetParam());
  const int64_t rb = l->nf4_bytes_per_row();
  const Stream s = random_stream(2000, 10);
  const Addresses a = addresses_of(*l, s, 0, 2000);
  for (int64_t r = 0; r < l->rows(); r += 1 + r / 50) {
    const BlockLocation b = l->block_of(r);
    ASSERT_GE(b.block, 0);
    ASSERT_LT(b.block, l->num_blocks());
    if (b.blocks == 1) {
      ASSERT_LE(b.offset + rb, kBlockBytes) << "row " << r << " straddles a block";
    }
  }
  // Every order's rows of one token: PageGram reads one block per order; others one per row.
  const int64_t K = l->heads_per_order();
  for (int64_t i = 0; i < a.n; ++i)
    for (int64_t o = 0; o < l->n_orders(); ++o) {
      std::set<int64_t> blocks;
      for (int64_t k = 0; k < K; ++k)
        blocks.insert(l->block_of(a.rows[static_cast<size_t>(i * a.heads + o * K + k)]).block);
      if (l->name() == "pagegram") {
        ASSERT_EQ(blocks.size(), 1u);
      }
    }
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("pg_memory_test_" + name + "_" + std::to_string(::getpid()) + ".h5"))
      .string();
}

TEST_P(LayoutConformance, SaveLoadRoundTripContinuesIdentically) {
  const std::string path = temp_path(std::string("rt_") + GetParam().label);
  auto make = [&] {
    auto t = std::make_unique<MemoryTable>(layout_for(GetParam()), RowwiseRmsSettings{0.95, 1e-8, 0.01});
    t->optimizer().set_schedule(LrSchedule{0.1, 8, 0.0, 1.0});  // decaying
    return t;
  };
  const Stream s = random_stream(1000, 11);
  auto train_step = [&](MemoryTable& t, int64_t step) {
    Addresses a = addresses_of(t.layout(), s, step * 100, step * 100 + 400);
    t.catch_up(a);
    std::vector<float> out(static_cast<size_t>(a.n * t.readout_width()));
    t.gather(a, out.data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = out[i] * 0.5f + static_cast<float>(i % 7) - 3.0f;
    t.accumulate_grad(a, out.data());
    t.apply_update(step);
  };
  auto a = make();
  for (int64_t st = 1; st <= 3; ++st) train_step(*a, st);
  h5::write_atomic(path, [&](const h5::Group& g) { a->save(g.create("memory")); });
  auto b = make();
  {
    h5::File f = h5::File::open(path);
    b->load(f.root().sub("memory"));
  }
  ASSERT_EQ(b->completed_step(), 3);
  ASSERT_EQ(0, std::memcmp(a->values().data(), b->values().data(), a->values().size() * sizeof(float)));
  for (int64_t st = 4; st <= 5; ++st) train_step(*a, st), train_step(*b, st);
  EXPECT_EQ(0, std::memcmp(a->values().data(), b->values().data(), a->values().size() * sizeof(float)));
  std::filesystem::remove(path);
}

TEST_P(LayoutConformance, MismatchedOrCorruptTablesAreRefused) {
  const std::string path = temp_path(std::string("bad_") + GetParam().label);
  MemoryTable a(layout_for(GetParam()), {});
  randomize(a, 12);
  h5::write_atomic(path, [&](const h5::Group& g) { a.save(g.create("memory")); });
  // Another hash seed: same shapes, different table format.
  {
    MemoryConfig c = config_for(GetParam());
    c.hash.seed = 8;
    MemoryTable b(make_layout(c, kD, &test_vocab()), {});
    h5::File f = h5::File::open(path);
    try {
      b.load(f.root().sub("memory"));
      FAIL() << "a table of another hash seed was accepted";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find("hash_seed"), std::string::npos) << e.what();
    }
  }
  // Another size.
  {
    MemoryTable b(layout_for(GetParam(), 900000), {});
    h5::File f = h5::File::open(path);
    EXPECT_THROW(b.load(f.root().sub("memory")), IoError);
  }
  // Flipped bytes in the table data (checksummed) and a truncated file.
  const auto size = std::filesystem::file_size(path);
  {
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(size * 6 / 10));
    const char junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    io.write(junk, 8);
  }
  {
    MemoryTable b(layout_for(GetParam()), {});
    EXPECT_THROW(
        {
          h5::File f = h5::File::open(path);
          b.load(f.root().sub("memory"));
        },
        IoError);
  }
  std::filesystem::resize_file(path, size / 2);
  EXPECT_THROW(h5::File::open(path), IoError);
  std::filesystem::remove(path);
}

// The registry decides which layouts exist: each registered layout has a case here (with and without pages' slots
// as it takes them), and every case names a registered layout. The golden, grad-tree and bf16 suites instantiate
// memory_layout_choices() themselves.
TEST(LayoutRegistry, EveryRegisteredLayoutHasAConformanceCase) {
  const std::vector<std::string> names = layout_names();
  ASSERT_FALSE(names.empty());
  for (const std::string& name : names) {
    const bool covered =
        std::any_of(std::begin(kCases), std::end(kCases), [&](const LayoutCase& c) { return name == c.layout; });
    EXPECT_TRUE(covered) << "layout '" << name << "' is registered (memory/layout.cpp) but has no case in kCases";
    EXPECT_TRUE(is_layout_name(name));
  }
  for (const LayoutCase& c : kCases) EXPECT_TRUE(is_layout_name(c.layout)) << c.label;
  EXPECT_FALSE(is_layout_name("none"));
  const std::vector<std::string> choices = memory_layout_choices();
  ASSERT_EQ(choices.size(), names.size() + 1);
  EXPECT_EQ(choices[0], "none");
  // Slots and labels come from the layout, not from its name.
  for (const LayoutCase& c : kCases) {
    auto L = layout_for(c);
    EXPECT_EQ(L->has_pages(), layout_takes_slots(c.layout)) << c.label;
    EXPECT_EQ(L->slots(), L->has_pages() ? c.slots : 0) << c.label;
    EXPECT_EQ(L->unit_rows(), L->has_pages() ? L->heads_per_order() * c.slots : 1) << c.label;
    EXPECT_EQ(L->label(), L->has_pages() ? str(c.layout, "(S=", c.slots, ")") : std::string(c.layout)) << c.label;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryLayout, LayoutConformance, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<LayoutCase>& i) { return std::string(i.param.label); });

}  // namespace
}  // namespace pg
