// Implementation of model/transformer.h: parameter layout, the activation arena, init, and the forward /
// backward sequence over the layer functions of model/layers.h.
#include "model/transformer.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "core/error.h"
#include "core/rng.h"
#include "kernels/gemm.h"
#include "model/layers.h"

namespace pg {
namespace {

template <class F>
F* alloc_zeroed(size_t n) {
  const size_t bytes = std::max<size_t>(64, (n * sizeof(F) + 63) / 64 * 64);
  F* p = static_cast<F*>(std::aligned_alloc(64, bytes));
  PG_CHECK(p != nullptr, "out of memory allocating ", bytes, " bytes");
  std::memset(p, 0, bytes);  // touch every page now, never during a step
  return p;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

// All activations and scratch of one micro-batch of up to micro_batch windows, in one allocation.
template <class F>
struct TransformerT<F>::Arena {
  F* base = nullptr;
  std::vector<F*> resid;  // [L+1] x [N, C]: the stream entering block l (after injection); resid[L] is final
  std::vector<F*> ln1, rstd1, qkv, lse, att, resid_mid, ln2, rstd2, fc, gelu;  // per layer
  F *lnf = nullptr, *rstdf = nullptr;
  F *dres = nullptr, *dln = nullptr, *dqkv = nullptr, *datt = nullptr, *dfc = nullptr, *dgelu = nullptr;
  F *pack_w = nullptr, *pack_x = nullptr, *norm_partials = nullptr, *rope_cos = nullptr, *rope_sin = nullptr;
  layers::LmHeadScratch<F> lm;
  std::vector<int32_t> inputs, targets;
  ~Arena() { std::free(base); }
};

// Every activation view of the arena with its size, in allocation order (one place for the constructor and the
// memory estimate).
template <class F>
void TransformerT<F>::plan_arena(Arena& a, const ModelConfig& cfg_, int64_t micro_batch,
                                 std::vector<std::pair<F**, size_t>>& req) {
  const int64_t L = cfg_.layers, C = cfg_.d_model, H = cfg_.mlp_ratio * C, V = cfg_.vocab, T = cfg_.context;
  const int64_t NH = cfg_.heads, HD = cfg_.head_dim(), N = micro_batch * T;
  auto take = [&](F*& p, size_t n) { req.emplace_back(&p, n); };
  a.resid.resize(L + 1);
  for (auto* v : {&a.ln1, &a.rstd1, &a.qkv, &a.lse, &a.att, &a.resid_mid, &a.ln2, &a.rstd2, &a.fc, &a.gelu})
    v->resize(L);
  for (int64_t l = 0; l <= L; ++l) take(a.resid[l], N * C);
  for (int64_t l = 0; l < L; ++l) {
    take(a.ln1[l], N * C);
    take(a.rstd1[l], N);
    take(a.qkv[l], N * 3 * C);
    take(a.lse[l], micro_batch * NH * T);
    take(a.att[l], N * C);
    take(a.resid_mid[l], N * C);
    take(a.ln2[l], N * C);
    take(a.rstd2[l], N);
    take(a.fc[l], N * H);
    take(a.gelu[l], N * H);
  }
  take(a.lnf, N * C);
  take(a.rstdf, N);
  take(a.dres, N * C);
  take(a.dln, N * C);
  take(a.dqkv, N * 3 * C);
  take(a.datt, N * C);
  take(a.dfc, N * H);
  take(a.dgelu, N * H);
  take(a.norm_partials, ((N + layers::kNormRows - 1) / layers::kNormRows) * C);
  take(a.rope_cos, T * (HD / 2));
  take(a.rope_sin, T * (HD / 2));
  a.lm.rows = std::min(layers::lm_head_rows(V), N);
  take(a.lm.logits, a.lm.rows * V);
  take(a.lm.dx_part, layers::kLmGroups * a.lm.rows * C);
  a.lm.vocab_block = layers::lm_head_vocab_block(a.lm.rows);
  take(a.lm.stats, (2 * ((V + a.lm.vocab_block - 1) / a.lm.vocab_block) + 1) * a.lm.rows);
  if constexpr (std::is_same_v<F, float>) {  // packed GEMM operands (the double path uses plain views)
    using gemm::packed_a_floats;
    using gemm::packed_b_floats;
    int64_t pw = 0;
    for (auto [K, Nn] :
         std::initializer_list<std::pair<int64_t, int64_t>>{{C, 3 * C}, {C, C}, {C, H}, {H, C}, {3 * C, C}})
      pw = std::max(pw, packed_b_floats(K, Nn));
    take(a.pack_w, pw);
    take(a.pack_x, std::max(packed_b_floats(N, C), packed_b_floats(N, H)));
    take(a.lm.pack_wa, packed_a_floats(V, C));
    take(a.lm.pack_wn, packed_b_floats(V, C));
    take(a.lm.pack_xt, packed_b_floats(C, a.lm.rows));
    take(a.lm.pack_x, packed_b_floats(a.lm.rows, C));
  }
}

template <class F>
int64_t TransformerT<F>::activation_bytes(const ModelConfig& c, int64_t micro_batch) {
  Arena a;
  std::vector<std::pair<F**, size_t>> req;
  plan_arena(a, c, micro_batch, req);
  size_t total = 0;
  for (auto& [p, n] : req) total += (n + 15) / 16 * 16;
  return static_cast<int64_t>(total * sizeof(F));
}

template <class F>
int64_t TransformerT<F>::count_params(const ModelConfig& c) {
  const int64_t C = c.d_model, H = c.mlp_ratio * C, V = c.vocab;
  return 2 * V * C + c.layers * (2 * C + 4 * C * C + 2 * H * C) + C;
}

template <class F>
double TransformerT<F>::flops_per_token(const ModelConfig& c) {
  const double non_emb = static_cast<double>(count_params(c) - c.vocab * c.d_model);
  return 6.0 * non_emb + 12.0 * static_cast<double>(c.layers * c.context * c.d_model);
}

template <class F>
TransformerT<F>::TransformerT(const ModelConfig& cfg, int64_t micro_batch) : cfg_(cfg), micro_batch_(micro_batch) {
  cfg_.validate("Transformer");
  PG_CHECK(micro_batch >= 1, "micro_batch must be >= 1, got ", micro_batch);
  const int64_t L = cfg_.layers, C = cfg_.d_model, H = cfg_.mlp_ratio * C, V = cfg_.vocab, T = cfg_.context;
  const int64_t HD = cfg_.head_dim(), N = micro_batch * T;

  // ---- parameters: one buffer, named views in order
  size_t off = 0;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    const bool decay = shape.size() >= 2;
    infos_.push_back(ParamInfo{std::move(name), std::move(shape), off, n, decay});
    off += n;
  };
  add("tok_emb", {V, C});
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    add(p + "attn_norm", {C});
    add(p + "w_qkv", {3 * C, C});
    add(p + "w_o", {C, C});
    add(p + "mlp_norm", {C});
    add(p + "w_fc", {H, C});
    add(p + "w_proj", {C, H});
  }
  add("final_norm", {C});
  add("lm_head", {V, C});
  num_params_ = off;
  PG_CHECK(static_cast<int64_t>(num_params_) == count_params(cfg_));
  params_ = alloc_zeroed<F>(num_params_);
  grads_ = alloc_zeroed<F>(num_params_);
  for (auto [views, base] : {std::pair{&weights_, params_}, std::pair{&gradients_, grads_}}) {
    auto at = [&](const std::string& name) { return base + param_info(name).offset; };
    views->tok_emb = at("tok_emb");
    for (int64_t l = 0; l < L; ++l) {
      const std::string p = "blocks." + std::to_string(l) + ".";
      views->blocks.push_back(
          {at(p + "attn_norm"), at(p + "w_qkv"), at(p + "w_o"), at(p + "mlp_norm"), at(p + "w_fc"), at(p + "w_proj")});
    }
    views->final_norm = at("final_norm");
    views->lm_head = at("lm_head");
  }

  // ---- activation arena: sizes first, then one allocation
  arena_ = std::make_unique<Arena>();
  Arena& a = *arena_;
  std::vector<std::pair<F**, size_t>> req;
  plan_arena(a, cfg_, micro_batch, req);
  size_t total = 0;
  for (auto& [p, n] : req) total += (n + 15) / 16 * 16;  // every view 64-byte aligned
  a.base = alloc_zeroed<F>(total);
  size_t pos = 0;
  for (auto& [p, n] : req) {
    *p = a.base + pos;
    pos += (n + 15) / 16 * 16;
  }
  layers::rope_tables(a.rope_cos, a.rope_sin, T, HD, cfg_.rope_base);
  a.inputs.resize(N);
  a.targets.resize(N);
  token_losses_.resize(N);
}

template <class F>
TransformerT<F>::~TransformerT() {
  std::free(params_);
  std::free(grads_);
}

template <class F>
const ParamInfo& TransformerT<F>::param_info(std::string_view name) const {
  for (const ParamInfo& p : infos_)
    if (p.name == name) return p;
  PG_CHECK(false, "no parameter named '", name, "'");
  return infos_.front();  // unreachable
}
template <class F>
std::span<F> TransformerT<F>::param(std::string_view name) {
  const ParamInfo& p = param_info(name);
  return {params_ + p.offset, p.size};
}
template <class F>
std::span<F> TransformerT<F>::grad(std::string_view name) {
  const ParamInfo& p = param_info(name);
  return {grads_ + p.offset, p.size};
}

template <class F>
void TransformerT<F>::init(uint64_t seed) {
  const RngStream root(seed, "backbone.init");
  const double out_scale = 1.0 / std::sqrt(2.0 * static_cast<double>(cfg_.layers));
  for (const ParamInfo& info : infos_) {
    F* p = params_ + info.offset;
    const int64_t n = static_cast<int64_t>(info.size);
    if (ends_with(info.name, "norm")) {
      std::fill(p, p + n, F(1));
      continue;
    }
    const bool out_proj = ends_with(info.name, ".w_o") || ends_with(info.name, ".w_proj");
    const double sd = cfg_.init_std * (out_proj ? out_scale : 1.0);
    const RngStream stream = root.child(info.name);
    constexpr int64_t kBlock = 4096;
    const int64_t nb = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; ++b) {
      RngStream r = stream;
      r.set_counter(2 * static_cast<uint64_t>(b * kBlock));  // normal() consumes two values
      const int64_t e = std::min(n, (b + 1) * kBlock);
      for (int64_t i = b * kBlock; i < e; ++i) p[i] = static_cast<F>(r.normal() * sd);
    }
  }
}

template <class F>
void TransformerT<F>::zero_grads() {
  layers::parallel_zero(grads_, num_params_);
}

template <class F>
void TransformerT<F>::check_tokens(const int32_t* windows, int64_t B) const {
  const int64_t W = cfg_.context + 1;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < W; ++t) {
      const int32_t id = windows[b * W + t];
      if (id < 0 || id >= cfg_.vocab)
        throw UserError(str("Transformer: token id ", id, " at window ", b, ", position ", t, " is outside [0, ",
                            cfg_.vocab, ") (hint: model.vocab must match the tokenizer's vocabulary)"));
    }
}

template <class F>
double TransformerT<F>::forward_backward(const int32_t* windows, int64_t B, float loss_scale) {
  return run(windows, B, loss_scale, true);
}
template <class F>
double TransformerT<F>::forward_loss(const int32_t* windows, int64_t B) {
  return run(windows, B, 0.0f, false);
}

template <class F>
double TransformerT<F>::run(const int32_t* windows, int64_t B, float loss_scale, bool backward) {
  PG_CHECK(B >= 1 && B <= micro_batch_, "batch ", B, " outside [1, micro_batch = ", micro_batch_, "]");
  check_tokens(windows, B);
  const gemm::PrecisionScope scope(precision());  // the double instantiation's GEMMs ignore it
  // Autocast (set_autocast): the bf16 roundings of PyTorch's BF16 autocast, each where its tensor is made; a tensor
  // that only GEMMs read (GELU's output, its gradient dfc) is rounded by their packing (rounding twice changes
  // nothing), so it gets no pass of its own.
  const bool ac = autocast_ && std::is_same_v<F, float>;
  using namespace layers;
  Arena& a = *arena_;
  const int64_t L = cfg_.layers, C = cfg_.d_model, H = cfg_.mlp_ratio * C, V = cfg_.vocab, T = cfg_.context;
  const int64_t NH = cfg_.heads, N = B * T;
  const F eps = static_cast<F>(cfg_.norm_eps);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      a.inputs[b * T + t] = windows[b * (T + 1) + t];
      a.targets[b * T + t] = windows[b * (T + 1) + t + 1];
    }
  const ModelViews<F>& P = weights_;
  const ModelViews<F>& G = gradients_;
  auto inject_fwd = [&](int64_t l, F* x) {
    if constexpr (std::is_same_v<F, float>)
      if (injector_ && injector_->injects(l)) injector_->inject_forward(l, x, N);
  };
  auto inject_bwd = [&](int64_t l, F* dx) {
    if constexpr (std::is_same_v<F, float>)
      if (injector_ && injector_->injects(l)) injector_->inject_backward(l, dx, N);
  };

  auto injects = [&](int64_t l) {
    if constexpr (std::is_same_v<F, float>) return injector_ != nullptr && injector_->injects(l);
    return false;
  };

  // ---- forward. Row-wise ops run as epilogues of the GEMM tasks that finish those rows (layers.h).
  embedding_forward(a.resid[0], a.inputs.data(), P.tok_emb, N, C);
  inject_fwd(0, a.resid[0]);
  rmsnorm_forward(a.ln1[0], a.rstd1[0], a.resid[0], P.blocks[0].attn_norm, N, C, eps);
  for (int64_t l = 0; l < L; ++l) {
    const BlockViews<F>& w = P.blocks[static_cast<size_t>(l)];
    const F* mlp_norm = w.mlp_norm;
    // qkv = ln1 W_qkvᵀ, then RoPE on q, k
    linear_forward(a.qkv[l], a.ln1[l], w.w_qkv, static_cast<const F*>(nullptr), N, C, 3 * C, a.pack_w,
                   [&](int64_t r0, int64_t nr, int64_t) {
                     if (ac)
                       round_bf16_rows(a.qkv[l], r0, nr, 3 * C);  // the linear's bf16 output; RoPE with fp32 tables
                     rope_rows(a.qkv[l], a.rope_cos, a.rope_sin, r0, nr, T, C, NH, F(1));
                   });
    attention_forward(a.att[l], a.lse[l], a.qkv[l], B, T, C, NH);
    if (ac) round_bf16(a.att[l], N * C);
    // resid_mid = resid + att W_oᵀ, then ln2 = RMSNorm(resid_mid)
    // (autocast: the projection's bf16 output joins the fp32 residual stream: resid_mid = resid + bf16(att W_oᵀ))
    linear_forward(a.resid_mid[l], a.att[l], w.w_o, ac ? static_cast<const F*>(nullptr) : a.resid[l], N, C, C, a.pack_w,
                   [&](int64_t r0, int64_t nr, int64_t) {
                     if (ac) add_bf16_rows(a.resid_mid[l], a.resid[l], r0, nr, C);
                     rmsnorm_forward_rows(a.ln2[l], a.rstd2[l], a.resid_mid[l], mlp_norm, r0, nr, C, eps);
                   });
    // gelu = GELU(ln2 W_fcᵀ)
    linear_forward(a.fc[l], a.ln2[l], w.w_fc, static_cast<const F*>(nullptr), N, C, H, a.pack_w,
                   [&](int64_t r0, int64_t nr, int64_t) {
                     if (ac) round_bf16_rows(a.fc[l], r0, nr, H);
                     gelu_forward_rows(a.gelu[l], a.fc[l], r0, nr, H);  // bf16: the GEMMs reading it round it
                   });
    // resid[l+1] = resid_mid + gelu W_projᵀ, then the next norm (unless an injection comes first)
    const bool last = l + 1 == L, inject_next = !last && injects(l + 1);
    F* next_ln = last ? a.lnf : a.ln1[l + 1];
    F* next_rstd = last ? a.rstdf : a.rstd1[l + 1];
    const F* next_w = last ? P.final_norm : P.blocks[static_cast<size_t>(l + 1)].attn_norm;
    linear_forward(a.resid[l + 1], a.gelu[l], w.w_proj, ac ? static_cast<const F*>(nullptr) : a.resid_mid[l], N, H, C,
                   a.pack_w, [&](int64_t r0, int64_t nr, int64_t) {
                     if (ac) add_bf16_rows(a.resid[l + 1], a.resid_mid[l], r0, nr, C);
                     if (!inject_next) rmsnorm_forward_rows(next_ln, next_rstd, a.resid[l + 1], next_w, r0, nr, C, eps);
                   });
    if (inject_next) {
      inject_fwd(l + 1, a.resid[l + 1]);
      rmsnorm_forward(next_ln, next_rstd, a.resid[l + 1], next_w, N, C, eps);
    }
  }
  const F dloss = static_cast<F>(static_cast<double>(loss_scale) / static_cast<double>(N));
  const double loss = lm_head_ce(backward ? a.dln : static_cast<F*>(nullptr), G.lm_head, token_losses_.data(), a.lnf,
                                 P.lm_head, a.targets.data(), N, C, V, dloss, a.lm, /*accumulate=*/false, ac);
  last_n_ = N;
  if (!backward) return loss;

  // ---- backward (dres: gradient w.r.t. the residual stream, carried down through the blocks). Activation
  // gradients with a single producer are overwritten (accumulate = false) rather than zeroed and added to;
  // row-wise backward ops run as epilogues of the GEMM tasks that produce their input rows.
  const int64_t nblk = (N + kNormRows - 1) / kNormRows;
  parallel_zero(a.dres, N * C);
  if (ac) round_bf16(a.dln, N * C);  // the gradient of the bf16 copy of lnf the LM head read
  rmsnorm_backward(a.dres, G.final_norm, a.norm_partials, a.dln, a.resid[L], P.final_norm, a.rstdf, N, C);
  for (int64_t l = L - 1; l >= 0; --l) {
    const BlockViews<F>& w = P.blocks[static_cast<size_t>(l)];
    const BlockViews<F>& g = G.blocks[static_cast<size_t>(l)];
    const F* mlp_norm = w.mlp_norm;
    const F* attn_norm = w.attn_norm;
    // MLP: resid[l+1] = resid_mid + W_proj gelu(W_fc ln2(resid_mid))
    linear_backward(a.dgelu, g.w_proj, a.dres, a.gelu[l], w.w_proj, N, H, C, a.pack_w, a.pack_x, false,
                    [&](int64_t r0, int64_t nr, int64_t) {
                      if (ac) round_bf16_rows(a.dgelu, r0, nr, H);  // gradients of bf16 tensors are bf16
                      gelu_backward_rows(a.dfc, a.fc[l], a.dgelu, r0, nr, H, false);  // bf16 as GELU's output
                    });
    linear_backward(a.dln, g.w_fc, a.dfc, a.ln2[l], w.w_fc, N, C, H, a.pack_w, a.pack_x, false,
                    [&](int64_t r0, int64_t nr, int64_t task) {
                      if (ac) round_bf16_rows(a.dln, r0, nr, C);
                      rmsnorm_backward_rows(a.dres, a.norm_partials + task * C, a.dln, a.resid_mid[l], mlp_norm,
                                            a.rstd2[l], r0, nr, C);
                    });
    rmsnorm_reduce(g.mlp_norm, a.norm_partials, nblk, C);
    // attention: resid_mid = resid[l] + W_o attn(rope(W_qkv ln1(resid[l])))
    linear_backward(a.datt, g.w_o, a.dres, a.att[l], w.w_o, N, C, C, a.pack_w, a.pack_x, false,
                    [&](int64_t r0, int64_t nr, int64_t) {
                      if (ac) round_bf16_rows(a.datt, r0, nr, C);
                    });
    attention_backward(a.dqkv, a.datt, a.qkv[l], a.att[l], a.lse[l], B, T, C, NH, false, a.rope_cos, a.rope_sin);
    linear_backward(a.dln, g.w_qkv, a.dqkv, a.ln1[l], w.w_qkv, N, C, 3 * C, a.pack_w, a.pack_x, false,
                    [&](int64_t r0, int64_t nr, int64_t task) {
                      if (ac) round_bf16_rows(a.dln, r0, nr, C);
                      rmsnorm_backward_rows(a.dres, a.norm_partials + task * C, a.dln, a.resid[l], attn_norm,
                                            a.rstd1[l], r0, nr, C);
                    });
    rmsnorm_reduce(g.attn_norm, a.norm_partials, nblk, C);
    inject_bwd(l, a.dres);
  }
  embedding_backward(G.tok_emb, a.dres, a.inputs.data(), N, C);
  return loss;
}

template class TransformerT<float>;
template class TransformerT<double>;

}  // namespace pg
