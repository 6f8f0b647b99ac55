// The AMX-BF16 product of the bf16 GEMM (kernels/gemm.h "AMX order", kernels/kernels.h): TDPBF16PS on 16 x 16 fp32
// tiles, 2 x 2 tiles (32 rows x 32 columns of C) per block, k in groups of 16 pairs (a tile of A: 16 rows x 16 pairs; a
// tile of B: 16 pair rows x 16 columns). The packed B panel (kernels/gemm.h PackedB, bf16: pair p of column j at word
// p * kNr + j) is already in the tile layout of B and is read in place (rows 128 bytes apart); A, packed in kMr-row
// panels (pairs of one row kMr words apart), is laid out again per block as rows of contiguous pairs, zero-padded
// to 32 rows and whole groups (kept for the whole width of C). Only the last group of a block can be partial: its B
// rows are copied into a zero-padded tile.
//
// One driver, two tile back ends: Hw (the instructions; this file's target pragma, run only after cpuid, XCR0 and
// the kernel's tile permission said yes, see amx_bf16()) and Emu (the instruction as the SDM's pseudocode defines it,
// AVX2 FMAs under MXCSR DAZ|FTZ, on tiles in memory): every machine runs the driver's packing, blocking and edges
// through Emu (tests/kernels/bf16_test.cpp compares it with gemm_bf16_amx_reference bit for bit), and an AMX machine
// checks the instructions against Emu at first use (self_check) before `auto` picks them.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"

#pragma GCC target("amx-tile,amx-bf16")

namespace pg::kern::amx_impl {
namespace {

using gemm::kMr;
using gemm::kNr;  // 32: a packed B panel is two tiles wide
constexpr int64_t kGroup = 16;  // pairs per tile row (64 bytes)
constexpr int64_t kBlockK = 384;  // k per block: 12 groups (a multiple of 2 * kGroup, so groups start at even k)
constexpr int64_t kBlockM = 128;  // rows of A laid out per block (a multiple of 32)

inline const uint32_t* words(const float* p) { return reinterpret_cast<const uint32_t*>(p); }
inline int64_t pairs(int64_t k) { return (k + 1) / 2; }

// TILECFG (palette 1): every tile 16 rows of 64 bytes; tmm0-3 accumulate C, tmm4-5 hold A, tmm6-7 hold B.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
static_assert(sizeof(TileConfig) == 64);

// The instructions. The tile number is part of the instruction, hence the switches (constant after inlining).
struct Hw {
  static void begin() {
    static const TileConfig cfg;
    _tile_loadconfig(&cfg);
  }
  static void end() { _tile_release(); }
  // GCC's TILELOADD asm does not tell the compiler it reads memory: the barrier keeps stores to the source (the
  // B tail, the C buffer) before it.
  static inline void load(int t, const void* p, int64_t stride) {
    __asm__ volatile("" ::: "memory");
    switch (t) {
      case 0:
        _tile_loadd(0, p, stride);
        break;
      case 1:
        _tile_loadd(1, p, stride);
        break;
      case 2:
        _tile_loadd(2, p, stride);
        break;
      case 3:
        _tile_loadd(3, p, stride);
        break;
      case 4:
        _tile_loadd(4, p, stride);
        break;
      case 5:
        _tile_loadd(5, p, stride);
        break;
      case 6:
        _tile_loadd(6, p, stride);
        break;
      default:
        _tile_loadd(7, p, stride);
        break;
    }
  }
  static inline void store(int t, void* p, int64_t stride) {
    switch (t) {
      case 0:
        _tile_stored(0, p, stride);
        break;
      case 1:
        _tile_stored(1, p, stride);
        break;
      case 2:
        _tile_stored(2, p, stride);
        break;
      default:
        _tile_stored(3, p, stride);
        break;
    }
  }
  static inline void zero_c() {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  // C(0) += A(4) B(6), C(1) += A(4) B(7), C(2) += A(5) B(6), C(3) += A(5) B(7)
  static inline void dp4() {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
};

// TDPBF16PS as the SDM's pseudocode defines it, on tiles in memory: per row m of C and column n, an even chain
// E = fma(a[m].bf16[2k], b[k].bf16[2n], E) and an odd chain O (the [2k+1] elements) over the tile's 16 pairs k, both
// from 0, then C[m][n] += (E + O); every operation fp32 with DAZ, FTZ and round to nearest even (here MXCSR
// DAZ|FTZ, set by begin()).
struct Emu {
  struct alignas(64) Tiles {
    uint32_t t[8][16][16];
  };
  static Tiles& tiles() {
    static thread_local Tiles s;
    return s;
  }
  static unsigned& saved_csr() {
    static thread_local unsigned csr = 0;
    return csr;
  }
  static void begin() {
    saved_csr() = _mm_getcsr();
    _mm_setcsr(0x9FC0u);  // the instruction's rules whatever the caller set: FTZ | DAZ, nearest even, all masked
  }
  static void end() { _mm_setcsr(saved_csr()); }
  static void load(int t, const void* p, int64_t stride) {
    for (int r = 0; r < 16; ++r) std::memcpy(tiles().t[t][r], static_cast<const char*>(p) + r * stride, 64);
  }
  static void store(int t, void* p, int64_t stride) {
    for (int r = 0; r < 16; ++r) std::memcpy(static_cast<char*>(p) + r * stride, tiles().t[t][r], 64);
  }
  static void zero_c() { std::memset(tiles().t, 0, 4 * sizeof tiles().t[0]); }
  static void dp(int c, int a, int b) {
    Tiles& T = tiles();
    const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    for (int m = 0; m < 16; ++m) {
      __m256 e0 = _mm256_setzero_ps(), e1 = e0, o0 = e0, o1 = e0;  // columns 0-7 and 8-15
      for (int k = 0; k < 16; ++k) {
        const uint32_t w = T.t[a][m][k];
        const __m256 ae = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(w << 16)));
        const __m256 ao = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(w & 0xFFFF0000u)));
        const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(T.t[b][k]));
        const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(T.t[b][k] + 8));
        e0 = _mm256_fmadd_ps(ae, _mm256_castsi256_ps(_mm256_slli_epi32(b0, 16)), e0);
        o0 = _mm256_fmadd_ps(ao, _mm256_castsi256_ps(_mm256_and_si256(b0, hi)), o0);
        e1 = _mm256_fmadd_ps(ae, _mm256_castsi256_ps(_mm256_slli_epi32(b1, 16)), e1);
        o1 = _mm256_fmadd_ps(ao, _mm256_castsi256_ps(_mm256_and_si256(b1, hi)), o1);
      }
      float* cr = reinterpret_cast<float*>(T.t[c][m]);
      _mm256_storeu_ps(cr, _mm256_add_ps(_mm256_loadu_ps(cr), _mm256_add_ps(e0, o0)));
      _mm256_storeu_ps(cr + 8, _mm256_add_ps(_mm256_loadu_ps(cr + 8), _mm256_add_ps(e1, o1)));
    }
  }
  static void dp4() {
    dp(0, 4, 6);
    dp(1, 4, 7);
    dp(2, 5, 6);
    dp(3, 5, 7);
  }
};

// Per-thread buffers, grown once.
struct Scratch {
  std::vector<uint32_t> at;  // A rows of contiguous pairs: kBlockM x kBlockK / 2 words (from a_rows(), 64-aligned)
  std::vector<uint32_t> std;  // A packed in kMr-row panels (from a view), one block
  alignas(64) uint32_t btail[kGroup * kNr];
  alignas(64) float cbuf[32 * 32];
  // Tile rows of A start on cache lines (row strides are multiples of 64 bytes).
  uint32_t* a_rows() {
    const auto p = reinterpret_cast<uintptr_t>(at.data());
    return at.data() + ((64 - p % 64) % 64) / 4;
  }
};
Scratch& scratch() {
  static thread_local Scratch s;
  if (s.at.empty()) {
    s.at.resize(kBlockM * kBlockK / 2 + 16);
    s.std.resize(((kBlockM + kMr - 1) / kMr) * kMr * kBlockK / 2);
  }
  return s;
}

// Rows [r0, r0 + mc) of A in kMr-row panels (panel stride a_stride words, pair p of a row kMr words apart) to rows
// of kpad contiguous pairs (kpc of them, then zeros), then zero rows up to a multiple of 32.
void lay_out_a(uint32_t* at, int64_t kpad, const uint32_t* ap, int64_t a_stride, int64_t r0, int64_t mc, int64_t kpc) {
  const int64_t mpad = (mc + 31) / 32 * 32;
  for (int64_t i = 0; i < mpad; ++i) {
    uint32_t* d = at + i * kpad;
    int64_t p = 0;
    if (i < mc) {
      const int64_t r = r0 + i;
      const uint32_t* s = ap + (r / kMr) * a_stride + r % kMr;
      for (; p < kpc; ++p) d[p] = s[p * kMr];
    }
    for (; p < kpad; ++p) d[p] = 0;
  }
}

// C[0:mr, 0:nr] (mr, nr <= 32) = [C +] the groups of a 32-row slice of the laid-out A times a B panel; B rows of
// group g from the panel for g < full, else from btail.
template <class T>
void block(const uint32_t* at, int64_t kpad, int64_t groups, int64_t full, const uint32_t* bp, const uint32_t* btail,
           float* c, int64_t ldc, int64_t mr, int64_t nr, bool load_c, float* cbuf) {
  const bool whole = mr == 32 && nr == 32;
  float* cd = whole ? c : cbuf;
  const int64_t cs = whole ? ldc * 4 : 32 * 4;  // bytes between C rows
  const int64_t cr = whole ? 16 * ldc : 16 * 32;
  if (load_c) {
    if (!whole) {
      std::memset(cbuf, 0, 32 * 32 * sizeof(float));
      for (int64_t i = 0; i < mr; ++i) std::memcpy(cbuf + i * 32, c + i * ldc, nr * sizeof(float));
    }
    T::load(0, cd, cs);
    T::load(1, cd + 16, cs);
    T::load(2, cd + cr, cs);
    T::load(3, cd + cr + 16, cs);
  } else {
    T::zero_c();
  }
  for (int64_t g = 0; g < groups; ++g) {
    const uint32_t* bg = g < full ? bp + g * kGroup * kNr : btail;
    T::load(4, at + g * kGroup, kpad * 4);
    T::load(5, at + 16 * kpad + g * kGroup, kpad * 4);
    T::load(6, bg, kNr * 4);
    T::load(7, bg + 16, kNr * 4);
    T::dp4();
  }
  T::store(0, cd, cs);
  T::store(1, cd + 16, cs);
  T::store(2, cd + cr, cs);
  T::store(3, cd + cr + 16, cs);
  if (!whole)
    for (int64_t i = 0; i < mr; ++i) std::memcpy(c + i * ldc, cbuf + i * 32, nr * sizeof(float));
}

// The gemm_core16 contract (kernels/kernels.h): C (M x N) = [C +] A[:, ka0 : ka0+K] * B[kb0 : kb0+K, n0 : n0+N].
// Loops: k-blocks of kBlockK, row blocks of kBlockM (A laid out once per block), B panels, 32-row slices.
template <class T>
void core(int64_t M, int64_t N, int64_t K, const ASource& A, int64_t ka0, const float* bdata, int64_t b_kcap,
          int64_t kb0, int64_t n0, float* c, int64_t ldc, bool accumulate, float* /*abuf*/) {
  Scratch& s = scratch();
  uint32_t* at = s.a_rows();
  const uint32_t* bw = words(bdata);
  const int64_t bkp = pairs(b_kcap);
  for (int64_t kb = 0; kb < K; kb += kBlockK) {
    const int64_t kcur = std::min(kBlockK, K - kb), kpc = pairs(kcur);
    const int64_t full = kpc / kGroup, groups = (kpc + kGroup - 1) / kGroup, kpad = groups * kGroup;
    const bool load_c = accumulate || kb > 0;
    for (int64_t ic = 0; ic < M; ic += kBlockM) {
      const int64_t mc = std::min(kBlockM, M - ic);
      if (A.packed) {
        const int64_t akp = pairs(A.k_cap);
        lay_out_a(at, kpad, words(A.packed) + ((ka0 + kb) / 2) * kMr, akp * kMr, A.i0 + ic, mc, kpc);
      } else {
        const int64_t np = (mc + kMr - 1) / kMr;
        active().pack_a16(reinterpret_cast<float*>(s.std.data()), A.view.at_block(ic, ka0 + kb), mc, kcur, 0, np);
        lay_out_a(at, kpad, s.std.data(), kpc * kMr, 0, mc, kpc);
      }
      // Tiles configured around the tile work only (the ABI keeps no tile state across calls: the only calls inside
      // are libc's memcpy / memset, which use no tiles).
      T::begin();
      for (int64_t jr = 0; jr < N; jr += kNr) {
        const uint32_t* bp = bw + ((n0 + jr) / kNr) * bkp * kNr + ((kb0 + kb) / 2) * kNr;
        if (full < groups) {
          const int64_t tail = kpc - full * kGroup;
          std::memcpy(s.btail, bp + full * kGroup * kNr, tail * kNr * sizeof(uint32_t));
          std::memset(s.btail + tail * kNr, 0, (kGroup - tail) * kNr * sizeof(uint32_t));
        }
        const int64_t nr = std::min(kNr, N - jr);
        for (int64_t ir = 0; ir < mc; ir += 32)
          block<T>(at + ir * kpad, kpad, groups, full, bp, s.btail, c + (ic + ir) * ldc + jr, ldc,
                   std::min<int64_t>(32, mc - ir), nr, load_c, s.cbuf);
      }
      T::end();
    }
  }
}

// AMX usable by this process: CPU (cpuid, tile limits), OS (XCR0 tile state) and the kernel's permission (Linux
// 5.16+: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), asked once per process); else why not.
std::string request_tiles() {
  if (!isa::cpu_has_amx_bf16()) return "this CPU has no AMX-BF16";
  if (std::string p = isa::amx_palette_problem(); !p.empty()) return p;
  if (!isa::os_enables_amx()) return "the OS has not enabled the AMX tile state (XCR0 bits 17-18)";
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) != 0)
    return str("the kernel refused the AMX tile permission (arch_prctl ARCH_REQ_XCOMP_PERM: ", std::strerror(errno),
               "; Linux 5.16 or later is needed)");
  return "";
}

// Operands of one self-check product, packed by hand (no packer: they would ask for the active bf16 kernels,
// which are being chosen): A pre-packed in kMr-row panels, B in kNr-column panels, C random. `special` mixes in
// what the denormal rules act on (as tests/kernels/bf16_test.cpp's matrix()): values scaled by 2^-63 (products near
// 2^-126, flushed by FTZ) and 2^-120, and denormals in C (DAZ on the accumulator read).
struct CheckCase {
  int64_t M, N, K;
  bool accumulate;
  std::vector<float> a, b, c;
  CheckCase(int64_t m, int64_t n, int64_t k, bool acc, bool special, uint32_t seed)
      : M(m), N(n), K(k), accumulate(acc) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto value = [&] {
      const float x = u(g);
      if (!special) return x;
      const uint32_t r = g() % 16;
      return r == 1 ? std::ldexp(x, -63) : r == 2 ? std::ldexp(x, -120) : x;
    };
    const int64_t kp = pairs(K);
    auto word = [](float lo, float hi) {
      return static_cast<uint32_t>(gemm::to_bf16(lo)) | (static_cast<uint32_t>(gemm::to_bf16(hi)) << 16);
    };
    auto to_float = [](uint32_t w) {
      float x;
      std::memcpy(&x, &w, 4);
      return x;
    };
    a.assign(gemm::packed_a_panels(M) * kMr * kp, 0.0f);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t p = 0; p < kp; ++p) {
        const float lo = value(), hi = 2 * p + 1 < K ? value() : 0.0f;
        a[(i / kMr) * kp * kMr + p * kMr + i % kMr] = to_float(word(lo, hi));
      }
    b.assign(gemm::packed_b_panels(N) * kNr * kp, 0.0f);
    for (int64_t j = 0; j < N; ++j)
      for (int64_t p = 0; p < kp; ++p) {
        const float lo = value(), hi = 2 * p + 1 < K ? value() : 0.0f;
        b[(j / kNr) * kp * kNr + p * kNr + j % kNr] = to_float(word(lo, hi));
      }
    c.resize(M * N);
    for (float& x : c) {
      x = value();
      if (special && g() % 16 == 0) x = to_float((g() & 0x807FFFFFu) | 1u);  // a denormal
    }
  }
  std::vector<float> run(GemmCore16 fn) const {
    std::vector<float> out = c;
    fn(M, N, K, ASource{gemm::View{nullptr, 0, 0}, a.data(), K, 0}, 0, b.data(), K, 0, 0, out.data(), N, accumulate,
       nullptr);
    return out;
  }
};

}  // namespace

constexpr Bf16Micro kHw{"amx", false, {}, &core<Hw>, {}};
constexpr Bf16Micro kEmu{"amx-emulated", true, {}, &core<Emu>, {}};

}  // namespace pg::kern::amx_impl

namespace pg::kern {

const AmxStatus& amx_status() {
  static const AmxStatus st = [] {
    AmxStatus s;
    s.reason = amx_request_permission();
    if (!s.reason.empty()) return s;
    // The instructions against the pseudocode's model on one product (accumulating into C): the model's bits are
    // expected (then `auto` uses the tiles); another summation order (|difference| <= 1e-4 (1 + |value|): Intel's
    // intrinsics guide describes one chain per element instead of the SDM's two) leaves them usable on request
    // only (PAGEGRAM_BF16=amx); more, or a NaN, is a broken kernel, never used.
    // Three products: edges in every direction with an odd K and a partial group, accumulating into C; the
    // denormal rules on the same shape; a fresh C (TILEZERO) over three k-blocks (C stored and reloaded between).
    const amx_impl::CheckCase cases[] = {
        {45, 50, 83, true, false, 12345}, {45, 50, 83, true, true, 23456}, {37, 41, 800, false, true, 34567}};
    double worst = 0;
    int64_t differ = 0, outputs = 0;
    bool broken = false;
    for (const amx_impl::CheckCase& cc : cases) {
      const std::vector<float> hw = cc.run(amx_impl::kHw.core), emu = cc.run(amx_impl::kEmu.core);
      outputs += static_cast<int64_t>(hw.size());
      for (size_t i = 0; i < hw.size(); ++i) {
        if (std::memcmp(&hw[i], &emu[i], 4) == 0) continue;
        ++differ;
        const double d = std::fabs(static_cast<double>(hw[i]) - emu[i]);
        if (!(d <= 1e-4 * (1.0 + std::fabs(emu[i])))) broken = true;  // NaN included
        if (!(d <= worst)) worst = d;
      }
    }
    s.bit_identical = differ == 0;
    if (broken) {
      s.reason = str("the AMX self-check failed: ", differ, " of ", outputs,
                     " outputs differ from the SDM model, by up to ", worst, " (accepted: 1e-4 (1 + |value|))");
      return s;
    }
    if (differ > 0)
      s.note = str("TDPBF16PS differs from the SDM model in ", differ, " of ", outputs, " outputs (by <= ", worst,
                   "): auto does not use it");
    s.usable = true;
    return s;
  }();
  return st;
}

const std::string& amx_request_permission() {
  static const std::string reason = amx_impl::request_tiles();
  return reason;
}

const Bf16Micro* amx_bf16() { return amx_status().usable ? &amx_impl::kHw : nullptr; }
const Bf16Micro& amx_bf16_emulated() { return amx_impl::kEmu; }

double amx_dot_probe(int64_t iters) {
  if (!amx_bf16()) return 0.0;  // never a tile instruction without the CPU, the OS and the permission
  // Four independent accumulator tiles, each TDPBF16PS 16 x 16 x 32 bf16 products (16,384 FLOPs).
  alignas(64) static const uint32_t zeros[16 * 16] = {};
  amx_impl::Hw::begin();
  amx_impl::Hw::zero_c();
  for (int t = 4; t < 8; ++t) amx_impl::Hw::load(t, zeros, 64);
  for (int64_t i = 0; i < iters; ++i) amx_impl::Hw::dp4();
  alignas(64) float out[16 * 16];
  amx_impl::Hw::store(0, out, 64);
  amx_impl::Hw::end();
  volatile float sink = out[0];
  (void)sink;
  return 4.0 * 16384.0 * static_cast<double>(iters);
}

}  // namespace pg::kern
