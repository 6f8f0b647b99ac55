// Instruction-set selection for the float kernels (kernels/kernels.h): detected from cpuid once per process,
// overridable with the environment variable PAGEGRAM_ISA (auto | avx2 | avx512). The whole project is compiled
// for x86-64-v3 (AVX2 + FMA); the AVX-512 kernels live in their own translation unit and are only called
// when the CPU has them. The fp32 kernels of every ISA give the same bits (same per-element summation order
// and FMA use; tests/kernels/kernels_test.cpp pins this).
#pragma once
#include <string>
#include <vector>

namespace pg::kern {
struct Kernels;
}

namespace pg::isa {

enum class Isa { avx2, avx512 };

// The instruction sets this build has kernels for, one row each, best last (kernels/isa.cpp): the only place an ISA
// is listed. Its name as PAGEGRAM_ISA spells it, whether this CPU runs it, and its kernel table (call only when
// cpu_has() is true).
struct IsaEntry {
  Isa isa;
  const char* name;
  bool (*cpu_has)();
  const kern::Kernels& (*kernels)();
};
const std::vector<IsaEntry>& table();
const IsaEntry& entry(Isa i);

// Lower-case name as PAGEGRAM_ISA spells it ("avx2", "avx512").
const char* name(Isa i);
// Every ISA this CPU can run, best last.
std::vector<Isa> supported();
bool cpu_supports(Isa i);
// AVX512_BF16 (VDPBF16PS), cpuid leaf 7 sub-leaf 1, EAX bit 5.
bool cpu_has_avx512bf16();
// AMX-TILE and AMX-BF16 (cpuid leaf 7 sub-leaf 0, EDX bits 24 and 22).
bool cpu_has_amx_bf16();
// The OS has enabled the tile state (XCR0 bits 17 and 18). Linux also wants a per-process permission before the
// first tile instruction (kern::amx_status() asks for it).
bool os_enables_amx();
// "" when cpuid leaves 0x1D/0x1E describe tiles this project's kernels can configure (palette 1 with 8 tiles of 16
// rows x 64 bytes; TMUL k 16, n 64 bytes), else what is missing: LDTILECFG would fault on a CPU or VM reporting
// smaller limits.
std::string amx_palette_problem();
// The best ISA of this CPU.
Isa best();
// Parses a PAGEGRAM_ISA value ("auto" = best()); throws UserError naming the variable and the choices when the
// value is unknown or the CPU lacks that instruction set.
Isa parse(const std::string& value, const char* where = "PAGEGRAM_ISA");
// One line describing the CPU (model name from /proc/cpuinfo) and its vector extensions.
std::string cpu_description();

}  // namespace pg::isa
