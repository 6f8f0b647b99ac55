// Implementation of sweep/spec.h: sweep-file parsing (every error names the sweep-file key path), expansion into
// runs, config hashes and the manifest.
#include "sweep/spec.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "core/text.h"
#include "data/hash.h"

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
    throw ConfigError(
        str(where, ": key '", origin, ".", key, "': the sweep owns this config key (hint: ", it->second, ")"));
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
  if (!fs::exists(path))
    throw IoError(str("sweep file not found: ", path, " (hint: sweeps live in experiments/*/sweep.yaml)"));
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw IoError(str("sweep file ", path, ": not a regular file (hint: experiments/*/sweep.yaml)"));
  // The config loader's checks: one document, plain keys never twice, aliases expanded to a bounded node count.
  const YAML::Node root = cfg::parse_text(read_file_bounded(path, 1 << 20, "sweep file"), path);
  if (!root.IsMap()) throw ConfigError(str(path, ": expected a map of keys at the top level (name, base, seeds, ...)"));

  SweepSpec spec;
  spec.path = path;
  // Top-level keys: the scalar fields plus the three maps of config keys.
  std::vector<std::string> known;
  {
    KeyLister l{"", &known};
    spec.f.visit(l);
    known.insert(known.end(), {"set", "variants", "grid", "variant_seeds"});
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
    if (key != "set" && key != "variants" && key != "grid" && key != "variant_seeds") rest[key] = it->second;
  }
  spec.f = cfg::from_yaml<SweepFields>(rest, path);
  if (!valid_name(spec.f.name))
    throw ConfigError(
        str(path, ": key 'name': '", spec.f.name, "' is not a valid name (hint: letters, digits, _ . + -)"));
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
  if (YAML::Node vs = root["variant_seeds"]) {
    if (!vs.IsMap())
      throw ConfigError(str(path, ": key 'variant_seeds': expected a map of variant name -> list of seeds ",
                            "(hint: variant_seeds: {none: [0, 1]})"));
    for (auto it = vs.begin(); it != vs.end(); ++it) {
      const std::string var = it->first.as<std::string>();
      const std::string origin = "variant_seeds." + var;
      if (std::none_of(spec.variants.begin(), spec.variants.end(),
                       [&](const SweepVariant& v) { return v.name == var; }))
        throw ConfigError(str(path, ": key '", origin, "': no such variant (hint: name one of 'variants')"));
      const YAML::Node list = it->second;
      if (!list.IsSequence() || list.size() == 0)
        throw ConfigError(str(path, ": key '", origin, "': expected a non-empty list of seeds (hint: [0, 1])"));
      std::vector<int64_t> seeds;
      for (const auto& e : list) {
        int64_t s = -1;
        try {
          s = e.as<int64_t>();
        } catch (const YAML::Exception&) {
          throw ConfigError(
              str(path, ": key '", origin, "': '", e.Scalar(), "' is not a seed (hint: integers from 'seeds')"));
        }
        if (std::find(spec.f.seeds.begin(), spec.f.seeds.end(), s) == spec.f.seeds.end())
          throw ConfigError(
              str(path, ": key '", origin, "': seed ", s, " is not in 'seeds' (hint: a subset of seeds)"));
        if (std::find(seeds.begin(), seeds.end(), s) != seeds.end())
          throw ConfigError(str(path, ": key '", origin, "': seed ", s, " is listed twice"));
        seeds.push_back(s);
      }
      spec.variant_seeds[var] = std::move(seeds);
    }
  }
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

YAML::Node portable_yaml(const ExperimentConfig& cfg) {
  YAML::Node n = cfg::to_yaml(cfg);
  // Keys added after runs were recorded are left out at their default value, so those runs keep their hashes
  // (a non-default value changes the results, and the hash) and an older build can run the config.
  if (cfg.train.precision == TrainConfig{}.precision) n["train"].remove("precision");
  if (cfg.train.table_sharding == TrainConfig{}.table_sharding) n["train"].remove("table_sharding");
  return n;
}

std::string config_hash(const ExperimentConfig& cfg) {
  ExperimentConfig c = cfg;
  c.train.out_dir = "";
  c.train.threads = 0;
  c.train.table_sharding = TrainConfig{}.table_sharding;  // how ranks hold the table does not change the results
  YAML::Node n = portable_yaml(c);
  // Keys that only choose what the run log records are left out entirely, so adding one keeps every
  // existing run directory's hash.
  for (const char* k : MemoryConfig::kLogOnlyKeys) n["memory"].remove(k);
  YAML::Emitter e;
  e << n;
  return data::hex64(data::xxh64(std::string(e.c_str()))).substr(0, 8);
}

std::vector<SweepRun> expand_sweep(const SweepSpec& spec) {
  // Bounded before anything is built: seeds x variants x grid points (each run resolves a whole config).
  constexpr double kMaxRuns = 100000;
  double total = static_cast<double>(spec.f.seeds.size()) * static_cast<double>(spec.variants.size());
  std::string sizes = str(spec.f.seeds.size(), " seeds x ", spec.variants.size(), " variants");
  for (const auto& ax : spec.grid) {
    total *= static_cast<double>(ax.values.size());
    sizes += str(" x ", ax.values.size(), " (grid ", ax.key, ")");
  }
  if (total > kMaxRuns)
    throw ConfigError(str(spec.path, ": the sweep expands to ", total, " runs (", sizes, "), more than ", kMaxRuns,
                          " (hint: split it into several sweep files)"));
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
        if (auto vs = spec.variant_seeds.find(var.name);
            vs != spec.variant_seeds.end() && std::find(vs->second.begin(), vs->second.end(), seed) == vs->second.end())
          continue;
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
            if (msg.find("'" + o->key + "'") != std::string::npos)
              from = " (set by '" + o->origin + "." + o->key + "')";
          for (const auto& [k, v] : r.grid)
            if (msg.find("'" + k + "'") != std::string::npos) from = " (set by 'grid." + k + "')";
          throw ConfigError(str(spec.path, ": run '", r.name, "'", from, ": ", msg));
        }
        if (spec.f.tokens > 0 && r.config.train.steps > 0)
          throw ConfigError(str(spec.path, ": key 'tokens': run '", r.name,
                                "' has train.steps = ", r.config.train.steps,
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

std::string sweep_axes_json(const SweepSpec& spec) {
  std::ostringstream j;
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
  j << "}";
  return j.str();
}

void write_sweep_manifest(const SweepSpec& spec, const std::vector<SweepRun>& runs) {
  const fs::path out = fs::absolute(spec.out_dir()).lexically_normal();
  std::ostringstream j;
  j << "{\n  \"format\": \"pagegram-sweep\",\n  \"format_version\": 1,\n";
  j << "  \"name\": " << json_escape(spec.name()) << ",\n";
  j << "  \"description\": " << json_escape(spec.f.description) << ",\n";
  j << "  \"spec\": " << json_escape(fs::absolute(spec.path).lexically_normal().string()) << ",\n";
  j << "  \"base\": " << json_escape(fs::absolute(spec.base_path()).lexically_normal().string()) << ",\n";
  j << sweep_axes_json(spec) << ",\n  \"runs\": [\n";
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

}  // namespace pg
