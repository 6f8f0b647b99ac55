// Implementation of core/text.h.
#include "core/text.h"

#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
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

std::string json_escape(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
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

}  // namespace pg
