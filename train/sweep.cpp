// Implementation of train/sweep.h: sweep-file parsing and expansion, run directories keyed by config hash,
// the local process runner (fork/exec of `pagegram train`), status, Slurm job arrays and collect.
#include "train/sweep.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <type_traits>

#include "core/h5.h"
#include "core/threads.h"
#include "core/timer.h"
#include "data/hash.h"
#include "data/pipeline.h"
#include "train/run_log.h"

namespace pg {

namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------------------
// Sweep-file parsing helpers.

// Every leaf key path of ExperimentConfig ("model.layers", "memory.hash.seed", ...), from its field list.
struct KeyLister {
  std::string prefix;
  std::vector<std::string>* out;
  template <class T, class C = cfg::NoCheck>
  void operator()(const char* key, T& field, const char*, const C& = C{}) {
    if constexpr (cfg::HasVisit<T>) {
      KeyLister k{prefix + key + ".", out};
      field.visit(k);
    } else {
      out->push_back(prefix + key);
    }
  }
};
const std::vector<std::string>& config_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    ExperimentConfig c;
    KeyLister l{"", &k};
    c.visit(l);
    return k;
  }();
  return keys;
}

// A YAML value as one line of YAML (flow style), the text `--set key=value` parses back to the same value.
std::string yaml_text(const YAML::Node& n) {
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

// `${sweep_dir}` in a value becomes the sweep file's absolute directory (`${sweep_dir}/a/../b` is normalized), so
// a sweep file can name a corpus or cache next to it (data.corpus must be absolute). Applied to every scalar.
YAML::Node expand_sweep_dir(const YAML::Node& n, const std::string& sweep_dir) {
  static const std::string var = "${sweep_dir}";
  if (n.IsSequence()) {
    YAML::Node out(YAML::NodeType::Sequence);
    for (auto e : n) out.push_back(expand_sweep_dir(e, sweep_dir));
    return out;
  }
  if (!n.IsScalar() || n.Scalar().find(var) == std::string::npos) return n;
  std::string s = n.Scalar();
  if (s.rfind(var + "/", 0) == 0 && s.find(var, var.size()) == std::string::npos)
    return YAML::Node((fs::path(sweep_dir) / s.substr(var.size() + 1)).lexically_normal().string());
  for (size_t p; (p = s.find(var)) != std::string::npos;) s.replace(p, var.size(), sweep_dir);
  return YAML::Node(s);
}

bool valid_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '+' || c == '-')) return false;
  return s != "." && s != "..";
}

// Checks that `key` is a config key the sweep may set; `origin` is the sweep-file key path holding it.
void check_config_key(const std::string& where, const std::string& origin, const std::string& key) {
  static const std::map<std::string, std::string> owned = {
      {"train.seed", "list seeds under 'seeds'"},
      {"train.out_dir", "run directories are <out_dir>/<run>-<hash>; set the sweep's 'out_dir'"},
      {"train.threads", "the runner sets train.threads = cores / parallel; set the sweep's 'parallel'"},
  };
  if (auto it = owned.find(key); it != owned.end())
    throw ConfigError(str(where, ": key '", origin, ".", key, "': the sweep owns this config key (hint: ", it->second, ")"));
  const auto& keys = config_keys();
  if (std::find(keys.begin(), keys.end(), key) != keys.end()) return;
  std::string near = cfg::closest(key, keys);
  throw ConfigError(str(where, ": key '", origin, ".", key, "': not a config key",
                        near.empty() ? std::string() : " (did you mean '" + near + "'?)",
                        " (hint: `pagegram config keys` lists them; nested maps or dotted keys both work)"));
}

// Flattens a map of overrides ({memory: {layout: flat}} or {memory.layout: flat}) into key=value pairs.
void flatten_overrides(const YAML::Node& n, const std::string& prefix, const std::string& where,
                       const std::string& origin, const std::string& sweep_dir, std::vector<SweepOverride>& out) {
  for (auto kv : n) {
    const std::string key = prefix + kv.first.as<std::string>();
    const YAML::Node v = kv.second;
    if (v.IsMap()) {
      flatten_overrides(v, key + ".", where, origin, sweep_dir, out);
      continue;
    }
    if (!v || v.IsNull())
      throw ConfigError(str(where, ": key '", origin, ".", key, "': no value (hint: write key: value)"));
    check_config_key(where, origin, key);
    for (const auto& o : out)
      if (o.key == key) throw ConfigError(str(where, ": key '", origin, ".", key, "' is given twice"));
    out.push_back({key, yaml_text(expand_sweep_dir(v, sweep_dir)), origin});
  }
}

// Grid: {key: [v1, v2]} (keys may be nested maps); each leaf must be a non-empty list.
void flatten_grid(const YAML::Node& n, const std::string& prefix, const std::string& where,
                  const std::string& sweep_dir, std::vector<SweepGridAxis>& out) {
  for (auto kv : n) {
    const std::string key = prefix + kv.first.as<std::string>();
    const YAML::Node v = kv.second;
    if (v.IsMap()) {
      flatten_grid(v, key + ".", where, sweep_dir, out);
      continue;
    }
    check_config_key(where, "grid", key);
    if (!v.IsSequence() || v.size() == 0)
      throw ConfigError(str(where, ": key 'grid.", key, "': expected a non-empty list of values, got '", yaml_text(v),
                            "' (hint: grid: {", key, ": [a, b]})"));
    SweepGridAxis ax;
    ax.key = key;
    for (auto e : v) ax.values.push_back(yaml_text(expand_sweep_dir(e, sweep_dir)));
    std::set<std::string> seen(ax.values.begin(), ax.values.end());
    if (seen.size() != ax.values.size())
      throw ConfigError(str(where, ": key 'grid.", key, "': a value is listed twice"));
    for (const auto& a : out)
      if (a.key == key) throw ConfigError(str(where, ": key 'grid.", key, "' is given twice"));
    out.push_back(std::move(ax));
  }
}

// A grid value in a run name: brackets, spaces and quotes dropped, '/' -> '_' (e.g. "[0, 3]" -> "0,3").
std::string name_value(const std::string& v) {
  std::string s;
  for (char c : v) {
    if (c == '[' || c == ']' || c == ' ' || c == '"' || c == '\'' || c == '{' || c == '}') continue;
    s += (c == '/' || c == ':') ? '_' : c;
  }
  return s;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_text_atomic(const std::string& path, const std::string& text) {
  fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  const std::string tmp = h5::temp_name(path);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw IoError(str("cannot write ", tmp, " (hint: check permissions and free space)"));
    f << text;
    f.flush();
    if (!f) throw IoError(str("cannot write ", tmp, " (hint: check free space)"));
  }
  h5::commit_atomic(tmp, path);
}

std::string json_escape(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          o += buf;
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
}

std::string fmt_duration(double s) {
  if (s < 0 || !std::isfinite(s)) return "?";
  char buf[32];
  const int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof(buf), "%ldh%02ldm", long(t / 3600), long(t % 3600 / 60));
  else std::snprintf(buf, sizeof(buf), "%ldm%02lds", long(t / 60), long(t % 60));
  return buf;
}

// The last `lines` lines of a text file (reads at most its last 8 KiB).
std::string tail_lines(const std::string& path, int lines) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "(no output file " + path + ")";
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 8192);
  f.seekg(from);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // A progress line on a terminal uses '\r'; keep the last segment of each line.
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) {
    if (auto r = l.rfind('\r'); r != std::string::npos) l = l.substr(r + 1);
    out.push_back(l);
  }
  if (from > 0 && !out.empty()) out.erase(out.begin());  // a partial first line
  std::string s;
  for (size_t i = out.size() > static_cast<size_t>(lines) ? out.size() - lines : 0; i < out.size(); ++i)
    s += "    | " + out[i] + "\n";
  return s;
}

std::string self_exe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw IoError("cannot resolve /proc/self/exe (hint: pass the pagegram binary explicitly)");
  return p.string();
}

// True when a live runner holds <dir>/.lock (flock is released when its holder dies).
bool dir_locked(const std::string& dir) {
  const std::string p = dir + "/.lock";
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool locked = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return locked;
}

volatile sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

}  // namespace

// -----------------------------------------------------------------------------------------------------------
// Sweep file.

std::string SweepSpec::base_path() const {
  fs::path b(f.base);
  if (b.is_absolute()) return b.string();
  return (fs::path(path).parent_path() / b).lexically_normal().string();
}
std::string SweepSpec::out_dir() const { return f.out_dir.empty() ? "runs/" + f.name : f.out_dir; }

SweepSpec load_sweep(const std::string& path) {
  if (!fs::exists(path)) throw IoError(str("sweep file not found: ", path, " (hint: sweeps live in experiments/*/sweep.yaml)"));
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw ConfigError(str(path, ":", e.mark.line + 1, ":", e.mark.column + 1, ": YAML syntax error: ", e.msg));
  }
  if (!root.IsMap()) throw ConfigError(str(path, ": expected a map of keys at the top level (name, base, seeds, ...)"));

  SweepSpec spec;
  spec.path = path;
  // Top-level keys: the scalar fields plus the three maps of config keys.
  std::vector<std::string> known;
  {
    KeyLister l{"", &known};
    spec.f.visit(l);
    known.insert(known.end(), {"set", "variants", "grid"});
  }
  YAML::Node rest(YAML::NodeType::Map);
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string key = it->first.as<std::string>();
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string near = cfg::closest(key, known), keys;
      for (const auto& k : known) keys += (keys.empty() ? "" : ", ") + k;
      throw ConfigError(str(path, ": unknown key '", key, "'", near.empty() ? "" : " (did you mean '" + near + "'?)",
                            " (hint: keys here are: ", keys, ")"));
    }
    if (key != "set" && key != "variants" && key != "grid") rest[key] = it->second;
  }
  spec.f = cfg::from_yaml<SweepFields>(rest, path);
  if (!valid_name(spec.f.name))
    throw ConfigError(str(path, ": key 'name': '", spec.f.name, "' is not a valid name (hint: letters, digits, _ . + -)"));
  if (spec.f.base.empty()) throw ConfigError(str(path, ": key 'base': missing (hint: base: ../../configs/small.yaml)"));
  if (spec.f.seeds.empty()) throw ConfigError(str(path, ": key 'seeds': missing or empty (hint: seeds: [0, 1, 2])"));
  {
    std::set<int64_t> s(spec.f.seeds.begin(), spec.f.seeds.end());
    if (s.size() != spec.f.seeds.size()) throw ConfigError(str(path, ": key 'seeds': a seed is listed twice"));
  }
  if (!fs::exists(spec.base_path()))
    throw IoError(str(path, ": key 'base': config file not found: ", spec.base_path(),
                      " (hint: base is relative to the sweep file)"));

  const std::string sweep_dir = fs::absolute(fs::path(path)).parent_path().lexically_normal().string();
  if (YAML::Node s = root["set"]) {
    if (!s.IsMap() && !s.IsNull())
      throw ConfigError(str(path, ": key 'set': expected a map of config keys (hint: set: {train.eval_interval: 10})"));
    if (s.IsMap()) flatten_overrides(s, "", path, "set", sweep_dir, spec.set);
  }
  if (YAML::Node v = root["variants"]) {
    if (!v.IsMap())
      throw ConfigError(str(path, ": key 'variants': expected a map of variant name -> config keys ",
                            "(hint: variants: {flat: {memory.layout: flat}})"));
    for (auto it = v.begin(); it != v.end(); ++it) {
      SweepVariant var;
      var.name = it->first.as<std::string>();
      const std::string origin = "variants." + var.name;
      if (!valid_name(var.name))
        throw ConfigError(str(path, ": key '", origin, "': not a valid variant name (hint: letters, digits, _ . +)"));
      if (var.name.find('-') != std::string::npos)
        throw ConfigError(str(path, ": key '", origin, "': '-' separates the parts of run names (hint: use '_')"));
      for (const auto& o : spec.variants)
        if (o.name == var.name) throw ConfigError(str(path, ": key '", origin, "' is given twice"));
      const YAML::Node body = it->second;
      if (body.IsMap()) flatten_overrides(body, "", path, origin, sweep_dir, var.overrides);
      else if (!body.IsNull())
        throw ConfigError(str(path, ": key '", origin, "': expected a map of config keys (or {} for the base config)"));
      spec.variants.push_back(std::move(var));
    }
  }
  if (spec.variants.empty()) spec.variants.push_back({"base", {}});
  if (YAML::Node g = root["grid"]) {
    if (!g.IsMap()) throw ConfigError(str(path, ": key 'grid': expected a map of config key -> list of values"));
    flatten_grid(g, "", path, sweep_dir, spec.grid);
    // Labels: the last key component unless two axes share it.
    for (auto& ax : spec.grid) {
      ax.label = ax.key.substr(ax.key.rfind('.') + 1);
      for (const auto& other : spec.grid)
        if (&other != &ax && other.key.substr(other.key.rfind('.') + 1) == ax.label) ax.label = ax.key;
    }
  }
  return spec;
}

// -----------------------------------------------------------------------------------------------------------
// Expansion.

std::string record_path(const SweepSpec& spec, const SweepRun& run) {
  const fs::path dir = fs::absolute(spec.path).parent_path() / "records";
  return (dir / (run.name + "-" + run.hash + ".json")).lexically_normal().string();
}

bool record_exists(const SweepSpec& spec, const SweepRun& run) { return fs::exists(record_path(spec, run)); }

namespace {
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}
template <class T>
std::string json_array(const std::vector<T>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) o += ", ";
    if constexpr (std::is_integral_v<T>) o += std::to_string(v[i]);
    else o += num(static_cast<double>(v[i]));
  }
  return o + "]";
}
}  // namespace

// The run's /collisions group in a few numbers per order: means over logged steps and heads of each per-head
// statistic, the per-order means of page_mates and distinct, and the last logged step's foreign shares.
// null when the log has no collision statistics.
std::string collision_summary_json(const h5::Group& r) {
  if (!r.has("collisions")) return "null";
  const h5::Group c = r.sub("collisions");
  const auto orders = c.read<int64_t>("orders");
  const size_t no = orders.size();
  std::vector<uint64_t> shape;
  const auto touched = c.read<double>("lookups_per_row", &shape);
  if (no == 0 || shape.size() != 3 || shape[1] != no) return "null";
  const size_t R = shape[0], K = shape[2];
  std::ostringstream j;
  j << "{\"orders\": " << json_array(orders) << ", \"steps_logged\": " << R << ", \"heads\": " << K;
  for (const char* name : {"lookups_per_row", "foreign_step", "foreign_owner", "co_heads"}) {
    const auto v = c.read<double>(name);
    std::vector<double> mean(no, 0.0), last(no, 0.0);
    for (size_t o = 0; o < no; ++o) {
      double sum = 0;
      int64_t n = 0;
      for (size_t row = 0; row < R; ++row)
        for (size_t k = 0; k < K; ++k) {
          const double x = v[(row * no + o) * K + k];
          if (std::isfinite(x)) sum += x, ++n;
          if (row + 1 == R) last[o] += x / static_cast<double>(K);
        }
      mean[o] = n ? sum / static_cast<double>(n) : NAN;
    }
    j << ", \"" << name << "_mean\": " << json_array(mean);
    if (std::string(name).rfind("foreign", 0) == 0) j << ", \"" << name << "_last\": " << json_array(last);
  }
  for (const char* name : {"page_mates", "distinct"}) {
    std::vector<double> v;
    if (std::string(name) == "distinct") {
      const auto d = c.read<int64_t>(name);
      v.assign(d.begin(), d.end());
    } else {
      v = c.read<double>(name);
    }
    std::vector<double> mean(no, 0.0);
    for (size_t o = 0; o < no; ++o) {
      double sum = 0;
      int64_t n = 0;
      for (size_t row = 0; row < R; ++row)
        if (std::isfinite(v[row * no + o])) sum += v[row * no + o], ++n;
      mean[o] = n ? sum / static_cast<double>(n) : NAN;
    }
    j << ", \"" << name << "_mean\": " << json_array(mean);
  }
  return j.str() + "}";
}

std::string run_record_json(const SweepSpec& spec, const SweepRun& run) {
  const std::string log = run.dir + "/log.h5";
  if (!fs::exists(log)) throw IoError(str(log, ": missing (hint: the run has not started here)"));
  h5::File f = h5::File::open(log);
  h5::Group r = f.root();
  const std::string status = r.has_attr("status") ? r.attr_string("status") : "";
  if (status != "finished" && status != "diverged")
    throw IoError(str(log, ": status '", status, "', not finished (hint: `pagegram sweep run ", spec.path, "`)"));
  auto attr = [&](const char* k) { return r.has_attr(k) ? r.attr_string(k) : std::string(); };
  // a log may lack a series (a run that diverged before its first evaluation): empty arrays then
  auto series_i = [&](const char* g, const char* n) {
    return r.has(g) && r.sub(g).has(n) ? r.sub(g).read<int64_t>(n) : std::vector<int64_t>{};
  };
  auto series_d = [&](const char* g, const char* n) {
    return r.has(g) && r.sub(g).has(n) ? r.sub(g).read<double>(n) : std::vector<double>{};
  };
  const auto steps = series_i("train", "step");
  const auto loss = series_d("train", "loss");
  const auto tokens = series_i("train", "tokens");
  const auto tps = series_d("train", "tok_per_s");
  const auto elapsed = series_d("train", "elapsed_s");
  std::vector<double> tps_sorted(tps);
  std::sort(tps_sorted.begin(), tps_sorted.end());
  std::ostringstream j;
  j << "{\n  \"format\": \"pagegram-run-record\", \"format_version\": 1,\n";
  j << "  \"sweep\": " << json_escape(spec.name()) << ", \"name\": " << json_escape(run.name)
    << ", \"variant\": " << json_escape(run.variant) << ", \"seed\": " << run.seed << ",\n";
  j << "  \"grid\": {";
  for (size_t a = 0; a < run.grid.size(); ++a)
    j << (a ? ", " : "") << json_escape(run.grid[a].first) << ": " << json_escape(run.grid[a].second);
  j << "}, \"config_hash\": " << json_escape(run.hash) << ",\n";
  j << "  \"status\": " << json_escape(status) << ", \"revision\": " << json_escape(attr("revision"))
    << ", \"kernels\": " << json_escape(attr("kernels")) << ",\n  \"cpu\": " << json_escape(attr("cpu"))
    << ", \"host\": " << json_escape(attr("host")) << ", \"threads\": "
    << (r.has_attr("threads") ? r.attr_int("threads") : 0) << ",\n";
  j << "  \"compiler_flags\": " << json_escape(attr("compiler_flags")) << ", \"started\": " << json_escape(attr("started"))
    << ", \"updated\": " << json_escape(attr("updated")) << ",\n";
  j << "  \"steps\": " << (steps.empty() ? 0 : steps.back()) << ", \"total_steps\": " << run.config.train.total_steps()
    << ", \"tokens\": " << (tokens.empty() ? 0 : tokens.back()) << ",\n";
  j << "  \"train_seconds\": " << num(elapsed.empty() ? 0.0 : elapsed.back())
    << ", \"tok_per_s_median\": " << num(tps_sorted.empty() ? 0.0 : tps_sorted[tps_sorted.size() / 2]) << ",\n";
  const auto ev_loss = series_d("eval", "loss");
  j << "  \"final\": {\"heldout_loss\": " << num(ev_loss.empty() ? NAN : ev_loss.back())
    << ", \"train_loss\": " << num(loss.empty() ? NAN : loss.back()) << "},\n";
  j << "  \"eval\": {\"step\": " << json_array(series_i("eval", "step")) << ", \"tokens\": "
    << json_array(series_i("eval", "tokens")) << ",\n           \"loss\": " << json_array(ev_loss) << "},\n";
  j << "  \"train\": {\"step\": " << json_array(steps) << ",\n            \"loss\": " << json_array(loss) << "},\n";
  j << "  \"scalars_last\": {";
  if (r.has("scalars")) {
    const h5::Group sc = r.sub("scalars");
    bool first = true;
    for (const auto& name : sc.children()) {
      const auto v = sc.sub(name).read<double>("value");
      if (v.empty()) continue;
      j << (first ? "" : ", ") << json_escape(name) << ": " << num(v.back());
      first = false;
    }
  }
  j << "},\n";
  j << "  \"collisions\": " << collision_summary_json(r) << ",\n";
  j << "  \"config\": " << json_escape(attr("config")) << "\n}\n";
  return j.str();
}

std::string write_run_record(const SweepSpec& spec, const SweepRun& run) {
  const std::string p = record_path(spec, run);
  write_text_atomic(p, run_record_json(spec, run));
  return p;
}

std::string config_hash(const ExperimentConfig& cfg) {
  ExperimentConfig c = cfg;
  c.train.out_dir = "";
  c.train.threads = 0;
  // Keys that only choose what the run log records are left out entirely, so adding one keeps every
  // existing run directory's hash.
  YAML::Node n = cfg::to_yaml(c);
  for (const char* k : MemoryConfig::kLogOnlyKeys) n["memory"].remove(k);
  YAML::Emitter e;
  e << n;
  return data::hex64(data::xxh64(std::string(e.c_str()))).substr(0, 8);
}

std::vector<SweepRun> expand_sweep(const SweepSpec& spec) {
  // Grid points: cartesian product, first axis slowest.
  std::vector<std::vector<size_t>> points{{}};
  for (const auto& ax : spec.grid) {
    std::vector<std::vector<size_t>> next;
    for (const auto& p : points)
      for (size_t i = 0; i < ax.values.size(); ++i) {
        auto q = p;
        q.push_back(i);
        next.push_back(q);
      }
    points = std::move(next);
  }
  const fs::path out = fs::absolute(spec.out_dir()).lexically_normal();
  const std::string base = spec.base_path();
  std::vector<SweepRun> runs;
  std::set<std::string> names;
  for (int64_t seed : spec.f.seeds)
    for (const auto& var : spec.variants)
      for (const auto& p : points) {
        SweepRun r;
        r.variant = var.name;
        r.seed = seed;
        r.name = var.name;
        std::vector<const SweepOverride*> origin;  // for error messages
        if (spec.f.tokens > 0) r.overrides.push_back(str("train.tokens=", spec.f.tokens));
        for (const auto& o : spec.set) r.overrides.push_back(o.assignment()), origin.push_back(&o);
        for (const auto& o : var.overrides) r.overrides.push_back(o.assignment()), origin.push_back(&o);
        for (size_t a = 0; a < spec.grid.size(); ++a) {
          const auto& ax = spec.grid[a];
          const std::string& v = ax.values[p[a]];
          r.grid.emplace_back(ax.key, v);
          r.overrides.push_back(ax.key + "=" + v);
          r.name += "-" + ax.label + "=" + name_value(v);
        }
        r.overrides.push_back(str("train.seed=", seed));
        r.name += str("-s", seed);
        try {
          r.config = load_experiment(base, r.overrides);
        } catch (const ConfigError& e) {
          std::string from;
          const std::string msg = e.what();
          for (const SweepOverride* o : origin)
            if (msg.find("'" + o->key + "'") != std::string::npos) from = " (set by '" + o->origin + "." + o->key + "')";
          for (const auto& [k, v] : r.grid)
            if (msg.find("'" + k + "'") != std::string::npos) from = " (set by 'grid." + k + "')";
          throw ConfigError(str(spec.path, ": run '", r.name, "'", from, ": ", msg));
        }
        if (spec.f.tokens > 0 && r.config.train.steps > 0)
          throw ConfigError(str(spec.path, ": key 'tokens': run '", r.name, "' has train.steps = ", r.config.train.steps,
                                ", which overrides the token budget (hint: drop 'tokens' or set train.steps: 0)"));
        r.config.train.threads = 0;
        r.hash = config_hash(r.config);
        r.dir = (out / (r.name + "-" + r.hash)).string();
        r.config.train.out_dir = r.dir;
        if (!names.insert(r.name).second)
          throw ConfigError(str(spec.path, ": two runs are named '", r.name, "' (hint: rename a variant)"));
        runs.push_back(std::move(r));
      }
  return runs;
}

// -----------------------------------------------------------------------------------------------------------
// Run directories.

const char* run_state_name(RunState s) {
  switch (s) {
    case RunState::kPending: return "pending";
    case RunState::kPartial: return "partial";
    case RunState::kRunning: return "running";
    case RunState::kFinished: return "finished";
    case RunState::kDiverged: return "diverged";
    case RunState::kFailed: return "failed";
  }
  return "?";
}

bool run_dir_finished(const std::string& dir) {
  const std::string log = dir + "/log.h5";
  if (!fs::exists(log)) return false;
  try {
    h5::File f = h5::File::open(log);
    h5::Group r = f.root();
    return r.has_attr("status") && r.attr_string("status") == "finished";
  } catch (const IoError&) {
    return false;
  }
}

RunStatus run_status(const SweepRun& run) {
  RunStatus st;
  st.total_steps = run.config.train.total_steps();
  const std::string log = run.dir + "/log.h5", ckpt = run.dir + "/checkpoint.h5", failed = run.dir + "/failed.txt";
  std::string status;
  bool any = false;
  if (fs::exists(log)) {
    any = true;
    try {
      h5::File f = h5::File::open(log);
      h5::Group r = f.root();
      if (r.has_attr("status")) status = r.attr_string("status");
      auto steps = r.sub("train").read<int64_t>("step");
      if (!steps.empty()) st.step = steps.back();
      auto el = r.sub("train").read<double>("elapsed_s");
      if (!el.empty()) st.elapsed_s = el.back();
      auto loss = r.sub("eval").read<double>("loss");
      if (!loss.empty()) st.final_loss = loss.back();
    } catch (const IoError& e) {
      st.note = str("log unreadable: ", e.what());
    }
  }
  if (fs::exists(ckpt)) {
    any = true;
    try {
      h5::File f = h5::File::open(ckpt);
      st.checkpoint_step = f.root().attr_int("step");
    } catch (const IoError&) {
    }
  }
  const bool has_failed = fs::exists(failed);
  if (has_failed) {
    std::string t = read_text(failed);
    st.note = t.substr(0, t.find('\n'));
  }
  if (status == "finished") st.state = RunState::kFinished;
  else if (status == "diverged") st.state = RunState::kDiverged;
  else if (dir_locked(run.dir)) st.state = RunState::kRunning;
  else if (has_failed) st.state = RunState::kFailed;
  else if (any) st.state = RunState::kPartial;
  return st;
}

void write_run_config(const SweepRun& run) {
  fs::create_directories(run.dir);
  write_text_atomic(run.dir + "/config.yaml",
                    str("# run ", run.name, " (config hash ", run.hash, "), written by `pagegram sweep`\n",
                        cfg::dump(run.config), "\n"));
}

void write_sweep_manifest(const SweepSpec& spec, const std::vector<SweepRun>& runs) {
  const fs::path out = fs::absolute(spec.out_dir()).lexically_normal();
  std::ostringstream j;
  j << "{\n  \"format\": \"pagegram-sweep\",\n  \"format_version\": 1,\n";
  j << "  \"name\": " << json_escape(spec.name()) << ",\n";
  j << "  \"description\": " << json_escape(spec.f.description) << ",\n";
  j << "  \"spec\": " << json_escape(fs::absolute(spec.path).lexically_normal().string()) << ",\n";
  j << "  \"base\": " << json_escape(fs::absolute(spec.base_path()).lexically_normal().string()) << ",\n";
  j << "  \"seeds\": [";
  for (size_t i = 0; i < spec.f.seeds.size(); ++i) j << (i ? ", " : "") << spec.f.seeds[i];
  j << "],\n  \"variants\": [";
  for (size_t i = 0; i < spec.variants.size(); ++i) j << (i ? ", " : "") << json_escape(spec.variants[i].name);
  j << "],\n  \"grid\": {";
  for (size_t a = 0; a < spec.grid.size(); ++a) {
    j << (a ? ", " : "") << json_escape(spec.grid[a].key) << ": [";
    for (size_t i = 0; i < spec.grid[a].values.size(); ++i) j << (i ? ", " : "") << json_escape(spec.grid[a].values[i]);
    j << "]";
  }
  j << "},\n  \"runs\": [\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const SweepRun& r = runs[i];
    j << "    {\"name\": " << json_escape(r.name) << ", \"variant\": " << json_escape(r.variant)
      << ", \"seed\": " << r.seed << ", \"grid\": {";
    for (size_t a = 0; a < r.grid.size(); ++a)
      j << (a ? ", " : "") << json_escape(r.grid[a].first) << ": " << json_escape(r.grid[a].second);
    j << "}, \"dir\": " << json_escape(fs::path(r.dir).lexically_relative(out).string())
      << ", \"hash\": " << json_escape(r.hash) << ", \"overrides\": [";
    for (size_t k = 0; k < r.overrides.size(); ++k) j << (k ? ", " : "") << json_escape(r.overrides[k]);
    j << "]}" << (i + 1 < runs.size() ? "," : "") << "\n";
  }
  j << "  ]\n}\n";
  write_text_atomic((out / "sweep.json").string(), j.str());
}

std::vector<std::string> prepare_sweep_data(const std::vector<SweepRun>& runs) {
  std::vector<std::string> lines;
  std::set<std::string> seen;
  for (const auto& r : runs) {
    if (!seen.insert(cfg::dump(r.config.data) + "\n" + cfg::dump(r.config.tokenizer)).second) continue;
    const data::TokenizeSummary s = data::tokenize(r.config.data, r.config.tokenizer, r.dir + "/config.yaml");
    lines.push_back(str(s.cache_hit ? "cached " : "built  ", s.store_dir, ": train ", s.train.tokens, " tokens, held-out ",
                        s.heldout.tokens, " (tokenizer ", s.tokenizer.key, ", as run ", r.name, ")"));
  }
  return lines;
}

// -----------------------------------------------------------------------------------------------------------
// Local runner.

namespace {

struct Child {
  size_t run = 0;   // index into runs
  pid_t pid = -1;
  int lock_fd = -1;
  int slot = 0;     // CPU slice
  Timer timer;
  int64_t start_step = 0, step = 0;
};

// fork + exec of `binary args...` with stdout/stderr appended to `out`, pinned to `cpus`, killed with the runner.
pid_t spawn(const std::string& binary, const std::vector<std::string>& args, const std::string& out,
            const std::vector<int>& cpus) {
  // Everything the child needs is prepared before fork: only async-signal-safe calls run after it.
  std::vector<std::string> all{binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(str("cannot open ", out, ": ", std::strerror(errno)));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw IoError(str("fork failed: ", std::strerror(errno), " (hint: too many processes?)"));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // the runner's death stops the run (it resumes from its checkpoint)
    if (::getppid() != parent) ::_exit(1);
    ::sched_setaffinity(0, sizeof(set), &set);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(argv[0], argv.data());
    const char msg[] = "pagegram sweep: exec of the pagegram binary failed\n";
    [[maybe_unused]] ssize_t w = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::close(fd);
  return pid;
}

int64_t logged_step(const std::string& dir) {
  try {
    if (!fs::exists(dir + "/log.h5")) return 0;
    h5::File f = h5::File::open(dir + "/log.h5");
    auto s = f.root().sub("train").read<int64_t>("step");
    return s.empty() ? 0 : s.back();
  } catch (const IoError&) {
    return -1;  // being replaced right now: keep the previous value
  }
}

}  // namespace

SweepRunResult run_sweep(const SweepSpec& spec, const SweepRunOptions& opt) {
  std::vector<SweepRun> runs = expand_sweep(spec);
  const int64_t parallel = opt.parallel > 0 ? opt.parallel : spec.f.parallel;
  const std::vector<int> cpus = allowed_cpus();
  const int64_t cores = opt.cores > 0 ? opt.cores : static_cast<int64_t>(cpus.size());
  const int64_t threads = std::max<int64_t>(1, cores / parallel);
  const std::string binary = opt.binary.empty() ? self_exe() : opt.binary;
  auto say = [&](const std::string& s) {
    if (opt.progress) std::fprintf(stderr, "%s%s\n", isatty(STDERR_FILENO) ? "\r\033[K" : "", s.c_str());
  };

  SweepRunResult res;
  res.total = static_cast<int64_t>(runs.size());
  std::vector<size_t> queue;
  std::vector<RunStatus> initial(runs.size());
  std::vector<bool> selected(runs.size(), true);
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!opt.only.empty())
      selected[i] = std::any_of(opt.only.begin(), opt.only.end(), [&](const std::string& pat) {
        return fnmatch(pat.c_str(), runs[i].name.c_str(), 0) == 0;
      });
    initial[i] = run_status(runs[i]);
    if ((initial[i].state == RunState::kFinished || initial[i].state == RunState::kDiverged) &&
        !record_exists(spec, runs[i]) && !opt.dry_run)
      write_run_record(spec, runs[i]);  // a run finished before records existed (or by another runner)
    if (initial[i].state != RunState::kFinished && initial[i].state != RunState::kDiverged &&
        record_exists(spec, runs[i])) {
      initial[i].state = RunState::kFinished;  // recorded (committed), possibly on another machine: not rerun
      ++res.already_finished;
    } else if (initial[i].state == RunState::kFinished) ++res.already_finished;
    else if (initial[i].state == RunState::kDiverged) res.diverged.push_back(runs[i].name);
    else if (!selected[i]) ++res.not_selected;
    else queue.push_back(i);
  }
  if (!opt.only.empty() && std::none_of(selected.begin(), selected.end(), [](bool b) { return b; })) {
    std::string pats;
    for (const auto& p : opt.only) pats += (pats.empty() ? "" : " ") + p;
    throw UserError(str("sweep ", spec.name(), ": --only ", pats, " matches none of its ", runs.size(),
                        " runs (hint: `pagegram sweep status ", spec.path, "` lists the run names)"));
  }
  const std::string header = str("sweep ", spec.name(), ": ", runs.size(), " runs, ", res.already_finished, " finished, ",
                                 queue.size(), " to run",
                                 res.not_selected ? str(" (", res.not_selected, " left out by --only)") : std::string(),
                                 ", ", parallel, " at a time x ", threads, " threads, in ",
                                 fs::absolute(spec.out_dir()).lexically_normal().string());
  if (opt.dry_run) {
    std::printf("%s\n", header.c_str());
    for (size_t i = 0; i < runs.size(); ++i) {
      const RunStatus& s = initial[i];
      std::string what = s.state == RunState::kFinished ? "skip (finished)"
                         : s.state == RunState::kDiverged ? str("skip (diverged at step ", s.step, ")")
                         : !selected[i]                  ? std::string("skip (not selected)")
                         : s.checkpoint_step > 0       ? str("resume at step ", s.checkpoint_step, "/", s.total_steps)
                                                       : str("run ", s.total_steps, " steps");
      std::string sets;
      for (const auto& x : runs[i].overrides)
        sets += x.find_first_of(" \"'$*?") == std::string::npos ? " --set " + x : " --set '" + x + "'";
      std::printf("%-32s %s  %-22s %s\n", runs[i].name.c_str(), runs[i].hash.c_str(), what.c_str(), sets.c_str());
    }
    std::printf("base %s; binary %s; threads per run %ld (%ld cores / parallel %ld)\n", spec.base_path().c_str(),
                binary.c_str(), long(threads), long(cores), long(parallel));
    return res;
  }
  say(header);
  for (const auto& n : res.diverged)
    say(str("skip ", n, ": diverged (a result, not retried; delete its directory to run it again)"));
  write_sweep_manifest(spec, runs);

  // Stop cleanly on SIGINT/SIGTERM: children are stopped and resume from their checkpoints next time.
  struct sigaction sa {}, old_int {}, old_term {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  g_stop_signal = 0;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  std::vector<Child> active;
  std::vector<bool> slot_used(static_cast<size_t>(parallel), false);
  size_t next = 0;
  double done_seconds = 0.0;
  int64_t done_steps = 0;
  Timer since_line;
  const bool tty = isatty(STDERR_FILENO) != 0;

  auto progress_line = [&] {
    if (!opt.progress) return;
    int64_t remaining = 0;
    for (size_t q = next; q < queue.size(); ++q) {
      const RunStatus& s = initial[queue[q]];
      remaining += s.total_steps - std::max<int64_t>(0, s.checkpoint_step);
    }
    double rate_num = done_seconds, rate_den = static_cast<double>(done_steps);
    std::string cur;
    for (const Child& c : active) {
      const SweepRun& r = runs[c.run];
      const int64_t total = r.config.train.total_steps();
      remaining += total - c.step;
      cur += str(cur.empty() ? " " : "  ", r.name, " ", c.step, "/", total);
      if (done_steps == 0 && c.step > c.start_step)
        rate_num += c.timer.seconds(), rate_den += static_cast<double>(c.step - c.start_step);
    }
    const double eta = rate_den > 0 ? rate_num / rate_den * static_cast<double>(remaining) / static_cast<double>(parallel) : -1;
    const int64_t done = res.already_finished + res.finished;
    std::string line = str("[sweep ", spec.name(), "] ", done, "/", res.total, " done",
                           res.failed.empty() ? std::string() : str(", ", res.failed.size(), " failed"), " |", cur,
                           " | ETA ", fmt_duration(eta));
    if (tty) std::fprintf(stderr, "\r\033[K%s", line.c_str());
    else std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  };

  while (true) {
    // Start runs while slots are free.
    while (!g_stop_signal && static_cast<int64_t>(active.size()) < parallel && next < queue.size()) {
      const size_t i = queue[next++];
      const SweepRun& r = runs[i];
      fs::create_directories(r.dir);
      const std::string lock = r.dir + "/.lock";
      const int lfd = ::open(lock.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
      if (lfd < 0) throw IoError(str("cannot open ", lock, ": ", std::strerror(errno)));
      if (::flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        ::close(lfd);
        res.locked.push_back(r.name);
        say(str("skip ", r.name, ": another runner is running it"));
        continue;
      }
      if (run_dir_finished(r.dir)) {  // finished by someone else since we looked
        ::close(lfd);
        ++res.already_finished;
        continue;
      }
      write_run_config(r);
      fs::remove(r.dir + "/failed.txt");
      // Without a checkpoint the run starts over: drop a log of steps that no checkpoint holds.
      if (!fs::exists(r.dir + "/checkpoint.h5")) fs::remove(r.dir + "/log.h5");
      Child c;
      c.run = i;
      c.lock_fd = lfd;
      c.slot = static_cast<int>(std::find(slot_used.begin(), slot_used.end(), false) - slot_used.begin());
      slot_used[static_cast<size_t>(c.slot)] = true;
      std::vector<int> mine;
      for (int64_t t = 0; t < threads; ++t)
        mine.push_back(cpus[static_cast<size_t>((c.slot * threads + t) % static_cast<int64_t>(cpus.size()))]);
      c.start_step = c.step = std::max<int64_t>(0, initial[i].checkpoint_step);
      c.pid = spawn(binary, {"train", "--config", r.dir + "/config.yaml", "--resume", "--set", str("train.threads=", threads)},
                    r.dir + "/train.out", mine);
      ++res.launched;
      say(str("start ", r.name, c.start_step > 0 ? str(" (resuming at step ", c.start_step, ")") : std::string(),
              " -> ", r.dir, "/train.out"));
      active.push_back(std::move(c));
    }
    if (active.empty()) break;
    if (g_stop_signal) break;

    std::this_thread::sleep_for(std::chrono::duration<double>(opt.poll_seconds));
    for (size_t a = 0; a < active.size();) {
      Child& c = active[a];
      const SweepRun& r = runs[c.run];
      int wstatus = 0;
      const pid_t w = ::waitpid(c.pid, &wstatus, WNOHANG);
      if (w == 0) {
        const int64_t s = logged_step(r.dir);
        if (s >= 0) c.step = s;
        ++a;
        continue;
      }
      const double secs = c.timer.seconds();
      const int64_t end_step = logged_step(r.dir);
      const bool ok = w == c.pid && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
      if (ok && run_dir_finished(r.dir)) {
        ++res.finished;
        done_seconds += secs;
        done_steps += std::max<int64_t>(1, end_step - c.start_step);
        const RunStatus s = run_status(r);
        const std::string rec = write_run_record(spec, r);
        say(str("done  ", r.name, " in ", fmt_duration(secs), ": held-out loss ", s.final_loss, "; record ", rec));
      } else if (run_status(r).state == RunState::kDiverged) {
        res.diverged.push_back(r.name);
        write_run_record(spec, r);
        say(str("DIVERGED ", r.name, " at step ", end_step, " (kept as a result; last lines of its train.out:)\n",
                tail_lines(r.dir + "/train.out", 3)));
      } else {
        std::string why = !ok ? (WIFSIGNALED(wstatus) ? str("killed by signal ", WTERMSIG(wstatus))
                                                      : str("exit code ", WEXITSTATUS(wstatus)))
                              : std::string("exited 0 but log.h5 does not say finished");
        res.failed.push_back(r.name);
        write_text_atomic(r.dir + "/failed.txt", str(why, " at step ", end_step, " (", iso_time_now(), ")\n"));
        say(str("FAILED ", r.name, ": ", why, "; last lines of ", r.dir, "/train.out:\n",
                tail_lines(r.dir + "/train.out", 12), "    (the sweep goes on; `pagegram sweep run` again retries it)"));
      }
      ::close(c.lock_fd);
      slot_used[static_cast<size_t>(c.slot)] = false;
      active.erase(active.begin() + static_cast<std::ptrdiff_t>(a));
    }
    if (tty || since_line.seconds() >= 60.0) {
      progress_line();
      since_line.reset();
    }
  }

  if (g_stop_signal && !active.empty()) {
    res.interrupted = true;
    for (Child& c : active) ::kill(c.pid, SIGTERM);
    for (Child& c : active) {
      ::waitpid(c.pid, nullptr, 0);
      ::close(c.lock_fd);
    }
    say(str("interrupted: stopped ", active.size(), " run(s); `pagegram sweep run` again resumes them from their ",
            "last checkpoints"));
  } else if (g_stop_signal) {
    res.interrupted = true;
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (tty && opt.progress) std::fprintf(stderr, "\r\033[K");
  say(str("sweep ", spec.name(), ": ", res.already_finished + res.finished, "/", res.total, " finished (",
          res.finished, " this time), ", res.failed.size(), " failed",
          res.diverged.empty() ? std::string() : str(", ", res.diverged.size(), " diverged"),
          res.locked.empty() ? std::string()
          : str(", ", res.locked.size(), " held by another runner")));
  return res;
}

// -----------------------------------------------------------------------------------------------------------
// Status.

std::string sweep_status_table(const SweepSpec& spec, const std::vector<SweepRun>& runs) {
  size_t w = 4;
  for (const auto& r : runs) w = std::max(w, r.name.size());
  std::ostringstream o;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%-*s  %-8s  %-9s  %11s  %6s  %9s  %9s\n", int(w), "run", "hash", "state", "step",
                "ckpt", "held-out", "train");
  o << buf;
  std::map<std::string, int> counts;
  double total_s = 0.0;
  for (const auto& r : runs) {
    const RunStatus s = run_status(r);
    counts[run_state_name(s.state)]++;
    total_s += s.elapsed_s;
    const std::string step = s.state == RunState::kPending ? "-" : str(s.step, "/", s.total_steps);
    const std::string ck = s.checkpoint_step >= 0 ? str(s.checkpoint_step) : "-";
    char loss[32] = "-";
    if (s.final_loss >= 0) std::snprintf(loss, sizeof(loss), "%.4f", s.final_loss);
    std::snprintf(buf, sizeof(buf), "%-*s  %-8s  %-9s  %11s  %6s  %9s  %9s%s\n", int(w), r.name.c_str(), r.hash.c_str(),
                  run_state_name(s.state), step.c_str(), ck.c_str(), loss,
                  s.elapsed_s > 0 ? fmt_duration(s.elapsed_s).c_str() : "-",
                  s.note.empty() ? "" : ("  " + s.note).c_str());
    o << buf;
  }
  // Directories of older configs (any key changed: another hash) are never reused; say that they are there.
  std::set<std::string> mine;
  for (const auto& r : runs) mine.insert(fs::path(r.dir).filename().string());
  std::vector<std::string> stale;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::absolute(spec.out_dir()), ec))
    if (e.is_directory() && !mine.count(e.path().filename().string()) &&
        fs::exists(e.path() / "config.yaml"))
      stale.push_back(e.path().filename().string());
  std::sort(stale.begin(), stale.end());
  if (!stale.empty()) {
    o << stale.size() << " run director" << (stale.size() == 1 ? "y" : "ies")
      << " of other configs (not this sweep's runs, never reused):";
    for (size_t i = 0; i < stale.size() && i < 8; ++i) o << " " << stale[i];
    o << (stale.size() > 8 ? " ..." : "") << "\n";
  }
  o << "sweep " << spec.name() << " (" << fs::absolute(spec.out_dir()).lexically_normal().string() << "): ";
  bool first = true;
  for (const auto& [k, n] : counts) o << (first ? "" : ", ") << n << " " << k, first = false;
  o << "; training time " << fmt_duration(total_s) << "\n";
  return o.str();
}

// -----------------------------------------------------------------------------------------------------------
// Slurm.

std::string slurm_script(const SweepSpec& spec, size_t n_runs, const std::string& runs_txt, const SlurmOptions& opt) {
  const std::string out = fs::absolute(spec.out_dir()).lexically_normal().string();
  const std::string bin = opt.binary.empty() ? self_exe() : opt.binary;
  std::ostringstream s;
  s << "#!/bin/bash\n";
  s << "# Sweep '" << spec.name() << "': " << n_runs << " runs as a Slurm job array (one task per run).\n";
  s << "# Written by `pagegram sweep slurm " << spec.path << "` on " << host_name() << " at " << iso_time_now() << ".\n";
  s << "# Submit with `sbatch " << opt.script << "`. Task i runs line i+1 of " << runs_txt << ";\n";
  s << "# a finished run is skipped and an interrupted or requeued one resumes from its checkpoint.\n";
  s << "# Build the token stores first, on the cluster: `pagegram sweep prepare " << spec.path << "` (with\n";
  s << "# PAGEGRAM_CACHE on shared storage). Merge results elsewhere: `pagegram sweep collect SPEC --from DIR`.\n";
  s << "#SBATCH --job-name=pg-" << spec.name() << "\n";
  s << "#SBATCH --array=0-" << (n_runs == 0 ? 0 : n_runs - 1) << "\n";
  s << "#SBATCH --nodes=1\n";
  s << "#SBATCH --ntasks=1\n";
  s << "#SBATCH --cpus-per-task=" << opt.cpus << "\n";
  s << "#SBATCH --time=" << opt.time << "\n";
  if (!opt.partition.empty()) s << "#SBATCH --partition=" << opt.partition << "\n";
  if (!opt.mem.empty()) s << "#SBATCH --mem=" << opt.mem << "\n";
  s << "#SBATCH --output=" << out << "/slurm-%A_%a.out\n";
  s << "#SBATCH --open-mode=append\n";
  s << "#SBATCH --requeue\n";
  s << "set -euo pipefail\n";
  s << "PAGEGRAM=" << bin << "\n";
  s << "RUN=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" " << runs_txt << ")\n";
  s << "if [ -z \"$RUN\" ]; then echo \"no run for array task $SLURM_ARRAY_TASK_ID\" >&2; exit 1; fi\n";
  s << "if \"$PAGEGRAM\" sweep finished \"$RUN\"; then echo \"$RUN: already finished\"; exit 0; fi\n";
  s << "echo \"$RUN: task $SLURM_ARRAY_TASK_ID on $(hostname) at $(date -u +%FT%TZ)\"\n";
  s << "\"$PAGEGRAM\" train --config \"$RUN/config.yaml\" --resume --set train.threads=$SLURM_CPUS_PER_TASK "
       ">> \"$RUN/train.out\" 2>&1\n";
  return s.str();
}

void write_slurm(const SweepSpec& spec, const std::vector<SweepRun>& runs, const SlurmOptions& opt) {
  if (opt.script.empty()) throw UserError("sweep slurm: --out FILE is required (the job script)");
  if (opt.cpus < 1) throw UserError("sweep slurm: --cpus must be at least 1");
  const std::string out = fs::absolute(spec.out_dir()).lexically_normal().string();
  const std::string runs_txt = out + "/runs.txt";
  std::string lines;
  for (const auto& r : runs) {
    write_run_config(r);
    lines += r.dir + "\n";
  }
  write_text_atomic(runs_txt, lines);
  write_sweep_manifest(spec, runs);
  write_text_atomic(opt.script, slurm_script(spec, runs.size(), runs_txt, opt));
  fs::permissions(opt.script, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
}

// -----------------------------------------------------------------------------------------------------------
// Collect.

namespace {
// The config hash of the config stored in a run directory's log.h5 ("" when it cannot be read).
std::string logged_config_hash(const std::string& dir, std::string* why) {
  try {
    h5::File f = h5::File::open(dir + "/log.h5");
    return config_hash(parse_experiment(f.root().attr_string("config"), dir + "/log.h5"));
  } catch (const UserError& e) {
    *why = e.what();
    return "";
  }
}
}  // namespace

CollectResult collect_sweep(const SweepSpec& spec, const std::vector<SweepRun>& runs,
                            const std::vector<std::string>& from) {
  CollectResult res;
  for (const auto& src : from)
    if (!fs::is_directory(src)) throw IoError(str("sweep collect: --from ", src, ": not a directory"));
  for (const auto& r : runs) {
    if (run_dir_finished(r.dir)) {
      res.had.push_back(r.name);
      continue;
    }
    if (dir_locked(r.dir)) {
      res.refused.push_back(str(r.dir, ": a runner on this machine is running it"));
      continue;
    }
    const std::string leaf = fs::path(r.dir).filename().string();
    bool done = false;
    for (const auto& src : from) {
      // The directory itself, a sweep out_dir holding it, or a runs/ tree holding sweep out_dirs.
      std::vector<fs::path> cand{fs::path(src) / leaf, fs::path(src) / spec.name() / leaf};
      if (fs::path(src).filename() == leaf) cand.insert(cand.begin(), fs::path(src));
      for (const auto& c : cand) {
        if (done || !fs::is_directory(c)) continue;
        if (fs::weakly_canonical(c) == fs::weakly_canonical(r.dir)) continue;  // our own directory
        if (!run_dir_finished(c.string())) {
          res.refused.push_back(str(c.string(), ": not finished"));
          continue;
        }
        std::string why;
        const std::string h = logged_config_hash(c.string(), &why);
        if (h != r.hash) {
          res.refused.push_back(str(c.string(), ": its log's config hashes to ", h.empty() ? "?" : h, " not ", r.hash,
                                    why.empty() ? "" : " (" + why + ")"));
          continue;
        }
        // Copy into a temp directory next to the target, then swap it in.
        const fs::path tmp = fs::path(r.dir + ".collect-" + std::to_string(::getpid()));
        fs::remove_all(tmp);
        fs::create_directories(tmp);
        for (const auto& e : fs::directory_iterator(c))
          if (e.is_regular_file() && e.path().filename() != ".lock")
            fs::copy_file(e.path(), tmp / e.path().filename(), fs::copy_options::overwrite_existing);
        fs::remove_all(r.dir);
        fs::rename(tmp, r.dir);
        write_run_config(r);  // train.out_dir = this machine's directory
        res.merged.push_back(str(r.name, ": from ", c.string()));
        done = true;
      }
      if (done) break;
    }
    if (!done) res.missing.push_back(r.name);
  }
  return res;
}

}  // namespace pg
