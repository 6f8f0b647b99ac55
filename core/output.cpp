#include "core/output.h"

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/h5.h"

namespace pg {

namespace fs = std::filesystem;

namespace {
std::string head_of(const std::string& path, size_t n) {
  std::ifstream f(path, std::ios::binary);
  std::string s(n, '\0');
  f.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<size_t>(f.gcount()));
  return s;
}
}  // namespace

std::string kind_phrase(const std::string& kind) {
  if (kind == "file") return "a file";
  if (kind == "hdf5") return "an HDF5 file without a pagegram format";
  return "a " + kind + " file";
}

std::string file_kind(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return "";
  if (fs::is_directory(st)) return "directory";
  if (!fs::is_regular_file(st)) return "special file";
  const std::string head = head_of(path, 4096);
  if (head.compare(0, 8, "\x89HDF\r\n\x1a\n") == 0) {
    try {
      const h5::File f = h5::File::open(path);
      const h5::Group r = f.root();
      return r.has_attr("format") ? r.attr_string("format") : "hdf5";
    } catch (const std::exception&) {
      return "hdf5";
    }
  }
  if (head.compare(0, 8, "PGNF4TBL") == 0) return "pagegram-table";
  if (head.compare(0, 8, "PGTOKENS") == 0) return "pagegram-token-store";
  if (head.rfind("#!/bin/bash\n# Sweep '", 0) == 0 && head.find("as a Slurm job array") != std::string::npos)
    return "pagegram-slurm-script";  // sweep/slurm.cpp's first two lines
  const size_t b = head.find_first_not_of(" \t\r\n");
  if (b != std::string::npos && head[b] == '{') {
    const size_t at = head.find("\"format\"");
    if (at != std::string::npos) {
      const size_t q1 = head.find('"', head.find(':', at) + 1);
      const size_t q2 = q1 == std::string::npos ? q1 : head.find('"', q1 + 1);
      if (q2 != std::string::npos) return head.substr(q1 + 1, q2 - q1 - 1);
    }
  }
  return "file";
}

void check_output_path(const std::string& path, const std::string& own, bool force, const std::string& option) {
  if (path.empty()) throw UserError(str(option, ": empty path (hint: give a file name)"));
  std::error_code ec;
  const fs::file_status lst = fs::symlink_status(path, ec);
  if (!ec && fs::is_symlink(lst) && !fs::exists(fs::status(path, ec)))
    throw UserError(
        str(option, " ", path, ": a symlink to a missing target (hint: remove the link or name another file)"));
  const std::string kind = file_kind(path);
  if (kind == "directory") throw UserError(str(option, " ", path, ": is a directory (hint: name a file inside it)"));
  if (kind == "special file")
    throw UserError(str(option, " ", path, ": not a regular file (hint: name a regular file)"));
  if (kind.empty()) {
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty() && !fs::is_directory(parent, ec))
      throw UserError(str(option, " ", path, ": folder ", parent.string(), " does not exist (hint: create it first)"));
    return;
  }
  if (kind == own || force) return;
  throw UserError(str(option, " ", path,
                      ": refusing to replace an existing file that this command did not write (it is ",
                      kind_phrase(kind), ") (hint: name another output, or pass --force to replace it)"));
}

}  // namespace pg
