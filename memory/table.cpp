// Implementation of memory/table.h.
#include "memory/table.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace pg {

RowRange shard_of(int64_t rows, int ranks, int rank) {
  PG_CHECK(ranks >= 1 && rank >= 0 && rank < ranks && rows >= 0);
  // rows * rank fits int64 for any table that fits a machine (< 2^40 rows) and any rank count (< 2^20).
  return {rows * rank / ranks, rows * (rank + 1) / ranks};
}

MemoryTable::MemoryTable(std::unique_ptr<MemoryLayout> layout, RowwiseRmsSettings opt, std::optional<RowRange> shard)
    : layout_(std::move(layout)),
      shard_(shard.value_or(RowRange{0, layout_->rows()})),
      values_(static_cast<size_t>(shard_.size() * layout_->width()), 0.0f),
      opt_(shard_.size(), layout_->width(), opt) {
  PG_CHECK(shard_.lo >= 0 && shard_.lo <= shard_.hi && shard_.hi <= layout_->rows(), "shard [", shard_.lo, ", ",
           shard_.hi, ") of a table of ", layout_->rows(), " rows");
  pending_.width = mb_grad_.width = merged_.width = layout_->width();
}

void MemoryTable::catch_up(const Addresses& a) {
  PG_CHECK(whole(), "catch_up(addresses) of a sharded table (read_rows catches up the rows it reads)");
  if (opt_.settings().weight_decay == 0.0 || step_ == 0) return;
  unique_.assign(a.rows.begin(), a.rows.begin() + a.n * a.heads);
  std::sort(unique_.begin(), unique_.end());
  unique_.erase(std::unique(unique_.begin(), unique_.end()), unique_.end());
  opt_.catch_up(values_.data(), unique_, step_);
}

void MemoryTable::gather(const Addresses& a, float* out) const {
  PG_CHECK(whole(), "gather() of a sharded table (train/table_shards.h fetches the rows)");
  PG_CHECK(a.heads == layout_->heads() && a.sign_words == layout_->sign_words());
  gather_signed(a, values_.data(), layout_->width(), layout_->sums_heads(), out);
}

void MemoryTable::read_rows(std::span<const int64_t> rows, float* out) {
  const int64_t n = static_cast<int64_t>(rows.size()), w = layout_->width();
  if (n == 0) return;
  PG_CHECK(shard_.contains(rows.front()) && shard_.contains(rows.back()), "read_rows: rows [", rows.front(), ", ",
           rows.back(), "] outside the shard [", shard_.lo, ", ", shard_.hi, ")");
  local_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) local_[static_cast<size_t>(i)] = rows[static_cast<size_t>(i)] - shard_.lo;
  if (opt_.settings().weight_decay != 0.0 && step_ > 0) opt_.catch_up(values_.data(), local_, step_);
#pragma omp parallel for schedule(static) if (n * w > 65536)
  for (int64_t i = 0; i < n; ++i) std::copy_n(values_.data() + local_[static_cast<size_t>(i)] * w, w, out + i * w);
}

void MemoryTable::accumulate_grad(const Addresses& a, const float* dout) {
  sparse_grad(a, dout, layout_->width(), layout_->sums_heads(), mb_grad_, scratch_);
  if (pending_.size() == 0) {
    std::swap(pending_, mb_grad_);  // buffers are swapped, not copied; both keep their capacity
    return;
  }
  merge_sparse(pending_, mb_grad_, merged_);
  std::swap(pending_, merged_);
}

void MemoryTable::apply_update(int64_t t) {
  PG_CHECK(t > step_, "table update for step ", t, " after step ", step_);
  PG_CHECK(pending_.size() == 0 || pending_.width == layout_->width(), "pending gradient of width ", pending_.width);
  if (!whole()) {  // a shard: its own rows, at local indices
    PG_CHECK(pending_.size() == 0 || (shard_.contains(pending_.rows.front()) && shard_.contains(pending_.rows.back())),
             "a shard's pending gradient holds rows of another shard");
    for (int64_t& r : pending_.rows) r -= shard_.lo;
  }
  opt_.update(values_.data(), pending_.rows, pending_.values.data(), t);
  touched_last_ = pending_.size();
  pending_.rows.clear();  // values keep their capacity
  step_ = t;
}

void MemoryTable::materialize() { opt_.catch_up_all(values_.data(), step_); }

TableStats MemoryTable::stats() const {
  TableStats s;
  s.step = step_;
  s.rows = shard_.size();
  s.touched_last = touched_last_;
  const int64_t R = shard_.size(), w = layout_->width();
  // Fixed chunks summed in order: identical for any thread count.
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (R + kChunk - 1) / kChunk;
  std::vector<double> sq(static_cast<size_t>(chunks)), mx(static_cast<size_t>(chunks)), vs(static_cast<size_t>(chunks));
  std::vector<int64_t> tc(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    double q = 0, m = 0, v = 0;
    int64_t t = 0;
    for (int64_t r = c * kChunk; r < std::min(R, (c + 1) * kChunk); ++r) {
      for (int64_t j = 0; j < w; ++j) {
        const double x = values_[static_cast<size_t>(r * w + j)];
        q += x * x;
        m = std::max(m, std::fabs(x));
      }
      if (opt_.last()[static_cast<size_t>(r)] > 0) ++t, v += opt_.v()[static_cast<size_t>(r)];
    }
    sq[static_cast<size_t>(c)] = q, mx[static_cast<size_t>(c)] = m, vs[static_cast<size_t>(c)] = v;
    tc[static_cast<size_t>(c)] = t;
  }
  double q = 0, v = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    q += sq[static_cast<size_t>(c)];
    v += vs[static_cast<size_t>(c)];
    s.max_abs = std::max(s.max_abs, mx[static_cast<size_t>(c)]);
    s.touched_ever += tc[static_cast<size_t>(c)];
  }
  s.rms = R > 0 ? std::sqrt(q / static_cast<double>(R * w)) : 0.0;
  s.mean_v = s.touched_ever > 0 ? v / static_cast<double>(s.touched_ever) : 0.0;
  return s;
}

void MemoryTable::save(const h5::Group& g, const SavedShards* shards) const {
  PG_CHECK(pending_.size() == 0, "saving a memory table with a pending gradient");
  for (const auto& [k, v] : layout_->identity()) g.set_attr(k, v);
  g.set_attr("completed_step", step_);
  const auto seeds = layout_->derived_seeds();
  g.write<uint64_t>("hash_seeds", std::span<const uint64_t>(seeds),
                    {static_cast<uint64_t>(layout_->n_orders()), static_cast<uint64_t>(layout_->heads_per_order()), 3});
  const uint64_t rows = static_cast<uint64_t>(layout_->rows()), w = static_cast<uint64_t>(layout_->width());
  if (whole()) {
    PG_CHECK(!shards, "a whole table saved as shards");
    g.write<float>("table", std::span<const float>(values_), {rows, w});
    h5::Group o = g.create("optimizer");
    opt_.save(o);
    return;
  }
  PG_CHECK(shards && shards->files.size() + 1 == shards->bounds.size() && shards->bounds.front() == 0 &&
               shards->bounds.back() == layout_->rows(),
           "saving a table shard without the shard files of the whole table");
  std::vector<h5::Group::VirtualSource> table, v, last;
  std::string names;
  for (size_t q = 0; q < shards->files.size(); ++q) {
    const auto lo = static_cast<uint64_t>(shards->bounds[q]), n = static_cast<uint64_t>(shards->bounds[q + 1]) - lo;
    PG_CHECK(shards->bounds[q + 1] >= shards->bounds[q] && shards->files[q].find('\n') == std::string::npos, "shard ",
             q, " of a saved table");
    table.push_back({shards->files[q], "table", lo, n});
    v.push_back({shards->files[q], "v", lo, n});
    last.push_back({shards->files[q], "last", lo, n});
    names += (q ? "\n" : "") + shards->files[q];
  }
  g.set_attr("save_id", shards->save_id);
  g.set_attr("shard_files", names);
  g.write<int64_t>("shard_bounds", shards->bounds);
  // Rows whose shard file is missing read as NaN (table, v) and -1 (last): refused by load, visible to h5py.
  g.create_virtual<float>("table", {rows, w}, table, std::nanf(""));
  h5::Group o = g.create("optimizer");
  o.set_attr("beta2", opt_.settings().beta2);
  o.set_attr("eps", opt_.settings().eps);
  o.set_attr("weight_decay", opt_.settings().weight_decay);
  o.create_virtual<float>("v", {rows}, v, std::nanf(""));
  o.create_virtual<int32_t>("last", {rows}, last, -1);
}

void MemoryTable::save_shard(const std::string& path, const std::string& save_id) const {
  PG_CHECK(pending_.size() == 0, "saving a memory table shard with a pending gradient");
  const uint64_t n = static_cast<uint64_t>(shard_.size()), w = static_cast<uint64_t>(layout_->width());
  h5::write_atomic(
      path,
      [&](const h5::Group& r) {
        r.set_attr("format", std::string(kTableShardFormat));
        r.set_attr("format_version", kTableShardFormatVersion);
        r.set_attr("save_id", save_id);
        r.set_attr("completed_step", step_);
        r.set_attr("lo", shard_.lo);
        r.set_attr("hi", shard_.hi);
        r.set_attr("rows", layout_->rows());
        r.set_attr("width", layout_->width());
        r.write<float>("table", std::span<const float>(values_), {n, w});
        r.write<float>("v", opt_.v(), {n});
        r.write<int32_t>("last", opt_.last(), {n});
      },
      static_cast<int64_t>(n * (4 * w + 8)));
}

namespace {
const char* const kKeepShards =
    "(hint: a checkpoint of a table sharded by rows is its .h5 file and the shard files beside it, written by one "
    "save: keep and copy them together; training writes them into one folder every rank shares)";

// Opens shard q's file and checks it is the one a save (save_id, step) of a table of rows x width wrote for rows
// [lo, hi). `where`: the group or save that names it.
h5::File open_shard(const std::string& path, size_t q, size_t shards, int64_t lo, int64_t hi, int64_t rows,
                    int64_t width, int64_t step, const std::string& save_id, const std::string& where) {
  const std::string shard = str("table shard ", q, " of ", shards, " (rows [", lo, ", ", hi, "))");
  if (!std::filesystem::exists(path))
    throw IoError(str(where, ": ", shard, " is in ", path, ", which is missing ", kKeepShards));
  h5::File f = h5::File::open(path);
  const h5::Group r = f.root();
  if (!r.has_attr("format") || r.attr_string("format") != kTableShardFormat || !r.has_attr("format_version") ||
      r.attr_int("format_version") != kTableShardFormatVersion)
    throw IoError(str(path, ": not a pagegram table shard of format version ", kTableShardFormatVersion, " (", shard,
                      " of ", where, ") ", kKeepShards));
  const std::string id = r.has_attr("save_id") ? r.attr_string("save_id") : "";
  if (id != save_id)
    throw IoError(str(path, ": a shard of save '", id, "', ", where, " maps save '", save_id, "' for its ", shard,
                      " (another run's or another save's file under this name) ", kKeepShards));
  const auto want = [&](const char* attr, int64_t v) {
    const int64_t got = r.attr_int(attr);
    if (got != v)
      throw IoError(str(path, ": attribute '", attr, "' = ", got, ", ", where, " expects ", v, " for its ", shard, " ",
                        kKeepShards));
  };
  want("completed_step", step);
  want("lo", lo);
  want("hi", hi);
  want("rows", rows);
  want("width", width);
  const auto n = static_cast<uint64_t>(hi - lo);
  r.check_shape("table", {n, static_cast<uint64_t>(width)});
  r.check_shape("v", {n});
  r.check_shape("last", {n});
  return f;
}
}  // namespace

void MemoryTable::check_shards(const SavedShards& shards, const std::string& dir) const {
  PG_CHECK(shards.files.size() + 1 == shards.bounds.size(), "check_shards: ", shards.files.size(), " files");
  for (size_t q = 0; q < shards.files.size(); ++q)
    open_shard((std::filesystem::path(dir) / shards.files[q]).string(), q, shards.files.size(), shards.bounds[q],
               shards.bounds[q + 1], layout_->rows(), layout_->width(), step_, shards.save_id,
               str("save '", shards.save_id, "' of step ", step_));
}

std::vector<std::string> saved_shard_names(const h5::Group& g) {
  std::vector<std::string> files;
  if (!g.has_attr("shard_files")) return files;
  const std::string names = g.attr_string("shard_files");
  for (size_t a = 0, e; a <= names.size(); a = e + 1) {
    e = std::min(names.find('\n', a), names.size());
    files.push_back(names.substr(a, e - a));
  }
  return files;
}

std::string saved_shards_folder(const std::string& file) {
  std::error_code ec;
  const std::filesystem::path p(file);
  return (std::filesystem::is_symlink(p, ec) ? std::filesystem::canonical(p, ec) : p).parent_path().string();
}

SavedTable::SavedTable(const h5::Group& g, int64_t rows, int64_t width)
    : g_(g.reopen()), rows_(rows), width_(width), where_(g.file() + ":" + g.path()) {
  step_ = g.attr_int("completed_step");
  if (step_ < 0 || step_ >= INT32_MAX)
    throw IoError(str(where_, ": completed_step ", step_, " is invalid (corrupt file?)"));
  g.check_shape("table", {static_cast<uint64_t>(rows), static_cast<uint64_t>(width)});
  if (!g.has_attr("shard_files")) {
    g.sub("optimizer").check_shape("v", {static_cast<uint64_t>(rows)});
    g.sub("optimizer").check_shape("last", {static_cast<uint64_t>(rows)});
    return;
  }
  const std::vector<std::string> files = saved_shard_names(g);
  bounds_ = g.read<int64_t>("shard_bounds");
  if (bounds_.size() != files.size() + 1 || bounds_.front() != 0 || bounds_.back() != rows ||
      !std::is_sorted(bounds_.begin(), bounds_.end()))
    throw IoError(str(where_, ": shard_bounds do not split the table's ", rows, " rows among its ", files.size(),
                      " shard files (hint: the checkpoint is corrupt or edited)"));
  const std::string save_id = g.has_attr("save_id") ? g.attr_string("save_id") : "";
  const std::filesystem::path dir = saved_shards_folder(g.file());
  for (size_t q = 0; q < files.size(); ++q)
    files_.push_back(open_shard((dir / files[q]).string(), q, files.size(), bounds_[q], bounds_[q + 1], rows, width,
                                step_, save_id, where_));
}

void SavedTable::read(int64_t r0, int64_t n, float* table, float* v, int32_t* last) const {
  PG_CHECK(r0 >= 0 && n >= 0 && r0 + n <= rows_, "SavedTable::read [", r0, ", ", r0 + n, ") of ", rows_, " rows");
  const auto part = [&](const h5::Group& src, const h5::Group& opt, const std::string& where, int64_t row0, int64_t a,
                        int64_t b) {  // rows [a, b) of the table, held by src from its row row0
    const auto at = static_cast<uint64_t>(a - row0);
    const int64_t k = b - a, i = a - r0;
    float* t = table + i * width_;
    src.read_slab<float>("table", at, std::span<float>(t, static_cast<size_t>(k * width_)));
    opt.read_slab<float>("v", at, std::span<float>(v + i, static_cast<size_t>(k)));
    opt.read_slab<int32_t>("last", at, std::span<int32_t>(last + i, static_cast<size_t>(k)));
    for (int64_t j = 0; j < k * width_; ++j)
      if (!std::isfinite(t[j]))
        throw IoError(str(where, "/table: non-finite value at row ", a + j / width_,
                          " (hint: a diverged run or a corrupt file)"));
    RowwiseRmsOptimizer::check_state({v + i, static_cast<size_t>(k)}, {last + i, static_cast<size_t>(k)}, a, step_,
                                     where);
  };
  if (bounds_.empty()) {
    part(g_, g_.sub("optimizer"), where_, 0, r0, r0 + n);
    return;
  }
  for (size_t q = 0; q + 1 < bounds_.size(); ++q) {
    const int64_t a = std::max(r0, bounds_[q]), b = std::min(r0 + n, bounds_[q + 1]);
    if (a >= b) continue;
    const h5::Group root = files_[q].root();
    part(root, root, files_[q].path() + ":", bounds_[q], a, b);
  }
}

void MemoryTable::load(const h5::Group& g) {
  const std::string where = g.file() + ":" + g.path();
  if (!g.has_attr("layout"))
    throw IoError(str(where, ": not a memory table (attribute 'layout' missing) (hint: wrong file or group)"));
  for (const auto& [k, v] : layout_->identity()) {
    if (!g.has_attr(k))
      throw IoError(str(where, ": memory table attribute '", k, "' missing (hint: written by another version)"));
    const std::string saved = g.attr_string(k);
    if (saved != v)
      throw IoError(str(where, ": memory table was saved with ", k, " = ", saved, ", this run has ", k, " = ", v,
                        " (hint: use the memory config the table was trained with)"));
  }
  const auto seeds = layout_->derived_seeds();
  std::vector<uint64_t> shape;
  const auto saved_seeds = g.read<uint64_t>("hash_seeds", &shape);
  if (saved_seeds != seeds)
    throw IoError(str(where, ": the saved hash seeds differ from this build's (hash format changed without a version ",
                      "bump, or a corrupt file) (hint: hash_version ", kHashVersion, ")"));
  const SavedTable saved(g, layout_->rows(), layout_->width());
  std::vector<float> v(static_cast<size_t>(shard_.size()));
  std::vector<int32_t> last(static_cast<size_t>(shard_.size()));
  saved.read(shard_.lo, shard_.size(), values_.data(), v.data(), last.data());
  opt_.set_state(v, last);
  step_ = saved.completed_step();
  pending_.rows.clear();
  touched_last_ = 0;
}

void MemoryTable::read_saved_rows(const SavedTable& s, int64_t r0, int64_t n, float* out) const {
  RowwiseRmsOptimizer slab(n, layout_->width(), opt_.settings());  // these rows' v and last step, with the schedule
  slab.set_schedule(opt_.schedule());
  std::vector<float> v(static_cast<size_t>(n));
  std::vector<int32_t> last(static_cast<size_t>(n));
  s.read(r0, n, out, v.data(), last.data());
  slab.set_state(v, last);
  slab.catch_up_all(out, s.completed_step());
}

}  // namespace pg
