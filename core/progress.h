// How the libraries report progress and notes (ARCHITECTURE.md: libraries never print; cli/ does). A library writes
//   Note() << "[data] tokenizer " << key << ": cache hit";
// and the finished line goes to the sink the program installed (cli/main.cpp: stderr); with no sink (tests, a
// program embedding the libraries that installs none) it is dropped. ProgressLine reports a long loop's progress
// (export, flashsim, iobench, table warm-up, evaluation) the same way.
#pragma once
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>

namespace pg {

// Receives each line (without its trailing newline). Called from any thread, one line at a time.
using NoteSink = std::function<void(const std::string& line)>;
// Installs the sink (an empty one drops every line); returns the previous one.
NoteSink set_note_sink(NoteSink sink);
// Sends one line to the sink.
void emit_note(const std::string& line);

// One line, built with <<, sent when the statement ends (a trailing newline is dropped).
class Note {
 public:
  Note() = default;
  Note(const Note&) = delete;
  Note& operator=(const Note&) = delete;
  ~Note();
  template <class T>
  Note& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  std::ostringstream os_;
};

// Progress of a long loop: reports "<what> <done>/<total> (<pct>%, <rate>/s, <eta>)" as a note
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
