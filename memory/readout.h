// Readout and injection math of the memory (docs/model.md §3) as plain functions over row-major arrays: the W_V
// projection, the scalar gate x += g e, the Engram context gate (sigmoid and signed-sqrt forms), their
// backward passes (which add into gradients), and the deterministic orthogonal init. T = float or double.
// Shapes: N tokens, C model width, D readout width (n_orders*K*r; for the flat layout D = C, no projection).
#pragma once
#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace pg::readout {

// Rows per fixed work chunk: every parallel loop splits by these, never by thread count.
inline constexpr int64_t kRowChunk = 128;

// Scratch of the projections, grown on first use and then reused, so a training step allocates nothing: packed
// operands w, de (float only: packed once per call and shared by the tasks; double uses views) and dwt (both).
template <class T>
struct ProjectionScratch {
  std::vector<T> w, de, dwt;
};

// e [N, C] = u [N, D] · W_Vᵀ, W_V [C, D] stored [out, in].
template <class T>
void project_forward(T* e, const T* u, const T* w, int64_t N, int64_t C, int64_t D, ProjectionScratch<T>& s);
// du [N, D] = de · W_V, or += when accumulate_du (skipped when du is null); dw [C, D] += deᵀ · u (computed as
// dwᵀ = uᵀ · de with de packed once and u's blocks packed as they are used, never u whole).
template <class T>
void project_backward(T* du, bool accumulate_du, T* dw, const T* de, const T* u, const T* w, int64_t N, int64_t C,
                      int64_t D, ProjectionScratch<T>& s);

// x [N, C] += g e.
template <class T>
void scalar_gate_forward(T* x, const T* e, T g, int64_t N, int64_t C);
// dg += Σ dy ⊙ e (double, fixed chunks); de [N, C] += g dy. dy passes to the stream unchanged.
template <class T>
void scalar_gate_backward(T* de, T* dg, const T* dy, const T* e, T g, int64_t N, int64_t C);

enum class GateForm {
  kSigmoid,  // α = σ(s)                              (report form)
  kSignedSqrt,  // α = σ(sign(s) sqrt(max(|s|, 1e-6)))   (Engram's released code)
};
// Context gate, per token t: s = <RMSNorm(h_t) ⊙ wh, RMSNorm(k_t) ⊙ wk> / sqrt(C), x_t = h_t + α_t v_t.
// x [N, C] holds h on entry (copied to h_save [N, C] for the backward pass); alpha [N] receives α.
template <class T>
void context_gate_forward(T* x, T* h_save, T* alpha, const T* k, const T* v, const T* wh, const T* wk, int64_t N,
                          int64_t C, double eps, GateForm form);
// dx [N, C]: in, the gradient w.r.t. x after the gate; out, w.r.t. h (dy + the gate's path).
// dk, dv [N, C] and dwh, dwk [C] are added to.
template <class T>
void context_gate_backward(T* dx, T* dk, T* dv, T* dwh, T* dwk, const T* h, const T* k, const T* v, const T* wh,
                           const T* wk, int64_t N, int64_t C, double eps, GateForm form);

// w [rows, cols] = gain · (orthonormal rows if rows <= cols, else orthonormal columns), from Gaussian draws of
// `rng` orthonormalized by two passes of modified Gram-Schmidt in double. Deterministic.
void orthogonal_init(float* w, int64_t rows, int64_t cols, double gain, RngStream rng);

}  // namespace pg::readout
