// Implementation of sweep/records.h (format: experiments/RECORDS.md).
#include "sweep/records.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <type_traits>

#include <yaml-cpp/yaml.h>

#include "core/config.h"
#include "core/h5.h"
#include "core/text.h"
#include "sweep/status.h"

namespace pg {

namespace fs = std::filesystem;

std::string record_path(const SweepSpec& spec, const SweepRun& run) {
  const fs::path dir = fs::absolute(spec.path).parent_path() / "records";
  return (dir / (run.name + "-" + run.hash + ".json")).lexically_normal().string();
}

bool record_exists(const SweepSpec& spec, const SweepRun& run) { return fs::exists(record_path(spec, run)); }

namespace {
// The text after `"key": ` in a record (records are written by this file, one key once per record at most, except
// inside "config", which is a single string and comes last).
std::string record_field(const std::string& text, const std::string& key, const std::string& path) {
  const std::string k = "\"" + key + "\": ";
  const size_t at = text.find(k);
  if (at == std::string::npos)
    throw IoError(str(path, ": run record has no '", key, "' (hint: experiments/RECORDS.md)"));
  const size_t b = at + k.size();
  const size_t e = text.find_first_of(",}\n", b);
  return text.substr(b, e == std::string::npos ? std::string::npos : e - b);
}
double record_number(const std::string& text, const std::string& key, const std::string& path) {
  const std::string v = record_field(text, key, path);
  if (v == "null") return -1.0;
  try {
    return std::stod(v);
  } catch (...) {
    throw IoError(str(path, ": run record's '", key, "' is not a number: '", v, "'"));
  }
}
}  // namespace

namespace {
// A record counts as this run's result only when it is whole and is this run's: parsed as JSON (through YAML), format,
// name and config hash of the run, the hash of its own config, a known status, and for a finished run every step
// done and a finite held-out loss. Anything else is one IoError naming the record (never a silently "finished" run).
void validate_record(const std::string& path, const std::string& text, const SweepRun& run) {
  auto bad = [&](const std::string& what) {
    return IoError(str(path, ": run record ", what,
                       " (hint: restore it from git, or delete it to train the run again; ",
                       "format: experiments/RECORDS.md)"));
  };
  YAML::Node r;
  try {
    r = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw bad(str("unreadable at line ", e.mark.line + 1, ": ", e.msg));
  }
  auto field = [&](const char* k) {
    const YAML::Node n = r.IsMap() ? r[k] : YAML::Node();
    if (!n || !n.IsScalar()) throw bad(str("has no '", k, "'"));
    return n.Scalar();
  };
  if (field("format") != "pagegram-run-record") throw bad(str("format is '", field("format"), "'"));
  if (field("name") != run.name) throw bad(str("is of run '", field("name"), "', not '", run.name, "'"));
  if (field("config_hash") != run.hash)
    throw bad(str("has config_hash ", field("config_hash"), ", the run ", run.hash));
  std::string own;
  try {
    own = config_hash(parse_experiment(field("config"), path + ":config"));
  } catch (const UserError& e) {
    throw bad(str("config does not parse: ", e.what()));
  }
  if (own != run.hash) throw bad(str("config hashes to ", own, ", not its config_hash ", run.hash, " (edited?)"));
  const std::string status = field("status");
  if (status != "finished" && status != "diverged") throw bad(str("status '", status, "'"));
  if (status == "finished") {
    const YAML::Node fin = r["final"];
    double loss = NAN;
    try {
      loss = fin && fin["heldout_loss"] ? fin["heldout_loss"].as<double>() : NAN;
    } catch (const YAML::Exception&) {
    }
    if (!std::isfinite(loss)) throw bad("is 'finished' without a finite final.heldout_loss");
    if (field("steps") != field("total_steps"))
      throw bad(str("is 'finished' at step ", field("steps"), " of ", field("total_steps")));
  }
}
}  // namespace

RunStatus recorded_status(const SweepSpec& spec, const SweepRun& run) {
  const std::string path = record_path(spec, run);
  const std::string text = read_file_bounded(path, size_t{64} << 20, "run record");
  validate_record(path, text, run);
  RunStatus s;
  const std::string status = record_field(text, "status", path);
  s.state = status == "\"diverged\"" ? RunState::kDiverged : RunState::kFinished;
  s.step = static_cast<int64_t>(record_number(text, "steps", path));
  s.total_steps = static_cast<int64_t>(record_number(text, "total_steps", path));
  s.final_loss = record_number(text, "heldout_loss", path);
  s.elapsed_s = record_number(text, "train_seconds", path);
  std::string rev = record_field(text, "revision", path);
  rev.erase(std::remove(rev.begin(), rev.end(), '"'), rev.end());
  s.note = str("(committed record, revision ", rev, ")");
  return s;
}

std::string run_data_fingerprint(const SweepSpec& spec, const SweepRun& run) {
  const std::string log = run.dir + "/log.h5";
  if (run_dir_finished(run.dir)) {
    try {
      h5::Group r = h5::File::open(log).root();
      if (r.has_attr("data")) return r.attr_string("data");
    } catch (const IoError&) {
      // being replaced, or unreadable: the record (if any) says it
    }
  }
  const std::string path = record_path(spec, run);
  if (!fs::exists(path)) return "";
  try {  // a record is JSON, which YAML reads (escapes included)
    const YAML::Node data = YAML::LoadFile(path)["data"];
    return data ? data.as<std::string>() : std::string();
  } catch (const YAML::Exception& e) {
    throw IoError(str(path, ": run record unreadable at line ", e.mark.line + 1, ": ", e.msg,
                      " (hint: restore it from git; format: experiments/RECORDS.md)"));
  }
}

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

}  // namespace

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
    << ", \"kernels\": " << json_escape(attr("kernels")) << ", \"revisions\": " << json_escape(attr("revisions"))
    << ",\n  \"cpu\": " << json_escape(attr("cpu")) << ", \"host\": " << json_escape(attr("host"))
    << ", \"threads\": " << (r.has_attr("threads") ? r.attr_int("threads") : 0)
    << ", \"data\": " << json_escape(attr("data")) << ",\n";
  j << "  \"compiler_flags\": " << json_escape(attr("compiler_flags"))
    << ", \"started\": " << json_escape(attr("started")) << ", \"updated\": " << json_escape(attr("updated")) << ",\n";
  j << "  \"steps\": " << (steps.empty() ? 0 : steps.back()) << ", \"total_steps\": " << run.config.train.total_steps()
    << ", \"tokens\": " << (tokens.empty() ? 0 : tokens.back()) << ",\n";
  j << "  \"train_seconds\": " << num(elapsed.empty() ? 0.0 : elapsed.back())
    << ", \"tok_per_s_median\": " << num(tps_sorted.empty() ? 0.0 : tps_sorted[tps_sorted.size() / 2]) << ",\n";
  const auto ev_loss = series_d("eval", "loss");
  j << "  \"final\": {\"heldout_loss\": " << num(ev_loss.empty() ? NAN : ev_loss.back())
    << ", \"train_loss\": " << num(loss.empty() ? NAN : loss.back()) << "},\n";
  j << "  \"eval\": {\"step\": " << json_array(series_i("eval", "step"))
    << ", \"tokens\": " << json_array(series_i("eval", "tokens")) << ",\n           \"loss\": " << json_array(ev_loss)
    << "},\n";
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

std::string expansion_path(const SweepSpec& spec) {
  return (fs::absolute(spec.path).parent_path() / "records" / "expansion.json").lexically_normal().string();
}

namespace {
// The sweep file and every preset of its base chain, as load_experiment read them.
std::vector<fs::path> expansion_sources(const SweepSpec& spec) {
  std::vector<fs::path> files{fs::absolute(spec.path).lexically_normal()};
  for (const fs::path& p : cfg::base_chain(spec.base_path())) files.push_back(fs::absolute(p).lexically_normal());
  return files;
}
}  // namespace

std::string sweep_expansion_json(const SweepSpec& spec, const std::vector<SweepRun>& runs) {
  const fs::path dir = fs::absolute(spec.path).parent_path().lexically_normal();
  std::ostringstream j;
  j << "{\n  \"format\": \"pagegram-sweep-expansion\",\n  \"format_version\": 1,\n";
  j << "  \"name\": " << json_escape(spec.name()) << ",\n";
  j << "  \"description\": " << json_escape(spec.f.description) << ",\n";
  j << "  \"spec\": " << json_escape(fs::absolute(spec.path).lexically_normal().lexically_relative(dir).string())
    << ",\n";
  j << "  \"base\": " << json_escape(spec.f.base) << ",\n";
  j << "  \"out_dir\": " << json_escape(spec.out_dir()) << ",\n";
  j << sweep_axes_json(spec) << ",\n  \"inputs\": {";
  const std::vector<fs::path> inputs = expansion_sources(spec);
  for (size_t i = 0; i < inputs.size(); ++i)
    j << (i ? "," : "") << "\n    " << json_escape(inputs[i].lexically_relative(dir).string()) << ": "
      << json_escape(read_file(inputs[i].string()));
  j << "\n  },\n  \"runs\": [\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const SweepRun& r = runs[i];
    ExperimentConfig c = r.config;  // as config_hash reads it: the keys that never change results blanked
    c.train.out_dir = "";
    c.train.threads = 0;
    YAML::Emitter e;
    e << portable_yaml(c);
    j << "    {\"name\": " << json_escape(r.name) << ", \"variant\": " << json_escape(r.variant)
      << ", \"seed\": " << r.seed << ", \"grid\": {";
    for (size_t a = 0; a < r.grid.size(); ++a)
      j << (a ? ", " : "") << json_escape(r.grid[a].first) << ": " << json_escape(r.grid[a].second);
    j << "}, \"hash\": " << json_escape(r.hash) << ", \"overrides\": [";
    for (size_t k = 0; k < r.overrides.size(); ++k) j << (k ? ", " : "") << json_escape(r.overrides[k]);
    j << "],\n     \"config\": " << json_escape(e.c_str()) << "}" << (i + 1 < runs.size() ? "," : "") << "\n";
  }
  j << "  ]\n}\n";
  return j.str();
}

std::string write_sweep_expansion(const SweepSpec& spec, const std::vector<SweepRun>& runs) {
  const std::string p = expansion_path(spec);
  write_text_atomic(p, sweep_expansion_json(spec, runs));
  return p;
}

std::vector<std::string> write_sweep_records(const SweepSpec& spec, const std::vector<SweepRun>& runs) {
  std::vector<std::string> written;
  for (const SweepRun& r : runs) {
    const RunState st = run_status(r).state;
    if (st == RunState::kFinished || st == RunState::kDiverged) written.push_back(write_run_record(spec, r));
  }
  return written;
}

}  // namespace pg
