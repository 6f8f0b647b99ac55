// RunLog: the HDF5 run log of one training run (schema in train/FORMATS.md). Rows are kept in memory
// and the whole file is rewritten atomically at every flush, so a killed run keeps everything up to its
// last flush and never leaves a half-written log.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "memory/step_collisions.h"

namespace pg {

struct RunMeta {
  std::string config_yaml;  // the resolved config
  std::string command;  // the command line
  int64_t threads = 1;
  bool pinned = false;
  std::string cpus;
  int64_t ranks = 1;  // data-parallel ranks (threads, pinned and cpus are rank 0's)
  bool bf16 = false;  // train.precision bf16: the "kernels" attribute names the bf16 kernel too
  std::string data{};  // the dataset's fingerprint (data::dataset_fingerprint): which corpus build trained the run
};

class RunLog {
 public:
  // Creates a new log, or with resume_step >= 0 loads an existing one and drops rows after resume_step.
  RunLog(std::string path, RunMeta meta, int64_t resume_step = -1);

  void train_row(int64_t step, int64_t tokens, double loss, double lr, double grad_norm, double tok_per_s,
                 double elapsed_s);
  void eval_row(int64_t step, int64_t tokens, double loss);
  // A named scalar series (e.g. "gate/0", "memory/touched_rows").
  void scalar(const std::string& name, int64_t step, double value);
  // One step's collision statistics (the /collisions group; every row must have the same orders and heads).
  // orders: the n-gram order of each order index; owners: whether Foreign reading (b) is tracked.
  void collisions(int64_t step, const StepCollisionStats& s, const std::vector<int64_t>& orders, bool owners);
  int64_t collision_rows() const { return static_cast<int64_t>(coll_step_.size()); }
  void set_status(const std::string& status) { status_ = status; }
  void set_summary(const std::string& key, double value) { summary_[key] = value; }
  void flush();  // atomic rewrite of the whole file

  const std::vector<double>& eval_loss() const { return eval_.loss; }
  // Steps of the training rows held (after a resume: those up to the checkpoint's step).
  const std::vector<int64_t>& train_steps() const { return train_.step; }
  const std::vector<double>& train_losses() const { return train_.loss; }

 private:
  // Each group's per-step columns, listed once: columns(self, f) calls f(dataset name, column) in file order, and
  // drives read, truncate and write (a column added to a struct and its list is logged and resumed).
  struct Train {
    std::vector<int64_t> step, tokens;
    std::vector<double> loss, lr, grad_norm, tok_per_s, elapsed_s;
    template <class Self, class F>
    static void columns(Self& s, F&& f) {
      f("step", s.step), f("tokens", s.tokens), f("loss", s.loss), f("lr", s.lr), f("grad_norm", s.grad_norm);
      f("tok_per_s", s.tok_per_s), f("elapsed_s", s.elapsed_s);
    }
  } train_;
  struct Eval {
    std::vector<int64_t> step, tokens;
    std::vector<double> loss;
    template <class Self, class F>
    static void columns(Self& s, F&& f) {
      f("step", s.step), f("tokens", s.tokens), f("loss", s.loss);
    }
  } eval_;
  struct Series {
    std::vector<int64_t> step;
    std::vector<double> value;
    template <class Self, class F>
    static void columns(Self& s, F&& f) {
      f("step", s.step), f("value", s.value);
    }
  };
  std::map<std::string, Series> scalars_;
  std::map<std::string, double> summary_;
  std::vector<int64_t> coll_step_, coll_orders_;
  std::vector<StepCollisionStats> coll_;
  bool coll_owners_ = false;
  // "<revision>:<kernels>@<first step>" per build that wrote this log, space-separated (attribute `revisions`).
  std::string revisions() const;
  std::string path_, status_ = "running", started_, revisions_;
  int64_t resume_step_ = 0;
  RunMeta meta_;
};

// Host name, ISO-8601 UTC time: recorded in logs.
std::string host_name();
std::string iso_time_now();

}  // namespace pg
