// Config machinery: a config struct lists its fields once in `template <class V> void visit(V& v)`,
// and parsing from YAML (with key paths in errors), dumping, equality and help all derive from that list.
//
//   struct ModelConfig {
//     int64_t layers = 6;
//     template <class V> void visit(V& v) { v("layers", layers, "transformer blocks", cfg::Range{1, 128}); }
//   };
//
// Field types: int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>,
// std::vector<std::string>, and nested config structs (anything with a visit method).
#pragma once
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <utility>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace pg::cfg {

// Inclusive numeric range a field's value (each element, for lists) must fall in.
struct Range {
  double lo, hi;
};
// The allowed values of a string field.
struct OneOf {
  std::vector<std::string> values;
  OneOf(std::initializer_list<std::string> v) : values(v) {}
  explicit OneOf(std::vector<std::string> v) : values(std::move(v)) {}
};
struct NoCheck {};

template <class T>
concept HasVisit = requires {
  &T::template visit<int>;
};

std::string type_name(const int64_t*);
std::string type_name(const double*);
std::string type_name(const bool*);
std::string type_name(const std::string*);
std::string type_name(const std::vector<int64_t>*);
std::string type_name(const std::vector<double>*);
std::string type_name(const std::vector<std::string>*);

// Converts a YAML node into a field value; throws ConfigError naming `where` and `path`.
void decode(const YAML::Node& n, int64_t& out, const std::string& where, const std::string& path);
void decode(const YAML::Node& n, double& out, const std::string& where, const std::string& path);
void decode(const YAML::Node& n, bool& out, const std::string& where, const std::string& path);
void decode(const YAML::Node& n, std::string& out, const std::string& where, const std::string& path);
void decode(const YAML::Node& n, std::vector<int64_t>& out, const std::string& where, const std::string& path);
void decode(const YAML::Node& n, std::vector<double>& out, const std::string& where, const std::string& path);
void decode(const YAML::Node& n, std::vector<std::string>& out, const std::string& where, const std::string& path);

void check(const int64_t& v, const Range& r, const std::string& where, const std::string& path,
           const std::string& help);
void check(const double& v, const Range& r, const std::string& where, const std::string& path, const std::string& help);
void check(const std::vector<int64_t>& v, const Range& r, const std::string& where, const std::string& path,
           const std::string& help);
void check(const std::vector<double>& v, const Range& r, const std::string& where, const std::string& path,
           const std::string& help);
void check(const std::string& v, const OneOf& r, const std::string& where, const std::string& path,
           const std::string& help);
template <class T>
void check(const T&, const NoCheck&, const std::string&, const std::string&, const std::string&) {}

YAML::Node encode(const int64_t& v);
YAML::Node encode(const double& v);
YAML::Node encode(const bool& v);
YAML::Node encode(const std::string& v);
YAML::Node encode(const std::vector<int64_t>& v);
YAML::Node encode(const std::vector<double>& v);
YAML::Node encode(const std::vector<std::string>& v);

std::string describe(const Range& r);
std::string describe(const OneOf& r);
inline std::string describe(const NoCheck&) { return ""; }

// Closest known key (edit distance), for "did you mean" hints; empty when nothing is close.
std::string closest(const std::string& key, const std::vector<std::string>& known);

// Reads a YAML map into a config struct. Unknown keys and bad values throw ConfigError.
class Reader {
 public:
  Reader(YAML::Node node, std::string where, std::string prefix)
      : node_(std::move(node)), where_(std::move(where)), prefix_(std::move(prefix)) {}

  template <class T, class C = NoCheck>
  void operator()(const char* key, T& field, const char* help, const C& c = C{}) {
    known_.push_back(key);
    const std::string path = prefix_ + key;
    if constexpr (HasVisit<T>) {
      YAML::Node sub = node_[key];
      if (!sub) return;
      if (!sub.IsMap())
        throw ConfigError(str(where_, ": key '", path, "': expected a section (a map of keys), got '", YAML::Dump(sub),
                              "' (hint: ", help, ")"));
      Reader r(sub, where_, path + ".");
      field.visit(r);
      r.finish();
    } else {
      YAML::Node v = node_[key];
      if (!v) return;
      decode(v, field, where_, path);
      check(field, c, where_, path, help);
    }
  }
  // Throws on keys of the map that no field claimed.
  void finish() const;

 private:
  YAML::Node node_;
  std::string where_, prefix_;
  std::vector<std::string> known_;
};

// Writes a config struct into a YAML map.
class Writer {
 public:
  YAML::Node node{YAML::NodeType::Map};
  template <class T, class C = NoCheck>
  void operator()(const char* key, T& field, const char*, const C& = C{}) {
    if constexpr (HasVisit<T>) {
      Writer w;
      field.visit(w);
      node[key] = w.node;
    } else {
      node[key] = encode(field);
    }
  }
};

// Lists every key with its type, default, constraint and help (for `pagegram config keys`).
class Helper {
 public:
  explicit Helper(std::string prefix = "") : prefix_(std::move(prefix)) {}
  std::vector<std::string> lines;
  template <class T, class C = NoCheck>
  void operator()(const char* key, T& field, const char* help, const C& c = C{}) {
    if constexpr (HasVisit<T>) {
      Helper h(prefix_ + key + ".");
      field.visit(h);
      lines.insert(lines.end(), h.lines.begin(), h.lines.end());
    } else {
      std::string d = describe(c);
      lines.push_back(prefix_ + key + " (" + type_name(&field) + ", default " + YAML::Dump(encode(field)) +
                      (d.empty() ? "" : ", " + d) + "): " + help);
    }
  }

 private:
  std::string prefix_;
};

template <class T>
YAML::Node to_yaml(const T& cfg) {
  Writer w;
  const_cast<T&>(cfg).visit(w);
  return w.node;
}
template <class T>
std::string dump(const T& cfg) {
  YAML::Emitter e;
  e << to_yaml(cfg);
  return e.c_str();
}
// Structural equality through the YAML dump (doubles are written with round-trip precision).
template <class T>
bool equal(const T& a, const T& b) {
  return dump(a) == dump(b);
}
template <class T>
T from_yaml(const YAML::Node& node, const std::string& where) {
  T cfg;
  if (!node || node.IsNull()) return cfg;
  if (!node.IsMap()) throw ConfigError(str(where, ": expected a map of keys at the top level"));
  Reader r(node, where, "");
  cfg.visit(r);
  r.finish();
  return cfg;
}

// Loads a YAML file, resolving `base: other.yaml` (relative to the file, recursively; later keys win,
// maps merge deeply), then applies `a.b=value` overrides (value parsed as YAML). Throws ConfigError/IoError.
YAML::Node load_file(const std::string& path, const std::vector<std::string>& overrides = {});
// The files load_file reads for `path`: it, then each `base:` in turn (paths as resolved, relative to each file).
std::vector<std::filesystem::path> base_chain(const std::string& path);
// Applies one `a.b=value` override to a node.
void apply_override(YAML::Node& root, const std::string& assignment);
// Parses YAML text that must hold exactly one document, every key a plain scalar and no key twice in a map
// (ConfigError naming `where`, line and column otherwise).
YAML::Node parse_text(const std::string& text, const std::string& where);
// Deep merge: keys of `over` replace or (for maps) merge into `base`.
YAML::Node merge(const YAML::Node& base, const YAML::Node& over);

}  // namespace pg::cfg
