// The float kernels behind kernels/gemm and model/simd, one table per instruction set, chosen at run time
// (kernels/isa.h). Each table is compiled in its own translation unit with its own target flags
// (kernels/kernels_avx2.cpp, kernels/kernels_avx512.cpp); the rest of the project is compiled for x86-64-v3. The bf16
// products have their own kernels beside them: VDPBF16PS micro-kernels (kernels/kernels_avx512bf16.cpp), each
// table's emulation of them, and the AMX tile driver with its emulation (kernels/kernels_amx.cpp); see active_bf16.
//
// Every table computes the same bits: a GEMM output element is the sequential FMA chain over k
// (c = fma(a_ik, b_kj, c), k = 0..K-1, starting from C or 0), whatever the register blocking; reductions
// (dot, sum, max) keep 16 lane partials (lane l holds the elements i = l mod 16) and add them in one fixed
// tree; element-wise math (exp, erf, GELU) uses the same operation sequence in every ISA.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/gemm.h"
#include "kernels/isa.h"

namespace pg::kern {

// Where a GEMM's A operand comes from: a view packed block by block, or pre-packed panels (rows from i0).
struct ASource {
  gemm::View view{nullptr, 0, 0};
  const float* packed = nullptr;
  int64_t k_cap = 0, i0 = 0;
};

// A bf16 micro-kernel (kernels/gemm.h, bf16): C[0:MR, 0:nr] = [C +] the kp packed pairs of an A micro-panel (words
// kMr apart) times those of a B panel (words kNr apart); cn as for the fp32 micro-kernels (a prefetch hint).
using Bf16Kernel = void (*)(int64_t kp, const uint32_t* ap, const uint32_t* bp, float* c, int64_t ldc, int64_t nr,
                            bool load_c, const float* cn);
// The blocked bf16 product (Kernels::gemm_core16's contract without the micro-kernel set): C (M x N) = [C +]
// A[:, ka0 : ka0+K] * B[kb0 : kb0+K, n0 : n0+N], B packed with panel stride b_kcap * kNr; abuf as for gemm_core.
using GemmCore16 = void (*)(int64_t M, int64_t N, int64_t K, const ASource& A, int64_t ka0, const float* bdata,
                            int64_t b_kcap, int64_t kb0, int64_t n0, float* c, int64_t ldc, bool accumulate,
                            float* abuf);
// A k-contiguous A (a row-major activation) is packed by rows instead, with no transposition: row i of a micro-panel
// holds its pairs p at word i * kRowWords + p (a k-block has at most kKc / 2 pairs), and the `kr` kernels read it so.
inline constexpr int64_t kRowWords = gemm::kKc / 2;
struct Bf16Micro {
  const char* name;  // for logs: "vdpbf16ps", "emulated", "amx" or "amx-emulated"
  bool mxcsr_daz_ftz;  // an emulation: packers convert in software; k[] run with MXCSR DAZ|FTZ set (the plain
                       // FMAs then round as VDPBF16PS does)
  Bf16Kernel k[gemm::kMr];  // k[MR - 1]: MR = 1..kMr rows (VDPBF16PS order; unused when core is set)
  GemmCore16 core;  // AMX order (kernels/gemm.h): a whole product of its own (kernels/kernels_amx.cpp), else nullptr
  Bf16Kernel kr[gemm::kMr];  // as k, with A's micro-panel in rows (kRowWords above); the same bits
};

struct Kernels {
  isa::Isa isa;
  // kernels/gemm (packed layouts in kernels/gemm.h)
  void (*pack_a)(float* dst, gemm::View a, int64_t M, int64_t K, int64_t q0, int64_t q1);
  void (*pack_a_krange)(float* dst, gemm::View a, int64_t M, int64_t K, int64_t k0, int64_t k1);
  void (*pack_b)(float* dst, gemm::View b, int64_t K, int64_t N, int64_t q0, int64_t q1);
  // C (M x N) = [C +] A[:, ka0 : ka0+K] * B[kb0 : kb0+K, n0 : n0+N], B packed with panel stride b_kcap * kNr;
  // abuf: scratch of kMc * kKc floats for packing A (unused when A is pre-packed).
  void (*gemm_core)(int64_t M, int64_t N, int64_t K, const ASource& A, int64_t ka0, const float* bdata, int64_t b_kcap,
                    int64_t kb0, int64_t n0, float* c, int64_t ldc, bool accumulate, float* abuf);
  // bf16 GEMM (kernels/gemm.h): the same packers writing bf16 pairs, and the blocked product with a micro-kernel set
  // (the table's emulation or the VDPBF16PS one); abuf as for gemm_core.
  void (*pack_a16)(float* dst, gemm::View a, int64_t M, int64_t K, int64_t q0, int64_t q1);
  void (*pack_a_krange16)(float* dst, gemm::View a, int64_t M, int64_t K, int64_t k0, int64_t k1);
  void (*pack_b16)(float* dst, gemm::View b, int64_t K, int64_t N, int64_t q0, int64_t q1);
  // k rows [k0, k1) (k0 even) of every panel of a row-major B (cs == 1), in one pass over those source rows.
  void (*pack_b_krange16)(float* dst, gemm::View b, int64_t K, int64_t N, int64_t k0, int64_t k1);
  void (*gemm_core16)(int64_t M, int64_t N, int64_t K, const ASource& A, int64_t ka0, const float* bdata,
                      int64_t b_kcap, int64_t kb0, int64_t n0, float* c, int64_t ldc, bool accumulate, float* abuf,
                      const Bf16Micro& micro);
  const Bf16Micro* bf16_emulated;  // fp32 FMAs of this ISA under MXCSR DAZ|FTZ
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

// The VDPBF16PS micro-kernels (kernels/kernels_avx512bf16.cpp); nullptr when the CPU lacks AVX512_BF16.
const Bf16Micro* native_bf16();
// Peak probe of VDPBF16PS: `iters` rounds of independent chains on one thread; returns the FLOPs done (2 per bf16
// product). Only call when native_bf16() is not null.
double bf16_dot_probe(int64_t iters);

// AMX-BF16 (kernels/kernels_amx.cpp; bits of gemm::gemm_bf16_amx_reference). Whether this process can use the tile
// instructions: CPU, OS and the kernel's permission (requested at the first call), and a self-check of the
// instructions against the SDM's model of TDPBF16PS (the emulation below) on one product.
struct AmxStatus {
  bool usable = false;  // PAGEGRAM_BF16=amx allowed
  bool bit_identical = false;  // the self-check's product had the model's bits (auto uses the tiles)
  std::string reason;  // why not usable ("" when usable)
  std::string note;  // usable, but the instructions differed from the model (by how much)
};
const AmxStatus& amx_status();
// The tile permission alone (cpuid, tile limits, XCR0, arch_prctl), asked once per process: "" when granted, else
// why not. main() asks it first thing, before MPI and threads start (a small sigaltstack installed before it would
// make Linux refuse); amx_status() runs the self-check on top.
const std::string& amx_request_permission();
// The tile kernels when amx_status().usable, else nullptr.
const Bf16Micro* amx_bf16();
// The same driver on emulated tiles (the SDM's pseudocode in AVX2 FMAs): the AMX bits on every machine, slower.
const Bf16Micro& amx_bf16_emulated();
// Peak probe of TDPBF16PS: `iters` rounds of four independent tile products on one thread; returns the FLOPs done.
// Returns 0 (and runs no tile instruction) when amx_bf16() is null.
double amx_dot_probe(int64_t iters);

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

// The bf16 kernels in use. PAGEGRAM_BF16 chooses at first use:
//   auto: AMX tiles where amx_bf16() is usable and its self-check found the model's bits, else VDPBF16PS when the
//         active table is avx512 and the CPU has
//         AVX512_BF16, else the active table's emulation of VDPBF16PS (same bits as VDPBF16PS);
//   native: VDPBF16PS (UserError without it); emulated: the active table's emulation of VDPBF16PS;
//   amx: the tiles (UserError when not usable); amx-emulated: the AMX driver on emulated tiles (AMX bits anywhere).
// The AMX order gives other bits than VDPBF16PS's (kernels/gemm.h): a bf16 run on an AMX machine under auto is
// reproducible there and with amx-emulated elsewhere; native or emulated give the VDPBF16PS bits everywhere.
const Bf16Micro& active_bf16();
// Chooses as PAGEGRAM_BF16 would (UserError for a choice this machine cannot run or an unknown name). Tests and
// benchmarks; never while kernels run on other threads.
void select_bf16(const std::string& mode);
// "vdpbf16ps", "amx", "emulated (avx2)" or "amx-emulated (avx512)": the bf16 kernel, for logs and --version.
std::string bf16_name();
// The kernels a run uses, for logs: active_name() in fp32, "avx512+bf16 vdpbf16ps" (or "avx2+bf16 emulated
// (avx2)") in bf16.
std::string run_kernels_name(bool bf16);

}  // namespace pg::kern

namespace pg::kern {
struct PeakResult {
  double fma_gflops = 0;  // independent FMA chains on every thread (the machine's fp32 FMA peak)
  double gemm_gflops = 0;  // kernels/gemm on a training-sized product (M 1,024 per thread, K 192, N 768)
  double bf16_gflops = 0;  // VDPBF16PS chains on every thread (0 without AVX512_BF16)
  double bf16_gemm_gflops = 0;  // the same product in bf16 (gemm::Precision::bf16: the active bf16 kernels)
  double amx_gflops = 0;  // TDPBF16PS on every thread (0 where AMX is not usable)
  int threads = 0;
};
// Measures both on the current OpenMP threads (call setup_threads first), best of `reps` repetitions.
PeakResult measure_peak(int reps = 3);
}  // namespace pg::kern
