// MemoryConfig (memory/config.h): defaults, YAML field list, and cross-field checks naming the key path; the
// layout registry.
#include "memory/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "memory/layout.h"

namespace pg {
namespace {

MemoryConfig parse(const std::string& yaml) { return cfg::from_yaml<MemoryConfig>(YAML::Load(yaml), "test.yaml"); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(MemoryConfig, DefaultsFollowTheReport) {
  const MemoryConfig c;
  EXPECT_EQ(c.layout, "none");
  EXPECT_EQ(c.orders, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(c.heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.slots, 4);
  EXPECT_EQ(c.target_params, 200000000);
  EXPECT_EQ(c.inject_layers, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(c.gate, "scalar");
  EXPECT_EQ(c.gate_init, 0.5);
  EXPECT_EQ(c.lr_mult, 70.0);
  EXPECT_EQ(c.beta2, 0.95);
  EXPECT_EQ(c.weight_decay, 0.0);
  EXPECT_EQ(c.hash.version, kHashVersion);
  EXPECT_FALSE(c.hash.engram_faithful);
  EXPECT_NO_THROW(c.validate("x", 384, 6));
}

TEST(MemoryConfig, ParsesAndRoundTrips) {
  const MemoryConfig c = parse("layout: pagegram\nslots: 15\norders: [2, 3, 4]\ngate: context_sqrt\nhash: {seed: 9}\n");
  EXPECT_EQ(c.layout, "pagegram");
  EXPECT_EQ(c.slots, 15);
  EXPECT_EQ(c.orders.size(), 3u);
  EXPECT_EQ(c.hash.seed, 9);
  EXPECT_TRUE(cfg::equal(c, cfg::from_yaml<MemoryConfig>(cfg::to_yaml(c), "dump")));
}

TEST(MemoryConfig, BadValuesNameTheKey) {
  EXPECT_NE(error_of([] { parse("layuot: flat\n"); }).find("did you mean 'layout'"), std::string::npos);
  EXPECT_NE(error_of([] { parse("layout: pagegrm\n"); }).find("did you mean 'pagegram'"), std::string::npos);
  EXPECT_NE(error_of([] { parse("orders: [1, 2]\n"); }).find("'orders[0]'"), std::string::npos);
  EXPECT_NE(error_of([] { parse("orders: [2, 5]\n"); }).find("'orders[1]'"), std::string::npos);
  EXPECT_NE(error_of([] { parse("gate: sigmoid\n"); }).find("'gate'"), std::string::npos);
  EXPECT_NE(error_of([] { parse("hash: {version: 2}\n"); }).find("'hash.version'"), std::string::npos);
  EXPECT_NE(error_of([] { parse("heads: eight\n"); }).find("expected an integer"), std::string::npos);
}

TEST(MemoryConfig, CrossFieldChecksNameTheKeyPath) {
  MemoryConfig c;
  c.layout = "pagegram";
  EXPECT_NE(error_of([&] { c.validate("run.yaml", 384, 4); }).find("'memory.inject_layers[1]'"), std::string::npos);
  c.inject_layers = {0, 0};
  EXPECT_NE(error_of([&] { c.validate("run.yaml", 384, 6); }).find("listed twice"), std::string::npos);
  c.inject_layers = {0};
  c.orders = {3, 2};
  EXPECT_NE(error_of([&] { c.validate("run.yaml", 384, 6); }).find("'memory.orders[1]'"), std::string::npos);
  c.orders = {2, 3};
  c.hash.engram_faithful = true;
  EXPECT_NE(error_of([&] { c.validate("run.yaml", 384, 6); }).find("'memory.hash.engram_faithful'"), std::string::npos);
  c.hash.engram_faithful = false;
  c.target_params = 1000;
  EXPECT_NE(error_of([&] { c.validate("run.yaml", 384, 6); }).find("'memory.target_params'"), std::string::npos);
  c.target_params = 200000000;
  EXPECT_NO_THROW(c.validate("run.yaml", 384, 6));
  // A disabled memory skips the checks of its unused fields.
  MemoryConfig off;
  off.inject_layers = {9};
  EXPECT_NO_THROW(off.validate("run.yaml", 384, 6));
}

TEST(MemoryLayoutRegistry, NamesAndNone) {
  EXPECT_EQ(layout_names(), (std::vector<std::string>{"flat", "engram", "pagegram"}));
  MemoryConfig c;
  EXPECT_EQ(make_layout(c, 384), nullptr);
  for (const auto& n : layout_names()) {
    c.layout = n;
    auto l = make_layout(c, 384);
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->name(), n);
  }
  c.layout = "hashed";
  EXPECT_THROW(make_layout(c, 384), ConfigError);
}

}  // namespace
}  // namespace pg

namespace pg {
namespace {

// STYLE.md: memory/ takes spans and returns views; it never includes model/ or train/ headers (core/ and kernels/
// below it only; the include_rule test checks every room the same way).
TEST(MemoryDependencies, MemoryIncludesOnlyTheFloorsBelowIt) {
  namespace fs = std::filesystem;
  int files = 0;
  for (const auto& e : fs::directory_iterator(fs::path(PG_SOURCE_DIR) / "memory")) {
    std::ifstream in(e.path());
    ++files;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("#include \"", 0) != 0) continue;
      EXPECT_TRUE(line.rfind("#include \"memory/", 0) == 0 || line.rfind("#include \"core/", 0) == 0 ||
                  line.rfind("#include \"kernels/", 0) == 0)
          << e.path().filename() << ": " << line;
    }
  }
  EXPECT_GT(files, 10);
}

}  // namespace
}  // namespace pg
