// Implementation of core/config.h: YAML decoding with key paths, range checks, base merging, overrides.
#include "core/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace pg::cfg {
namespace {

std::string scalar_text(const YAML::Node& n) {
  if (n.IsScalar()) {  // shown on one line
    std::string s = n.Scalar();
    for (size_t i = 0; (i = s.find_first_of("\n\r", i)) != std::string::npos;) s.replace(i, 1, "\\n");
    return s;
  }
  std::string s = YAML::Dump(n);
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

[[noreturn]] void bad_type(const YAML::Node& n, const char* want, const std::string& where, const std::string& path) {
  throw ConfigError(str(where, ": key '", path, "': expected ", want, ", got '", scalar_text(n),
                        "' (hint: run `pagegram config keys` for every key and its type)"));
}

bool parse_int(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  size_t pos = 0;
  try {
    long long v = std::stoll(s, &pos, 0);
    if (pos != s.size()) {
      // Accept integral floating forms like 2e6 or 1.0e3 when they are exact integers.
      double d = std::stod(s, &pos);
      if (pos != s.size() || d != std::floor(d) || std::fabs(d) > 9.0e15) return false;
      out = static_cast<int64_t>(d);
      return true;
    }
    out = v;
    return true;
  } catch (...) {
    return false;
  }
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Shortest decimal text that reads back as exactly v.
std::string fmt_num(double v) {
  for (int p = 6; p <= 17; ++p) {
    std::ostringstream os;
    os.precision(p);
    os << v;
    if (p == 17 || std::stod(os.str()) == v) return os.str();
  }
  return "";
}

}  // namespace

std::string type_name(const int64_t*) { return "integer"; }
std::string type_name(const double*) { return "number"; }
std::string type_name(const bool*) { return "bool"; }
std::string type_name(const std::string*) { return "string"; }
std::string type_name(const std::vector<int64_t>*) { return "list of integers"; }
std::string type_name(const std::vector<double>*) { return "list of numbers"; }
std::string type_name(const std::vector<std::string>*) { return "list of strings"; }

void decode(const YAML::Node& n, int64_t& out, const std::string& where, const std::string& path) {
  if (!n.IsScalar() || !parse_int(n.Scalar(), out)) bad_type(n, "an integer", where, path);
}
void decode(const YAML::Node& n, double& out, const std::string& where, const std::string& path) {
  if (!n.IsScalar()) bad_type(n, "a number", where, path);
  const std::string& s = n.Scalar();
  size_t pos = 0;
  try {
    out = std::stod(s, &pos);
  } catch (...) {
    bad_type(n, "a number", where, path);
  }
  if (pos != s.size() || !std::isfinite(out)) bad_type(n, "a finite number", where, path);
}
void decode(const YAML::Node& n, bool& out, const std::string& where, const std::string& path) {
  if (!n.IsScalar()) bad_type(n, "true or false", where, path);
  const std::string& s = n.Scalar();
  if (s == "true" || s == "True" || s == "yes" || s == "on") out = true;
  else if (s == "false" || s == "False" || s == "no" || s == "off") out = false;
  else bad_type(n, "true or false", where, path);
}
void decode(const YAML::Node& n, std::string& out, const std::string& where, const std::string& path) {
  if (n.IsNull()) {
    out.clear();
    return;
  }
  if (!n.IsScalar()) bad_type(n, "a string", where, path);
  out = n.Scalar();
}
template <class T>
static void decode_list(const YAML::Node& n, std::vector<T>& out, const char* want, const std::string& where,
                        const std::string& path) {
  if (n.IsNull()) {
    out.clear();
    return;
  }
  if (!n.IsSequence()) bad_type(n, want, where, path);
  out.clear();
  for (size_t i = 0; i < n.size(); ++i) {
    T v{};
    decode(n[i], v, where, path + "[" + std::to_string(i) + "]");
    out.push_back(v);
  }
}
void decode(const YAML::Node& n, std::vector<int64_t>& out, const std::string& where, const std::string& path) {
  decode_list(n, out, "a list of integers like [0, 4]", where, path);
}
void decode(const YAML::Node& n, std::vector<double>& out, const std::string& where, const std::string& path) {
  decode_list(n, out, "a list of numbers", where, path);
}
void decode(const YAML::Node& n, std::vector<std::string>& out, const std::string& where, const std::string& path) {
  decode_list(n, out, "a list of strings", where, path);
}

static void check_num(double v, const Range& r, const std::string& where, const std::string& path,
                      const std::string& help) {
  if (!(v >= r.lo && v <= r.hi))
    throw ConfigError(
        str(where, ": key '", path, "': value ", fmt_num(v), " is out of range ", describe(r), " (hint: ", help, ")"));
}
void check(const int64_t& v, const Range& r, const std::string& where, const std::string& path,
           const std::string& help) {
  check_num(static_cast<double>(v), r, where, path, help);
}
void check(const double& v, const Range& r, const std::string& where, const std::string& path,
           const std::string& help) {
  check_num(v, r, where, path, help);
}
void check(const std::vector<int64_t>& v, const Range& r, const std::string& where, const std::string& path,
           const std::string& help) {
  for (size_t i = 0; i < v.size(); ++i)
    check_num(static_cast<double>(v[i]), r, where, path + "[" + std::to_string(i) + "]", help);
}
void check(const std::vector<double>& v, const Range& r, const std::string& where, const std::string& path,
           const std::string& help) {
  for (size_t i = 0; i < v.size(); ++i) check_num(v[i], r, where, path + "[" + std::to_string(i) + "]", help);
}
void check(const std::string& v, const OneOf& r, const std::string& where, const std::string& path,
           const std::string& help) {
  if (std::find(r.values.begin(), r.values.end(), v) == r.values.end()) {
    std::string near = closest(v, r.values);
    throw ConfigError(str(where, ": key '", path, "': '", v, "' is not one of ", describe(r),
                          near.empty() ? "" : " (did you mean '" + near + "'?)", " (hint: ", help, ")"));
  }
}

YAML::Node encode(const int64_t& v) { return YAML::Node(v); }
YAML::Node encode(const double& v) { return YAML::Node(fmt_num(v)); }
YAML::Node encode(const bool& v) { return YAML::Node(v); }
YAML::Node encode(const std::string& v) { return YAML::Node(v); }
template <class T>
static YAML::Node encode_list(const std::vector<T>& v) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (const T& x : v) n.push_back(encode(x));
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}
YAML::Node encode(const std::vector<int64_t>& v) { return encode_list(v); }
YAML::Node encode(const std::vector<double>& v) { return encode_list(v); }
YAML::Node encode(const std::vector<std::string>& v) { return encode_list(v); }

std::string describe(const Range& r) { return "[" + fmt_num(r.lo) + ", " + fmt_num(r.hi) + "]"; }
std::string describe(const OneOf& r) {
  std::string s = "{";
  for (size_t i = 0; i < r.values.size(); ++i) s += (i ? ", " : "") + r.values[i];
  return s + "}";
}

std::string closest(const std::string& key, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& k : known) {
    size_t d = edit_distance(key, k);
    if (d < best_d) best_d = d, best = k;
  }
  return best_d <= std::max<size_t>(2, key.size() / 3) ? best : "";
}

void Reader::finish() const {
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string key = it->first.as<std::string>();
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    std::string near = closest(key, known_);
    std::string keys;
    for (const auto& k : known_) keys += (keys.empty() ? "" : ", ") + k;
    throw ConfigError(str(where_, ": unknown key '", prefix_ + key, "'",
                          near.empty() ? "" : " (did you mean '" + prefix_ + near + "'?)",
                          " (hint: keys here are: ", keys, ")"));
  }
}

YAML::Node merge(const YAML::Node& base, const YAML::Node& over) {
  if (!base || !base.IsMap() || !over || !over.IsMap()) return YAML::Clone(over);
  YAML::Node out = YAML::Clone(base);
  for (auto it = over.begin(); it != over.end(); ++it) {
    const std::string key = it->first.as<std::string>();
    YAML::Node cur = out[key];
    if (cur && cur.IsMap() && it->second.IsMap()) out[key] = merge(cur, it->second);
    else out[key] = YAML::Clone(it->second);
  }
  return out;
}

namespace {

std::string mark_of(const YAML::Mark& m) {
  return m.is_null() ? std::string() : str(":", m.line + 1, ":", m.column + 1);
}

// The most nodes a config or sweep file may expand to (aliases counted at every use). A real config has a few
// hundred; a YAML alias bomb ("billion laughs") expands to billions and is refused at this count, in milliseconds.
constexpr int64_t kMaxYamlNodes = 100000;

// Every map key a plain scalar, no key twice in one map (yaml-cpp keeps both and the last would silently win).
// `nodes` counts the nodes walked, aliases expanded (bounded by kMaxYamlNodes).
void check_keys(const YAML::Node& n, const std::string& where, const std::string& prefix, int64_t& nodes) {
  if (++nodes > kMaxYamlNodes)
    throw ConfigError(str(where, ": more than ", kMaxYamlNodes, " YAML nodes once aliases are expanded (at '", prefix,
                          "') (hint: a config is a few hundred keys; remove the nested aliases)"));
  if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) check_keys(n[i], where, str(prefix, "[", i, "]"), nodes);
    return;
  }
  if (!n.IsMap()) return;
  std::vector<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar())
      throw ConfigError(str(where, mark_of(it->first.Mark()), ": a complex (non-scalar) key",
                            prefix.empty() ? std::string() : " under '" + prefix + "'",
                            " (hint: keys are plain names such as model.layers)"));
    const std::string key = it->first.Scalar();
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      throw ConfigError(str(where, mark_of(it->first.Mark()), ": key '", path,
                            "' appears twice in one map (hint: keep one; YAML would silently use the last)"));
    seen.push_back(key);
    check_keys(it->second, where, path, nodes);
  }
}

// True when `text` holds more than one YAML document: a document marker (--- or ...) at the start of a line
// after content (a leading --- before any content opens the only document). Checked on the text because
// yaml-cpp 0.7's LoadAll can loop forever on some malformed input (found by tests/cli/fuzz_test.cpp).
bool several_documents(const std::string& text) {
  bool content = false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const bool marker = (line.rfind("---", 0) == 0 || line.rfind("...", 0) == 0) &&
                        (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
    if (marker && content) return true;
    const size_t first = line.find_first_not_of(" \t\r");
    if (!marker && first != std::string::npos && line[first] != '#') content = true;
  }
  return false;
}

// Parses YAML text that must be exactly one document.
YAML::Node load_one(const std::string& text, const std::string& where) {
  if (several_documents(text))
    throw ConfigError(str(where, ": several YAML documents (--- or ... after content) where one is expected ",
                          "(hint: one config per file; a value cannot hold a document marker)"));
  YAML::Node n;
  try {
    n = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(str(where, mark_of(e.mark), ": YAML syntax error: ", e.msg));
  }
  int64_t nodes = 0;
  check_keys(n, where, "", nodes);
  return n;
}

}  // namespace

YAML::Node parse_text(const std::string& text, const std::string& where) { return load_one(text, where); }

namespace {

YAML::Node load_with_bases(const std::filesystem::path& path, int depth,
                           std::vector<std::filesystem::path>* files = nullptr) {
  if (depth > 16) throw ConfigError(str(path.string(), ": 'base' chain deeper than 16 (hint: a cycle?)"));
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw IoError(str("config file not found: ", path.string(), " (hint: presets are in configs/)"));
  if (!std::filesystem::is_regular_file(path, ec))
    throw IoError(str(path.string(), ": not a regular file (a directory?) (hint: name a .yaml file)"));
  if (std::filesystem::file_size(path, ec) > (size_t{16} << 20))
    throw ConfigError(str(path.string(), ": larger than 16 MiB (hint: a config is a few hundred keys)"));
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) throw IoError(str(path.string(), ": cannot read (", std::strerror(errno), ")"));
  YAML::Node node = load_one(text.str(), path.string());
  if ((!node || node.IsNull()) && text.str().find_first_not_of(" \t\r\n") != std::string::npos && [&] {
        std::istringstream in(text.str());
        for (std::string l; std::getline(in, l);) {
          const size_t f = l.find_first_not_of(" \t\r");
          if (f != std::string::npos && l[f] != '#') return true;
        }
        return false;
      }())
    throw ConfigError(str(path.string(), ": expected a map of keys at the top level (the YAML parses to nothing)"));
  if (!node || node.IsNull())
    throw ConfigError(str(path.string(),
                          ": empty config file (hint: at least `base: <preset>` or one section; "
                          "an empty file would silently mean all defaults)"));
  if (!node.IsMap()) throw ConfigError(str(path.string(), ": expected a map of keys at the top level"));
  if (files) files->push_back(path);
  if (YAML::Node b = node["base"]) {
    if (!b.IsScalar() || b.Scalar().empty())
      throw ConfigError(str(path.string(), mark_of(b.Mark()), ": key 'base': expected a file name"));
    std::filesystem::path bp = path.parent_path() / b.Scalar();
    YAML::Node base = load_with_bases(bp, depth + 1, files);
    node.remove("base");
    return merge(base, node);
  }
  return node;
}

}  // namespace

void apply_override(YAML::Node& root, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(str("--set '", assignment, "': expected key.path=value (e.g. --set model.layers=4)"));
  const std::string path = assignment.substr(0, eq);
  const std::string value = assignment.substr(eq + 1);
  std::string shown = assignment;  // one line, whatever the value holds
  for (size_t i = 0; (i = shown.find('\n', i)) != std::string::npos;) shown.replace(i, 1, "\\n");
  const YAML::Node parsed = load_one(value, str("--set '", shown, "'"));
  // YAML folds the lines of a scalar into one with spaces: a path or name holding a newline would silently become
  // another value. Refused when the newline did not survive (a block scalar `|` keeps it; maps and lists may span
  // lines).
  if (parsed.IsScalar() && value.find_first_of("\n\r") != std::string::npos &&
      parsed.Scalar().find_first_of("\n\r") == std::string::npos)
    throw ConfigError(str("--set '", shown, "': a newline in the value of '", path, "', which YAML would fold into a ",
                          "space (hint: quote the value, or leave the newline out)"));
  std::vector<std::string> parts;
  std::stringstream ss(path);
  for (std::string p; std::getline(ss, p, '.');) {
    if (p.empty()) throw ConfigError(str("--set '", assignment, "': empty key in path '", path, "'"));
    parts.push_back(p);
  }
  if (path.back() == '.') throw ConfigError(str("--set '", assignment, "': empty key in path '", path, "'"));
  // Walk by value-copies of nodes: yaml-cpp nodes are handles, so writes go into `root`.
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = chain.back()[parts[i]];
    if (!next || next.IsNull()) {
      chain.back()[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next = chain.back()[parts[i]];
    } else if (!next.IsMap()) {
      throw ConfigError(str("--set '", assignment, "': '", parts[i], "' is not a section"));
    }
    chain.push_back(next);
  }
  // A map given for a whole section merges into it (--set 'model={layers: 3}' changes only model.layers).
  YAML::Node cur = chain.back()[parts.back()];
  if (cur && cur.IsMap() && parsed.IsMap()) chain.back()[parts.back()] = merge(cur, parsed);
  else chain.back()[parts.back()] = parsed;
}

std::vector<std::filesystem::path> base_chain(const std::string& path) {
  std::vector<std::filesystem::path> files;
  load_with_bases(path, 0, &files);
  return files;
}

YAML::Node load_file(const std::string& path, const std::vector<std::string>& overrides) {
  YAML::Node node = load_with_bases(path, 0);
  for (const auto& o : overrides) apply_override(node, o);
  return node;
}

}  // namespace pg::cfg
