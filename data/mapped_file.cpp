// POSIX implementation of data/mapped_file.h (mmap, atomic rename).
#include "data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace pg::data {

MappedFile::MappedFile(const std::string& path, bool populate) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw IoError(str("cannot open ", path, ": ", std::strerror(errno), " (hint: check the path and permissions)"));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw IoError(str("cannot stat ", path, ": ", std::strerror(e)));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    int flags = MAP_PRIVATE | (populate ? MAP_POPULATE : 0);
    void* p = ::mmap(nullptr, size_, PROT_READ, flags, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw IoError(str("cannot map ", path, " (", size_, " bytes): ", std::strerror(e)));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

MappedFile::MappedFile(MappedFile&& o) noexcept : path_(std::move(o.path_)), data_(o.data_), size_(o.size_) {
  o.data_ = nullptr;
  o.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError(str("cannot create ", path, ": ", std::strerror(errno), " (hint: check disk space)"));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw IoError(str("cannot write ", path, " (hint: check disk space)"));
}

void make_dirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError(str("cannot create directory ", dir, ": ", ec.message(), " (hint: check data.cache_dir)"));
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) throw IoError(str("cannot remove ", path, ": ", ec.message(), " (hint: remove it by hand)"));
}

bool path_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

std::string staging_path(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return str(path, ".tmp-", ::getpid(), "-", counter.fetch_add(1));
}

bool publish_dir(const std::string& tmp, const std::string& final_dir) {
  if (::rename(tmp.c_str(), final_dir.c_str()) == 0) return true;
  int e = errno;
  if (e == EEXIST || e == ENOTEMPTY) {
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
    return false;
  }
  throw IoError(str("cannot rename ", tmp, " to ", final_dir, ": ", std::strerror(e)));
}

}  // namespace pg::data
