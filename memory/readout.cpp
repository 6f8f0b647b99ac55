// Implementation of memory/readout.h. Matrix products use kernels/gemm (single-threaded per call) on fixed chunks;
// reductions over tokens use double partial sums per fixed chunk, added in chunk order.
#include "memory/readout.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "kernels/gemm.h"

namespace pg::readout {
namespace {

int64_t chunks_of(int64_t n, int64_t c) { return (n + c - 1) / c; }
// Token rows per projection task (8 micro-panels of 14) and readout columns per dW task. The results do not
// depend on either (kernels/gemm: each element is one FMA chain over k, in every ISA), only the load balance does.
constexpr int64_t kGemmRows = 112;
constexpr int64_t kDwCols = 112;

// The buffer for a packed operand (float), at least n long; nullptr for double, whose operands stay views.
template <class T>
T* grown(std::vector<T>& v, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
    return v.data();
  }
  return nullptr;  // double: operands are used through their views
}

}  // namespace

template <class T>
void project_forward(T* e, const T* u, const T* w, int64_t N, int64_t C, int64_t D, ProjectionScratch<T>& s) {
  using V = gemm::StridedView<T>;
  // B(k = d, j = c) = W[c, d]
  const auto wb = gemm::make_b(grown(s.w, gemm::packed_b_floats(D, C)), V{w, 1, D}, D, C);
  const int64_t nc = chunks_of(N, kGemmRows);
#pragma omp parallel if (nc > 1)
  {
    gemm::pack_operand(wb);
#pragma omp for schedule(dynamic, 1)
    for (int64_t c = 0; c < nc; ++c) {
      const int64_t r0 = c * kGemmRows, m = std::min(kGemmRows, N - r0);
      gemm::gemm_b(m, C, D, V{u + r0 * D, D, 1}, wb, 0, 0, e + r0 * C, C, false);
    }
  }
}

template <class T>
void project_backward(T* du, bool accumulate_du, T* dw, const T* de, const T* u, const T* w, int64_t N, int64_t C,
                      int64_t D, ProjectionScratch<T>& s) {
  using V = gemm::StridedView<T>;
  const auto wb = gemm::make_b(grown(s.w, gemm::packed_b_floats(C, D)), V{w, D, 1}, C, D);  // B(k = c, j = d)
  const auto db = gemm::make_b(grown(s.de, gemm::packed_b_floats(N, C)), V{de, C, 1}, N, C);  // B(k = n, j = c)
  if (s.dwt.size() < static_cast<size_t>(D * C)) s.dwt.resize(static_cast<size_t>(D * C));
  T* dwt = s.dwt.data();
  const int64_t ndu = du ? chunks_of(N, kGemmRows) : 0, ndw = chunks_of(D, kDwCols);
#pragma omp parallel
  {
    if (du) gemm::pack_operand(wb);
    gemm::pack_operand(db);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < ndw + ndu; ++task) {
      if (task < ndw) {
        // dwᵀ[d0 : d0+m, :] += u[:, d0 : d0+m]ᵀ · de, a full reduction over N in order, through a transposed copy
        // of dw's columns (the same products and summation order as accumulating into dw directly).
        const int64_t d0 = task * kDwCols, m = std::min(kDwCols, D - d0);
        T* t = dwt + d0 * C;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t d = 0; d < m; ++d) t[d * C + c] = dw[c * D + d0 + d];
        gemm::gemm_b(m, C, N, V{u + d0, 1, D}, db, 0, 0, t, C, true);
        for (int64_t c = 0; c < C; ++c)
          for (int64_t d = 0; d < m; ++d) dw[c * D + d0 + d] = t[d * C + c];
      } else {  // du[r0 : r0+m, :] (+)= de[r0 : r0+m, :] · W
        const int64_t r0 = (task - ndw) * kGemmRows, m = std::min(kGemmRows, N - r0);
        gemm::gemm_b(m, D, C, V{de + r0 * C, C, 1}, wb, 0, 0, du + r0 * D, D, accumulate_du);
      }
    }
  }
}

template <class T>
void scalar_gate_forward(T* x, const T* e, T g, int64_t N, int64_t C) {
  const int64_t n = N * C;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) x[i] += g * e[i];
}

template <class T>
void scalar_gate_backward(T* de, T* dg, const T* dy, const T* e, T g, int64_t N, int64_t C) {
  const int64_t nc = chunks_of(N, kRowChunk);
  std::vector<double> part(static_cast<size_t>(nc));
#pragma omp parallel for schedule(static) if (nc > 1)
  for (int64_t c = 0; c < nc; ++c) {
    const int64_t a = c * kRowChunk * C, b = std::min(N, (c + 1) * kRowChunk) * C;
    double s = 0;
    for (int64_t i = a; i < b; ++i) {
      s += static_cast<double>(dy[i]) * e[i];
      de[i] += g * dy[i];
    }
    part[static_cast<size_t>(c)] = s;
  }
  double s = 0;
  for (double p : part) s += p;
  *dg += static_cast<T>(s);
}

namespace {
// The gate nonlinearity z(s) and dz/ds.
inline double gate_z(double s, GateForm f) {
  if (f == GateForm::kSigmoid) return s;
  return std::copysign(std::sqrt(std::max(std::fabs(s), 1e-6)), s);
}
inline double gate_dz(double s, GateForm f) {
  if (f == GateForm::kSigmoid) return 1.0;
  const double a = std::fabs(s);
  return a > 1e-6 ? 0.5 / std::sqrt(a) : 0.0;
}
inline double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }
}  // namespace

template <class T>
void context_gate_forward(T* x, T* h_save, T* alpha, const T* k, const T* v, const T* wh, const T* wk, int64_t N,
                          int64_t C, double eps, GateForm form) {
  const double inv_sqrt_c = 1.0 / std::sqrt(static_cast<double>(C));
#pragma omp parallel for schedule(static) if (N > kRowChunk)
  for (int64_t t = 0; t < N; ++t) {
    T* xt = x + t * C;
    const T* kt = k + t * C;
    const T* vt = v + t * C;
    double hh = 0, kk = 0;
    for (int64_t c = 0; c < C; ++c) hh += static_cast<double>(xt[c]) * xt[c], kk += static_cast<double>(kt[c]) * kt[c];
    const double rh = 1.0 / std::sqrt(hh / C + eps), rk = 1.0 / std::sqrt(kk / C + eps);
    double s = 0;
    for (int64_t c = 0; c < C; ++c) s += (xt[c] * rh * wh[c]) * (kt[c] * rk * wk[c]);
    s *= inv_sqrt_c;
    const double a = sigmoid(gate_z(s, form));
    alpha[t] = static_cast<T>(a);
    for (int64_t c = 0; c < C; ++c) {
      h_save[t * C + c] = xt[c];
      xt[c] = static_cast<T>(xt[c] + a * vt[c]);
    }
  }
}

template <class T>
void context_gate_backward(T* dx, T* dk, T* dv, T* dwh, T* dwk, const T* h, const T* k, const T* v, const T* wh,
                           const T* wk, int64_t N, int64_t C, double eps, GateForm form) {
  const double inv_sqrt_c = 1.0 / std::sqrt(static_cast<double>(C));
  const int64_t nc = chunks_of(N, kRowChunk);
  std::vector<double> pwh(static_cast<size_t>(nc * C), 0.0), pwk(static_cast<size_t>(nc * C), 0.0);
#pragma omp parallel for schedule(static) if (nc > 1)
  for (int64_t ch = 0; ch < nc; ++ch) {
    double* gwh = pwh.data() + ch * C;
    double* gwk = pwk.data() + ch * C;
    for (int64_t t = ch * kRowChunk; t < std::min(N, (ch + 1) * kRowChunk); ++t) {
      const T* ht = h + t * C;
      const T* kt = k + t * C;
      const T* vt = v + t * C;
      T* dyt = dx + t * C;
      double hh = 0, kk = 0;
      for (int64_t c = 0; c < C; ++c)
        hh += static_cast<double>(ht[c]) * ht[c], kk += static_cast<double>(kt[c]) * kt[c];
      const double rh = 1.0 / std::sqrt(hh / C + eps), rk = 1.0 / std::sqrt(kk / C + eps);
      double s = 0, da = 0;
      for (int64_t c = 0; c < C; ++c) {
        s += (ht[c] * rh * wh[c]) * (kt[c] * rk * wk[c]);
        da += static_cast<double>(dyt[c]) * vt[c];
      }
      s *= inv_sqrt_c;
      const double a = sigmoid(gate_z(s, form));
      const double ds = da * a * (1.0 - a) * gate_dz(s, form) * inv_sqrt_c;  // includes the 1/sqrt(C)
      // d(hn)_c = ds kn_c, d(kn)_c = ds hn_c; RMSNorm backward: dx_c = r w_c dn_c - r^3/C x_c Σ_j w_j dn_j x_j.
      double sh = 0, sk = 0;
      for (int64_t c = 0; c < C; ++c) {
        const double kn = kt[c] * rk * wk[c], hn = ht[c] * rh * wh[c];
        sh += wh[c] * (ds * kn) * ht[c];
        sk += wk[c] * (ds * hn) * kt[c];
        gwh[c] += ds * kn * ht[c] * rh;
        gwk[c] += ds * hn * kt[c] * rk;
      }
      const double ch3 = rh * rh * rh / C * sh, ck3 = rk * rk * rk / C * sk;
      for (int64_t c = 0; c < C; ++c) {
        const double kn = kt[c] * rk * wk[c], hn = ht[c] * rh * wh[c];
        dv[t * C + c] += static_cast<T>(a * dyt[c]);
        dk[t * C + c] += static_cast<T>(rk * wk[c] * (ds * hn) - ck3 * kt[c]);
        dyt[c] = static_cast<T>(dyt[c] + rh * wh[c] * (ds * kn) - ch3 * ht[c]);
      }
    }
  }
  for (int64_t c = 0; c < C; ++c) {
    double a = 0, b = 0;
    for (int64_t ch = 0; ch < nc; ++ch)
      a += pwh[static_cast<size_t>(ch * C + c)], b += pwk[static_cast<size_t>(ch * C + c)];
    dwh[c] += static_cast<T>(a);
    dwk[c] += static_cast<T>(b);
  }
}

void orthogonal_init(float* w, int64_t rows, int64_t cols, double gain, RngStream rng) {
  const bool by_rows = rows <= cols;
  const int64_t nv = by_rows ? rows : cols, len = by_rows ? cols : rows;
  std::vector<double> q(static_cast<size_t>(nv * len));
  for (auto& x : q) x = rng.normal();
  for (int64_t i = 0; i < nv; ++i) {
    double* qi = q.data() + i * len;
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t j = 0; j < i; ++j) {
        const double* qj = q.data() + j * len;
        double d = 0;
        for (int64_t c = 0; c < len; ++c) d += qi[c] * qj[c];
        for (int64_t c = 0; c < len; ++c) qi[c] -= d * qj[c];
      }
    double nrm = 0;
    for (int64_t c = 0; c < len; ++c) nrm += qi[c] * qi[c];
    nrm = std::sqrt(nrm);
    PG_CHECK(nrm > 1e-12, "orthogonal_init: degenerate draw");
    for (int64_t c = 0; c < len; ++c) qi[c] /= nrm;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      w[r * cols + c] = static_cast<float>(
          gain * (by_rows ? q[static_cast<size_t>(r * len + c)] : q[static_cast<size_t>(c * len + r)]));
}

#define PG_READOUT_INSTANTIATE(T)                                                                                     \
  template void project_forward<T>(T*, const T*, const T*, int64_t, int64_t, int64_t, ProjectionScratch<T>&);         \
  template void project_backward<T>(T*, bool, T*, const T*, const T*, const T*, int64_t, int64_t, int64_t,            \
                                    ProjectionScratch<T>&);                                                           \
  template void scalar_gate_forward<T>(T*, const T*, T, int64_t, int64_t);                                            \
  template void scalar_gate_backward<T>(T*, T*, const T*, const T*, T, int64_t, int64_t);                             \
  template void context_gate_forward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, int64_t, int64_t, double, \
                                        GateForm);                                                                    \
  template void context_gate_backward<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*, const T*,        \
                                         int64_t, int64_t, double, GateForm);
PG_READOUT_INSTANTIATE(float)
PG_READOUT_INSTANTIATE(double)

}  // namespace pg::readout
