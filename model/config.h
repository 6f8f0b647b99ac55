// ModelConfig: the backbone's shape (docs/model.md §2). One field list drives YAML parsing, dumping and equality.
#pragma once
#include <cstdint>

#include "core/config.h"

namespace pg {

struct ModelConfig {
  int64_t layers = 6;  // L
  int64_t d_model = 384;  // C
  int64_t heads = 6;  // NH, head width C / NH
  int64_t mlp_ratio = 4;  // hidden = mlp_ratio * C
  int64_t vocab = 65536;  // V
  int64_t context = 1024;  // T
  double rope_base = 10000.0;
  double norm_eps = 1e-6;
  double init_std = 0.02;  // normal std of embeddings and linear weights (output projections scaled, see README)

  template <class V>
  void visit(V& v) {
    v("layers", layers, "number of transformer blocks", cfg::Range{1, 128});
    v("d_model", d_model, "model width d", cfg::Range{8, 16384});
    v("heads", heads, "attention heads (d_model must be divisible by heads)", cfg::Range{1, 256});
    v("mlp_ratio", mlp_ratio, "MLP hidden width / d_model", cfg::Range{1, 16});
    v("vocab", vocab, "vocabulary size (must equal the tokenizer's)", cfg::Range{2, 1 << 24});
    v("context", context, "context length T in tokens", cfg::Range{2, 1 << 16});
    v("rope_base", rope_base, "RoPE base", cfg::Range{1.0, 1e9});
    v("norm_eps", norm_eps, "RMSNorm epsilon", cfg::Range{0.0, 1.0});
    v("init_std", init_std, "init std of embeddings and linear weights", cfg::Range{0.0, 1.0});
  }
  // Cross-field checks; throws ConfigError naming the keys.
  void validate(const std::string& where) const;
  int64_t head_dim() const { return d_model / heads; }
};

}  // namespace pg
