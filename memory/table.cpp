// Implementation of memory/table.h.
#include "memory/table.h"

#include <algorithm>
#include <cmath>

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

void MemoryTable::save(const h5::Group& g, const OtherSlabs& others) const {
  PG_CHECK(pending_.size() == 0, "saving a memory table with a pending gradient");
  for (const auto& [k, v] : layout_->identity()) g.set_attr(k, v);
  g.set_attr("completed_step", step_);
  const auto seeds = layout_->derived_seeds();
  g.write<uint64_t>("hash_seeds", std::span<const uint64_t>(seeds),
                    {static_cast<uint64_t>(layout_->n_orders()), static_cast<uint64_t>(layout_->heads_per_order()), 3});
  const uint64_t rows = static_cast<uint64_t>(layout_->rows()), w = static_cast<uint64_t>(layout_->width());
  if (whole()) {
    g.write<float>("table", std::span<const float>(values_), {rows, w});
    h5::Group o = g.create("optimizer");
    opt_.save(o);
    return;
  }
  PG_CHECK(others, "saving a table shard without the other shards' rows");
  g.create_dataset<float>("table", {rows, w});
  h5::Group o = g.create("optimizer");
  RowwiseRmsOptimizer(0, layout_->width(), opt_.settings()).save_slab(o, 0, layout_->rows());  // the datasets
  int64_t written = 0;
  const auto write = [&](const TableSlab& s) {
    PG_CHECK(s.lo >= 0 && s.n >= 0 && s.lo + s.n <= layout_->rows() &&
                 static_cast<int64_t>(s.table.size()) == s.n * layout_->width() &&
                 static_cast<int64_t>(s.v.size()) == s.n && static_cast<int64_t>(s.last.size()) == s.n,
             "a table slab of ", s.n, " rows at ", s.lo);
    g.write_slab<float>("table", static_cast<uint64_t>(s.lo), s.table);
    o.write_slab<float>("v", static_cast<uint64_t>(s.lo), s.v);
    o.write_slab<int32_t>("last", static_cast<uint64_t>(s.lo), s.last);
    written += s.n;
  };
  write({shard_.lo, shard_.size(), values_, opt_.v(), opt_.last()});
  others(write);
  PG_CHECK(written == layout_->rows(), "the shards wrote ", written, " of ", layout_->rows(), " table rows");
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
  const int64_t step = g.attr_int("completed_step");
  if (step < 0 || step >= INT32_MAX)
    throw IoError(str(where, ": completed_step ", step, " is invalid (corrupt file?)"));
  g.check_shape("table", {static_cast<uint64_t>(layout_->rows()), static_cast<uint64_t>(layout_->width())});
  g.read_slab<float>("table", static_cast<uint64_t>(shard_.lo), std::span<float>(values_));
  int64_t bad = -1;
  for (size_t i = 0; i < values_.size() && bad < 0; ++i)
    if (!std::isfinite(values_[i])) bad = static_cast<int64_t>(i);
  if (bad >= 0)
    throw IoError(str(where, "/table: non-finite value at row ", shard_.lo + bad / layout_->width(),
                      " (hint: a diverged run or a corrupt file)"));
  opt_.load_slab(g.sub("optimizer"), shard_.lo, layout_->rows(), step);
  step_ = step;
  pending_.rows.clear();
  touched_last_ = 0;
}

void MemoryTable::read_saved_rows(const h5::Group& g, int64_t r0, int64_t n, float* out) const {
  const int64_t rows = layout_->rows(), w = layout_->width();
  PG_CHECK(r0 >= 0 && n >= 0 && r0 + n <= rows, "read_saved_rows [", r0, ", ", r0 + n, ") of ", rows, " rows");
  const int64_t step = g.attr_int("completed_step");
  if (step < 0 || step >= INT32_MAX)
    throw IoError(str(g.file(), ":", g.path(), ": completed_step ", step, " is invalid (corrupt file?)"));
  g.check_shape("table", {static_cast<uint64_t>(rows), static_cast<uint64_t>(w)});
  g.read_slab<float>("table", static_cast<uint64_t>(r0), std::span<float>(out, static_cast<size_t>(n * w)));
  for (int64_t i = 0; i < n * w; ++i)
    if (!std::isfinite(out[i]))
      throw IoError(str(g.file(), ":", g.path(), "/table: non-finite value at row ", r0 + i / w,
                        " (hint: a diverged run or a corrupt file)"));
  RowwiseRmsOptimizer slab(n, w, opt_.settings());  // these rows' v and last step, with the table's schedule
  slab.set_schedule(opt_.schedule());
  slab.load_slab(g.sub("optimizer"), r0, rows, step);
  slab.catch_up_all(out, step);
}

}  // namespace pg
