// The backbone's layers as forward/backward function pairs (llm.c style), templated on the scalar type:
// float is the training path, double the gradient-check instantiation of the very same code.
//
// Conventions: N = B*T tokens (row-major [N, ...] activations), C model width, OC output width,
// H MLP hidden width, V vocabulary, NH heads, HD = C/NH head width. Linear weights are [out, in], y = x Wᵀ.
// Backward functions ADD into every gradient they produce (dinp and dweight alike); callers zero them.
// Where an activation gradient has a single producer, `accumulate = false` makes that producer overwrite dinp
// instead (saves zeroing a buffer every step); parameter gradients are always added to.
//
// Determinism: every parallel loop runs fixed tasks (token blocks, weight-row blocks, (batch, head) pairs,
// vocabulary blocks) whose boundaries never depend on the thread count, each computed by single-threaded
// code; reductions over tokens are either split over the output dimension or reduced per fixed block and
// then summed in block order. So results are bit-identical for any number of threads and any schedule.
// Nothing here throws inside a parallel region.
//
// Fusion: linear_forward / linear_backward accept a RowEpilogue, called by the task that has just finished
// rows [r0, r0 + nr) of the output (forward) or of dinp (backward), with the task's index. The Transformer
// uses it to apply RoPE, GELU, RMSNorm and their backward passes to rows while they are hot in cache (the
// *_rows functions below), instead of separate passes over memory. Task boundaries are fixed, so fused and
// unfused runs give the same bits.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace pg::layers {

inline constexpr int64_t kGemmRows = 112;  // tokens per GEMM / row task: 8 micro-panels of 14
inline constexpr int64_t kDwRows = 336;  // weight-gradient rows per task (each task streams all N tokens)
inline constexpr int64_t kNormRows = kGemmRows;  // tokens per RMSNorm weight-gradient partial sum (= row tasks)
inline constexpr int64_t kQueryBlock = 64;  // attention queries per block
inline constexpr int64_t kLmGroups = 8;  // LM-head backward: vocabulary-block groups (fixed), one dX partial each

// A non-owning reference to a callable (no allocation), for per-task epilogues.
template <class Sig>
class FunctionRef;
template <class R, class... A>
class FunctionRef<R(A...)> {
 public:
  FunctionRef() = default;
  template <class Fn>
  requires(!std::is_same_v<std::decay_t<Fn>, FunctionRef>)
      FunctionRef(Fn&& f)  // NOLINT(google-explicit-constructor): lambdas convert implicitly
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))), call_([](void* o, A... a) -> R {
          return (*static_cast<std::remove_reference_t<Fn>*>(o))(std::forward<A>(a)...);
        }) {}
  explicit operator bool() const { return call_ != nullptr; }
  R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }

 private:
  void* obj_ = nullptr;
  R (*call_)(void*, A...) = nullptr;
};
// epilogue(r0, nr, task): rows [r0, r0 + nr) are final; task = r0 / kGemmRows.
using RowEpilogue = FunctionRef<void(int64_t, int64_t, int64_t)>;

// Scratch of the fused LM head + cross-entropy. Logits are kept vocabulary-major, logitsᵀ [V, rows], so the
// softmax over the vocabulary runs per vocabulary block (vectorized across tokens) right after that block's
// GEMM. Packed operands are used by float only (null for double).
template <class F>
struct LmHeadScratch {
  F* pack_wa = nullptr;  // W as A (M = V, K = C): gemm::packed_a_floats(V, C)
  F* pack_wn = nullptr;  // W as B (K = V, N = C): gemm::packed_b_floats(V, C)
  F* pack_xt = nullptr;  // one chunk of Xᵀ as B (K = C, N = rows): gemm::packed_b_floats(C, rows)
  F* pack_x = nullptr;  // the chunk of X as B (K = rows, N = C): gemm::packed_b_floats(rows, C)
  F* dx_part = nullptr;  // [kLmGroups, rows, C] partial dX of each vocabulary-block group
  F* logits = nullptr;  // [V, rows] logitsᵀ, then dlogitsᵀ, of one chunk
  F* stats = nullptr;  // [2 * ceil(V / vocab_block) + 1, rows] per-block max / sum, target logits
  int64_t rows = 0;  // tokens per chunk (lm_head_rows)
  int64_t vocab_block = 0;  // vocabulary rows per task, a multiple of 14 (lm_head_vocab_block)
};
// Tokens per LM-head chunk for vocabulary V: the [V, rows] logits chunk up to 128 MiB (multiple of 32, <= 512).
int64_t lm_head_rows(int64_t V);
// Vocabulary rows per LM-head task for a chunk of `rows` tokens (a multiple of 14; block ~1 MiB).
int64_t lm_head_vocab_block(int64_t rows);

// ---- token embedding ----
// out [N, C] = wte[tokens[n]]; tokens [N] already validated; wte [V, C].
template <class F>
void embedding_forward(F* out, const int32_t* tokens, const F* wte, int64_t N, int64_t C);
// dwte [V, C] += scatter of dout [N, C] rows (tokens in order, split over column blocks).
template <class F>
void embedding_backward(F* dwte, const F* dout, const int32_t* tokens, int64_t N, int64_t C);

// ---- RMSNorm (learned weight): out = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps) ----
// out [N, C], rstd [N] (saved for backward), inp [N, C], weight [C].
template <class F>
void rmsnorm_forward(F* out, F* rstd, const F* inp, const F* weight, int64_t N, int64_t C, F eps);
// dinp [N, C] +=, dweight [C] +=; partials [ceil(N / kNormRows), C] scratch; dout [N, C], inp [N, C],
// weight [C], rstd [N].
template <class F>
void rmsnorm_backward(F* dinp, F* dweight, F* partials, const F* dout, const F* inp, const F* weight, const F* rstd,
                      int64_t N, int64_t C);
// Row-range forms (single-threaded; the arrays are the full [N, ...] ones, rows [r0, r0 + nr) are done).
// rmsnorm_backward_rows writes this block's weight-gradient partial (partial [C] = sum over its rows) and adds
// into dinp; rmsnorm_reduce then adds the partials of nblk blocks, in block order, into dweight [C].
template <class F>
void rmsnorm_forward_rows(F* out, F* rstd, const F* inp, const F* weight, int64_t r0, int64_t nr, int64_t C, F eps);
template <class F>
void rmsnorm_backward_rows(F* dinp, F* partial, const F* dout, const F* inp, const F* weight, const F* rstd, int64_t r0,
                           int64_t nr, int64_t C);
template <class F>
void rmsnorm_reduce(F* dweight, const F* partials, int64_t nblk, int64_t C);

// ---- linear, no bias: out = [residual +] inp Wᵀ ----
// out [N, OC], inp [N, C], weight [OC, C], residual [N, OC] or null (may alias nothing else);
// pack_w scratch of gemm::packed_b_floats(C, OC) floats (float only); epilogue on finished output rows.
template <class F>
void linear_forward(F* out, const F* inp, const F* weight, const F* residual, int64_t N, int64_t C, int64_t OC,
                    F* pack_w, RowEpilogue epilogue = {});
// dinp [N, C] += dout W (= if !accumulate), dweight [OC, C] += doutᵀ inp; dout [N, OC], inp [N, C],
// weight [OC, C]; pack_w >= packed_b_floats(OC, C), pack_x >= packed_b_floats(N, C) (float only).
// epilogue on finished dinp rows (it must not touch dout, inp or dweight, which other tasks still read).
template <class F>
void linear_backward(F* dinp, F* dweight, const F* dout, const F* inp, const F* weight, int64_t N, int64_t C,
                     int64_t OC, F* pack_w, F* pack_x, bool accumulate = true, RowEpilogue epilogue = {});

// ---- RoPE, rotate-half pairing (i, i + HD/2), angle t * base^(-2i/HD) ----
// cos, sin [T, HD/2] (computed in double).
template <class F>
void rope_tables(F* cos, F* sin, int64_t T, int64_t HD, double base);
// qkv [B*T, 3C]: rotates the q and k parts in place (v untouched); cos, sin [T, HD/2].
template <class F>
void rope_forward(F* qkv, const F* cos, const F* sin, int64_t B, int64_t T, int64_t C, int64_t NH);
// dqkv [B*T, 3C]: maps the gradient w.r.t. rotated q, k to the gradient w.r.t. unrotated q, k, in place.
template <class F>
void rope_backward(F* dqkv, const F* cos, const F* sin, int64_t B, int64_t T, int64_t C, int64_t NH);
// Row-range form: rows [r0, r0 + nr) of qkv [B*T, 3C] (position = row % T); sign +1 forward, -1 backward.
template <class F>
void rope_rows(F* qkv, const F* cos, const F* sin, int64_t r0, int64_t nr, int64_t T, int64_t C, int64_t NH, F sign);

// ---- causal self-attention, scale 1/sqrt(HD), per (batch, head), query blocks of kQueryBlock ----
// out [B*T, C] (heads side by side), lse [B, NH, T] log-sum-exp of the scaled scores (saved for backward),
// qkv [B*T, 3C] (q, k already rotated).
template <class F>
void attention_forward(F* out, F* lse, const F* qkv, int64_t B, int64_t T, int64_t C, int64_t NH);
// dqkv [B*T, 3C] += (= if !accumulate); dout [B*T, C]; qkv, out, lse as saved by the forward.
// Probabilities are recomputed from lse. With rope_cos / rope_sin ([T, HD/2]) the q, k gradients are also
// mapped through the inverse rotation (rope_backward fused in); null = gradients w.r.t. the rotated q, k.
template <class F>
void attention_backward(F* dqkv, const F* dout, const F* qkv, const F* out, const F* lse, int64_t B, int64_t T,
                        int64_t C, int64_t NH, bool accumulate = true, const F* rope_cos = nullptr,
                        const F* rope_sin = nullptr);

// ---- GELU, exact erf form ----
// out [N, H] = gelu(inp [N, H]).
template <class F>
void gelu_forward(F* out, const F* inp, int64_t N, int64_t H);
// dinp [N, H] += dout * gelu'(inp)   (= if !accumulate).
template <class F>
void gelu_backward(F* dinp, const F* inp, const F* dout, int64_t N, int64_t H, bool accumulate = true);
// Row-range forms (rows [r0, r0 + nr) of the full arrays).
template <class F>
void gelu_forward_rows(F* out, const F* inp, int64_t r0, int64_t nr, int64_t H);
template <class F>
void gelu_backward_rows(F* dinp, const F* inp, const F* dout, int64_t r0, int64_t nr, int64_t H, bool accumulate);

// ---- LM head fused with softmax cross-entropy, in token chunks (never the whole [N, V] logits) ----
// losses [N] = -log softmax(inp Wᵀ)[target]; returns their mean. With dinp != null also
// dinp [N, C] += dL/dinp (= if !accumulate) and dweight [V, C] += dL/dW for L = dloss * sum(losses)
// (dloss = scale / N). inp [N, C], weight [V, C], targets [N] (validated).
template <class F>
double lm_head_ce(F* dinp, F* dweight, double* losses, const F* inp, const F* weight, const int32_t* targets, int64_t N,
                  int64_t C, int64_t V, F dloss, const LmHeadScratch<F>& s, bool accumulate = true,
                  bool round_logits = false);  // autocast: the logits rounded to bf16 before the softmax

// ---- helpers ----
// p[0:n] = 0 in parallel (fixed blocks).
template <class F>
void parallel_zero(F* p, size_t n);
// BF16 autocast (train.precision: autocast): x[i] = bf16(x[i]) in place, the value rounded to bf16 (kernels/gemm.h
// to_bf16: round to nearest even) and kept as F; a no-op for double (the gradient-check instantiation).
template <class F>
void round_bf16(F* x, int64_t n);  // split over threads
// gemm::to_bf16 then from_bf16, without branches (the compiler vectorizes the loops below).
inline float round_bf16_value(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;  // round to nearest even
  r = (u & 0x7FFFFFFFu) > 0x7F800000u ? ((u | 0x00400000u) & 0xFFFF0000u) : r;  // NaN: made quiet
  r = (u & 0x7F800000u) == 0 ? (u & 0x80000000u) : r;  // zero, denormal: signed zero
  return std::bit_cast<float>(r);
}
template <class F>
inline void round_bf16_rows(F* x, int64_t r0, int64_t nr, int64_t width) {
  if constexpr (std::is_same_v<F, float>)
    for (int64_t i = r0 * width, e = (r0 + nr) * width; i < e; ++i) x[i] = round_bf16_value(x[i]);
}
// Rows [r0, r0 + nr) of out [N, width] = residual + bf16(out): a bf16 output joining an F residual stream.
template <class F>
inline void add_bf16_rows(F* out, const F* residual, int64_t r0, int64_t nr, int64_t width) {
  for (int64_t i = r0 * width, e = (r0 + nr) * width; i < e; ++i) {
    if constexpr (std::is_same_v<F, float>) out[i] = residual[i] + round_bf16_value(out[i]);
    else out[i] += residual[i];
  }
}

}  // namespace pg::layers
