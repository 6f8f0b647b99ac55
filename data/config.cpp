// Cross-field validation of DataConfig and TokenizerConfig.
#include "data/config.h"

namespace pg {

void DataConfig::validate(const std::string& where) const {
  if (corpus != "corpus" && corpus != "corpus-quick" && (corpus.empty() || corpus[0] != '/'))
    throw ConfigError(str(where,
                          ": key 'data.corpus': expected 'corpus', 'corpus-quick' or an absolute directory, got '",
                          corpus, "' (hint: use an absolute path for a custom corpus)"));
}

void TokenizerConfig::validate(const std::string& where) const {
  if (!byte_fallback)
    throw ConfigError(str(where,
                          ": key 'tokenizer.byte_fallback': must be true (newlines are encoded as the byte piece "
                          "<0x0A>; hint: remove the key)"));
}

}  // namespace pg
