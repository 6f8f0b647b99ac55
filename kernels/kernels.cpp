// Implementation of the run-time selection in kernels/kernels.h.
#include "kernels/kernels.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "core/error.h"

namespace pg::kern {
namespace detail {
const Kernels* g_active = nullptr;

const Kernels& init_active() {
  static std::once_flag once;
  static const Kernels* chosen = nullptr;
  std::call_once(once, [] {
    const char* env = std::getenv("PAGEGRAM_ISA");
    chosen = &kernels_for(isa::parse(env ? env : "auto"));
  });
  if (!g_active) g_active = chosen;
  return *g_active;
}
}  // namespace detail

const Kernels& kernels_for(isa::Isa i) {
  if (!isa::cpu_supports(i))
    throw UserError(str(isa::name(i), " kernels requested on a CPU without them (hint: PAGEGRAM_ISA=auto)"));
  return isa::entry(i).kernels();
}

void select(isa::Isa i) { detail::g_active = &kernels_for(i); }

const char* active_name() { return isa::name(active_isa()); }

namespace {
enum class Bf16Mode { unset, automatic, emulated, native, amx, amx_emulated };
Bf16Mode g_bf16_mode = Bf16Mode::unset;

void require_native() {
  if (active().isa != isa::Isa::avx512 || native_bf16() == nullptr)
    throw UserError(str("PAGEGRAM_BF16=native: VDPBF16PS needs AVX-512 with AVX512_BF16 (active kernels: ",
                        active_name(), "; CPU: ", isa::cpu_description(), ") (hint: auto or emulated)"));
}
void require_amx() {
  if (amx_bf16() == nullptr)
    throw UserError(str("PAGEGRAM_BF16=amx: ", amx_status().reason, " (CPU: ", isa::cpu_description(),
                        ") (hint: auto, or amx-emulated for the same bits without the tiles)"));
}

Bf16Mode parse_bf16(const std::string& v) {
  if (v.empty() || v == "auto") return Bf16Mode::automatic;
  if (v == "emulated") return Bf16Mode::emulated;
  if (v == "native") return Bf16Mode::native;
  if (v == "amx") return Bf16Mode::amx;
  if (v == "amx-emulated") return Bf16Mode::amx_emulated;
  throw UserError(
      str("PAGEGRAM_BF16=", v, ": unknown bf16 kernel choice (hint: auto, native, emulated, amx or amx-emulated)"));
}

Bf16Mode bf16_mode() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (g_bf16_mode != Bf16Mode::unset) return;  // select_bf16 came first
    const char* env = std::getenv("PAGEGRAM_BF16");
    g_bf16_mode = parse_bf16(env ? env : "");
  });
  return g_bf16_mode;
}
}  // namespace

// Resolved at every call (a few compares per GEMM call), so it follows select() of the fp32 table.
const Bf16Micro& active_bf16() {
  const Kernels& k = active();
  switch (bf16_mode()) {
    case Bf16Mode::emulated:
      return *k.bf16_emulated;
    case Bf16Mode::native:
      require_native();
      return *native_bf16();
    case Bf16Mode::amx:
      require_amx();
      return *amx_bf16();
    case Bf16Mode::amx_emulated:
      return amx_bf16_emulated();
    default:
      if (amx_bf16() && amx_status().bit_identical) return *amx_bf16();
      return k.isa == isa::Isa::avx512 && native_bf16() ? *native_bf16() : *k.bf16_emulated;
  }
}

void select_bf16(const std::string& mode) {
  const Bf16Mode m = parse_bf16(mode);
  if (m == Bf16Mode::native) require_native();
  if (m == Bf16Mode::amx) require_amx();
  g_bf16_mode = m;
}

std::string run_kernels_name(bool bf16) {
  return bf16 ? str(active_name(), "+bf16 ", bf16_name()) : std::string(active_name());
}

std::string bf16_name() {
  const Bf16Micro& m = active_bf16();
  return m.mxcsr_daz_ftz ? str(m.name, " (", active_name(), ")") : std::string(m.name);
}

}  // namespace pg::kern

#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/timer.h"

namespace pg::kern {

PeakResult measure_peak(int reps) {
  PeakResult r;
  r.threads = omp_get_max_threads();
  const Kernels& k = active();
  // Best of `reps` runs of a probe on every thread (each returns the FLOPs it did), in GFLOP/s.
  auto best_of = [reps](auto probe) {
    double best = 0;
    for (int rep = 0; rep < reps; ++rep) {
      double flops = 0;
      Timer t;
#pragma omp parallel reduction(+ : flops)
      { flops += probe(); }
      best = std::max(best, flops / t.seconds() / 1e9);
    }
    return best;
  };
  r.fma_gflops = best_of([&k] { return k.fma_probe(20'000'000); });
  if (native_bf16()) r.bf16_gflops = best_of([] { return bf16_dot_probe(20'000'000); });
  if (amx_bf16()) r.amx_gflops = best_of([] { return amx_dot_probe(2'000'000); });
  const int64_t M = 1024, K = 192, N = 768;
  for (const gemm::Precision prec : {gemm::Precision::fp32, gemm::Precision::bf16}) {
    const gemm::PrecisionScope scope(prec);
    double& best = prec == gemm::Precision::fp32 ? r.gemm_gflops : r.bf16_gemm_gflops;
    for (int rep = 0; rep < reps; ++rep) {
      double flops = 0, seconds = 0;
      Timer t;  // shared: reset and read by one thread between barriers
#pragma omp parallel reduction(+ : flops)
      {
        // Untimed: the buffers' page faults and one warm-up product; the clock covers the 8 timed products only.
        std::vector<float> a(M * K, 0.5f), b(K * N, 0.25f), c(M * N);
        gemm::gemm(M, N, K, gemm::View{a.data(), K, 1}, gemm::View{b.data(), N, 1}, c.data(), N, false);
#pragma omp barrier
#pragma omp single
        t.reset();  // the implicit barrier after `single` starts every thread together
        for (int i = 0; i < 8; ++i) {
          gemm::gemm(M, N, K, gemm::View{a.data(), K, 1}, gemm::View{b.data(), N, 1}, c.data(), N, false);
          flops += 2.0 * M * N * K;
        }
#pragma omp barrier
#pragma omp single
        seconds = t.seconds();
      }
      best = std::max(best, flops / seconds / 1e9);
    }
  }
  return r;
}

}  // namespace pg::kern
