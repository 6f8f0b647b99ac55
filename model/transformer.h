// The backbone Transformer (docs/model.md §2): pre-norm decoder with hand-written forward and backward passes.
// Owns one contiguous parameter buffer, one gradient buffer and one activation arena, all allocated once.
//
//   x = tok_emb[w]                                   (no positional embedding: RoPE in attention)
//   per block l:  [x += g e   (ResidualInjector, memory tables)]
//                 x += W_o Attn(RoPE(W_qkv RMSNorm(x)))   causal, scale 1/sqrt(hd), heads of hd = C / NH
//                 x += W_proj GELU(W_fc RMSNorm(x))        exact erf GELU, hidden H = mlp_ratio * C
//   logits = lm_head RMSNorm(x);  loss = mean over all B*T predictions of -log softmax(logits)[target] (nats)
//
// Linear weights are stored [out, in] and applied y = x Wᵀ; no biases; untied embedding and LM head.
// Results are bit-identical run to run and for any OpenMP thread count (see model/layers.h).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kernels/gemm.h"
#include "model/config.h"

namespace pg {

// A named view into params()/grads(): elements [offset, offset + size) with the given shape.
struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset;
  size_t size;
  bool decay;  // weight decay applies (matrices: embeddings, linears, LM head; not norm weights)
};

// Pointers into one of the model's buffers (parameters or gradients), per tensor: the hot path and the decoder use
// these instead of looking tensors up by name.
template <class F>
struct BlockViews {
  F *attn_norm, *w_qkv, *w_o, *mlp_norm, *w_fc, *w_proj;
};
template <class F>
struct ModelViews {
  F* tok_emb = nullptr;
  std::vector<BlockViews<F>> blocks;
  F* final_norm = nullptr;
  F* lm_head = nullptr;
};

// Memory tables plug in here: called on the residual stream entering a block, before its attention norm.
struct ResidualInjector {
  virtual ~ResidualInjector() = default;
  virtual bool injects(int64_t layer) const = 0;
  // x: [N, C] residual stream (N = B*T tokens, row-major) entering block `layer`; modify in place (x += g * e).
  virtual void inject_forward(int64_t layer, float* x, int64_t N) = 0;
  // dx: [N, C] gradient w.r.t. the stream after injection; accumulate the injector's own gradients and
  // update dx in place to the gradient w.r.t. the stream before injection.
  virtual void inject_backward(int64_t layer, float* dx, int64_t N) = 0;
};

// F = float for training; F = double instantiates the same code for gradient checks.
template <class F>
class TransformerT {
 public:
  // Validates cfg (ConfigError) and allocates parameters, gradients and activations for up to
  // `micro_batch` windows of config().context tokens, once. Parameters start at zero: call init().
  TransformerT(const ModelConfig& cfg, int64_t micro_batch);
  ~TransformerT();
  TransformerT(const TransformerT&) = delete;
  TransformerT& operator=(const TransformerT&) = delete;

  const ModelConfig& config() const { return cfg_; }
  int64_t micro_batch() const { return micro_batch_; }

  // Each one contiguous buffer (64-byte aligned), laid out as param_infos() says, no gaps.
  std::span<F> params() { return {params_, num_params_}; }
  std::span<F> grads() { return {grads_, num_params_}; }
  std::span<const F> params() const { return {params_, num_params_}; }
  std::span<const F> grads() const { return {grads_, num_params_}; }
  // Named views in buffer order: "tok_emb", "blocks.<l>.attn_norm", "blocks.<l>.w_qkv", "blocks.<l>.w_o",
  // "blocks.<l>.mlp_norm", "blocks.<l>.w_fc", "blocks.<l>.w_proj", "final_norm", "lm_head".
  const std::vector<ParamInfo>& param_infos() const { return infos_; }
  // The view of one named tensor (InternalError for an unknown name).
  const ParamInfo& param_info(std::string_view name) const;
  std::span<F> param(std::string_view name);
  std::span<F> grad(std::string_view name);
  // Every tensor of params() / grads() as pointers, by block.
  const ModelViews<F>& weights() const { return weights_; }
  const ModelViews<F>& gradients() const { return gradients_; }

  // Initialization, from RngStream(seed, "backbone.init") with one child stream per parameter name (so adding
  // a parameter never shifts the others); value i of a tensor is the i-th normal of its stream:
  //   tok_emb, w_qkv, w_fc, lm_head:  normal(0, init_std)
  //   w_o, w_proj (output projections into the residual stream): normal(0, init_std / sqrt(2 L))
  //   attn_norm, mlp_norm, final_norm: 1
  void init(uint64_t seed);
  void zero_grads();

  // windows: [B, T+1] token ids (inputs w[:, :T], targets w[:, 1:]), 1 <= B <= micro_batch, T = context.
  // Adds d(loss_scale * meanCE)/dθ into grads(); returns the mean CE of this micro-batch (nats).
  // Throws UserError for a token id outside [0, vocab) (before any work).
  double forward_backward(const int32_t* windows, int64_t B, float loss_scale);
  // The same forward pass without gradient work; bit-identical to forward_backward's return value.
  double forward_loss(const int32_t* windows, int64_t B);
  // Per-token losses [B*T] of the last forward (nats), row-major [B, T].
  std::span<const double> token_losses() const { return {token_losses_.data(), static_cast<size_t>(last_n_)}; }

  // The precision of the float GEMMs of forward_backward / forward_loss (kernels/gemm.h; default fp32): set for the
  // duration of each call. bf16 rounds the GEMM operands (weights and activations) to bf16 and accumulates in
  // fp32, as BF16 autocast does; parameters, gradients, norms, softmax and the loss stay in F.
  void set_precision(gemm::Precision p) { precision_ = p; }
  gemm::Precision precision() const { return autocast_ ? gemm::Precision::bf16 : precision_; }
  // BF16 autocast (train.precision: autocast; float only): bf16 GEMMs as above, and the tensors PyTorch's BF16
  // autocast keeps in bf16 are rounded to bf16 where they are made: the outputs of the linear layers (qkv, the
  // attention and MLP projections before they join the residual stream, the MLP hidden layer, the logits), the
  // attention output and GELU's output; backward, the gradients reaching those tensors and the bf16 copies of the
  // norms' outputs. Norms, softmax, the loss, the residual stream, parameters and gradients of parameters stay in F.
  void set_autocast(bool on) { autocast_ = on; }
  bool autocast() const { return autocast_; }

  // The residual injector (memory tables); nullptr = none. Not owned.
  void set_injector(ResidualInjector* inj) requires std::is_same_v<F, float> { injector_ = inj; }
  ResidualInjector* injector() const { return injector_; }

  // 6 * (parameters excluding tok_emb) + 12 * L * T * C  (PERFORMANCE.md convention).
  static double flops_per_token(const ModelConfig& cfg);
  static int64_t count_params(const ModelConfig& cfg);
  // Bytes of the activation arena for micro-batches of `micro_batch` windows (what the constructor allocates).
  static int64_t activation_bytes(const ModelConfig& cfg, int64_t micro_batch);

 private:
  struct Arena;
  static void plan_arena(Arena& a, const ModelConfig& cfg, int64_t micro_batch,
                         std::vector<std::pair<F**, size_t>>& req);
  double run(const int32_t* windows, int64_t B, float loss_scale, bool backward);
  void check_tokens(const int32_t* windows, int64_t B) const;

  ModelConfig cfg_;
  int64_t micro_batch_;
  size_t num_params_ = 0;
  F* params_ = nullptr;
  F* grads_ = nullptr;
  std::vector<ParamInfo> infos_;
  ModelViews<F> weights_, gradients_;
  std::unique_ptr<Arena> arena_;
  std::vector<double> token_losses_;
  int64_t last_n_ = 0;
  ResidualInjector* injector_ = nullptr;
  gemm::Precision precision_ = gemm::Precision::fp32;
  bool autocast_ = false;
};

// The training model (float). A class (not an alias) so it can be forward-declared.
class Transformer : public TransformerT<float> {
 public:
  using TransformerT<float>::TransformerT;
};

extern template class TransformerT<float>;
extern template class TransformerT<double>;

}  // namespace pg
