// ProgressLine: progress of a long loop on stderr, for the tools that take minutes (export, flashsim, iobench,
// table warm-up, evaluation).
#pragma once
#include <cstdint>
#include <string>

namespace pg {

// A progress line printer for long loops: prints "<what> <done>/<total> (<pct>%, <rate>/s, <eta>)" to stderr
// at most every `interval_s` seconds, and once more on finish(). Silent when disabled.
class ProgressLine {
 public:
  ProgressLine(std::string what, int64_t total, bool enabled = true, double interval_s = 2.0);
  void update(int64_t done);
  void finish();

 private:
  std::string what_;
  int64_t total_, done_ = 0;
  bool enabled_;
  double interval_, t0_, last_;
};

}  // namespace pg
