// Implementation of train/run_log.h.
#include "train/run_log.h"

#include <algorithm>
#include <initializer_list>

#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <type_traits>

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
template <class T>
size_t rows_until(const std::vector<int64_t>& step, int64_t last) {
  size_t n = 0;
  while (n < step.size() && step[n] <= last) ++n;
  return n;
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
  if (r.has("collisions")) {
    h5::Group c = r.sub("collisions");
    std::vector<uint64_t> shape;
    const std::vector<int64_t> step = c.read<int64_t>("step");
    coll_orders_ = c.read<int64_t>("orders");
    coll_owners_ = c.attr_int("owners") != 0;
    const std::vector<int64_t> touched = c.read<int64_t>("touched_rows", &shape);
    if (shape.size() != 3 || shape[0] != step.size() || shape[1] != coll_orders_.size())
      throw IoError(str(path_, ":/collisions/touched_rows: shape does not match step and orders"));
    const size_t R = step.size(), no = shape[1], K = shape[2], OK = no * K;
    const auto lookups = c.read<int64_t>("lookups"), distinct = c.read<int64_t>("distinct"),
               pairs = c.read<int64_t>("shared_pairs");
    const auto page_mates = c.read<double>("page_mates"), lpr = c.read<double>("lookups_per_row"),
               fs = c.read<double>("foreign_step"), fo = c.read<double>("foreign_owner"), co = c.read<double>("co_heads");
    for (const size_t n : {lookups.size(), distinct.size(), page_mates.size()})
      if (n != R * no) throw IoError(str(path_, ":/collisions: per-order datasets do not match step and orders"));
    for (const size_t n : {pairs.size(), lpr.size(), fs.size(), fo.size(), co.size()})
      if (n != R * OK) throw IoError(str(path_, ":/collisions: per-head datasets do not match touched_rows"));
    for (size_t i = 0; i < R && step[i] <= resume_step; ++i) {
      StepCollisionStats st;
      st.n_orders = static_cast<int64_t>(no);
      st.heads_per_order = static_cast<int64_t>(K);
      auto slice = [](const auto& v, size_t a, size_t n) { return std::vector(v.begin() + a, v.begin() + a + n); };
      st.lookups = slice(lookups, i * no, no), st.distinct = slice(distinct, i * no, no);
      st.page_mates = slice(page_mates, i * no, no);
      st.touched_rows = slice(touched, i * OK, OK), st.shared_pairs = slice(pairs, i * OK, OK);
      st.lookups_per_row = slice(lpr, i * OK, OK), st.foreign_step = slice(fs, i * OK, OK);
      st.foreign_owner = slice(fo, i * OK, OK), st.co_heads = slice(co, i * OK, OK);
      coll_step_.push_back(step[i]);
      coll_.push_back(std::move(st));
    }
  }
  if (r.has_attr("started")) started_ = r.attr_string("started");
  // Provenance across resumes: "<revision>:<kernels>@<first step>" segments, one per build that wrote the log.
  if (r.has_attr("revisions")) revisions_ = r.attr_string("revisions");
  else if (r.has_attr("revision")) revisions_ = r.attr_string("revision") + ":" +
                                                (r.has_attr("kernels") ? r.attr_string("kernels") : "?") + "@1";
}

void RunLog::collisions(int64_t step, const StepCollisionStats& s, const std::vector<int64_t>& orders, bool owners) {
  PG_CHECK(static_cast<int64_t>(orders.size()) == s.n_orders, "collision statistics of ", s.n_orders,
           " orders for ", orders.size(), " orders");
  if (!coll_.empty())
    PG_CHECK(orders == coll_orders_ && s.heads_per_order == coll_.front().heads_per_order,
             "collision statistics with another geometry than the log's earlier rows");
  coll_orders_ = orders;
  coll_owners_ = owners;
  coll_step_.push_back(step);
  coll_.push_back(s);
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
    if (!coll_.empty()) {
      const uint64_t R = coll_.size(), no = coll_orders_.size(), K = static_cast<uint64_t>(coll_.front().heads_per_order);
      h5::Group c = r.create("collisions");
      c.set_attr("owners", int64_t{coll_owners_ ? 1 : 0});
      c.set_attr("heads_per_order", static_cast<int64_t>(K));
      c.write("step", coll_step_);
      c.write("orders", coll_orders_);
      auto put = [&](const char* name, auto field, bool per_head) {
        const uint64_t per_row = per_head ? no * K : no;
        using T = typename std::remove_reference_t<decltype(coll_.front().*field)>::value_type;
        std::vector<T> v;
        v.reserve(R * per_row);
        for (const StepCollisionStats& st : coll_) v.insert(v.end(), (st.*field).begin(), (st.*field).end());
        PG_CHECK(v.size() == R * per_row, "collision statistics: ", name, " has ", v.size(), " values");
        if (per_head) c.write(name, std::span<const T>(v), {R, no, K});
        else c.write(name, std::span<const T>(v), {R, no});
      };
      put("lookups", &StepCollisionStats::lookups, false);
      put("distinct", &StepCollisionStats::distinct, false);
      put("page_mates", &StepCollisionStats::page_mates, false);
      put("touched_rows", &StepCollisionStats::touched_rows, true);
      put("lookups_per_row", &StepCollisionStats::lookups_per_row, true);
      put("foreign_step", &StepCollisionStats::foreign_step, true);
      put("foreign_owner", &StepCollisionStats::foreign_owner, true);
      put("shared_pairs", &StepCollisionStats::shared_pairs, true);
      put("co_heads", &StepCollisionStats::co_heads, true);
    }
    h5::Group sum = r.create("summary");
    for (const auto& [k, v] : summary_) sum.set_attr(k, v);
  });
}

}  // namespace pg
