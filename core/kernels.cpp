// Implementation of the run-time selection in core/kernels.h.
#include "core/kernels.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

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
  switch (i) {
    case isa::Isa::avx2: return avx2_kernels();
    case isa::Isa::avx512:
      if (!isa::cpu_supports(i)) throw UserError("avx512 kernels requested on a CPU without AVX-512 (hint: avx2)");
      return avx512_kernels();
  }
  return avx2_kernels();
}

void select(isa::Isa i) { detail::g_active = &kernels_for(i); }

const char* active_name() { return isa::name(active_isa()); }

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
  for (int rep = 0; rep < reps; ++rep) {
    double flops = 0;
    Timer t;
#pragma omp parallel reduction(+ : flops)
    { flops += k.fma_probe(20'000'000); }
    r.fma_gflops = std::max(r.fma_gflops, flops / t.seconds() / 1e9);
  }
  const int64_t M = 1024, K = 192, N = 768;
  for (int rep = 0; rep < reps; ++rep) {
    double flops = 0;
    Timer t;
#pragma omp parallel reduction(+ : flops)
    {
      std::vector<float> a(M * K, 0.5f), b(K * N, 0.25f), c(M * N);
      gemm::gemm(M, N, K, gemm::View{a.data(), K, 1}, gemm::View{b.data(), N, 1}, c.data(), N, false);
      for (int i = 0; i < 8; ++i) {
        gemm::gemm(M, N, K, gemm::View{a.data(), K, 1}, gemm::View{b.data(), N, 1}, c.data(), N, false);
        flops += 2.0 * M * N * K;
      }
    }
    r.gemm_gflops = std::max(r.gemm_gflops, flops / t.seconds() / 1e9);
  }
  return r;
}

}  // namespace pg::kern
