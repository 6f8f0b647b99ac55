// Implementation of core/progress.h.
#include "core/progress.h"

#include <cstdio>
#include <utility>

#include "core/timer.h"

namespace pg {

namespace {
double now_s() {
  static const Timer clock;
  return clock.seconds();
}
}  // namespace

ProgressLine::ProgressLine(std::string what, int64_t total, bool enabled, double interval_s)
    : what_(std::move(what)), total_(total), enabled_(enabled), interval_(interval_s) {
  t0_ = last_ = now_s();
}

void ProgressLine::update(int64_t done) {
  done_ = done;
  if (!enabled_) return;
  const double t = now_s();
  if (t - last_ < interval_) return;
  last_ = t;
  const double el = t - t0_, rate = el > 0 ? static_cast<double>(done) / el : 0.0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0;
  std::fprintf(stderr, "  %s %lld/%lld (%.1f%%, %.3g/s, eta %.0f s)\n", what_.c_str(), static_cast<long long>(done),
               static_cast<long long>(total_), total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0,
               rate, eta);
}

void ProgressLine::finish() {
  if (!enabled_) return;
  std::fprintf(stderr, "  %s done: %lld in %.1f s\n", what_.c_str(), static_cast<long long>(done_), now_s() - t0_);
}


}  // namespace pg
