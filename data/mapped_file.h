// MappedFile: a whole file mapped read-only (RAII), and small POSIX file helpers used by the data stages
// (atomic directory publication, writing a file in one go).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/text.h"  // read_file

namespace pg::data {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps `path` read-only; `populate` pre-faults every page (one bulk fault instead of one per page).
  // Throws IoError naming the file when it cannot be opened or mapped. An empty file maps to size 0.
  explicit MappedFile(const std::string& path, bool populate = false);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Writes `bytes` to `path` (truncating); throws IoError naming the file.
void write_file(const std::string& path, std::string_view bytes);
// Creates `dir` and its parents; throws IoError naming it (std::filesystem errors never escape data/).
void make_dirs(const std::string& dir);
// Removes `path` recursively; throws IoError naming it.
void remove_tree(const std::string& path);
// Whether `path` exists (false on any error).
bool path_exists(const std::string& path);
// A fresh sibling path for staging output: "<path>.tmp-<pid>-<counter>".
std::string staging_path(const std::string& path);
// Publishes the staged directory `tmp` as `final_dir` by rename(2). Returns false (and removes `tmp`) when
// `final_dir` appeared meanwhile (another process won the race; its content is equivalent).
bool publish_dir(const std::string& tmp, const std::string& final_dir);

}  // namespace pg::data
