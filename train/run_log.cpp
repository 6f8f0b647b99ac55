// Implementation of train/run_log.h.
#include "train/run_log.h"

#include <unistd.h>

#include <ctime>
#include <filesystem>

#include "core/build_info.h"
#include "core/kernels.h"
#include "core/h5.h"

namespace pg {

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}
std::string iso_time_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

namespace {
template <class T>
void truncate_after(std::vector<T>& v, size_t n) {
  if (v.size() > n) v.resize(n);
}
template <class T>
size_t rows_until(const std::vector<int64_t>& step, int64_t last) {
  size_t n = 0;
  while (n < step.size() && step[n] <= last) ++n;
  return n;
}
}  // namespace

RunLog::RunLog(std::string path, RunMeta meta, int64_t resume_step)
    : path_(std::move(path)), started_(iso_time_now()), meta_(std::move(meta)) {
  if (resume_step < 0 || !std::filesystem::exists(path_)) return;
  h5::File f = h5::File::open(path_);
  h5::Group r = f.root();
  if (!r.has_attr("format") || r.attr_string("format") != "pagegram-runlog")
    throw IoError(str(path_, ": not a pagegram run log (attribute 'format' missing or different)"));
  h5::Group t = r.sub("train");
  train_.step = t.read<int64_t>("step");
  train_.tokens = t.read<int64_t>("tokens");
  train_.loss = t.read<double>("loss");
  train_.lr = t.read<double>("lr");
  train_.grad_norm = t.read<double>("grad_norm");
  train_.tok_per_s = t.read<double>("tok_per_s");
  train_.elapsed_s = t.read<double>("elapsed_s");
  size_t n = rows_until<int64_t>(train_.step, resume_step);
  truncate_after(train_.step, n), truncate_after(train_.tokens, n), truncate_after(train_.loss, n);
  truncate_after(train_.lr, n), truncate_after(train_.grad_norm, n), truncate_after(train_.tok_per_s, n);
  truncate_after(train_.elapsed_s, n);
  h5::Group e = r.sub("eval");
  eval_.step = e.read<int64_t>("step");
  eval_.tokens = e.read<int64_t>("tokens");
  eval_.loss = e.read<double>("loss");
  n = rows_until<int64_t>(eval_.step, resume_step);
  truncate_after(eval_.step, n), truncate_after(eval_.tokens, n), truncate_after(eval_.loss, n);
  if (r.has("scalars")) {
    h5::Group s = r.sub("scalars");
    for (const auto& name : s.children()) {
      h5::Group g = s.sub(name);
      Series ser{g.read<int64_t>("step"), g.read<double>("value")};
      n = rows_until<int64_t>(ser.step, resume_step);
      truncate_after(ser.step, n), truncate_after(ser.value, n);
      // Names are stored with '/' replaced by ':' (HDF5 paths); restore them.
      std::string key = name;
      for (char& c : key)
        if (c == ':') c = '/';
      scalars_[key] = std::move(ser);
    }
  }
  if (r.has_attr("started")) started_ = r.attr_string("started");
}

void RunLog::train_row(int64_t step, int64_t tokens, double loss, double lr, double grad_norm,
                       double tok_per_s, double elapsed_s) {
  train_.step.push_back(step);
  train_.tokens.push_back(tokens);
  train_.loss.push_back(loss);
  train_.lr.push_back(lr);
  train_.grad_norm.push_back(grad_norm);
  train_.tok_per_s.push_back(tok_per_s);
  train_.elapsed_s.push_back(elapsed_s);
}
void RunLog::eval_row(int64_t step, int64_t tokens, double loss) {
  eval_.step.push_back(step);
  eval_.tokens.push_back(tokens);
  eval_.loss.push_back(loss);
}
void RunLog::scalar(const std::string& name, int64_t step, double value) {
  Series& s = scalars_[name];
  s.step.push_back(step);
  s.value.push_back(value);
}

void RunLog::flush() {
  std::filesystem::path p(path_);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  h5::write_atomic(path_, [&](const h5::Group& r) {
    r.set_attr("format", std::string("pagegram-runlog"));
    r.set_attr("format_version", int64_t{1});
    r.set_attr("config", meta_.config_yaml);
    r.set_attr("command", meta_.command);
    r.set_attr("revision", std::string(build::kRevision));
    r.set_attr("compiler_flags", std::string(build::kFlags));
    r.set_attr("build_type", std::string(build::kBuildType));
    r.set_attr("kernels", std::string(kern::active_name()));
    r.set_attr("cpu", isa::cpu_description());
    r.set_attr("threads", meta_.threads);
    r.set_attr("pinned", int64_t{meta_.pinned ? 1 : 0});
    r.set_attr("cpus", meta_.cpus);
    r.set_attr("host", host_name());
    r.set_attr("started", started_);
    r.set_attr("updated", iso_time_now());
    r.set_attr("status", status_);
    h5::Group t = r.create("train");
    t.write("step", train_.step);
    t.write("tokens", train_.tokens);
    t.write("loss", train_.loss);
    t.write("lr", train_.lr);
    t.write("grad_norm", train_.grad_norm);
    t.write("tok_per_s", train_.tok_per_s);
    t.write("elapsed_s", train_.elapsed_s);
    h5::Group e = r.create("eval");
    e.write("step", eval_.step);
    e.write("tokens", eval_.tokens);
    e.write("loss", eval_.loss);
    h5::Group s = r.create("scalars");
    for (const auto& [name, ser] : scalars_) {
      std::string key = name;
      for (char& c : key)
        if (c == '/') c = ':';
      h5::Group g = s.create(key);
      g.write("step", ser.step);
      g.write("value", ser.value);
    }
    h5::Group sum = r.create("summary");
    for (const auto& [k, v] : summary_) sum.set_attr(k, v);
  });
}

}  // namespace pg
