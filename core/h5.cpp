// Implementation of core/h5.h.
#include "core/h5.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

namespace pg::h5 {
namespace {
struct Silence {
  Silence() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }
};
const Silence kSilence;

herr_t close_file(hid_t id) { return H5Fclose(id); }
herr_t close_group(hid_t id) { return H5Gclose(id); }
herr_t close_dataset(hid_t id) { return H5Dclose(id); }
herr_t close_space(hid_t id) { return H5Sclose(id); }
herr_t close_attr(hid_t id) { return H5Aclose(id); }
herr_t close_type(hid_t id) { return H5Tclose(id); }
herr_t close_plist(hid_t id) { return H5Pclose(id); }
}  // namespace

template <>
hid_t native_type<float>() {
  return H5T_NATIVE_FLOAT;
}
template <>
hid_t native_type<double>() {
  return H5T_NATIVE_DOUBLE;
}
template <>
hid_t native_type<int64_t>() {
  return H5T_NATIVE_INT64;
}
template <>
hid_t native_type<uint64_t>() {
  return H5T_NATIVE_UINT64;
}
template <>
hid_t native_type<int32_t>() {
  return H5T_NATIVE_INT32;
}
template <>
hid_t native_type<uint32_t>() {
  return H5T_NATIVE_UINT32;
}
template <>
hid_t native_type<uint16_t>() {
  return H5T_NATIVE_UINT16;
}
template <>
hid_t native_type<uint8_t>() {
  return H5T_NATIVE_UINT8;
}
template <>
hid_t native_type<int8_t>() {
  return H5T_NATIVE_INT8;
}

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    if (id_ >= 0 && closer_) closer_(id_);
    id_ = o.id_;
    closer_ = o.closer_;
    o.id_ = -1;
  }
  return *this;
}
Handle::~Handle() {
  if (id_ >= 0 && closer_) closer_(id_);
}

File File::create(const std::string& path, int64_t expected_bytes) {
  // The file is built in memory (HDF5 core driver, no backing store) and written out by close_checked with
  // checked POSIX writes: HDF5 itself never meets a failing disk (a failed HDF5 flush leaves the library in a
  // state that crashes its exit handler). A large file goes to disk as it is written (HDF5's sec2 driver), after
  // the room for it was checked, so that a full disk is met before, not during, the write.
  const bool streamed = expected_bytes >= kStreamedBytes;
  if (streamed) {
    std::filesystem::path dir = std::filesystem::path(path).parent_path();
    if (dir.empty()) dir = ".";
    std::error_code ec;
    const std::filesystem::space_info sp = std::filesystem::space(dir, ec);
    const uint64_t need = static_cast<uint64_t>(expected_bytes) + (uint64_t{64} << 20);
    if (!ec && sp.available < need)
      throw ResourceError(str("cannot write ", path, ": it needs about ", need >> 20, " MiB, ", dir.string(), " has ",
                              sp.available >> 20, " MiB free (hint: free disk space or write elsewhere)"));
    rlimit fs{};
    if (::getrlimit(RLIMIT_FSIZE, &fs) == 0 && fs.rlim_cur != RLIM_INFINITY && fs.rlim_cur < need)
      throw ResourceError(str("cannot write ", path, ": it needs about ", need >> 20,
                              " MiB, beyond this process's file size limit of ", fs.rlim_cur >> 20,
                              " MiB (hint: ulimit -f)"));
  }
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), close_plist);
  if (!streamed) H5Pset_fapl_core(fapl.id(), 16 << 20, 0);
  hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id());
  if (id < 0)
    throw IoError(str("cannot create HDF5 file ", path, " (hint: does the folder exist and is it writable?)"));
  File f;
  f.h_ = Handle(id, close_file);
  f.path_ = path;
  f.streamed_ = streamed;
  return f;
}
File File::open(const std::string& path) {
  if (!std::filesystem::exists(path)) throw IoError(str("file not found: ", path));
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw IoError(str(path, ": not an HDF5 file or truncated (hint: the file is corrupt or of another kind)"));
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw IoError(str(path, ": cannot open as HDF5 (corrupt or truncated?)"));
  File f;
  f.h_ = Handle(id, close_file);
  f.path_ = path;
  return f;
}
Group File::root() const {
  hid_t g = H5Gopen2(h_.id(), "/", H5P_DEFAULT);
  if (g < 0) throw IoError(str(path_, ": cannot open the root group"));
  return Group(Handle(g, close_group), path_, "/");
}
void File::flush() const { H5Fflush(h_.id(), H5F_SCOPE_GLOBAL); }

void File::close_checked() {
  const hid_t id = h_.release();
  if (streamed_) {
    errno = 0;
    const bool flushed = H5Fflush(id, H5F_SCOPE_GLOBAL) >= 0;
    const bool closed = H5Fclose(id) >= 0;
    if (!flushed || !closed)
      throw ResourceError(str("cannot write ", path_, ": ", errno ? std::strerror(errno) : "HDF5 error",
                              " (hint: free disk space, check quotas and file size limits)"));
    return;
  }
  std::vector<char> image;
  bool ok = H5Fflush(id, H5F_SCOPE_GLOBAL) >= 0;
  if (ok) {
    const ssize_t n = H5Fget_file_image(id, nullptr, 0);
    ok = n > 0;
    if (ok) {
      image.resize(static_cast<size_t>(n));
      ok = H5Fget_file_image(id, image.data(), image.size()) == n;
    }
  }
  H5Fclose(id);
  if (!ok) throw ResourceError(str("cannot write ", path_, ": HDF5 could not build the file image (out of memory?)"));
  write_new_file(path_, image.data(), image.size());
}

Group Group::sub(const std::string& name) const {
  if (!has(name))
    throw IoError(str(where(name), ": group missing (hint: the file is not of the expected kind or version)"));
  hid_t g = H5Gopen2(h_.id(), name.c_str(), H5P_DEFAULT);
  if (g < 0) throw IoError(str(where(name), ": cannot open group"));
  return Group(Handle(g, close_group), file_, path_ == "/" ? "/" + name : path_ + "/" + name);
}
Group Group::create(const std::string& name) const {
  hid_t g = H5Gcreate2(h_.id(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0) throw IoError(str(where(name), ": cannot create group"));
  return Group(Handle(g, close_group), file_, path_ == "/" ? "/" + name : path_ + "/" + name);
}
Group Group::reopen() const {
  hid_t g = H5Gopen2(h_.id(), ".", H5P_DEFAULT);
  if (g < 0) throw IoError(str(file_, ":", path_, ": cannot open the group again"));
  return Group(Handle(g, close_group), file_, path_);
}
bool Group::has(const std::string& name) const { return H5Lexists(h_.id(), name.c_str(), H5P_DEFAULT) > 0; }

std::vector<std::string> Group::children() const {
  std::vector<std::string> out;
  H5Literate(
      h_.id(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->push_back(name);
        return 0;
      },
      &out);
  return out;
}

Handle Group::create_raw(const std::string& name, hid_t type, const std::vector<uint64_t>& shape) const {
  uint64_t total = 1;
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  for (uint64_t d : shape) total *= d;
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), close_space);
  Handle plist(H5Pcreate(H5P_DATASET_CREATE), close_plist);
  if (total >= 1 && !dims.empty()) {
    // Chunked + checksummed (Fletcher32) so corruption of any dataset, small ones included, is detected on read.
    std::vector<hsize_t> chunk(dims);
    uint64_t csize = total;
    for (size_t i = 0; i < chunk.size() && csize > (1u << 20); ++i) {
      while (chunk[i] > 1 && csize > (1u << 20)) {
        csize /= chunk[i];
        chunk[i] = (chunk[i] + 1) / 2;
        csize *= chunk[i];
      }
    }
    H5Pset_chunk(plist.id(), static_cast<int>(chunk.size()), chunk.data());
    H5Pset_fletcher32(plist.id());
  }
  Handle ds(H5Dcreate2(h_.id(), name.c_str(), type, space.id(), H5P_DEFAULT, plist.id(), H5P_DEFAULT), close_dataset);
  if (ds.id() < 0) throw ResourceError(str(where(name), ": cannot create dataset (", std::strerror(errno), ")"));
  return ds;
}

void Group::write_raw(const std::string& name, hid_t type, const void* data, size_t n,
                      const std::vector<uint64_t>& shape) const {
  uint64_t total = 1;
  for (uint64_t d : shape) total *= d;
  PG_CHECK(total == n, "dataset ", name, ": shape holds ", total, " values, buffer ", n);
  Handle ds = create_raw(name, type, shape);
  errno = 0;
  if (n > 0 && H5Dwrite(ds.id(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    throw ResourceError(str(where(name), ": write failed: ", errno ? std::strerror(errno) : "HDF5 error",
                            " (hint: free disk space, check quotas and file size limits; the previous file is kept)"));
}

void Group::slab_raw(const std::string& name, hid_t type, uint64_t row0, void* data, size_t n, bool write) const {
  const std::vector<uint64_t> shape = dataset_shape(name);
  Handle ds(H5Dopen2(h_.id(), name.c_str(), H5P_DEFAULT), close_dataset);
  if (ds.id() < 0) throw IoError(str(where(name), ": cannot open dataset"));
  if (!write) check_type(name, ds.id(), type);
  PG_CHECK(!shape.empty(), "dataset ", name, ": a slab of a scalar");
  uint64_t row = 1;
  for (size_t i = 1; i < shape.size(); ++i) row *= shape[i];
  const uint64_t rows = row > 0 ? n / row : 0;
  PG_CHECK(rows * row == n && row0 + rows <= shape[0], "dataset ", name, ": slab of ", n, " values at row ", row0,
           " does not fit shape [", shape[0], ", ", row, "]");
  if (n == 0) return;
  std::vector<hsize_t> start(shape.size(), 0), count(shape.begin(), shape.end());
  start[0] = row0, count[0] = rows;
  Handle file_space(H5Dget_space(ds.id()), close_space);
  PG_CHECK(H5Sselect_hyperslab(file_space.id(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) >= 0,
           "dataset ", name, ": cannot select rows ", row0, " .. ", row0 + rows);
  Handle mem_space(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), close_space);
  errno = 0;
  if (write) {
    if (H5Dwrite(ds.id(), type, mem_space.id(), file_space.id(), H5P_DEFAULT, data) < 0)
      throw ResourceError(
          str(where(name), ": write failed: ", errno ? std::strerror(errno) : "HDF5 error",
              " (hint: free disk space, check quotas and file size limits; the previous file is kept)"));
  } else if (H5Dread(ds.id(), type, mem_space.id(), file_space.id(), H5P_DEFAULT, data) < 0) {
    throw IoError(str(where(name), ": read failed (corrupt data: checksum or type mismatch)"));
  }
}

void Group::virtual_raw(const std::string& name, hid_t type, const std::vector<uint64_t>& shape,
                        const std::vector<VirtualSource>& sources, const void* fill) const {
  PG_CHECK(!shape.empty(), "virtual dataset ", name, ": a scalar");
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), close_space);
  Handle plist(H5Pcreate(H5P_DATASET_CREATE), close_plist);
  PG_CHECK(H5Pset_fill_value(plist.id(), type, fill) >= 0, "virtual dataset ", name, ": fill value");
  for (const VirtualSource& s : sources) {
    PG_CHECK(s.row0 + s.rows <= shape[0], "virtual dataset ", name, ": source ", s.file, " rows ", s.row0, " + ",
             s.rows, " beyond ", shape[0]);
    if (s.rows == 0) continue;
    std::vector<hsize_t> start(dims.size(), 0), count(dims);
    start[0] = s.row0, count[0] = s.rows;
    Handle src(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), close_space);
    PG_CHECK(H5Sselect_hyperslab(space.id(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) >= 0 &&
                 H5Pset_virtual(plist.id(), space.id(), s.file.c_str(), s.dataset.c_str(), src.id()) >= 0,
             "virtual dataset ", name, ": cannot map ", s.file, ":", s.dataset);
  }
  H5Sselect_all(space.id());
  Handle ds(H5Dcreate2(h_.id(), name.c_str(), type, space.id(), H5P_DEFAULT, plist.id(), H5P_DEFAULT), close_dataset);
  if (ds.id() < 0)
    throw ResourceError(str(where(name), ": cannot create virtual dataset (", std::strerror(errno), ")"));
}

bool Group::is_virtual(const std::string& name) const {
  Handle ds(H5Dopen2(h_.id(), name.c_str(), H5P_DEFAULT), close_dataset);
  if (ds.id() < 0) throw IoError(str(where(name), ": cannot open dataset"));
  Handle plist(H5Dget_create_plist(ds.id()), close_plist);
  return H5Pget_layout(plist.id()) == H5D_VIRTUAL;
}

std::vector<uint64_t> Group::dataset_shape(const std::string& name) const {
  if (!has(name)) throw IoError(str(where(name), ": dataset missing"));
  Handle ds(H5Dopen2(h_.id(), name.c_str(), H5P_DEFAULT), close_dataset);
  if (ds.id() < 0) throw IoError(str(where(name), ": cannot open dataset"));
  Handle space(H5Dget_space(ds.id()), close_space);
  int rank = H5Sget_simple_extent_ndims(space.id());
  std::vector<hsize_t> dims(rank > 0 ? rank : 0);
  if (rank > 0) H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr);
  return std::vector<uint64_t>(dims.begin(), dims.end());
}

void Group::check_shape(const std::string& name, const std::vector<uint64_t>& shape) const {
  auto s = dataset_shape(name);
  if (s != shape) {
    auto fmt = [](const std::vector<uint64_t>& v) {
      std::string r = "[";
      for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
      return r + "]";
    };
    throw IoError(str(where(name), ": shape ", fmt(s), " but expected ", fmt(shape),
                      " (hint: the file was written for another config)"));
  }
}

void Group::check_type(const std::string& name, hid_t ds, hid_t type) const {
  // The stored element type must be the one asked for (never a silent int -> float conversion).
  Handle ftype(H5Dget_type(ds), close_type);
  const H5T_class_t want = H5Tget_class(type), got = H5Tget_class(ftype.id());
  const bool same_sign = want != H5T_INTEGER || H5Tget_sign(type) == H5Tget_sign(ftype.id());
  if (got != want || H5Tget_size(ftype.id()) != H5Tget_size(type) || !same_sign)
    throw IoError(str(where(name), ": stored as ",
                      got == H5T_FLOAT     ? "float"
                      : got == H5T_INTEGER ? "integer"
                                           : "other",
                      H5Tget_size(ftype.id()) * 8, " but read as ", want == H5T_FLOAT ? "float" : "integer",
                      H5Tget_size(type) * 8, " (hint: the file was not written by this program, or was edited)"));
}

void Group::read_raw(const std::string& name, hid_t type, void* data, size_t n) const {
  Handle ds(H5Dopen2(h_.id(), name.c_str(), H5P_DEFAULT), close_dataset);
  if (ds.id() < 0) throw IoError(str(where(name), ": cannot open dataset"));
  check_type(name, ds.id(), type);
  if (n > 0 && H5Dread(ds.id(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    throw IoError(str(where(name), ": read failed (corrupt data: checksum or type mismatch)"));
}

void Group::set_attr(const std::string& name, const std::string& value) const {
  if (has_attr(name)) H5Adelete(h_.id(), name.c_str());
  // Variable-length UTF-8: h5py reads it as str.
  Handle type(H5Tcopy(H5T_C_S1), close_type);
  H5Tset_size(type.id(), H5T_VARIABLE);
  H5Tset_cset(type.id(), H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR), close_space);
  Handle a(H5Acreate2(h_.id(), name.c_str(), type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT), close_attr);
  const char* p = value.c_str();
  if (a.id() < 0 || H5Awrite(a.id(), type.id(), &p) < 0) throw IoError(str(where(name), ": cannot write attribute"));
}
void Group::set_attr(const std::string& name, int64_t value) const {
  if (has_attr(name)) H5Adelete(h_.id(), name.c_str());
  Handle space(H5Screate(H5S_SCALAR), close_space);
  Handle a(H5Acreate2(h_.id(), name.c_str(), H5T_NATIVE_INT64, space.id(), H5P_DEFAULT, H5P_DEFAULT), close_attr);
  if (a.id() < 0 || H5Awrite(a.id(), H5T_NATIVE_INT64, &value) < 0)
    throw IoError(str(where(name), ": cannot write attribute"));
}
void Group::set_attr(const std::string& name, double value) const {
  if (has_attr(name)) H5Adelete(h_.id(), name.c_str());
  Handle space(H5Screate(H5S_SCALAR), close_space);
  Handle a(H5Acreate2(h_.id(), name.c_str(), H5T_NATIVE_DOUBLE, space.id(), H5P_DEFAULT, H5P_DEFAULT), close_attr);
  if (a.id() < 0 || H5Awrite(a.id(), H5T_NATIVE_DOUBLE, &value) < 0)
    throw IoError(str(where(name), ": cannot write attribute"));
}
bool Group::has_attr(const std::string& name) const { return H5Aexists(h_.id(), name.c_str()) > 0; }

std::string Group::attr_string(const std::string& name) const {
  if (!has_attr(name)) throw IoError(str(where(name), ": attribute missing"));
  Handle a(H5Aopen(h_.id(), name.c_str(), H5P_DEFAULT), close_attr);
  Handle ftype(H5Aget_type(a.id()), close_type);
  if (H5Tget_class(ftype.id()) != H5T_STRING) throw IoError(str(where(name), ": attribute is not a string"));
  if (H5Tis_variable_str(ftype.id()) > 0) {
    Handle mtype(H5Tcopy(H5T_C_S1), close_type);
    H5Tset_size(mtype.id(), H5T_VARIABLE);
    H5Tset_cset(mtype.id(), H5Tget_cset(ftype.id()));
    char* p = nullptr;
    if (H5Aread(a.id(), mtype.id(), &p) < 0) throw IoError(str(where(name), ": cannot read attribute"));
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  size_t n = H5Tget_size(ftype.id());
  std::string s(n, '\0');
  Handle mtype(H5Tcopy(H5T_C_S1), close_type);
  H5Tset_size(mtype.id(), n);
  H5Tset_cset(mtype.id(), H5Tget_cset(ftype.id()));
  if (H5Aread(a.id(), mtype.id(), s.data()) < 0) throw IoError(str(where(name), ": cannot read attribute"));
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}
int64_t Group::attr_int(const std::string& name) const {
  if (!has_attr(name)) throw IoError(str(where(name), ": attribute missing"));
  Handle a(H5Aopen(h_.id(), name.c_str(), H5P_DEFAULT), close_attr);
  int64_t v = 0;
  if (H5Aread(a.id(), H5T_NATIVE_INT64, &v) < 0) throw IoError(str(where(name), ": cannot read attribute"));
  return v;
}
double Group::attr_double(const std::string& name) const {
  if (!has_attr(name)) throw IoError(str(where(name), ": attribute missing"));
  Handle a(H5Aopen(h_.id(), name.c_str(), H5P_DEFAULT), close_attr);
  double v = 0;
  if (H5Aread(a.id(), H5T_NATIVE_DOUBLE, &v) < 0) throw IoError(str(where(name), ": cannot read attribute"));
  return v;
}

void write_new_file(const std::string& path, const void* data, size_t n) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw ResourceError(str("cannot create ", path, ": ", std::strerror(errno), " (hint: check permissions)"));
  const char* c = static_cast<const char*>(data);
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd, c + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = w < 0 ? errno : ENOSPC;
      ::close(fd);
      throw ResourceError(
          str("cannot write ", path, " (", done, " of ", n, " bytes written): ", std::strerror(e),
              " (hint: free disk space, check quotas and file size limits; the previous file is kept)"));
    }
    done += static_cast<size_t>(w);
  }
  if (::close(fd) != 0) throw ResourceError(str("cannot write ", path, ": close: ", std::strerror(errno)));
}

std::string temp_name(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

void remove_quietly(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

void commit_atomic(const std::string& tmp, const std::string& path) {
  auto fail = [&](const std::string& what, int err) {
    remove_quietly(tmp);
    throw ResourceError(str("cannot write ", path, ": ", what, ": ", std::strerror(err),
                            " (hint: free disk space; the previous file is kept)"));
  };
  const int fd = ::open(tmp.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot reopen " + tmp, errno);
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    fail("fsync of " + tmp, e);
  }
  ::close(fd);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail("rename of " + tmp, ec.value());
  const std::filesystem::path dir = std::filesystem::path(path).has_parent_path()
                                        ? std::filesystem::path(path).parent_path()
                                        : std::filesystem::path(".");
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {  // make the rename itself durable
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace pg::h5
