// Which tables the storage tools compare (`--layouts flat,engram,pagegram:15`) and the one builder of such a
// table's layout from the config's memory section: another layout, slot count or parameter count.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "memory/config.h"
#include "memory/layout.h"
#include "memory/normalize.h"

namespace pg {

// One table of a storage sweep: a layout ("flat", "engram", "pagegram" with the config's slots, or "pagegram:S").
struct FlashLayoutSpec {
  std::string layout;
  int64_t slots = 0;  // pagegram only
  std::string label() const;  // "flat", "engram", "pagegram(S=4)"
};
// Parses "flat", "engram", "pagegram", "pagegram:15"; pagegram without ":S" takes default_slots. S is checked
// against memory.slots' range (MemoryConfig's field list: one bound). UserError naming the text otherwise.
FlashLayoutSpec parse_flash_layout(const std::string& text, int64_t default_slots);

// The layout of `spec` built from the config's memory section `base` (params > 0: memory.target_params = params).
// Engram-faithful hashing applies when `vocab` is given (engram_vocab()); without it the table is hashed on raw
// ids (the flash simulation describes tables by their size and never needs the tokenizer).
std::unique_ptr<MemoryLayout> make_storage_layout(const MemoryConfig& base, int64_t d_model,
                                                  const FlashLayoutSpec& spec, double params = 0,
                                                  const CompressedVocab* vocab = nullptr);
// The same with Engram-faithful hashing built from the tokenizer's pieces when the memory section asks for it
// (memory.hash.engram_faithful with an Engram-style layout; `pieces` may be empty otherwise).
std::unique_ptr<MemoryLayout> make_storage_layout(const MemoryConfig& base, int64_t d_model,
                                                  const FlashLayoutSpec& spec, double params,
                                                  const std::vector<std::string>& pieces);

}  // namespace pg
