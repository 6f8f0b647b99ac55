// Opening a built corpus directory and cutting its text files into documents (data/corpus_reader.h).
#include "data/corpus_reader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "data/hash.h"

namespace pg::data {
namespace fs = std::filesystem;

void split_documents(std::string_view b, uint32_t file, std::vector<CorpusDocument>& out) {
  const size_t n = b.size();
  size_t start = 0, pos = 0;
  while (pos < n) {
    const void* hit = std::memchr(b.data() + pos, 0x1E, n - pos);
    if (!hit) break;
    size_t p = static_cast<const char*>(hit) - b.data();
    pos = p + 1;
    const bool line_start = p == 0 || b[p - 1] == '\n';
    const bool line_end = p + 1 == n || b[p + 1] == '\n';
    if (!line_start || !line_end) continue;  // a 0x1E inside a line is text
    size_t end = p > start ? p - 1 : start;  // drop the '\n' before the separator
    if (end > start) out.push_back({file, start, end});
    start = std::min(n, p + 2);
    pos = start;
  }
  if (start < n) {
    size_t end = n;
    if (b[end - 1] == '\n') --end;
    if (end > start) out.push_back({file, start, end});
  }
}

std::string read_corpus_manifest(const std::string& dir, const std::string& hint) {
  const fs::path root(dir);
  if (!path_exists((root / "DONE").string()) || !path_exists((root / "manifest.json").string()))
    throw IoError(str("corpus not built: ", dir, " (no DONE or manifest.json; hint: ", hint, ")"));
  return read_file((root / "manifest.json").string());
}

uint64_t corpus_identity(const std::string& manifest) {
  static const std::string key = "\"content_hash\":";
  size_t p = manifest.find(key);
  if (p != std::string::npos) {
    p = manifest.find_first_not_of(" \t\r\n", p + key.size());
    if (p != std::string::npos && manifest[p] == '"') {
      const size_t end = manifest.find('"', p + 1);
      const std::string hex = end == std::string::npos ? "" : manifest.substr(p + 1, end - p - 1);
      if (!hex.empty() && hex.find_first_not_of("0123456789abcdef") == std::string::npos)
        return xxh64("pagegram-corpus-content-v1 " + hex);
    }
  }
  return xxh64(manifest);
}

Corpus Corpus::open(const std::string& dir, const std::string& hint) {
  Corpus c;
  c.dir_ = dir;
  const fs::path root(dir);
  c.manifest_ = read_corpus_manifest(dir, hint);
  c.manifest_hash_ = corpus_identity(c.manifest_);
  std::vector<fs::path> paths;
  std::error_code ec;
  for (fs::directory_iterator it(root / "text", ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code fe;
    if (it->is_regular_file(fe) && it->path().extension() == ".txt") paths.push_back(it->path());
  }
  if (ec || paths.empty())
    throw IoError(str("corpus has no text files: ", (root / "text").string(), " (hint: ", hint, ")"));
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    c.files_.emplace_back(p.string());
    c.names_.push_back(p.stem().string());
    split_documents(c.files_.back().view(), static_cast<uint32_t>(c.files_.size() - 1), c.docs_);
  }
  for (const auto& d : c.docs_) c.total_bytes_ += d.end - d.begin;
  if (c.docs_.empty()) throw IoError(str("corpus has no documents: ", (root / "text").string(), " (hint: ", hint, ")"));
  return c;
}

}  // namespace pg::data
