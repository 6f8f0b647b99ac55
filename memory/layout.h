// MemoryLayout: how a table's rows are addressed (docs/model.md §3) — geometry, n-gram -> rows + sign vectors,
// parameter parity, and the 4 KiB block of each row in the NF4 file (docs/model.md §7) — plus the layout registry.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "memory/config.h"

namespace pg {

struct CompressedVocab;

inline constexpr int64_t kBlockBytes = 4096;  // flash read unit
inline constexpr int64_t kNf4GroupWidth = 64;  // values per NF4 group
inline constexpr int64_t kNf4GroupBytes = 34;  // 64 4-bit codes + one fp16 absmax scale
// Bytes of one row of `width` values in NF4 (34 per started group of 64).
inline int64_t nf4_row_bytes(int64_t width) { return (width + kNf4GroupWidth - 1) / kNf4GroupWidth * kNf4GroupBytes; }

// Where a row lives in the page-aligned NF4 file: its first 4 KiB block and byte offset there. `blocks` is
// the number of blocks a read of the row's unit (row, or page for PageGram) spans: 1 unless the unit
// exceeds 4 KiB (then it starts a block and spans ceil(bytes / 4096) blocks).
struct BlockLocation {
  int64_t block = 0;
  int64_t offset = 0;
  int64_t blocks = 1;
};

class MemoryLayout {
 public:
  virtual ~MemoryLayout() = default;
  // Registry key ("flat", "engram", "pagegram").
  virtual std::string name() const = 0;
  // S slots per head of a page (PageGram); 0 for a layout without pages. Statistics and files that depend on
  // pages ask this, never the layout's type.
  virtual int64_t slots() const { return 0; }
  bool has_pages() const { return slots() > 0; }
  // Rows of one addressing unit, kept together in a file (PageGram: a page of K*S rows; else 1).
  virtual int64_t unit_rows() const { return 1; }
  // For people: the name, with the slots of a layout that has them ("pagegram(S=4)").
  std::string label() const;

  // ---- Geometry.
  const std::vector<int64_t>& orders() const { return orders_; }
  int64_t n_orders() const { return static_cast<int64_t>(orders_.size()); }
  int64_t max_order() const { return orders_.back(); }
  int64_t heads_per_order() const { return heads_per_order_; }
  // Address columns per token: n_orders * heads_per_order, order-major ((o, k) -> o*K + k).
  int64_t heads() const { return n_orders() * heads_per_order_; }
  int64_t width() const { return width_; }  // w: row width in floats
  int64_t rows() const { return rows_; }
  int64_t sign_words() const { return (width_ + 63) / 64; }  // uint64 sign words per head
  // Flat: the readout is the signed sum of the heads' rows (readout width = w = d). Multi-head: the concat
  // of the signed rows (readout width = heads * w), projected by W_V.
  bool sums_heads() const { return sums_heads_; }
  int64_t readout_width() const { return sums_heads() ? width_ : heads() * width_; }
  // The rows head k of order index o can address: their count, and a dense index of `row` among them
  // in [0, count) (for occupancy statistics).
  virtual int64_t head_row_count(int64_t o, int64_t k) const = 0;
  virtual int64_t head_row_index(int64_t o, int64_t k, int64_t row) const = 0;

  // ---- Addressing. ctx: [n, max_order()] n-gram contexts, ctx[i*max_order + j] = x_{t-j} (memhash::
  // kBoundaryToken before the document start). rows: [n, heads()]. signs: [n, heads(), sign_words()],
  // bit j of word w set = lane 64w+j negated; unused lanes of the last word are 0. Thread-safe (const).
  virtual void address(const uint64_t* ctx, int64_t n, int64_t* rows, uint64_t* signs) const = 0;

  // ---- Storage (docs/model.md §7): the 4 KiB block of a row of the NF4 file.
  virtual BlockLocation block_of(int64_t row) const;
  virtual int64_t num_blocks() const;
  int64_t nf4_bytes_per_row() const { return nf4_row_bytes(width_); }

  // ---- Parameter parity (docs/model.md §3).
  int64_t target_params() const { return target_; }
  int64_t params() const { return rows_ * width_; }
  double parity_deviation() const { return static_cast<double>(params() - target_) / static_cast<double>(target_); }
  // One line: the sizes, the parameter count, its deviation from the target, and — when it exceeds 0.1% —
  // why (the unit of the layout is too coarse for that target).
  std::string parity_report() const;
  // Sub-table sizes in (order, head) order: flat R_n, Engram P_{n,k}, PageGram P_n (pages).
  const std::vector<int64_t>& sizes() const { return sizes_; }

  // ---- Segments: the table's rows as contiguous sub-tables, each addressed independently by hashing into its
  // units (flat: one per order, unit 1 row; Engram-style: one per (order, head), unit 1 row; PageGram: one per
  // order, unit one page of K*S rows). Two tables of one layout and config that differ only in size have the same
  // segments with more units (memory/row_spread.h places one table's rows in the other).
  struct Segment {
    int64_t base = 0, rows = 0, unit = 1;
  };
  virtual std::vector<Segment> segments() const = 0;

  // ---- Identity (saved with a table and compared on load): the hash version, seeds and geometry as
  // key/value text, and the derived hash seeds [n_orders, heads_per_order, 3 roles].
  virtual std::vector<std::pair<std::string, std::string>> identity() const;
  std::vector<uint64_t> derived_seeds() const;
  uint64_t hash_seed() const { return hash_seed_; }

 protected:
  MemoryLayout(const MemoryConfig& cfg, int64_t heads_per_order, int64_t width, bool sums_heads);
  // The smallest parameter unit by which this layout can grow (for the parity explanation).
  virtual int64_t parity_unit() const = 0;
  // Dense packing of rows into blocks (flat, Engram-style).
  BlockLocation dense_block_of(int64_t row) const;

  std::vector<int64_t> orders_;
  int64_t heads_per_order_;
  int64_t width_;
  bool sums_heads_;
  int64_t rows_ = 0;
  int64_t target_;
  uint64_t hash_seed_;
  std::vector<int64_t> sizes_;
};

// The registry: builds the layout named by cfg.layout ("flat", "engram", "pagegram"; "none" -> nullptr).
// `vocab` is required for Engram-faithful hashing (cfg.hash.engram_faithful) and ignored otherwise.
// Throws ConfigError for an unknown name or a missing vocabulary.
std::unique_ptr<MemoryLayout> make_layout(const MemoryConfig& cfg, int64_t d_model,
                                          const CompressedVocab* vocab = nullptr);
// The registered layout names in registry order ("none" is not a layout). Config choices, storage specs,
// CLI defaults and the test suites' instantiations all come from here (memory_layout_choices adds "none").
std::vector<std::string> layout_names();
bool is_layout_name(const std::string& name);
// Whether the layout has pages of S slots per head (memory.slots applies; storage specs take "name:S").
bool layout_takes_slots(const std::string& name);
// "name" or, for a layout with slots, "name(S=<slots>)".
std::string layout_label(const std::string& name, int64_t slots);

// Layout factories (one per layout file; listed in the registry in layout.cpp).
std::unique_ptr<MemoryLayout> make_flat_layout(const MemoryConfig& cfg, int64_t d_model, const CompressedVocab*);
std::unique_ptr<MemoryLayout> make_engram_layout(const MemoryConfig& cfg, int64_t d_model, const CompressedVocab*);
std::unique_ptr<MemoryLayout> make_pagegram_layout(const MemoryConfig& cfg, int64_t d_model, const CompressedVocab*);

// Parity across layouts for one config: the params of flat, Engram-style and PageGram(cfg.slots) built from
// cfg.target_params, and the largest relative difference between any two.
struct ParityCheck {
  int64_t flat = 0, engram = 0, pagegram = 0;
  double max_rel_diff = 0.0;
  std::string report;  // the three parity_report() lines
};
ParityCheck check_parity(const MemoryConfig& cfg, int64_t d_model);

}  // namespace pg
