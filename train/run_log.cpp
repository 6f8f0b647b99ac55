// Implementation of train/run_log.h.
#include "train/run_log.h"

#include <algorithm>
#include <initializer_list>

#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <type_traits>

#include "core/build_info.h"
#include "kernels/kernels.h"
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
// Every per-step array of `g` (all its datasets but `step` and those named in `skip`) must have one row per entry
// of g/step: a log whose arrays disagree is refused (IoError: exit 2), never truncated or written back misaligned.
void check_aligned(const h5::Group& g, const std::string& path, std::initializer_list<const char*> skip = {}) {
  const std::string at = str(path, ":", g.path());
  const std::vector<uint64_t> s = g.dataset_shape("step");
  if (s.size() != 1)
    throw IoError(str(at, "/step: ", s.size(), " dimensions, expected 1 (hint: the log was edited or damaged; remove ",
                      "checkpoint.h5 and log.h5 to start the run over)"));
  for (const std::string& name : g.children()) {
    if (name == "step" || std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    const std::vector<uint64_t> d = g.dataset_shape(name);
    if (!d.empty() && d[0] == s[0]) continue;
    const std::string rows = d.empty() ? std::string("a scalar") : str(d[0], d[0] == 1 ? " row" : " rows");
    throw IoError(str(at, "/", name, ": ", rows, ", but ", g.path(), "/step has ", s[0], " (hint: every per-step ",
                      "array must have one row per logged step; the log was edited or damaged: remove checkpoint.h5 ",
                      "and log.h5 to start the run over)"));
  }
}
size_t rows_until(const std::vector<int64_t>& step, int64_t last) {
  size_t n = 0;
  while (n < step.size() && step[n] <= last) ++n;
  return n;
}
// Reads every column of a group (the struct's columns() list) and keeps the rows of steps up to `last`.
template <class Cols>
void read_columns(const h5::Group& g, Cols& cols, int64_t last) {
  Cols::columns(cols,
                [&](const char* name, auto& v) { v = g.read<typename std::decay_t<decltype(v)>::value_type>(name); });
  const size_t n = rows_until(cols.step, last);
  Cols::columns(cols, [&](const char*, auto& v) { truncate_after(v, n); });
}
template <class Cols>
void write_columns(const h5::Group& g, const Cols& cols) {
  Cols::columns(cols, [&](const char* name, const auto& v) { g.write(name, v); });
}
}  // namespace

std::string RunLog::revisions() const {
  // This build's segment starts after the last step an earlier build logged (or at step 1).
  const std::string mine = std::string(build::kRevision) + ":" + kern::active_name();
  if (revisions_.empty()) return mine + "@1";
  const size_t last = revisions_.rfind(' ');
  const std::string tail = revisions_.substr(last == std::string::npos ? 0 : last + 1);
  if (tail.rfind(mine + "@", 0) == 0) return revisions_;
  return revisions_ + " " + mine + "@" + std::to_string(resume_step_ + 1);
}

RunLog::RunLog(std::string path, RunMeta meta, int64_t resume_step)
    : path_(std::move(path)), started_(iso_time_now()), meta_(std::move(meta)) {
  resume_step_ = std::max<int64_t>(0, resume_step);
  if (resume_step < 0 || !std::filesystem::exists(path_)) return;
  h5::File f = h5::File::open(path_);
  h5::Group r = f.root();
  if (!r.has_attr("format") || r.attr_string("format") != "pagegram-runlog")
    throw IoError(str(path_, ": not a pagegram run log (attribute 'format' missing or different)"));
  // A run resumed on another corpus build would go on with other training windows: refuse (logs written before the
  // attribute existed carry none and pass).
  if (const std::string was = r.has_attr("data") ? r.attr_string("data") : std::string();
      !was.empty() && !meta_.data.empty() && was != meta_.data)
    throw IoError(str(path_, ": the run started on other data (log: '", was, "'; now: '", meta_.data,
                      "') (hint: the corpus or token stores were rebuilt since; start the run over in a new "
                      "train.out_dir)"));
  // Per-step arrays are checked against their step array before anything is truncated or kept.
  check_aligned(r.sub("train"), path_);
  check_aligned(r.sub("eval"), path_);
  if (r.has("scalars"))
    for (const auto& name : r.sub("scalars").children()) check_aligned(r.sub("scalars").sub(name), path_);
  if (r.has("collisions")) check_aligned(r.sub("collisions"), path_, {"orders"});
  read_columns(r.sub("train"), train_, resume_step);
  read_columns(r.sub("eval"), eval_, resume_step);
  if (r.has("scalars")) {
    h5::Group s = r.sub("scalars");
    for (const auto& name : s.children()) {
      Series ser;
      read_columns(s.sub(name), ser, resume_step);
      // Names are stored with '/' replaced by ':' (HDF5 paths); restore them.
      std::string key = name;
      for (char& c : key)
        if (c == ':') c = '/';
      scalars_[key] = std::move(ser);
    }
  }
  if (r.has("collisions")) {
    h5::Group c = r.sub("collisions");
    std::vector<uint64_t> shape;
    const std::vector<int64_t> step = c.read<int64_t>("step");
    coll_orders_ = c.read<int64_t>("orders");
    coll_owners_ = c.attr_int("owners") != 0;
    const std::vector<int64_t> touched = c.read<int64_t>("touched_rows", &shape);
    if (shape.size() != 3 || shape[0] != step.size() || shape[1] != coll_orders_.size())
      throw IoError(str(path_, ":/collisions/touched_rows: shape does not match step and orders"));
    const size_t R = step.size(), no = shape[1], K = shape[2];
    const size_t keep = rows_until(step, resume_step);
    coll_.assign(keep, StepCollisionStats{});
    for (StepCollisionStats& st : coll_)
      st.n_orders = static_cast<int64_t>(no), st.heads_per_order = static_cast<int64_t>(K);
    StepCollisionStats::columns([&](const char* name, auto field, bool per_head) {
      using T = typename std::remove_reference_t<decltype(coll_.front().*field)>::value_type;
      const std::vector<T> all = c.read<T>(name);
      const size_t per_row = per_head ? no * K : no;
      if (all.size() != R * per_row)
        throw IoError(str(path_, ":/collisions/", name, ": ", all.size(), " values, expected ", R * per_row, " (",
                          per_head ? "per head" : "per order", ", ", R,
                          " steps; hint: the log was edited or damaged)"));
      for (size_t i = 0; i < keep; ++i)
        coll_[i].*field = std::vector<T>(all.begin() + static_cast<std::ptrdiff_t>(i * per_row),
                                         all.begin() + static_cast<std::ptrdiff_t>((i + 1) * per_row));
    });
    coll_step_.assign(step.begin(), step.begin() + static_cast<std::ptrdiff_t>(keep));
  }
  if (r.has_attr("started")) started_ = r.attr_string("started");
  // Provenance across resumes: "<revision>:<kernels>@<first step>" segments, one per build that wrote the log.
  if (r.has_attr("revisions")) revisions_ = r.attr_string("revisions");
  else if (r.has_attr("revision"))
    revisions_ = r.attr_string("revision") + ":" + (r.has_attr("kernels") ? r.attr_string("kernels") : "?") + "@1";
}

void RunLog::collisions(int64_t step, const StepCollisionStats& s, const std::vector<int64_t>& orders, bool owners) {
  PG_CHECK(static_cast<int64_t>(orders.size()) == s.n_orders, "collision statistics of ", s.n_orders, " orders for ",
           orders.size(), " orders");
  if (!coll_.empty())
    PG_CHECK(orders == coll_orders_ && s.heads_per_order == coll_.front().heads_per_order,
             "collision statistics with another geometry than the log's earlier rows");
  coll_orders_ = orders;
  coll_owners_ = owners;
  coll_step_.push_back(step);
  coll_.push_back(s);
}

void RunLog::train_row(int64_t step, int64_t tokens, double loss, double lr, double grad_norm, double tok_per_s,
                       double elapsed_s) {
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
    r.set_attr("kernels", kern::run_kernels_name(meta_.bf16));
    r.set_attr("cpu", isa::cpu_description());
    r.set_attr("threads", meta_.threads);
    r.set_attr("pinned", int64_t{meta_.pinned ? 1 : 0});
    r.set_attr("cpus", meta_.cpus);
    r.set_attr("ranks", meta_.ranks);
    r.set_attr("data", meta_.data);
    r.set_attr("host", host_name());
    r.set_attr("started", started_);
    r.set_attr("revisions", revisions());
    r.set_attr("updated", iso_time_now());
    r.set_attr("status", status_);
    write_columns(r.create("train"), train_);
    write_columns(r.create("eval"), eval_);
    h5::Group s = r.create("scalars");
    for (const auto& [name, ser] : scalars_) {
      std::string key = name;
      for (char& c : key)
        if (c == '/') c = ':';
      write_columns(s.create(key), ser);
    }
    if (!coll_.empty()) {
      const uint64_t R = coll_.size(), no = coll_orders_.size(),
                     K = static_cast<uint64_t>(coll_.front().heads_per_order);
      h5::Group c = r.create("collisions");
      c.set_attr("owners", int64_t{coll_owners_ ? 1 : 0});
      c.set_attr("heads_per_order", static_cast<int64_t>(K));
      c.write("step", coll_step_);
      c.write("orders", coll_orders_);
      StepCollisionStats::columns([&](const char* name, auto field, bool per_head) {
        const uint64_t per_row = per_head ? no * K : no;
        using T = typename std::remove_reference_t<decltype(coll_.front().*field)>::value_type;
        std::vector<T> v;
        v.reserve(R * per_row);
        for (const StepCollisionStats& st : coll_) v.insert(v.end(), (st.*field).begin(), (st.*field).end());
        PG_CHECK(v.size() == R * per_row, "collision statistics: ", name, " has ", v.size(), " values");
        if (per_head) c.write(name, std::span<const T>(v), {R, no, K});
        else c.write(name, std::span<const T>(v), {R, no});
      });
    }
    h5::Group sum = r.create("summary");
    for (const auto& [k, v] : summary_) sum.set_attr(k, v);
  });
}

}  // namespace pg
