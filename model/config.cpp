// ModelConfig cross-field checks (model/config.h).
#include "model/config.h"

#include "core/error.h"

namespace pg {

void ModelConfig::validate(const std::string& where) const {
  if (heads < 1 || d_model % heads != 0)
    throw ConfigError(str(where, ": key 'model.heads': ", heads, " does not divide model.d_model = ", d_model,
                          " (hint: choose heads so that d_model / heads is an even integer, e.g. 64-wide heads)"));
  if (head_dim() % 2 != 0)
    throw ConfigError(str(where, ": key 'model.heads': head width d_model / heads = ", d_model, " / ", heads, " = ",
                          head_dim(), " is odd, but RoPE pairs dimensions (i, i + head_dim/2)",
                          " (hint: choose heads so that d_model / heads is even)"));
}

}  // namespace pg
