// Implementation of core/progress.h.
#include "core/progress.h"

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <utility>

#include "core/timer.h"

namespace pg {

namespace {
std::mutex& sink_mutex() {
  static std::mutex m;
  return m;
}
NoteSink& sink() {
  static NoteSink s;
  return s;
}
__attribute__((format(printf, 1, 2))) std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof(buf), f, ap);
  va_end(ap);
  return buf;
}
}  // namespace

NoteSink set_note_sink(NoteSink s) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  std::swap(sink(), s);
  return s;
}

void emit_note(const std::string& line) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  if (sink()) sink()(line);
}

Note::~Note() {
  std::string line = os_.str();
  if (!line.empty() && line.back() == '\n') line.pop_back();
  try {
    emit_note(line);
  } catch (...) {  // a sink that throws must not end the program from a destructor
  }
}

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
  emit_note(fmt("  %s %lld/%lld (%.1f%%, %.3g/s, eta %.0f s)", what_.c_str(), static_cast<long long>(done),
                static_cast<long long>(total_),
                total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0, rate, eta));
}

void ProgressLine::finish() {
  if (!enabled_) return;
  emit_note(fmt("  %s done: %lld in %.1f s", what_.c_str(), static_cast<long long>(done_), now_s() - t0_));
}

}  // namespace pg
