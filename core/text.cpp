// Implementation of core/text.h.
#include "core/text.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/h5.h"

namespace pg {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(str("cannot open ", path, ": ", std::strerror(errno)));
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad()) throw IoError(str("cannot read ", path));
  return os.str();
}

std::string read_file_bounded(const std::string& path, size_t max_bytes, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(str(what, " ", path, ": cannot open: ", std::strerror(errno)));
  std::string s(max_bytes + 1, '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  if (in.bad()) throw IoError(str(what, " ", path, ": cannot read"));
  s.resize(static_cast<size_t>(in.gcount()));
  if (s.size() > max_bytes)
    throw UserError(str(what, " ", path, ": larger than ", max_bytes, " bytes (hint: give a smaller file)"));
  return s;
}

void write_text_atomic(const std::string& path, const std::string& text) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  const std::string tmp = h5::temp_name(path);
  try {
    h5::write_new_file(tmp, text.data(), text.size());
  } catch (...) {
    h5::remove_quietly(tmp);
    throw;
  }
  h5::commit_atomic(tmp, path);  // fsync, rename, fsync of the directory
}

namespace {
// The pid of a temporary's name ("<name>.tmp.<pid>" or "<name>.tmp-<pid>-<n>"), 0 when it is not one.
long temporary_pid(const std::string& name) {
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  };
  std::string pid;
  if (const size_t at = name.rfind(".tmp."); at != std::string::npos && at > 0) {
    pid = name.substr(at + 5);
  } else if (const size_t at2 = name.rfind(".tmp-"); at2 != std::string::npos && at2 > 0) {
    const std::string rest = name.substr(at2 + 5);
    const size_t dash = rest.find('-');
    if (dash == std::string::npos || !digits(rest.substr(dash + 1))) return 0;
    pid = rest.substr(0, dash);
  }
  if (!digits(pid) || pid.size() > 9) return 0;
  return std::strtol(pid.c_str(), nullptr, 10);
}
}  // namespace

std::vector<std::string> remove_stale_temporaries(const std::string& dir) {
  std::vector<std::filesystem::path> stale;  // collected first: no removal while the directory is read
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const long pid = temporary_pid(it->path().filename().string());
    if (pid <= 0 || pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    stale.push_back(it->path());
  }
  std::vector<std::string> removed;
  for (const auto& p : stale) {
    std::error_code rm;
    std::filesystem::remove_all(p, rm);
    if (!rm) removed.push_back(p.string());
  }
  return removed;
}

std::string tail_lines(const std::string& path, int lines) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "(no output file " + path + ")";
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 8192);
  f.seekg(from);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // A progress line on a terminal uses '\r'; keep the last segment of each line.
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) {
    if (auto r = l.rfind('\r'); r != std::string::npos) l = l.substr(r + 1);
    out.push_back(l);
  }
  if (from > 0 && !out.empty()) out.erase(out.begin());  // a partial first line
  std::string s;
  for (size_t i = out.size() > static_cast<size_t>(lines) ? out.size() - lines : 0; i < out.size(); ++i)
    s += "    | " + out[i] + "\n";
  return s;
}

std::string shell_quote(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_./=:,@+%-", c) != nullptr;
  });
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string json_escape(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        o += "\\\"";
        break;
      case '\\':
        o += "\\\\";
        break;
      case '\n':
        o += "\\n";
        break;
      case '\t':
        o += "\\t";
        break;
      case '\r':
        o += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          o += buf;
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
}

std::string fmt_fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string fmt_duration(double s) {
  if (s < 0 || !std::isfinite(s)) return "?";
  char buf[32];
  const int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof(buf), "%ldh%02ldm", long(t / 3600), long(t % 3600 / 60));
  else std::snprintf(buf, sizeof(buf), "%ldm%02lds", long(t / 60), long(t % 60));
  return buf;
}

std::string format_count(double c) {
  char buf[64];
  const char* suf = "";
  double v = c;
  if (c >= 1e12) v = c / 1e12, suf = "T";
  else if (c >= 1e9) v = c / 1e9, suf = "B";
  else if (c >= 1e6) v = c / 1e6, suf = "M";
  else if (c >= 1e3) v = c / 1e3, suf = "K";
  std::snprintf(buf, sizeof buf, "%.4g%s", v, suf);
  return buf;
}

// ---- Sizes (parse_count, parse_bytes, format_bytes).

namespace {
bool parse_number(const std::string& t, double& value, std::string& suffix) {
  size_t pos = 0;
  try {
    value = std::stod(t, &pos);
  } catch (...) {
    return false;
  }
  suffix = t.substr(pos);
  suffix.erase(0, suffix.find_first_not_of(' '));
  return std::isfinite(value);
}
}  // namespace

double parse_count(const std::string& text, const std::string& what) {
  double v = 0;
  std::string suf;
  if (!parse_number(text, v, suf))
    throw UserError(str(what, ": '", text, "' is not a number (hint: e.g. 3.2e9, 10B, 200M)"));
  double mult = 1;
  if (suf == "K" || suf == "k") mult = 1e3;
  else if (suf == "M") mult = 1e6;
  else if (suf == "B" || suf == "G") mult = 1e9;
  else if (suf == "T") mult = 1e12;
  else if (!suf.empty())
    throw UserError(str(what, ": unknown suffix '", suf, "' in '", text, "' (hint: K, M, B or T, or 3.2e9)"));
  v *= mult;
  if (!(v >= 1)) throw UserError(str(what, ": '", text, "' must be at least 1"));
  if (v > 1e15) throw UserError(str(what, ": '", text, "' is too large (hint: at most 1e15)"));
  return v;
}

int64_t parse_bytes(const std::string& text, const std::string& what) {
  double v = 0;
  std::string suf;
  if (!parse_number(text, v, suf))
    throw UserError(str(what, ": '", text, "' is not a size (hint: e.g. 0, 256MiB, 1GiB, 4096)"));
  double mult = 1;
  if (suf.empty() || suf == "B") mult = 1;
  else if (suf == "KiB" || suf == "K") mult = 1024.0;
  else if (suf == "MiB" || suf == "M") mult = 1024.0 * 1024;
  else if (suf == "GiB" || suf == "G") mult = 1024.0 * 1024 * 1024;
  else if (suf == "TiB" || suf == "T") mult = 1024.0 * 1024 * 1024 * 1024;
  else if (suf == "KB") mult = 1e3;
  else if (suf == "MB") mult = 1e6;
  else if (suf == "GB") mult = 1e9;
  else if (suf == "TB") mult = 1e12;
  else throw UserError(str(what, ": unknown unit '", suf, "' in '", text, "' (hint: KiB, MiB, GiB or plain bytes)"));
  v *= mult;
  if (v < 0 || v > 9.0e18) throw UserError(str(what, ": '", text, "' is out of range"));
  return static_cast<int64_t>(std::llround(v));
}

std::string format_bytes(int64_t b) {
  if (b == 0) return "0";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  if (v == std::floor(v)) std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

}  // namespace pg
