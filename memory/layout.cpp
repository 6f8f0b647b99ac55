// Implementation of memory/layout.h: the shared parts of every layout and the registry.
#include "memory/layout.h"

#include <cmath>
#include <cstdio>

#include "memory/hash.h"

namespace pg {

MemoryLayout::MemoryLayout(const MemoryConfig& cfg, int64_t heads_per_order, int64_t width, bool sums_heads)
    : orders_(cfg.orders),
      heads_per_order_(heads_per_order),
      width_(width),
      sums_heads_(sums_heads),
      target_(cfg.target_params),
      hash_seed_(static_cast<uint64_t>(cfg.hash.seed)) {
  PG_CHECK(!orders_.empty() && heads_per_order_ >= 1 && width_ >= 1 && target_ >= 1);
}

BlockLocation MemoryLayout::dense_block_of(int64_t row) const {
  const int64_t rb = nf4_bytes_per_row();
  BlockLocation b;
  if (rb <= kBlockBytes) {
    const int64_t per_block = kBlockBytes / rb;
    b.block = row / per_block;
    b.offset = (row % per_block) * rb;
  } else {
    b.blocks = (rb + kBlockBytes - 1) / kBlockBytes;
    b.block = row * b.blocks;
  }
  return b;
}

BlockLocation MemoryLayout::block_of(int64_t row) const { return dense_block_of(row); }

int64_t MemoryLayout::num_blocks() const {
  if (rows_ == 0) return 0;
  BlockLocation last = block_of(rows_ - 1);
  return last.block + last.blocks;
}

namespace {
std::string group_digits(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return (v < 0 ? "-" : "") + s;
}
std::string pct(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.4f%%", 100.0 * x);
  return buf;
}
}  // namespace

std::string MemoryLayout::parity_report() const {
  std::string sz;
  for (size_t i = 0; i < sizes_.size(); ++i) sz += (i ? " " : "") + std::to_string(sizes_[i]);
  std::string s =
      str(name(), ": sizes [", sz, "] -> ", group_digits(rows_), " rows x ", width_, " = ", group_digits(params()),
          " params (target ", group_digits(target_), ", ", pct(parity_deviation()), ")");
  if (std::fabs(parity_deviation()) > 1e-3) {
    const int64_t unit = parity_unit();
    char unit_pct[32];
    std::snprintf(unit_pct, sizeof unit_pct, "%.4f%%",
                  100.0 * static_cast<double>(unit) / static_cast<double>(target_));
    s += str("; exceeds 0.1%: one ", name() == "pagegram" ? "page per order" : "row per sub-table", " (",
             group_digits(unit), " params) is ", unit_pct,
             " of the target, the sizes are the primes nearest the target");
  }
  return s;
}

std::vector<std::pair<std::string, std::string>> MemoryLayout::identity() const {
  std::string ord, sz;
  for (size_t i = 0; i < orders_.size(); ++i) ord += (i ? "," : "") + std::to_string(orders_[i]);
  for (size_t i = 0; i < sizes_.size(); ++i) sz += (i ? "," : "") + std::to_string(sizes_[i]);
  return {{"layout", name()},
          {"hash_version", std::to_string(kHashVersion)},
          {"hash_seed", std::to_string(hash_seed_)},
          {"orders", ord},
          {"heads_per_order", std::to_string(heads_per_order_)},
          {"width", std::to_string(width_)},
          {"rows", std::to_string(rows_)},
          {"sizes", sz}};
}

std::vector<uint64_t> MemoryLayout::derived_seeds() const {
  std::vector<uint64_t> out;
  for (int64_t n : orders_)
    for (int64_t k = 0; k < heads_per_order_; ++k)
      for (memhash::Role r : {memhash::Role::kRow, memhash::Role::kPage, memhash::Role::kSign})
        out.push_back(memhash::derive_seed(hash_seed_, n, r == memhash::Role::kPage ? 0 : k, r));
  return out;
}

namespace {
struct Entry {
  const char* name;
  std::unique_ptr<MemoryLayout> (*make)(const MemoryConfig&, int64_t, const CompressedVocab*);
  bool takes_slots;  // pages of memory.slots slots per head
  // The smallest table the layout can build for a config (memory.target_params below it is refused), and why.
  int64_t (*min_params)(const MemoryConfig&, int64_t d_model);
  const char* min_unit;
};
int64_t n_orders(const MemoryConfig& c) { return static_cast<int64_t>(c.orders.size()); }
// The registry: one line per layout.
const Entry kLayouts[] = {
    {"flat", make_flat_layout, false, [](const MemoryConfig& c, int64_t d) { return n_orders(c) * d; },
     "one row of d_model per order"},
    {"engram", make_engram_layout, false,
     [](const MemoryConfig& c, int64_t) { return n_orders(c) * c.heads * c.head_dim * 2; },
     "a prime >= 2 rows per sub-table"},
    {"pagegram", make_pagegram_layout, true,
     [](const MemoryConfig& c, int64_t) { return n_orders(c) * c.heads * c.slots * c.head_dim * 2; },
     "a prime >= 2 pages per order"},
};
const Entry* find_entry(const std::string& name) {
  for (const Entry& e : kLayouts)
    if (name == e.name) return &e;
  return nullptr;
}
}  // namespace

std::unique_ptr<MemoryLayout> make_layout(const MemoryConfig& cfg, int64_t d_model, const CompressedVocab* vocab) {
  if (cfg.layout == "none") return nullptr;
  if (cfg.hash.version != kHashVersion)
    throw ConfigError(str("memory.hash.version: ", cfg.hash.version, " is not implemented (hint: this build ",
                          "implements version ", kHashVersion, ")"));
  if (const Entry* e = find_entry(cfg.layout)) return e->make(cfg, d_model, vocab);
  std::string names;
  for (const Entry& e : kLayouts) names += str(names.empty() ? "" : ", ", e.name);
  throw ConfigError(str("memory.layout: unknown layout '", cfg.layout, "' (hint: one of none, ", names, ")"));
}

std::vector<std::string> layout_names() {
  std::vector<std::string> out;
  for (const Entry& e : kLayouts) out.push_back(e.name);
  return out;
}

std::vector<std::string> memory_layout_choices() {
  std::vector<std::string> out{"none"};
  for (const Entry& e : kLayouts) out.push_back(e.name);
  return out;
}

bool is_layout_name(const std::string& name) { return find_entry(name) != nullptr; }

bool layout_takes_slots(const std::string& name) {
  const Entry* e = find_entry(name);
  return e && e->takes_slots;
}

std::string layout_label(const std::string& name, int64_t slots) {
  return layout_takes_slots(name) ? str(name, "(S=", slots, ")") : name;
}

std::string MemoryLayout::label() const { return layout_label(name(), slots()); }

int64_t layout_min_params(const MemoryConfig& cfg, int64_t d_model, std::string* unit) {
  const Entry* e = find_entry(cfg.layout);
  if (!e) return 0;
  if (unit) *unit = e->min_unit;
  return e->min_params(cfg, d_model);
}

ParityCheck check_parity(const MemoryConfig& cfg, int64_t d_model) {
  ParityCheck p;
  MemoryConfig c = cfg;
  c.hash.engram_faithful = false;
  c.layout = "flat";
  auto f = make_layout(c, d_model);
  c.layout = "engram";
  auto e = make_layout(c, d_model);
  c.layout = "pagegram";
  auto g = make_layout(c, d_model);
  p.flat = f->params();
  p.engram = e->params();
  p.pagegram = g->params();
  const int64_t v[3] = {p.flat, p.engram, p.pagegram};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      p.max_rel_diff = std::max(
          p.max_rel_diff, std::fabs(static_cast<double>(v[i] - v[j])) / static_cast<double>(std::min(v[i], v[j])));
  p.report = f->parity_report() + "\n" + e->parity_report() + "\n" + g->parity_report();
  return p;
}

}  // namespace pg
