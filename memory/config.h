// MemoryConfig: the hashed n-gram memory table (docs/model.md §3) and its row-wise optimizer (docs/model.md §4).
// One field list drives YAML parsing, dumping, equality and help; validate() does the cross-field checks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace pg {

// The hash format version this build implements (memory/hash.h). A config or a saved table naming
// another version is refused: a hash is part of the checkpoint format.
inline constexpr int64_t kHashVersion = 1;

// memory.layout's choices: "none" and the layout registry's names (memory/layout.cpp).
std::vector<std::string> memory_layout_choices();
struct MemoryConfig;
// The smallest memory.target_params the configured layout can build, and its unit in words (0 for none).
int64_t layout_min_params(const MemoryConfig& cfg, int64_t d_model, std::string* unit);

struct MemoryHashConfig {
  int64_t seed = 0;  // base seed of every (order, head, role) hash; not the run seed
  int64_t version = kHashVersion;  // must equal kHashVersion
  bool engram_faithful = false;  // Engram-style layout only: compressed vocabulary + XOR/odd-multiplier mix

  template <class V>
  void visit(V& v) {
    v("seed", seed, "base seed of the n-gram hashes (part of the table format)", cfg::Range{0, 9.0e15});
    v("version", version, "hash format version (this build implements 1)", cfg::Range{1, 1});
    v("engram_faithful", engram_faithful,
      "Engram-style layout only: hash like Engram's released code (compressed vocabulary, XOR of "
      "token*odd multiplier, consecutive primes)");
  }
};

struct MemoryConfig {
  std::string layout = "none";  // none | flat | engram | pagegram
  std::vector<int64_t> orders = {2, 3};  // n-gram orders n (suffix n-grams ending at the current token)
  int64_t heads = 8;  // K heads per order (engram, pagegram)
  int64_t head_dim = 64;  // r, width of a head row (engram, pagegram)
  int64_t slots = 4;  // S slots per head in a page (pagegram)
  int64_t target_params = 200000000;  // table parameters; each layout derives its rows from it
  std::vector<int64_t> inject_layers = {0, 4};  // blocks whose input receives e_t
  std::string gate = "scalar";  // scalar | context | context_sqrt
  double gate_init = 0.5;  // initial value of each scalar gate g_j
  double lr_mult = 70.0;  // table lr = lr_mult * backbone lr (same schedule)
  double beta2 = 0.95;  // row-wise RMS second-moment decay
  double eps = 1e-8;  // row-wise RMS epsilon (added to sqrt(v_hat))
  double weight_decay = 0.0;  // table decay lambda_T (replayed over skipped steps)
  MemoryHashConfig hash;
  // Run-log statistics only (they read addresses, never change results; left out of the sweep's config hash
  // and of the resume check, like train.threads).
  bool collision_stats = true;  // per-step collision statistics in the run log's /collisions group
  bool collision_owners = true;  // + Foreign reading (b): running lookup counts per n-gram (see README)

  template <class V>
  void visit(V& v) {
    v("layout", layout, "memory layout", cfg::OneOf(memory_layout_choices()));
    v("orders", orders, "n-gram orders, e.g. [2, 3]", cfg::Range{2, 4});
    v("heads", heads, "K heads per order (engram, pagegram)", cfg::Range{1, 64});
    v("head_dim", head_dim, "r, width of one head row (engram, pagegram)", cfg::Range{1, 4096});
    v("slots", slots, "S slots per head in a page (pagegram)", cfg::Range{1, 4096});
    v("target_params", target_params, "table size in parameters (rows are derived per layout)", cfg::Range{1, 1e12});
    v("inject_layers", inject_layers, "blocks whose input receives the memory vector", cfg::Range{0, 1023});
    v("gate", gate, "injection gate: scalar g_j, Engram context gate, or its signed-sqrt variant",
      cfg::OneOf{"scalar", "context", "context_sqrt"});
    v("gate_init", gate_init, "initial scalar gate value", cfg::Range{-100.0, 100.0});
    v("lr_mult", lr_mult, "table lr as a multiple of the backbone lr", cfg::Range{0.0, 1e6});
    v("beta2", beta2, "row-wise RMS beta2", cfg::Range{0.0, 0.999999});
    v("eps", eps, "row-wise RMS epsilon", cfg::Range{0.0, 1.0});
    v("weight_decay", weight_decay, "table weight decay lambda_T", cfg::Range{0.0, 10.0});
    v("hash", hash, "n-gram hashing");
    v("collision_stats", collision_stats,
      "log per-step collision statistics (per order and head) to the run log's /collisions group; reads the "
      "addresses only, results unchanged");
    v("collision_owners", collision_owners,
      "with collision_stats: also Foreign reading (b) (row owners from running n-gram counts; memory grows "
      "with the distinct n-grams of the run, ~17-34 bytes each)");
  }
  // Keys that only select what the run log records (never results): excluded from config hashes.
  static constexpr const char* kLogOnlyKeys[] = {"collision_stats", "collision_owners"};
  // Cross-field checks against the model; throws ConfigError naming the key path (under "memory.").
  void validate(const std::string& where, int64_t d_model, int64_t layers) const;
  bool enabled() const { return layout != "none"; }
  int64_t max_order() const;
};

}  // namespace pg
