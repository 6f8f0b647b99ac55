// The float kernels behind core/gemm and model/simd, one table per instruction set, chosen at run time
// (core/isa.h). Each table is compiled in its own translation unit with its own target flags
// (core/kernels_avx2.cpp, core/kernels_avx512.cpp); the rest of the project is compiled for x86-64-v3.
//
// Every table computes the same bits: a GEMM output element is the sequential FMA chain over k
// (c = fma(a_ik, b_kj, c), k = 0..K-1, starting from C or 0), whatever the register blocking; reductions
// (dot, sum, max) keep 16 lane partials (lane l holds the elements i = l mod 16) and add them in one fixed
// tree; element-wise math (exp, erf, GELU) uses the same operation sequence in every ISA.
#pragma once
#include <cstdint>

#include "core/gemm.h"
#include "core/isa.h"

namespace pg::kern {

// Where a GEMM's A operand comes from: a view packed block by block, or pre-packed panels (rows from i0).
struct ASource {
  gemm::View view{nullptr, 0, 0};
  const float* packed = nullptr;
  int64_t k_cap = 0, i0 = 0;
};

struct Kernels {
  isa::Isa isa;
  // core/gemm (packed layouts in core/gemm.h)
  void (*pack_a)(float* dst, gemm::View a, int64_t M, int64_t K, int64_t q0, int64_t q1);
  void (*pack_a_krange)(float* dst, gemm::View a, int64_t M, int64_t K, int64_t k0, int64_t k1);
  void (*pack_b)(float* dst, gemm::View b, int64_t K, int64_t N, int64_t q0, int64_t q1);
  // C (M x N) = [C +] A[:, ka0 : ka0+K] * B[kb0 : kb0+K, n0 : n0+N], B packed with panel stride b_kcap * kNr;
  // abuf: scratch of kMc * kKc floats for packing A (unused when A is pre-packed).
  void (*gemm_core)(int64_t M, int64_t N, int64_t K, const ASource& A, int64_t ka0, const float* bdata,
                    int64_t b_kcap, int64_t kb0, int64_t n0, float* c, int64_t ldc, bool accumulate, float* abuf);
  // model/simd (contracts there)
  void (*vexp)(float* out, const float* in, int64_t n);
  float (*exp_shift_sum)(float* x, int64_t n, float shift);
  void (*exp_affine_row)(float* x, const float* shift, float scale, float* sum, int64_t n);
  float (*vmax)(const float* x, int64_t n);
  float (*vdot)(const float* a, const float* b, int64_t n);
  void (*gelu_forward_row)(float* out, const float* x, int64_t n);
  void (*gelu_backward_row)(float* dinp, const float* x, const float* dout, int64_t n, bool accumulate);
  // Peak probe: `iters` rounds of independent FMA chains on one thread; returns the FLOPs done.
  double (*fma_probe)(int64_t iters);
};

const Kernels& avx2_kernels();
const Kernels& avx512_kernels();  // only call when isa::cpu_supports(Isa::avx512)
const Kernels& kernels_for(isa::Isa i);

namespace detail {
extern const Kernels* g_active;
const Kernels& init_active();
}  // namespace detail

// The active table: PAGEGRAM_ISA (auto | avx2 | avx512) at first use, else the best of this CPU.
inline const Kernels& active() {
  const Kernels* k = detail::g_active;
  return k ? *k : detail::init_active();
}
inline isa::Isa active_isa() { return active().isa; }
// Switches the active table (tests and benchmarks; never while kernels run on other threads).
void select(isa::Isa i);
// "avx512 (AMD EPYC [avx2 fma avx512f ...])": the kernel set and the CPU, for logs and --version.
const char* active_name();

}  // namespace pg::kern

namespace pg::kern {
struct PeakResult {
  double fma_gflops = 0;    // independent FMA chains on every thread (the machine's fp32 FMA peak)
  double gemm_gflops = 0;   // core/gemm on a training-sized product (M 1,024 per thread, K 192, N 768)
  int threads = 0;
};
// Measures both on the current OpenMP threads (call setup_threads first), best of `reps` repetitions.
PeakResult measure_peak(int reps = 3);
}  // namespace pg::kern
