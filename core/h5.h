// A small RAII layer over the HDF5 C API: files, groups, whole datasets and string/number attributes.
// Errors become pg::IoError naming the file and the object; HDF5's own error printing is silenced.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace pg::h5 {

template <class T>
hid_t native_type();

// Owns one hid_t and closes it with the matching H5*close.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*closer)(hid_t)) : id_(id), closer_(closer) {}
  Handle(Handle&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle();
  hid_t id() const { return id_; }
  // Gives up ownership (the caller closes the id).
  hid_t release() {
    const hid_t id = id_;
    id_ = -1;
    return id;
  }

 private:
  hid_t id_ = -1;
  herr_t (*closer_)(hid_t) = nullptr;
};

class Group {
 public:
  Group(Handle h, std::string file, std::string path)
      : h_(std::move(h)), file_(std::move(file)), path_(std::move(path)) {}
  Group sub(const std::string& name) const;  // open an existing group (IoError if missing)
  Group create(const std::string& name) const;  // create a new group
  Group reopen() const;  // another handle on this group (a Group is not copyable)
  bool has(const std::string& name) const;
  std::vector<std::string> children() const;

  template <class T>
  void write(const std::string& name, std::span<const T> data, const std::vector<uint64_t>& shape) const {
    write_raw(name, native_type<T>(), data.data(), data.size(), shape);
  }
  template <class T>
  void write(const std::string& name, const std::vector<T>& data) const {
    write_raw(name, native_type<T>(), data.data(), data.size(), {static_cast<uint64_t>(data.size())});
  }
  // One field of every row as a dataset (struct-of-arrays output): write_column("loss", runs, &Run::loss).
  template <class Row, class Field>
  void write_column(const std::string& name, const std::vector<Row>& rows, Field Row::*field) const {
    std::vector<Field> col;
    col.reserve(rows.size());
    for (const Row& r : rows) col.push_back(r.*field);
    write(name, col);
  }
  // A table of rows, described once by the row type (struct-of-arrays output): Row::columns(v) calls
  // v("name", &Row::member) for every column, number members becoming one dataset each (integers as int64,
  // floating point as double), string members one comma-separated attribute, and v("name", &Row::method) for a
  // derived number (a const method). The same list serves readers and tests (columns(v) with another visitor).
  template <class Row>
  void write_rows(const std::vector<Row>& rows) const;
  // Reads a whole dataset; its shape goes to *shape when given.
  template <class T>
  std::vector<T> read(const std::string& name, std::vector<uint64_t>* shape = nullptr) const {
    std::vector<uint64_t> s = dataset_shape(name);
    uint64_t n = 1;
    for (uint64_t d : s) n *= d;
    std::vector<T> out(n);
    read_raw(name, native_type<T>(), out.data(), n);
    if (shape) *shape = s;
    return out;
  }
  // Reads into a caller buffer; the dataset must have exactly `shape` (IoError otherwise).
  template <class T>
  void read_into(const std::string& name, std::span<T> out, const std::vector<uint64_t>& shape) const {
    check_shape(name, shape);
    read_raw(name, native_type<T>(), out.data(), out.size());
  }
  // A dataset written in slabs of rows (the first dimension), e.g. by the owners of a table's row ranges one after
  // another: create_dataset() makes it (chunked and checksummed as write() does), write_slab() stores rows
  // [row0, row0 + data.size() / row_size) and read_slab() reads them back (shape and type checked as read() does).
  template <class T>
  void create_dataset(const std::string& name, const std::vector<uint64_t>& shape) const {
    create_raw(name, native_type<T>(), shape);
  }
  template <class T>
  void write_slab(const std::string& name, uint64_t row0, std::span<const T> data) const {
    slab_raw(name, native_type<T>(), row0, const_cast<T*>(data.data()), data.size(), true);
  }
  template <class T>
  void read_slab(const std::string& name, uint64_t row0, std::span<T> out) const {
    slab_raw(name, native_type<T>(), row0, out.data(), out.size(), false);
  }
  // A virtual dataset (HDF5 VDS): row ranges of datasets in other files, read through this one as one dataset
  // (h5py and the C API alike). A source's file name is relative to this file's folder (HDF5 looks there); rows
  // no source covers, or whose file is missing, read as `fill`.
  struct VirtualSource {
    std::string file, dataset;  // the source: file (relative to this file's folder) and dataset path in it
    uint64_t row0 = 0, rows = 0;  // where its rows go: [row0, row0 + rows) of this dataset (the source has `rows`)
  };
  template <class T>
  void create_virtual(const std::string& name, const std::vector<uint64_t>& shape,
                      const std::vector<VirtualSource>& sources, T fill) const {
    virtual_raw(name, native_type<T>(), shape, sources, &fill);
  }
  bool is_virtual(const std::string& name) const;
  std::vector<uint64_t> dataset_shape(const std::string& name) const;
  void check_shape(const std::string& name, const std::vector<uint64_t>& shape) const;

  void set_attr(const std::string& name, const std::string& value) const;
  void set_attr(const std::string& name, int64_t value) const;
  void set_attr(const std::string& name, double value) const;
  bool has_attr(const std::string& name) const;
  std::string attr_string(const std::string& name) const;
  int64_t attr_int(const std::string& name) const;
  double attr_double(const std::string& name) const;

  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  hid_t id() const { return h_.id(); }

 private:
  void write_raw(const std::string& name, hid_t type, const void* data, size_t n,
                 const std::vector<uint64_t>& shape) const;
  void read_raw(const std::string& name, hid_t type, void* data, size_t n) const;
  Handle create_raw(const std::string& name, hid_t type, const std::vector<uint64_t>& shape) const;
  void slab_raw(const std::string& name, hid_t type, uint64_t row0, void* data, size_t n, bool write) const;
  void virtual_raw(const std::string& name, hid_t type, const std::vector<uint64_t>& shape,
                   const std::vector<VirtualSource>& sources, const void* fill) const;
  void check_type(const std::string& name, hid_t ds, hid_t type) const;
  std::string where(const std::string& name) const { return file_ + ":" + path_ + (path_ == "/" ? "" : "/") + name; }
  Handle h_;
  std::string file_, path_;
};

class File {
 public:
  // Truncates. The file is built in memory and written out by close_checked (HDF5 itself then never meets a failing
  // disk), unless `expected_bytes` reaches kStreamedBytes: such a file (a checkpoint of a large table, which no
  // process may have to hold twice) is written to disk as it is filled, after a check that the disk has room for
  // expected_bytes (ResourceError naming the file, the bytes and the room otherwise).
  static File create(const std::string& path, int64_t expected_bytes = 0);
  static constexpr int64_t kStreamedBytes = int64_t{1} << 30;
  static File open(const std::string& path);  // read-only; IoError if missing or not HDF5
  Group root() const;
  void flush() const;
  // Flushes and closes, checking both (a write error that HDF5 only reports at close, e.g. a full disk):
  // ResourceError naming the file and errno.
  void close_checked();
  const std::string& path() const { return path_; }

 private:
  Handle h_;
  std::string path_;
  bool streamed_ = false;
};

// Writes an HDF5 file atomically: `fill` writes into a temp file next to `path`, which is then flushed,
// closed (both checked), fsync'ed (file, then its directory after the rename) and renamed over `path`. A crash
// never leaves a half-written file under `path`; on any error the temp file is removed, `path` keeps its
// previous content and ResourceError (write failures) or the fill's own error propagates.
// expected_bytes: see File::create.
template <class F>
void write_atomic(const std::string& path, F&& fill, int64_t expected_bytes = 0);
// fsyncs tmp (checked), renames it over path and fsyncs the directory; removes tmp and throws ResourceError on error.
void commit_atomic(const std::string& tmp, const std::string& path);
std::string temp_name(const std::string& path);
// Creates (truncates) `path` and writes n bytes with checked writes; ResourceError naming the file and errno.
void write_new_file(const std::string& path, const void* data, size_t n);
void remove_quietly(const std::string& path);

template <class F>
void write_atomic(const std::string& path, F&& fill, int64_t expected_bytes) {
  const std::string tmp = temp_name(path);
  try {
    File f = File::create(tmp, expected_bytes);
    fill(f.root());
    f.close_checked();
  } catch (...) {
    remove_quietly(tmp);
    throw;
  }
  commit_atomic(tmp, path);
}

namespace detail {
template <class Row>
struct ColumnWriter {
  const Group& g;
  const std::vector<Row>& rows;
  template <class F>
  requires(!std::is_function_v<F>) void operator()(const char* name, F Row::*field) const {
    if constexpr (std::is_same_v<F, std::string>) {
      std::string joined;
      for (size_t i = 0; i < rows.size(); ++i) joined += (i ? "," : "") + rows[i].*field;
      g.set_attr(name, joined);
    } else {
      static_assert(std::is_arithmetic_v<F>, "a column is a number or a string");
      using Out = std::conditional_t<std::is_integral_v<F>, int64_t, double>;
      std::vector<Out> col;
      col.reserve(rows.size());
      for (const Row& r : rows) col.push_back(static_cast<Out>(r.*field));
      g.write(name, col);
    }
  }
  template <class R>
  void operator()(const char* name, R (Row::*method)() const) const {
    static_assert(std::is_arithmetic_v<R>, "a derived column is a number");
    std::vector<double> col;
    col.reserve(rows.size());
    for (const Row& r : rows) col.push_back(static_cast<double>((r.*method)()));
    g.write(name, col);
  }
};
}  // namespace detail

template <class Row>
void Group::write_rows(const std::vector<Row>& rows) const {
  detail::ColumnWriter<Row> w{*this, rows};
  Row::columns(w);
}

}  // namespace pg::h5
