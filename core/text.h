// Small text and file helpers shared by every folder: whole-file read, atomic text write, the tail of a log file,
// JSON string escaping, and the two human formats of durations and counts used in progress lines and tables.
#pragma once
#include <string>
#include <vector>

namespace pg {

// Reads a whole (small) file into a string; throws IoError naming the file.
std::string read_file(const std::string& path);
// A user's input file read whole, refused (UserError naming `what` and the path) past max_bytes: never an unbounded
// read of a device, a pipe or a huge file.
std::string read_file_bounded(const std::string& path, size_t max_bytes, const std::string& what);
// Writes `text` to a temp file next to `path` (parent directories created), then renames it over `path`: a
// crash never leaves a half-written file; written with checked POSIX writes and fsynced. On failure the temporary is
// removed, the previous file kept, and ResourceError names the file and errno.
void write_text_atomic(const std::string& path, const std::string& text);
// Removes the temporaries that dead processes left directly in `dir` (files or folders, recursively), by name:
// "<name>.tmp.<pid>" (write_text_atomic, h5::write_atomic) and "<name>.tmp-<pid>-<n>" (data::staging_path). A
// temporary is stale when kill(pid, 0) fails with ESRCH; a live process's (or one we may not signal, EPERM) stays.
// Returns the paths removed; never throws (a missing `dir` or a failed removal is skipped).
std::vector<std::string> remove_stale_temporaries(const std::string& dir);
// The last `lines` lines of a text file (reads at most its last 8 KiB), each prefixed "    | "; a terminal
// progress line's '\r' segments are reduced to the last. "(no output file <path>)" when it cannot be opened.
std::string tail_lines(const std::string& path, int lines);
// `s` as a JSON string literal, quotes included.
std::string json_escape(const std::string& s);
// `s` as one POSIX shell word, for commands shown in hints: unchanged when it holds only [A-Za-z0-9_./=:,@+%-] (and is
// not empty), else in single quotes (a ' written as '\'').
std::string shell_quote(const std::string& s);
// `v` with `digits` digits after the point ("%.<digits>f"), for progress lines and notes.
std::string fmt_fixed(double v, int digits);
// "1h05m" / "3m07s" (rounded to the nearest second); "?" for a negative or non-finite value.
std::string fmt_duration(double seconds);
// "3.2B", "200M", "12.5K", "512" (4 significant digits) — for table headings, file names and progress lines.
std::string format_count(double count);
// Parses "3.2e9", "10e9", "200M", "20B" (params) as a positive count; UserError naming `what` otherwise.
double parse_count(const std::string& text, const std::string& what);
// Parses "0", "256MiB", "1GiB", "4096", "512KiB", "1.5GiB" (bytes; decimal suffixes KB/MB/GB = 1000^k);
// UserError naming `what` otherwise.
int64_t parse_bytes(const std::string& text, const std::string& what);
// "1 GiB", "256 MiB", "0" — the inverse of parse_bytes for table headings.
std::string format_bytes(int64_t bytes);

}  // namespace pg
