// Implementation of model/decoder.h.
#include "model/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "kernels/gemm.h"
#include "model/layers.h"

namespace pg {
namespace {
constexpr int64_t kColBlock = 128;  // output columns per task (a multiple of gemm::kNr)

// out[n, o] = [residual[n, o] +] <inp[n, :], W[o, :]> for n < N, o < OC, with W pre-packed (B = Wᵀ, K = C).
// Tasks split the output columns, so a forward of 1 row or 64 uses every thread; every element is one sequential
// FMA chain over k (kernels/gemm.h), the same bits as the training forward pass for any N, thread count and ISA.
void matmul_rows(float* out, const float* inp, const gemm::BOperand<float>& w, const float* residual, int64_t N,
                 int64_t C, int64_t OC) {
  const int64_t ntask = (OC + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < ntask; ++t) {
    const int64_t o0 = t * kColBlock, no = std::min(kColBlock, OC - o0);
    if (residual)
      for (int64_t n = 0; n < N; ++n)
        std::memcpy(out + n * OC + o0, residual + n * OC + o0, static_cast<size_t>(no) * sizeof(float));
    gemm::gemm_b(N, no, C, gemm::View{inp, C, 1}, w, 0, o0, out + o0, OC, residual != nullptr);
  }
}
}  // namespace

Decoder::PackedWeight::PackedWeight(const float* W, int64_t OC, int64_t C) {
  const size_t n = static_cast<size_t>(gemm::packed_b_floats(C, OC));
  buf.reset(static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64)));
  PG_CHECK(buf != nullptr, "out of memory packing decoder weights");
  op = gemm::make_b(buf.get(), gemm::View{W, 1, C}, C, OC);  // B(k = c, j = o) = W[o, c]
#pragma omp parallel
  gemm::pack_operand(op);
}

KvCache::KvCache(const ModelConfig& cfg)
    : L_(cfg.layers),
      cap_(cfg.context),
      C_(cfg.d_model),
      k_(static_cast<size_t>(cfg.layers * cfg.context * cfg.d_model)),
      v_(static_cast<size_t>(cfg.layers * cfg.context * cfg.d_model)) {}

void KvCache::copy_prefix(const KvCache& o, int64_t n) {
  PG_CHECK(o.L_ == L_ && o.cap_ == cap_ && o.C_ == C_ && n >= 0 && n <= o.len_);
  for (int64_t l = 0; l < L_; ++l) {
    std::memcpy(k(l, 0), o.k_.data() + l * cap_ * C_, static_cast<size_t>(n * C_) * sizeof(float));
    std::memcpy(v(l, 0), o.v_.data() + l * cap_ * C_, static_cast<size_t>(n * C_) * sizeof(float));
  }
  len_ = n;
}

Decoder::Decoder(Transformer& model, int64_t max_rows) : m_(model), max_rows_(max_rows) {
  PG_CHECK(max_rows >= 1);
  const ModelConfig& c = model.config();
  const int64_t C = c.d_model, H = c.mlp_ratio * C, T = c.context, HD = c.head_dim();
  const auto n = [](int64_t x) { return static_cast<size_t>(x); };
  for (auto* b : {&x_, &ln_, &att_, &mid_, &lnf_}) b->resize(n(max_rows * C));
  qkv_.resize(n(max_rows * 3 * C));
  fc_.resize(n(max_rows * H));
  gelu_.resize(n(max_rows * H));
  rstd_.resize(n(max_rows));
  rope_cos_.resize(n(T * (HD / 2)));
  rope_sin_.resize(n(T * (HD / 2)));
  layers::rope_tables(rope_cos_.data(), rope_sin_.data(), T, HD, c.rope_base);
  const ModelViews<float>& P = model.weights();
  for (const BlockViews<float>& w : P.blocks)
    blocks_.push_back({PackedWeight(w.w_qkv, 3 * C, C), PackedWeight(w.w_o, C, C), PackedWeight(w.w_fc, H, C),
                       PackedWeight(w.w_proj, C, H)});
  lm_head_ = std::make_unique<PackedWeight>(P.lm_head, c.vocab, C);
}

void Decoder::forward(std::span<const int32_t> tokens, std::span<KvCache* const> caches, float* logits, bool last_only,
                      const std::function<void()>& before_injection) {
  using namespace layers;
  const ModelConfig& c = m_.config();
  const int64_t N = static_cast<int64_t>(tokens.size());
  const int64_t L = c.layers, C = c.d_model, H = c.mlp_ratio * C, V = c.vocab, NH = c.heads, HD = c.head_dim();
  const int64_t half = HD / 2;
  const float eps = static_cast<float>(c.norm_eps);
  PG_CHECK(N >= 1 && N <= max_rows_ && caches.size() == tokens.size(), "Decoder::forward: ", N, " rows, ",
           caches.size(), " caches, max ", max_rows_);
  // Positions: each row after its cache's current length and the earlier rows of the same cache.
  pos_.assign(static_cast<size_t>(N), 0);
  for (int64_t i = 0; i < N; ++i) {
    int64_t earlier = 0;
    for (int64_t j = i - 1; j >= 0 && caches[static_cast<size_t>(j)] == caches[static_cast<size_t>(i)]; --j) ++earlier;
    for (int64_t j = 0; j < i - earlier; ++j)
      PG_CHECK(caches[static_cast<size_t>(j)] != caches[static_cast<size_t>(i)],
               "Decoder::forward: the rows of one sequence must be consecutive");
    pos_[static_cast<size_t>(i)] = caches[static_cast<size_t>(i)]->length() + earlier;
    if (pos_[static_cast<size_t>(i)] >= caches[static_cast<size_t>(i)]->capacity())
      throw UserError(str("decoder: position ", pos_[static_cast<size_t>(i)], " is past the model's context of ",
                          c.context, " tokens (hint: start a new cache from the last tokens)"));
    const int32_t id = tokens[static_cast<size_t>(i)];
    if (id < 0 || id >= V) throw UserError(str("decoder: token id ", id, " outside [0, ", V, ")"));
  }
  const ModelViews<float>& P = m_.weights();
  ResidualInjector* inj = m_.injector();
  embedding_forward(x_.data(), tokens.data(), P.tok_emb, N, C);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  bool injected = false;
  for (int64_t l = 0; l < L; ++l) {
    const BlockViews<float>& w = P.blocks[static_cast<size_t>(l)];
    if (inj && inj->injects(l)) {
      if (!injected && before_injection) before_injection();
      injected = true;
      inj->inject_forward(l, x_.data(), N);
    }
    rmsnorm_forward(ln_.data(), rstd_.data(), x_.data(), w.attn_norm, N, C, eps);
    const PackedBlock& pw = blocks_[static_cast<size_t>(l)];
    matmul_rows(qkv_.data(), ln_.data(), pw.w_qkv.op, nullptr, N, C, 3 * C);
    for (int64_t i = 0; i < N; ++i) {
      const int64_t p = pos_[static_cast<size_t>(i)];
      float* row = qkv_.data() + i * 3 * C;
      rope_rows(row, rope_cos_.data() + p * half, rope_sin_.data() + p * half, 0, 1, 1, C, NH, 1.0f);
      KvCache& kv = *caches[static_cast<size_t>(i)];
      std::memcpy(kv.k(l, p), row + C, static_cast<size_t>(C) * sizeof(float));
      std::memcpy(kv.v(l, p), row + 2 * C, static_cast<size_t>(C) * sizeof(float));
    }
    // Attention of each (row, head) over its cache's positions 0..p: one thread per pair, a plain loop each.
#pragma omp parallel
    {
      std::vector<float> s;
#pragma omp for schedule(static)
      for (int64_t ih = 0; ih < N * NH; ++ih) {
        const int64_t i = ih / NH, h = ih % NH, p = pos_[static_cast<size_t>(i)];
        KvCache& kv = *caches[static_cast<size_t>(i)];
        const float* q = qkv_.data() + i * 3 * C + h * HD;
        s.resize(static_cast<size_t>(p + 1));
        float mx = -INFINITY;
        for (int64_t j = 0; j <= p; ++j) {
          const float* k = kv.k(l, j) + h * HD;
          float d = 0.0f;
          for (int64_t e = 0; e < HD; ++e) d += q[e] * k[e];
          s[static_cast<size_t>(j)] = d * scale;
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        float sum = 0.0f;
        for (int64_t j = 0; j <= p; ++j) sum += (s[static_cast<size_t>(j)] = std::exp(s[static_cast<size_t>(j)] - mx));
        float* o = att_.data() + i * C + h * HD;
        std::fill(o, o + HD, 0.0f);
        for (int64_t j = 0; j <= p; ++j) {
          const float* v = kv.v(l, j) + h * HD;
          const float pj = s[static_cast<size_t>(j)] / sum;
          for (int64_t e = 0; e < HD; ++e) o[e] += pj * v[e];
        }
      }
    }
    matmul_rows(mid_.data(), att_.data(), pw.w_o.op, x_.data(), N, C, C);
    rmsnorm_forward(ln_.data(), rstd_.data(), mid_.data(), w.mlp_norm, N, C, eps);
    matmul_rows(fc_.data(), ln_.data(), pw.w_fc.op, nullptr, N, C, H);
    gelu_forward(gelu_.data(), fc_.data(), N, H);
    matmul_rows(x_.data(), gelu_.data(), pw.w_proj.op, mid_.data(), N, H, C);
  }
  for (int64_t i = 0; i < N; ++i) {  // the rows are in the caches now
    KvCache& kv = *caches[static_cast<size_t>(i)];
    kv.len_ = std::max(kv.len_, pos_[static_cast<size_t>(i)] + 1);
  }
  if (!logits) return;
  // Final norm and LM head, for every row or for the last row of each sequence.
  int64_t rows = N;
  const float* src = x_.data();
  if (last_only) {
    rows = 0;
    for (int64_t i = 0; i < N; ++i)
      if (i + 1 == N || caches[static_cast<size_t>(i + 1)] != caches[static_cast<size_t>(i)])
        std::memcpy(mid_.data() + (rows++) * C, x_.data() + i * C, static_cast<size_t>(C) * sizeof(float));
    src = mid_.data();
  }
  rmsnorm_forward(lnf_.data(), rstd_.data(), src, P.final_norm, rows, C, eps);
  matmul_rows(logits, lnf_.data(), lm_head_->op, nullptr, rows, C, V);
}

}  // namespace pg
