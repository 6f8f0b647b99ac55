// Implementation of memory/table.h.
#include "memory/table.h"

#include <algorithm>
#include <cmath>

namespace pg {

MemoryTable::MemoryTable(std::unique_ptr<MemoryLayout> layout, RowwiseRmsSettings opt)
    : layout_(std::move(layout)),
      values_(static_cast<size_t>(layout_->rows() * layout_->width()), 0.0f),
      opt_(layout_->rows(), layout_->width(), opt) {
  pending_.width = mb_grad_.width = merged_.width = layout_->width();
}

void MemoryTable::catch_up(const Addresses& a) {
  if (opt_.settings().weight_decay == 0.0 || step_ == 0) return;
  unique_.assign(a.rows.begin(), a.rows.begin() + a.n * a.heads);
  std::sort(unique_.begin(), unique_.end());
  unique_.erase(std::unique(unique_.begin(), unique_.end()), unique_.end());
  opt_.catch_up(values_.data(), unique_, step_);
}

void MemoryTable::gather(const Addresses& a, float* out) const {
  PG_CHECK(a.heads == layout_->heads() && a.sign_words == layout_->sign_words());
  gather_signed(a, values_.data(), layout_->width(), layout_->sums_heads(), out);
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
  opt_.update(values_.data(), pending_.rows, pending_.values.data(), t);
  touched_last_ = pending_.size();
  pending_.rows.clear();  // values keep their capacity
  step_ = t;
}

void MemoryTable::materialize() { opt_.catch_up_all(values_.data(), step_); }

TableStats MemoryTable::stats() const {
  TableStats s;
  s.step = step_;
  s.rows = layout_->rows();
  s.touched_last = touched_last_;
  const int64_t R = layout_->rows(), w = layout_->width();
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

void MemoryTable::save(const h5::Group& g) const {
  PG_CHECK(pending_.size() == 0, "saving a memory table with a pending gradient");
  for (const auto& [k, v] : layout_->identity()) g.set_attr(k, v);
  g.set_attr("completed_step", step_);
  const auto seeds = layout_->derived_seeds();
  g.write<uint64_t>("hash_seeds", std::span<const uint64_t>(seeds),
                    {static_cast<uint64_t>(layout_->n_orders()), static_cast<uint64_t>(layout_->heads_per_order()), 3});
  g.write<float>("table", std::span<const float>(values_),
                 {static_cast<uint64_t>(layout_->rows()), static_cast<uint64_t>(layout_->width())});
  h5::Group o = g.create("optimizer");
  opt_.save(o);
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
  g.read_into<float>("table", std::span<float>(values_),
                     {static_cast<uint64_t>(layout_->rows()), static_cast<uint64_t>(layout_->width())});
  int64_t bad = -1;
  for (size_t i = 0; i < values_.size() && bad < 0; ++i)
    if (!std::isfinite(values_[i])) bad = static_cast<int64_t>(i);
  if (bad >= 0)
    throw IoError(str(where, "/table: non-finite value at row ", bad / layout_->width(), " (hint: a diverged run or ",
                      "a corrupt file)"));
  opt_.load(g.sub("optimizer"), step);
  step_ = step;
  pending_.rows.clear();
  touched_last_ = 0;
}

}  // namespace pg
