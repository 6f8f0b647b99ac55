// Incremental inference for a trained Transformer (model/transformer.h): the same forward pass, fed a few new
// tokens at a time against a key/value cache, returning logits instead of a loss.
//
//   KvCache cache(model.config());
//   Decoder dec(model, 64);                        // up to 64 rows per forward
//   dec.forward(prompt, {&cache, ...}, logits)     // prefill: every prompt token, one forward
//   dec.forward({next}, {&cache}, logits)          // decode: one row; rows of several caches decode as one batch
//
// Rows may belong to different sequences (caches); the rows of one sequence must be consecutive and in order. Row i
// sits at position cache_i.length() + (earlier rows of the same cache). Positions are absolute within the cache,
// at most config().context (the trained RoPE range): the caller starts a new cache past that (infer/engine.h).
// Residual injection (the memory table) goes through the model's injector with N = rows, as in training: prepare it
// for exactly these rows first, or in `before_injection`, which forward calls once just before the first block
// that injects (the blocks before it run meanwhile: the engine's table reads overlap them). Norms, RoPE, GELU and the
// linear layers are the training kernels, row for row (the GEMM over pre-packed weights, split by output columns: the
// same bits for 1 row or 64); attention of one query over its cache runs in the order of a plain loop. The logits equal
// a recomputation of the whole sequence up to float rounding (tests/model/decoder_test.cpp states the tolerance).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "kernels/gemm.h"
#include "model/transformer.h"

namespace pg {

class KvCache {
 public:
  explicit KvCache(const ModelConfig& cfg);
  int64_t length() const { return len_; }
  int64_t capacity() const { return cap_; }
  void clear() { len_ = 0; }
  // Forgets the positions from n on (n <= length()).
  void truncate(int64_t n) { len_ = n < len_ ? (n > 0 ? n : 0) : len_; }
  // Copies another cache's first `n` positions (fork a conversation).
  void copy_prefix(const KvCache& o, int64_t n);

 private:
  friend class Decoder;
  float* k(int64_t l, int64_t pos) { return k_.data() + (l * cap_ + pos) * C_; }
  float* v(int64_t l, int64_t pos) { return v_.data() + (l * cap_ + pos) * C_; }
  int64_t L_, cap_, C_, len_ = 0;
  std::vector<float> k_, v_;  // [L, cap, C] each (RoPE applied to k)
};

class Decoder {
 public:
  // Scratch for up to max_rows rows per forward (allocated once) and a packed copy of every weight matrix (made
  // here: the model's weights must not change while the decoder is used).
  Decoder(Transformer& model, int64_t max_rows);
  int64_t max_rows() const { return max_rows_; }

  // Runs rows tokens[i] of caches[i] (tokens.size() == caches.size() <= max_rows), appending each row's key and
  // value to its cache. logits (when not null) receives [rows, vocab] — or only the last row of each sequence
  // when last_only ([sequences, vocab], in order of first appearance). UserError for a token outside the
  // vocabulary or a cache that would pass its capacity. before_injection (when set) runs once, right before the
  // first block whose input the model's injector modifies (not at all without one).
  void forward(std::span<const int32_t> tokens, std::span<KvCache* const> caches, float* logits, bool last_only = false,
               const std::function<void()>& before_injection = {});

 private:
  struct FreeDeleter {
    void operator()(float* p) const { std::free(p); }
  };
  struct PackedWeight {  // W [OC, C] packed as the GEMM's B operand (K = C, N = OC)
    PackedWeight(const float* W, int64_t OC, int64_t C);
    std::unique_ptr<float, FreeDeleter> buf;
    gemm::BOperand<float> op;
  };
  struct PackedBlock {
    PackedWeight w_qkv, w_o, w_fc, w_proj;
  };
  Transformer& m_;
  int64_t max_rows_;
  std::vector<PackedBlock> blocks_;
  std::unique_ptr<PackedWeight> lm_head_;
  std::vector<float> x_, ln_, qkv_, att_, mid_, fc_, gelu_, rstd_, lnf_, rope_cos_, rope_sin_;
  std::vector<int64_t> pos_;
};

}  // namespace pg
