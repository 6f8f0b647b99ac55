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
