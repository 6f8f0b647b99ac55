// Implementation of model/layers.h, explicitly instantiated for float (training) and double (gradient checks).
// GCC 12 reports false -Wmaybe-uninitialized inside Eigen.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "model/layers.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/gemm.h"
#include "model/simd.h"

namespace pg::layers {
namespace {

using gemm::StridedView;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Per-thread scratch that grows once (first use) and is reused afterwards. Content never carries over
// between tasks: every task overwrites what it reads. One slot per concurrent use within a task.
enum Slot : int {
  kNormTmp = 0,  // rmsnorm_backward_rows: g = dy w [C]
  kScores = 0,  // attention: Sᵀ / Pᵀ [T, kQueryBlock]
  kScoreGrads,  // attention backward: dPᵀ / dSᵀ [T, kQueryBlock]
  kPackKA,  // K packed as A
  kPackVA,  // V packed as A
  kPackKB,  // K packed as B
  kPackQB,  // Q packed as B
  kPackVB,  // V (forward) / dO (backward) packed as B
  kRowDots,  // D = rowsum(dO O) [T]
  kAccK,  // dK accumulator [T, HD]
  kAccV,  // dV accumulator [T, HD]
  kAccQ,  // dQ of one query block [kQueryBlock, HD]
  kNumSlots
};
template <class F>
F* thread_buffer(int slot, size_t n) {
  static thread_local std::vector<F> bufs[kNumSlots];
  if (bufs[slot].size() < n) bufs[slot].resize(n);
  return bufs[slot].data();
}
// Thread buffers for an M x K operand packed as A / a K x N operand packed as B (float only; the double path
// uses plain views).
template <class F>
F* packed_buffer(int slot, int64_t M, int64_t K) {
  if constexpr (std::is_same_v<F, float>) return thread_buffer<F>(slot, gemm::packed_a_floats(M, K));
  return nullptr;
}
template <class F>
F* packed_b_buffer(int slot, int64_t K, int64_t N) {
  if constexpr (std::is_same_v<F, float>) return thread_buffer<F>(slot, gemm::packed_b_floats(K, N));
  return nullptr;
}

}  // namespace

int64_t lm_head_rows(int64_t V) {
  const int64_t rows = std::clamp<int64_t>((int64_t{1} << 25) / std::max<int64_t>(V, 1), 32, 512);
  return rows / 32 * 32;
}
int64_t lm_head_vocab_block(int64_t rows) {
  const int64_t vb = std::max<int64_t>(14, (int64_t{1} << 18) / std::max<int64_t>(rows, 1));
  return vb / 14 * 14;
}

template <class F>
void round_bf16(F* x, int64_t n) {
  if constexpr (std::is_same_v<F, float>) {
    constexpr int64_t kBlock = int64_t{1} << 14;
    const int64_t nb = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; ++b) round_bf16_rows(x + b * kBlock, 0, 1, std::min(kBlock, n - b * kBlock));
  }
}

template <class F>
void parallel_zero(F* p, size_t n) {
  constexpr size_t kBlock = size_t{1} << 16;
  const int64_t nb = static_cast<int64_t>((n + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < nb; ++b) {
    const size_t s = static_cast<size_t>(b) * kBlock;
    std::memset(p + s, 0, std::min(kBlock, n - s) * sizeof(F));
  }
}

// ---------------------------------------------------------------- embedding
template <class F>
void embedding_forward(F* out, const int32_t* tokens, const F* wte, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) std::memcpy(out + n * C, wte + int64_t{tokens[n]} * C, C * sizeof(F));
}

template <class F>
void embedding_backward(F* dwte, const F* dout, const int32_t* tokens, int64_t N, int64_t C) {
  // Rows of dwte collide (repeated tokens), so split over columns: each task adds the tokens in order.
  constexpr int64_t kCols = 64;
  const int64_t ntask = ceil_div(C, kCols);
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t task = 0; task < ntask; ++task) {
    const int64_t c0 = task * kCols, c1 = std::min(C, c0 + kCols);
    for (int64_t n = 0; n < N; ++n) {
      F* d = dwte + int64_t{tokens[n]} * C;
      const F* g = dout + n * C;
      for (int64_t c = c0; c < c1; ++c) d[c] += g[c];
    }
  }
}

// ---------------------------------------------------------------- RMSNorm
template <class F>
void rmsnorm_forward_rows(F* out, F* rstd, const F* inp, const F* weight, int64_t r0, int64_t nr, int64_t C, F eps) {
  for (int64_t n = r0; n < r0 + nr; ++n) {
    const F* x = inp + n * C;
    F* y = out + n * C;
    const F ms = simd::vdot(x, x, C) / static_cast<F>(C);
    const F r = F(1) / std::sqrt(ms + eps);
    for (int64_t c = 0; c < C; ++c) y[c] = x[c] * r * weight[c];
    rstd[n] = r;
  }
}

template <class F>
void rmsnorm_forward(F* out, F* rstd, const F* inp, const F* weight, int64_t N, int64_t C, F eps) {
  const int64_t ntask = ceil_div(N, kGemmRows);
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < ntask; ++task)
    rmsnorm_forward_rows(out, rstd, inp, weight, task * kGemmRows, std::min(kGemmRows, N - task * kGemmRows), C, eps);
}

// dx = r (g - xhat mean(g xhat)), g = dy w, xhat = x r;  dw = sum_n dy xhat (per block, then in block order).
template <class F>
void rmsnorm_backward_rows(F* dinp, F* partial, const F* dout, const F* inp, const F* weight, const F* rstd, int64_t r0,
                           int64_t nr, int64_t C) {
  F* g = thread_buffer<F>(kNormTmp, C);
  for (int64_t c = 0; c < C; ++c) partial[c] = 0;
  for (int64_t n = r0; n < r0 + nr; ++n) {
    const F* x = inp + n * C;
    const F* dy = dout + n * C;
    F* dx = dinp + n * C;
    const F r = rstd[n];
    for (int64_t c = 0; c < C; ++c) {
      g[c] = dy[c] * weight[c];
      partial[c] += dy[c] * (x[c] * r);
    }
    const F k = simd::vdot(g, x, C) * r * r / static_cast<F>(C);  // xhat * mean(g xhat) = x * k
    for (int64_t c = 0; c < C; ++c) dx[c] += r * (g[c] - x[c] * k);
  }
}

template <class F>
void rmsnorm_reduce(F* dweight, const F* partials, int64_t nblk, int64_t C) {
  for (int64_t c = 0; c < C; ++c) {
    F s = 0;
    for (int64_t blk = 0; blk < nblk; ++blk) s += partials[blk * C + c];
    dweight[c] += s;
  }
}

template <class F>
void rmsnorm_backward(F* dinp, F* dweight, F* partials, const F* dout, const F* inp, const F* weight, const F* rstd,
                      int64_t N, int64_t C) {
  const int64_t nblk = ceil_div(N, kNormRows);
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < nblk; ++blk)
    rmsnorm_backward_rows(dinp, partials + blk * C, dout, inp, weight, rstd, blk * kNormRows,
                          std::min(kNormRows, N - blk * kNormRows), C);
  rmsnorm_reduce(dweight, partials, nblk, C);
}

// ---------------------------------------------------------------- linear
template <class F>
void linear_forward(F* out, const F* inp, const F* weight, const F* residual, int64_t N, int64_t C, int64_t OC,
                    F* pack_w, RowEpilogue epilogue) {
  // B(k = c, j = o) = W[o, c]
  const auto w = gemm::make_b(pack_w, StridedView<F>{weight, 1, C}, C, OC);
  const int64_t ntask = ceil_div(N, kGemmRows);
#pragma omp parallel
  {
    gemm::pack_operand(w);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < ntask; ++task) {
      const int64_t r0 = task * kGemmRows, nr = std::min(kGemmRows, N - r0);
      if (residual) std::memcpy(out + r0 * OC, residual + r0 * OC, nr * OC * sizeof(F));
      gemm::gemm_b(nr, OC, C, StridedView<F>{inp + r0 * C, C, 1}, w, 0, 0, out + r0 * OC, OC, residual != nullptr);
      if (epilogue) epilogue(r0, nr, task);
    }
  }
}

template <class F>
void linear_backward(F* dinp, F* dweight, const F* dout, const F* inp, const F* weight, int64_t N, int64_t C,
                     int64_t OC, F* pack_w, F* pack_x, bool accumulate, RowEpilogue epilogue) {
  const auto w = gemm::make_b(pack_w, StridedView<F>{weight, C, 1}, OC, C);  // B(k = o, j = c) = W[o, c]
  const auto x = gemm::make_b(pack_x, StridedView<F>{inp, C, 1}, N, C);  // B(k = n, j = c) = inp[n, c]
  const int64_t ndw = ceil_div(OC, kDwRows), ndx = ceil_div(N, kGemmRows);
#pragma omp parallel
  {
    gemm::pack_operand(w);
    gemm::pack_operand(x);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < ndw + ndx; ++task) {
      if (task < ndw) {  // dW rows [o0, o0 + no): A(i = o, k = n) = dout[n, o]; reduction over all N in order
        const int64_t o0 = task * kDwRows, no = std::min(kDwRows, OC - o0);
        gemm::gemm_b(no, C, N, StridedView<F>{dout + o0, 1, OC}, x, 0, 0, dweight + o0 * C, C, true);
      } else {  // dinp rows [r0, r0 + nr)
        const int64_t r0 = (task - ndw) * kGemmRows, nr = std::min(kGemmRows, N - r0);
        gemm::gemm_b(nr, C, OC, StridedView<F>{dout + r0 * OC, OC, 1}, w, 0, 0, dinp + r0 * C, C, accumulate);
        if (epilogue) epilogue(r0, nr, task - ndw);
      }
    }
  }
}

// ---------------------------------------------------------------- RoPE
template <class F>
void rope_tables(F* cos, F* sin, int64_t T, int64_t HD, double base) {
  const int64_t half = HD / 2;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double ang =
          static_cast<double>(t) * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(HD));
      cos[t * half + i] = static_cast<F>(std::cos(ang));
      sin[t * half + i] = static_cast<F>(std::sin(ang));
    }
}

namespace {
// Rotates x[0:half], x[half:2 half] by the angles of one position; sign = +1 forward, -1 inverse.
template <class F>
inline void rotate(F* x, const F* cs, const F* sn, int64_t half, F sign) {
  for (int64_t i = 0; i < half; ++i) {
    const F a = x[i], b = x[i + half], s = sign * sn[i];
    x[i] = a * cs[i] - b * s;
    x[i + half] = b * cs[i] + a * s;
  }
}
}  // namespace

template <class F>
void rope_rows(F* qkv, const F* cos, const F* sin, int64_t r0, int64_t nr, int64_t T, int64_t C, int64_t NH, F sign) {
  const int64_t HD = C / NH, half = HD / 2;
  for (int64_t n = r0; n < r0 + nr; ++n) {
    const int64_t t = n % T;
    F* row = qkv + n * 3 * C;
    for (int64_t h = 0; h < 2 * NH; ++h) rotate(row + h * HD, cos + t * half, sin + t * half, half, sign);
  }
}

template <class F>
void rope_forward(F* qkv, const F* cos, const F* sin, int64_t B, int64_t T, int64_t C, int64_t NH) {
  const int64_t N = B * T, ntask = ceil_div(N, kGemmRows);
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < ntask; ++task)
    rope_rows(qkv, cos, sin, task * kGemmRows, std::min(kGemmRows, N - task * kGemmRows), T, C, NH, F(1));
}
template <class F>
void rope_backward(F* dqkv, const F* cos, const F* sin, int64_t B, int64_t T, int64_t C, int64_t NH) {
  // the transpose of a rotation is the inverse rotation
  const int64_t N = B * T, ntask = ceil_div(N, kGemmRows);
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < ntask; ++task)
    rope_rows(dqkv, cos, sin, task * kGemmRows, std::min(kGemmRows, N - task * kGemmRows), T, C, NH, F(-1));
}

// ---------------------------------------------------------------- attention
// Per (b, h) and query block [q0, q0 + nq) the scores are kept transposed, Sᵀ[key, j] (keys 0..q0+nq-1 as
// rows, the block's queries as contiguous columns), so the softmax over keys vectorizes across queries and
// Pᵀ feeds O = P V without a transpose.
namespace {
constexpr int64_t kLd = kQueryBlock;

// st [nk, kLd] raw scores q·k -> unnormalized probabilities exp(scale (s - m)) (0 where key > query);
// inv [nq] = 1 / sum over keys, lse [nq] = log-sum-exp of the scaled scores.
template <class F>
void softmax_forward_block(F* st, F* inv, F* lse, int64_t nk, int64_t nq, int64_t q0, F scale) {
  F m[kLd], sum[kLd];
  for (int64_t j = 0; j < nq; ++j) {
    m[j] = -std::numeric_limits<F>::infinity();
    sum[j] = 0;
  }
  for (int64_t key = 0; key < nk; ++key) {
    const F* row = st + key * kLd;
    for (int64_t j = std::max<int64_t>(0, key - q0); j < nq; ++j) m[j] = row[j] > m[j] ? row[j] : m[j];
  }
  for (int64_t j = 0; j < nq; ++j) m[j] *= scale;  // scale > 0: max of the scaled scores
  for (int64_t key = 0; key < nk; ++key) {
    F* row = st + key * kLd;
    const int64_t j0 = std::max<int64_t>(0, key - q0);
    for (int64_t j = 0; j < j0; ++j) row[j] = 0;
    simd::exp_affine_row(row + j0, m + j0, scale, sum + j0, nq - j0);
  }
  for (int64_t j = 0; j < nq; ++j) {
    inv[j] = F(1) / sum[j];
    lse[j] = m[j] + std::log(sum[j]);
  }
}

// st [nk, kLd] raw scores -> Pᵀ = exp(scale s - lse) (0 where key > query).
template <class F>
void softmax_recompute_block(F* st, const F* lse, int64_t nk, int64_t nq, int64_t q0, F scale) {
  for (int64_t key = 0; key < nk; ++key) {
    F* row = st + key * kLd;
    const int64_t j0 = std::max<int64_t>(0, key - q0);
    for (int64_t j = 0; j < j0; ++j) row[j] = 0;
    simd::exp_affine_row(row + j0, lse + j0, scale, static_cast<F*>(nullptr), nq - j0);
  }
}
}  // namespace

template <class F>
void attention_forward(F* out, F* lse, const F* qkv, int64_t B, int64_t T, int64_t C, int64_t NH) {
  const int64_t HD = C / NH, C3 = 3 * C;
  const F scale = F(1) / std::sqrt(static_cast<F>(HD));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t bh = 0; bh < B * NH; ++bh) {
    const int64_t b = bh / NH, h = bh % NH;
    const F* q = qkv + b * T * C3 + h * HD;
    const F* k = q + C;
    const F* v = q + 2 * C;
    F* o = out + b * T * C + h * HD;
    F* st = thread_buffer<F>(kScores, T * kLd);
    // K as A (rows = keys) and V as B (k = keys), packed once per (b, h)
    const auto ka = gemm::make_a(packed_buffer<F>(kPackKA, T, HD), StridedView<F>{k, C3, 1}, T, HD);
    const auto vb = gemm::make_b(packed_b_buffer<F>(kPackVB, T, HD), StridedView<F>{v, C3, 1}, T, HD);
    gemm::pack_operand_serial(ka);
    gemm::pack_operand_serial(vb);
    for (int64_t q0 = 0; q0 < T; q0 += kQueryBlock) {
      const int64_t nq = std::min(kQueryBlock, T - q0), nk = q0 + nq;
      // Sᵀ[key, j] = K[key] · Q[q0 + j]
      gemm::gemm_a(nk, nq, HD, ka, 0, 0, StridedView<F>{q + q0 * C3, 1, C3}, st, kLd, false);
      F inv[kLd];
      softmax_forward_block(st, inv, lse + bh * T + q0, nk, nq, q0, scale);
      // O[q0 + j] = (sum_key Pᵀ[key, j] V[key]) / sum_j   (normalizing the [nq, HD] output, not Pᵀ)
      gemm::gemm_b(nq, HD, nk, StridedView<F>{st, 1, kLd}, vb, 0, 0, o + q0 * C, C, false);
      for (int64_t j = 0; j < nq; ++j)
        for (int64_t d = 0; d < HD; ++d) o[(q0 + j) * C + d] *= inv[j];
    }
  }
}

template <class F>
void attention_backward(F* dqkv, const F* dout, const F* qkv, const F* out, const F* lse, int64_t B, int64_t T,
                        int64_t C, int64_t NH, bool accumulate, const F* rope_cos, const F* rope_sin) {
  const int64_t HD = C / NH, C3 = 3 * C, half = HD / 2;
  const F scale = F(1) / std::sqrt(static_cast<F>(HD));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t bh = 0; bh < B * NH; ++bh) {
    const int64_t b = bh / NH, h = bh % NH;
    const F* q = qkv + b * T * C3 + h * HD;
    const F* k = q + C;
    const F* v = q + 2 * C;
    const F* o = out + b * T * C + h * HD;
    const F* dO = dout + b * T * C + h * HD;
    F* dq = dqkv + b * T * C3 + h * HD;
    F* dk = dq + C;
    F* dv = dq + 2 * C;
    const F* l = lse + bh * T;
    F* st = thread_buffer<F>(kScores, T * kLd);
    F* dst = thread_buffer<F>(kScoreGrads, T * kLd);
    F* D = thread_buffer<F>(kRowDots, T);
    F* dk_acc = thread_buffer<F>(kAccK, T * HD);  // [T, HD] dK, dV of this (b, h), summed over query blocks in order
    F* dv_acc = thread_buffer<F>(kAccV, T * HD);
    std::fill(dk_acc, dk_acc + T * HD, F(0));
    std::fill(dv_acc, dv_acc + T * HD, F(0));
    for (int64_t t = 0; t < T; ++t) D[t] = simd::vdot(dO + t * C, o + t * C, HD);  // D = rowsum(dO * O)
    // packed once per (b, h): K, V as A (rows = keys); K, Q, dO as B (k = keys / queries)
    const auto ka = gemm::make_a(packed_buffer<F>(kPackKA, T, HD), StridedView<F>{k, C3, 1}, T, HD);
    const auto va = gemm::make_a(packed_buffer<F>(kPackVA, T, HD), StridedView<F>{v, C3, 1}, T, HD);
    const auto kb = gemm::make_b(packed_b_buffer<F>(kPackKB, T, HD), StridedView<F>{k, C3, 1}, T, HD);
    const auto qb = gemm::make_b(packed_b_buffer<F>(kPackQB, T, HD), StridedView<F>{q, C3, 1}, T, HD);
    const auto ob = gemm::make_b(packed_b_buffer<F>(kPackVB, T, HD), StridedView<F>{dO, C, 1}, T, HD);
    gemm::pack_operand_serial(ka);
    gemm::pack_operand_serial(va);
    gemm::pack_operand_serial(kb);
    gemm::pack_operand_serial(qb);
    gemm::pack_operand_serial(ob);
    for (int64_t q0 = 0; q0 < T; q0 += kQueryBlock) {
      const int64_t nq = std::min(kQueryBlock, T - q0), nk = q0 + nq;
      gemm::gemm_a(nk, nq, HD, ka, 0, 0, StridedView<F>{q + q0 * C3, 1, C3}, st, kLd, false);
      softmax_recompute_block(st, l + q0, nk, nq, q0, scale);
      // dPᵀ[key, j] = V[key] · dO[q0 + j]
      gemm::gemm_a(nk, nq, HD, va, 0, 0, StridedView<F>{dO + q0 * C, 1, C}, dst, kLd, false);
      // dSᵀ = Pᵀ (dPᵀ - D) * scale   (gradient w.r.t. the raw scores q·k)
      for (int64_t key = 0; key < nk; ++key) {
        const F* p = st + key * kLd;
        F* d = dst + key * kLd;
        for (int64_t j = 0; j < nq; ++j) d[j] = p[j] * (d[j] - D[q0 + j]) * scale;
      }
      // dQ[q0 + j] = sum_key dSᵀ[key, j] K[key]   (each query block's rows are final after this)
      F* dq_blk = thread_buffer<F>(kAccQ, kQueryBlock * HD);
      gemm::gemm_b(nq, HD, nk, StridedView<F>{dst, 1, kLd}, kb, 0, 0, dq_blk, HD, false);
      for (int64_t j = 0; j < nq; ++j) {
        F* g = dq_blk + j * HD;
        if (rope_cos) rotate(g, rope_cos + (q0 + j) * half, rope_sin + (q0 + j) * half, half, F(-1));
        F* dst_row = dq + (q0 + j) * C3;
        for (int64_t d = 0; d < HD; ++d) dst_row[d] = (accumulate ? dst_row[d] : F(0)) + g[d];
      }
      // dK[key] += sum_j dSᵀ[key, j] Q[q0 + j];  dV[key] += sum_j Pᵀ[key, j] dO[q0 + j]
      gemm::gemm_b(nk, HD, nq, StridedView<F>{dst, kLd, 1}, qb, q0, 0, dk_acc, HD, true);
      gemm::gemm_b(nk, HD, nq, StridedView<F>{st, kLd, 1}, ob, q0, 0, dv_acc, HD, true);
    }
    for (int64_t t = 0; t < T; ++t) {
      if (rope_cos) rotate(dk_acc + t * HD, rope_cos + t * half, rope_sin + t * half, half, F(-1));
      for (int64_t d = 0; d < HD; ++d) {
        dk[t * C3 + d] = (accumulate ? dk[t * C3 + d] : F(0)) + dk_acc[t * HD + d];
        dv[t * C3 + d] = (accumulate ? dv[t * C3 + d] : F(0)) + dv_acc[t * HD + d];
      }
    }
  }
}

// ---------------------------------------------------------------- GELU
template <class F>
void gelu_forward_rows(F* out, const F* inp, int64_t r0, int64_t nr, int64_t H) {
  simd::gelu_forward_row(out + r0 * H, inp + r0 * H, nr * H);
}
template <class F>
void gelu_backward_rows(F* dinp, const F* inp, const F* dout, int64_t r0, int64_t nr, int64_t H, bool accumulate) {
  simd::gelu_backward_row(dinp + r0 * H, inp + r0 * H, dout + r0 * H, nr * H, accumulate);
}
template <class F>
void gelu_forward(F* out, const F* inp, int64_t N, int64_t H) {
  const int64_t ntask = ceil_div(N, kGemmRows);
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < ntask; ++task)
    gelu_forward_rows(out, inp, task * kGemmRows, std::min(kGemmRows, N - task * kGemmRows), H);
}
template <class F>
void gelu_backward(F* dinp, const F* inp, const F* dout, int64_t N, int64_t H, bool accumulate) {
  const int64_t ntask = ceil_div(N, kGemmRows);
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < ntask; ++task)
    gelu_backward_rows(dinp, inp, dout, task * kGemmRows, std::min(kGemmRows, N - task * kGemmRows), H, accumulate);
}

// ---------------------------------------------------------------- LM head + cross-entropy
// Per chunk of `rows` tokens (all phases split into fixed tasks, each phase ends with a barrier):
//   1. per vocabulary block [v0, v0+nv): Lᵀ[v0:, :] = W[v0:] Xcᵀ, then per token the block max m_b and
//      e = exp(Lᵀ - m_b) in place, s_b = sum_v e (fixed order); the raw target logits are recorded.
//   2. per token: m = max_b m_b, s = sum_b s_b exp(m_b - m) (block order), loss = m + log s - logit[target];
//      backward: factor_b = exp(m_b - m) dloss / s.
//   3. per group of consecutive blocks (kLmGroups fixed groups), block by block while it is in L2:
//      dLᵀ = e factor_b - dloss onehot; dW[v0:] += dLᵀ[v0:] Xc; dX_g += dL[:, v0:] W[v0:]  (blocks in order).
//   4. per token: dX (+)= sum_g dX_g (group order).
template <class F>
double lm_head_ce(F* dinp, F* dweight, double* losses, const F* inp, const F* weight, const int32_t* targets, int64_t N,
                  int64_t C, int64_t V, F dloss, const LmHeadScratch<F>& s, bool accumulate, bool round_logits) {
  const bool backward = dinp != nullptr;
  const int64_t R = s.rows, vbs = s.vocab_block, nvb = (V + vbs - 1) / vbs, ng = std::min(kLmGroups, nvb);
  const auto wa = gemm::make_a(s.pack_wa, StridedView<F>{weight, C, 1}, V, C);  // A(i = v, k = c) = W[v, c]
  const auto wn = gemm::make_b(s.pack_wn, StridedView<F>{weight, C, 1}, V, C);  // B(k = v, j = c) = W[v, c]
  F* lt = s.logits;  // [V, R]
  F* bmax = s.stats;  // [nvb, R] block max, then the block's scale factor
  F* bsum = s.stats + nvb * R;  // [nvb, R]
  F* tlogit = s.stats + 2 * nvb * R;  // [R]
#pragma omp parallel
  {
    gemm::pack_operand(wa);
    if (backward) gemm::pack_operand(wn);
    for (int64_t r0 = 0; r0 < N; r0 += R) {  // every thread walks the same chunks
      const int64_t nc = std::min(R, N - r0);
      const F* xc = inp + r0 * C;
      const int32_t* tg = targets + r0;
      const auto xt = gemm::make_b(s.pack_xt, StridedView<F>{xc, 1, C}, C, nc);  // B(k = c, j = n) = X[n, c]
      const auto xb = gemm::make_b(s.pack_x, StridedView<F>{xc, C, 1}, nc, C);  // B(k = n, j = c) = X[n, c]
      gemm::pack_operand(xt);
      if (backward) gemm::pack_operand(xb);
#pragma omp for schedule(dynamic, 1)
      for (int64_t vb = 0; vb < nvb; ++vb) {
        const int64_t v0 = vb * vbs, nv = std::min(vbs, V - v0);
        F* blk = lt + v0 * R;
        gemm::gemm_ab(nv, nc, C, wa, v0, xt, 0, 0, blk, R, false);
        if (round_logits)
          for (int64_t v = 0; v < nv; ++v) round_bf16_rows(blk + v * R, 0, 1, nc);
        for (int64_t t = 0; t < nc; ++t)
          if (tg[t] >= v0 && tg[t] < v0 + nv) tlogit[t] = blk[(tg[t] - v0) * R + t];
        F* m = bmax + vb * R;
        F* sum = bsum + vb * R;
        for (int64_t t = 0; t < nc; ++t) {
          m[t] = -std::numeric_limits<F>::infinity();
          sum[t] = 0;
        }
        for (int64_t v = 0; v < nv; ++v) {
          const F* row = blk + v * R;
          for (int64_t t = 0; t < nc; ++t) m[t] = row[t] > m[t] ? row[t] : m[t];
        }
        for (int64_t v = 0; v < nv; ++v) {
          F* row = blk + v * R;
          for (int64_t t = 0; t < nc; ++t) row[t] -= m[t];
          simd::vexp(row, row, nc);
          for (int64_t t = 0; t < nc; ++t) sum[t] += row[t];
        }
      }
#pragma omp for schedule(static)
      for (int64_t t = 0; t < nc; ++t) {
        F m = -std::numeric_limits<F>::infinity();
        for (int64_t vb = 0; vb < nvb; ++vb) m = bmax[vb * R + t] > m ? bmax[vb * R + t] : m;
        F z = 0;
        for (int64_t vb = 0; vb < nvb; ++vb) z += bsum[vb * R + t] * simd::exp_s(static_cast<F>(bmax[vb * R + t] - m));
        losses[r0 + t] = std::log(static_cast<double>(z)) + static_cast<double>(m) - static_cast<double>(tlogit[t]);
        if (backward)
          for (int64_t vb = 0; vb < nvb; ++vb)
            bmax[vb * R + t] = simd::exp_s(static_cast<F>(bmax[vb * R + t] - m)) * dloss / z;
      }
      if (!backward) continue;
#pragma omp for schedule(dynamic, 1)
      for (int64_t g = 0; g < ng; ++g) {
        F* part = s.dx_part + g * R * C;  // [nc, C]
        for (int64_t vb = g * nvb / ng; vb < (g + 1) * nvb / ng; ++vb) {
          const int64_t v0 = vb * vbs, nv = std::min(vbs, V - v0);
          F* blk = lt + v0 * R;
          const F* f = bmax + vb * R;
          for (int64_t v = 0; v < nv; ++v) {
            F* row = blk + v * R;
            for (int64_t t = 0; t < nc; ++t) row[t] *= f[t];
          }
          for (int64_t t = 0; t < nc; ++t)
            if (tg[t] >= v0 && tg[t] < v0 + nv) blk[(tg[t] - v0) * R + t] -= dloss;
          // dW[v0 : v0+nv] += dLᵀ[v0 : v0+nv] Xc   (chunks added in order)
          gemm::gemm_b(nv, C, nc, StridedView<F>{blk, R, 1}, xb, 0, 0, dweight + v0 * C, C, true);
          // dX_g (+)= dL[:, v0 : v0+nv] W[v0 : v0+nv]   (the group's blocks in order)
          gemm::gemm_b(nc, C, nv, StridedView<F>{blk, 1, R}, wn, v0, 0, part, C, vb != g * nvb / ng);
        }
      }
#pragma omp for schedule(static)
      for (int64_t t = 0; t < nc; ++t) {
        F* dx = dinp + (r0 + t) * C;
        for (int64_t g = 0; g < ng; ++g) {
          const F* p = s.dx_part + g * R * C + t * C;
          if (g == 0 && !accumulate)
            for (int64_t c = 0; c < C; ++c) dx[c] = p[c];
          else
            for (int64_t c = 0; c < C; ++c) dx[c] += p[c];
        }
      }
    }
  }
  double total = 0;
  for (int64_t n = 0; n < N; ++n) total += losses[n];
  return total / static_cast<double>(N);
}

// ---------------------------------------------------------------- instantiations
#define PG_LAYERS_INSTANTIATE(F)                                                                                      \
  template void parallel_zero<F>(F*, size_t);                                                                         \
  template void round_bf16<F>(F*, int64_t);                                                                           \
  template void embedding_forward<F>(F*, const int32_t*, const F*, int64_t, int64_t);                                 \
  template void embedding_backward<F>(F*, const F*, const int32_t*, int64_t, int64_t);                                \
  template void rmsnorm_forward<F>(F*, F*, const F*, const F*, int64_t, int64_t, F);                                  \
  template void rmsnorm_backward<F>(F*, F*, F*, const F*, const F*, const F*, const F*, int64_t, int64_t);            \
  template void rmsnorm_forward_rows<F>(F*, F*, const F*, const F*, int64_t, int64_t, int64_t, F);                    \
  template void rmsnorm_backward_rows<F>(F*, F*, const F*, const F*, const F*, const F*, int64_t, int64_t, int64_t);  \
  template void rmsnorm_reduce<F>(F*, const F*, int64_t, int64_t);                                                    \
  template void rope_rows<F>(F*, const F*, const F*, int64_t, int64_t, int64_t, int64_t, int64_t, F);                 \
  template void gelu_forward_rows<F>(F*, const F*, int64_t, int64_t, int64_t);                                        \
  template void gelu_backward_rows<F>(F*, const F*, const F*, int64_t, int64_t, int64_t, bool);                       \
  template void linear_forward<F>(F*, const F*, const F*, const F*, int64_t, int64_t, int64_t, F*, RowEpilogue);      \
  template void linear_backward<F>(F*, F*, const F*, const F*, const F*, int64_t, int64_t, int64_t, F*, F*, bool,     \
                                   RowEpilogue);                                                                      \
  template void rope_tables<F>(F*, F*, int64_t, int64_t, double);                                                     \
  template void rope_forward<F>(F*, const F*, const F*, int64_t, int64_t, int64_t, int64_t);                          \
  template void rope_backward<F>(F*, const F*, const F*, int64_t, int64_t, int64_t, int64_t);                         \
  template void attention_forward<F>(F*, F*, const F*, int64_t, int64_t, int64_t, int64_t);                           \
  template void attention_backward<F>(F*, const F*, const F*, const F*, const F*, int64_t, int64_t, int64_t, int64_t, \
                                      bool, const F*, const F*);                                                      \
  template void gelu_forward<F>(F*, const F*, int64_t, int64_t);                                                      \
  template void gelu_backward<F>(F*, const F*, const F*, int64_t, int64_t, bool);                                     \
  template double lm_head_ce<F>(F*, F*, double*, const F*, const F*, const int32_t*, int64_t, int64_t, int64_t, F,    \
                                const LmHeadScratch<F>&, bool, bool);

PG_LAYERS_INSTANTIATE(float)
PG_LAYERS_INSTANTIATE(double)
#undef PG_LAYERS_INSTANTIATE

}  // namespace pg::layers
