// Implementation of memory/config.h: cross-field checks with key paths.
#include "memory/config.h"

#include <algorithm>

namespace pg {

int64_t MemoryConfig::max_order() const { return orders.empty() ? 0 : *std::max_element(orders.begin(), orders.end()); }

void MemoryConfig::validate(const std::string& where, int64_t d_model, int64_t layers) const {
  if (hash.version != kHashVersion)
    throw ConfigError(str(where, ": key 'memory.hash.version': ", hash.version, " is not implemented by this ",
                          "build (hint: it implements version ", kHashVersion, ")"));
  if (!enabled()) return;
  if (orders.empty()) throw ConfigError(str(where, ": key 'memory.orders': empty (hint: e.g. [2, 3])"));
  for (size_t i = 1; i < orders.size(); ++i)
    if (orders[i] <= orders[i - 1])
      throw ConfigError(str(where, ": key 'memory.orders[", i, "]': ", orders[i],
                            " must be larger than the previous order (hint: distinct and increasing, e.g. [2, 3])"));
  if (inject_layers.empty())
    throw ConfigError(str(where, ": key 'memory.inject_layers': empty (hint: e.g. [0, 4], or memory.layout=none)"));
  for (size_t i = 0; i < inject_layers.size(); ++i) {
    if (inject_layers[i] >= layers)
      throw ConfigError(str(where, ": key 'memory.inject_layers[", i, "]': layer ", inject_layers[i],
                            " does not exist (model.layers = ", layers, ") (hint: layers are 0-based)"));
    for (size_t j = 0; j < i; ++j)
      if (inject_layers[j] == inject_layers[i])
        throw ConfigError(
            str(where, ": key 'memory.inject_layers[", i, "]': layer ", inject_layers[i], " listed twice"));
  }
  if (hash.engram_faithful && layout != "engram")
    throw ConfigError(str(where, ": key 'memory.hash.engram_faithful': only the engram layout has Engram-faithful ",
                          "hashing (layout is '", layout, "')"));
  std::string unit;
  const int64_t min_params = layout_min_params(*this, d_model, &unit);
  if (target_params < min_params)
    throw ConfigError(str(where, ": key 'memory.target_params': ", target_params, " is too small for layout '", layout,
                          "' (hint: at least ", min_params, " = ", unit, ")"));
}

}  // namespace pg
