// Implementation of kernels/isa.h.
#include "kernels/isa.h"

#include <fstream>
#include <utility>

#include "core/error.h"
#include "kernels/kernels.h"

namespace pg::isa {
namespace {

struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};
Regs cpuid(unsigned leaf, unsigned sub) {
  Regs r;
  __asm__ volatile("cpuid" : "=a"(r.a), "=b"(r.b), "=c"(r.c), "=d"(r.d) : "a"(leaf), "c"(sub));
  return r;
}
unsigned max_leaf() { return cpuid(0, 0).a; }

}  // namespace

namespace {
bool has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
bool has_avx512() {
  return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}
}  // namespace

const std::vector<IsaEntry>& table() {
  static const std::vector<IsaEntry> t = {
      {Isa::avx2, "avx2", has_avx2, kern::avx2_kernels},
      {Isa::avx512, "avx512", has_avx512, kern::avx512_kernels},
  };
  return t;
}

const IsaEntry& entry(Isa i) {
  for (const IsaEntry& e : table())
    if (e.isa == i) return e;
  PG_CHECK(false, "instruction set ", static_cast<int>(i), " has no row in isa::table()");
  return table().front();
}

const char* name(Isa i) { return entry(i).name; }

bool cpu_supports(Isa i) { return entry(i).cpu_has(); }

bool cpu_has_avx512bf16() { return max_leaf() >= 7 && ((cpuid(7, 1).a >> 5) & 1) != 0; }

bool cpu_has_amx_bf16() {
  if (max_leaf() < 7) return false;
  const unsigned d = cpuid(7, 0).d;
  return ((d >> 24) & 1) != 0 && ((d >> 22) & 1) != 0;
}

bool os_enables_amx() {
  if (((cpuid(1, 0).c >> 27) & 1) == 0) return false;  // OSXSAVE: XGETBV usable
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((lo >> 17) & 3u) == 3u;  // XTILECFG and XTILEDATA
}

std::string amx_palette_problem() {
  if (const unsigned top = max_leaf(); top < 0x1E)
    return str("cpuid has no tile leaves 0x1D/0x1E (max leaf ", top, ")");
  if (cpuid(0x1D, 0).a < 1) return "cpuid leaf 0x1D lists no tile palette 1";
  const Regs p = cpuid(0x1D, 1);
  const unsigned bytes_per_row = p.b & 0xFFFFu, max_names = p.b >> 16, max_rows = p.c & 0xFFFFu;
  if (max_names < 8 || bytes_per_row < 64 || max_rows < 16)
    return str("tile palette 1 offers ", max_names, " tiles of ", max_rows, " rows x ", bytes_per_row,
               " bytes (needed: 8 of 16 x 64)");
  const unsigned tmul = cpuid(0x1E, 0).b, tmul_maxk = tmul & 0xFFu, tmul_maxn = (tmul >> 8) & 0xFFFFu;
  if (tmul_maxk < 16 || tmul_maxn < 64)
    return str("the tile multiplier takes k ", tmul_maxk, " and n ", tmul_maxn, " bytes (needed: 16 and 64)");
  return "";
}

std::vector<Isa> supported() {
  std::vector<Isa> out;
  for (const IsaEntry& e : table())
    if (e.cpu_has()) out.push_back(e.isa);
  return out;
}

Isa best() {
  const auto s = supported();
  if (s.empty())
    throw UserError(
        "this CPU lacks AVX2 + FMA: pagegram is built for x86-64-v3 (hint: any x86-64 CPU since 2013-2015 has them; "
        "build elsewhere)");
  return s.back();
}

Isa parse(const std::string& value, const char* where) {
  if (value.empty() || value == "auto") return best();
  std::string names;
  for (const IsaEntry& e : table()) names += str(", ", e.name);
  for (const IsaEntry& e : table()) {
    const Isa i = e.isa;
    if (value != e.name) continue;
    if (!cpu_supports(i))
      throw UserError(str(
          where, "=", value, ": this CPU does not support ", value, " (hint: supported here: ",
          [] {
            std::string s;
            for (Isa j : supported()) s += std::string(s.empty() ? "" : ", ") + name(j);
            return s.empty() ? std::string("none") : s;
          }(),
          "; or auto)"));
    return i;
  }
  throw UserError(str(where, "=", value, ": unknown instruction set (hint: auto", names, ")"));
}

std::string cpu_description() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto p = line.find(':');
      if (p != std::string::npos) model = line.substr(p + 2);
      break;
    }
  }
  __builtin_cpu_init();
  const std::pair<const char*, bool> exts[] = {{"avx2", __builtin_cpu_supports("avx2") != 0},
                                               {"fma", __builtin_cpu_supports("fma") != 0},
                                               {"avx512f", __builtin_cpu_supports("avx512f") != 0},
                                               {"avx512bw", __builtin_cpu_supports("avx512bw") != 0},
                                               {"avx512vl", __builtin_cpu_supports("avx512vl") != 0},
                                               {"avx512bf16", cpu_has_avx512bf16()},
                                               {"amx-bf16", cpu_has_amx_bf16()}};
  std::string ext;
  for (const auto& [e, has] : exts)
    if (has) ext += std::string(ext.empty() ? "" : " ") + e;
  return model + " [" + ext + "]";
}

}  // namespace pg::isa
