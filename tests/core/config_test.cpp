// Config machinery: parsing, key-path errors, base merging, overrides, dump/reload equality.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/config.h"
#include "tests/test_util.h"

namespace pg {
namespace {

struct Inner {
  int64_t width = 8;
  std::vector<int64_t> layers{0, 4};
  template <class V>
  void visit(V& v) {
    v("width", width, "a width", cfg::Range{1, 64});
    v("layers", layers, "injected layers", cfg::Range{0, 7});
  }
};
struct Outer {
  std::string kind = "a";
  double rate = 0.5;
  bool on = false;
  Inner inner;
  template <class V>
  void visit(V& v) {
    v("kind", kind, "which kind", cfg::OneOf{"a", "b"});
    v("rate", rate, "a rate", cfg::Range{0.0, 1.0});
    v("on", on, "a switch");
    v("inner", inner, "nested section");
  }
};

std::string error_of(const std::string& yaml) {
  try {
    cfg::from_yaml<Outer>(YAML::Load(yaml), "x.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, ParsesAndDefaults) {
  Outer o = cfg::from_yaml<Outer>(YAML::Load("kind: b\ninner: {width: 16}\n"), "x.yaml");
  EXPECT_EQ(o.kind, "b");
  EXPECT_EQ(o.inner.width, 16);
  EXPECT_EQ(o.inner.layers, (std::vector<int64_t>{0, 4}));
  EXPECT_DOUBLE_EQ(o.rate, 0.5);
}

TEST(Config, RejectsUnknownKeyWithPathAndSuggestion) {
  std::string e = error_of("inner: {widht: 3}\n");
  EXPECT_NE(e.find("x.yaml"), std::string::npos) << e;
  EXPECT_NE(e.find("inner.widht"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'inner.width'"), std::string::npos) << e;
}

TEST(Config, RejectsWrongTypesAndRanges) {
  EXPECT_NE(error_of("inner: {width: abc}").find("inner.width': expected an integer"), std::string::npos);
  EXPECT_NE(error_of("inner: {width: 1.5}").find("expected an integer"), std::string::npos);
  EXPECT_NE(error_of("inner: {width: 65}").find("out of range [1, 64]"), std::string::npos);
  EXPECT_NE(error_of("inner: {layers: [0, 9]}").find("inner.layers[1]"), std::string::npos);
  EXPECT_NE(error_of("rate: fast").find("'rate': expected a number"), std::string::npos);
  EXPECT_NE(error_of("on: maybe").find("true or false"), std::string::npos);
  EXPECT_NE(error_of("kind: c").find("not one of {a, b}"), std::string::npos);
  EXPECT_NE(error_of("inner: 3").find("expected a section"), std::string::npos);
  EXPECT_EQ(error_of("inner: {width: 2e1}"), "");  // exact integers in float notation are accepted
}

TEST(Config, DumpReloadsEqual) {
  Outer o;
  o.kind = "b";
  o.rate = 0.1 + 0.2;  // needs full precision to round-trip
  o.inner.layers = {1, 2, 3};
  Outer back = cfg::from_yaml<Outer>(YAML::Load(cfg::dump(o)), "dump");
  EXPECT_TRUE(cfg::equal(o, back));
  EXPECT_EQ(back.rate, o.rate);
  back.inner.width = 9;
  EXPECT_FALSE(cfg::equal(o, back));
}

TEST(Config, BaseMergeAndOverrides) {
  pg::testing::TempDir tmp;
  const auto& dir = tmp.path;
  std::ofstream(dir / "base.yaml") << "kind: b\ninner: {width: 4, layers: [1]}\n";
  std::ofstream(dir / "top.yaml") << "base: base.yaml\ninner: {width: 5}\n";
  YAML::Node n = cfg::load_file((dir / "top.yaml").string(), {"rate=0.25", "inner.layers=[2, 3]"});
  Outer o = cfg::from_yaml<Outer>(n, "top.yaml");
  EXPECT_EQ(o.kind, "b");
  EXPECT_EQ(o.inner.width, 5);
  EXPECT_EQ(o.inner.layers, (std::vector<int64_t>{2, 3}));
  EXPECT_DOUBLE_EQ(o.rate, 0.25);
  EXPECT_THROW(cfg::load_file((dir / "top.yaml").string(), {"novalue"}), ConfigError);
  EXPECT_THROW(cfg::load_file((dir / "missing.yaml").string()), IoError);
  std::ofstream(dir / "bad.yaml") << "a: [1, 2\n";
  EXPECT_THROW(cfg::load_file((dir / "bad.yaml").string()), ConfigError);
}

TEST(Config, HelpListsEveryKey) {
  Outer o;
  cfg::Helper h;
  o.visit(h);
  ASSERT_EQ(h.lines.size(), 5u);
  EXPECT_NE(h.lines[3].find("inner.width (integer, default 8, [1, 64])"), std::string::npos) << h.lines[3];
}

}  // namespace
}  // namespace pg
