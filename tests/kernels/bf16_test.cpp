// The bf16 GEMM (kernels/gemm.h): the instruction VDPBF16PS and the rounding VCVTNEPS2BF16 behave on this CPU as
// kernels/gemm.h states (odd pair element first, DAZ in, FTZ out; RNE, NaN quiet, denormals to zero), and every bf16
// kernel (VDPBF16PS, the emulation of every ISA this CPU runs) gives the bits of the scalar reference
// gemm_bf16_reference in every operand layout, with pre-packed operands and k sub-ranges, with accumulation into
// a C holding denormals, on data whose products cross the denormal range.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "tests/test_util.h"

namespace pg {
namespace {

using gemm::View;

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The CPU's own instructions, called only after the test checked cpuid. The namespace's name puts them among the
// functions tests/check_isa_confinement.sh allows to hold AVX-512 code.
namespace cpu_avx512bf16_impl {
__attribute__((target("avx512f,avx512bf16"))) float vdpbf16ps(float acc, uint32_t a, uint32_t b) {
  const __m512 c = _mm512_dpbf16_ps(_mm512_set1_ps(acc), (__m512bh)_mm512_set1_epi32(static_cast<int>(a)),
                                    (__m512bh)_mm512_set1_epi32(static_cast<int>(b)));
  return _mm512_cvtss_f32(c);
}
__attribute__((target("avx512f,avx512bf16,avx512vl"))) uint16_t vcvtneps2bf16(float x) {
  const __m256bh h = _mm512_cvtneps_pbh(_mm512_set1_ps(x));
  uint16_t out[16];
  std::memcpy(out, &h, sizeof out);
  return out[0];
}
}  // namespace cpu_avx512bf16_impl
using cpu_avx512bf16_impl::vcvtneps2bf16;
using cpu_avx512bf16_impl::vdpbf16ps;

// The semantics kernels/gemm.h states, in scalar code (software DAZ/FTZ, no MXCSR).
float flush(float x) { return std::fabs(x) < std::numeric_limits<float>::min() ? std::copysign(0.0f, x) : x; }
float dp_model(float acc, uint32_t a, uint32_t b) {
  auto lo = [](uint32_t w) { return flush(gemm::from_bf16(static_cast<uint16_t>(w))); };
  auto hi = [](uint32_t w) { return flush(gemm::from_bf16(static_cast<uint16_t>(w >> 16))); };
  float r = flush(std::fma(hi(a), hi(b), flush(acc)));
  return flush(std::fma(lo(a), lo(b), r));
}

// A random bf16: mostly normal around 1, some denormal, some whose products land near FLT_MIN.
uint16_t random_bf16(std::mt19937_64& g) {
  const uint16_t sign = static_cast<uint16_t>(g() & 0x8000u), man = static_cast<uint16_t>(g() & 0x7Fu);
  int e;
  switch (g() % 6) {
    case 0:
      e = 0;
      break;  // denormal (or zero)
    case 1:
      e = 1 + static_cast<int>(g() % 8);
      break;  // tiny normal
    case 2:
      e = 127 - 63 + static_cast<int>(g() % 3);
      break;  // ~2^-63: products ~2^-126
    default:
      e = 127 - 8 + static_cast<int>(g() % 16);
      break;
  }
  return static_cast<uint16_t>(sign | (e << 7) | man);
}

TEST(Bf16Instruction, Vdpbf16psTakesTheOddElementFirstWithDazAndFtz) {
  if (!isa::cpu_has_avx512bf16()) GTEST_SKIP() << "no AVX512_BF16 on " << isa::cpu_description();
  std::mt19937_64 g(7);
  int64_t checked = 0, order_matters = 0;
  for (int it = 0; it < 300000; ++it) {
    const uint32_t a = random_bf16(g) | static_cast<uint32_t>(random_bf16(g)) << 16;
    const uint32_t b = random_bf16(g) | static_cast<uint32_t>(random_bf16(g)) << 16;
    float acc;
    switch (g() % 3) {
      case 0:
        acc = from_bits(static_cast<uint32_t>(g() & 0x807FFFFFu));
        break;  // denormal accumulator
      case 1:
        acc = -gemm::from_bf16(static_cast<uint16_t>(a >> 16)) * gemm::from_bf16(static_cast<uint16_t>(b >> 16));
        break;
      default:
        acc = std::ldexp(static_cast<float>(g() % 100000) - 50000.0f, -static_cast<int>(g() % 140));
        break;
    }
    const float hw = vdpbf16ps(acc, a, b), model = dp_model(acc, a, b);
    ASSERT_EQ(bits(hw), bits(model)) << std::hex << "acc " << bits(acc) << " a " << a << " b " << b;
    const float swapped = dp_model(acc, (a >> 16) | (a << 16), (b >> 16) | (b << 16));
    order_matters += bits(swapped) != bits(model);
    ++checked;
  }
  EXPECT_GT(order_matters, checked / 100);  // the data does tell the two orders apart
  // Tininess after rounding: 2^-126 + 2080 * 2^-149 - (1 + 2^-7)^2 2^-138 = 2^-126 - 2^-152 rounds to 2^-126.
  const float acc = std::ldexp(1.0f, -126) + 2080 * std::ldexp(1.0f, -149);
  const uint16_t p = gemm::to_bf16((1 + std::ldexp(1.0f, -7)) * std::ldexp(1.0f, -69));
  EXPECT_EQ(bits(vdpbf16ps(acc, static_cast<uint32_t>(p | 0x8000u), p)), bits(std::ldexp(1.0f, -126)));
}

TEST(Bf16Instruction, RoundingMatchesVcvtneps2bf16) {
  if (!isa::cpu_has_avx512bf16()) GTEST_SKIP() << "no AVX512_BF16 on " << isa::cpu_description();
  std::mt19937_64 g(3);
  for (int it = 0; it < 400000; ++it) {
    uint32_t u = static_cast<uint32_t>(g());
    if (it % 4 == 0) u &= 0x807FFFFFu;  // denormals
    if (it % 7 == 0) u = (u & 0x80000000u) | 0x7F800000u | (it % 2 ? (u & 0x7FFFFFu) : 0u);  // inf / NaN
    if (it % 5 == 0) u = (u & 0xFFFF0000u) | 0x8000u;  // exact ties
    const float x = from_bits(u);
    ASSERT_EQ(gemm::to_bf16(x), vcvtneps2bf16(x)) << std::hex << u;
  }
}

// Random matrices as bf16 kernels see them: normals, denormals, values near 2^-63 (products near FLT_MIN).
std::vector<float> matrix(size_t n, uint32_t seed) {
  std::vector<float> v = testing::randn(n, seed);
  std::mt19937 g(seed + 1000);
  for (float& x : v) {
    const uint32_t r = g() % 16;
    if (r == 0) x = from_bits((g() & 0x807FFFFFu));  // denormal
    else if (r == 1) x = std::ldexp(x, -63);  // products around 2^-126
    else if (r == 2) x = std::ldexp(x, -120);
  }
  return v;
}

struct Case {
  int64_t M, N, K;
};

// Every kernel set to test on this CPU: (ISA, bf16 mode).
std::vector<std::pair<isa::Isa, std::string>> kernel_sets() {
  std::vector<std::pair<isa::Isa, std::string>> out;
  for (isa::Isa i : isa::supported()) {
    out.emplace_back(i, "emulated");
    if (i == isa::Isa::avx512 && kern::native_bf16()) out.emplace_back(i, "native");
    out.emplace_back(i, "amx-emulated");
    // the tiles where their self-check found the model's bits (else AmxTilesFollowTheirModel bounds the difference)
    if (kern::amx_bf16() && kern::amx_status().bit_identical) out.emplace_back(i, "amx");
  }
  return out;
}

// The scalar definition of the active kernels' bits: the AMX order for the AMX driver, else VDPBF16PS's.
void reference(int64_t M, int64_t N, int64_t K, View a, View b, float* c, int64_t ldc, bool accumulate) {
  if (kern::active_bf16().core) gemm::gemm_bf16_amx_reference(M, N, K, a, b, c, ldc, accumulate);
  else gemm::gemm_bf16_reference(M, N, K, a, b, c, ldc, accumulate);
}

class Bf16Gemm : public ::testing::Test {
 protected:
  void TearDown() override {
    kern::select(isa::best());
    const char* env = std::getenv("PAGEGRAM_BF16");
    kern::select_bf16(env ? env : "auto");
    const char* e2 = std::getenv("PAGEGRAM_ISA");
    kern::select(isa::parse(e2 ? e2 : "auto"));
  }
};

TEST_F(Bf16Gemm, EveryKernelGivesTheReferenceBitsInEveryLayout) {
  const gemm::PrecisionScope bf16(gemm::Precision::bf16);
  const Case cases[] = {{1, 1, 1}, {3, 5, 2}, {14, 32, 9}, {15, 33, 64}, {29, 70, 129}, {50, 17, 400}, {170, 40, 777}};
  for (const auto& [which, mode] : kernel_sets()) {
    kern::select(which);
    kern::select_bf16(mode);
    SCOPED_TRACE(std::string(isa::name(which)) + " " + kern::bf16_name());
    uint32_t seed = 1;
    for (const Case& cs : cases) {
      const int64_t M = cs.M, N = cs.N, K = cs.K;
      // room for the strided layout (2): element (i, j) of an R x C operand at p[2 i + 2 R j]
      const std::vector<float> a = matrix(4 * M * K, seed++), b = matrix(4 * K * N, seed++), c0 = matrix(M * N, seed++);
      auto view = [](const std::vector<float>& v, int layout, int64_t R, int64_t C) {
        return layout == 0 ? View{v.data(), C, 1} : layout == 1 ? View{v.data(), 1, R} : View{v.data(), 2, 2 * R};
      };
      for (int at : {0, 1, 2})
        for (int bt : {0, 1, 2})
          for (bool acc : {false, true}) {
            SCOPED_TRACE(::testing::Message()
                         << M << "x" << N << "x" << K << " at " << at << " bt " << bt << " acc " << acc);
            const View av = view(a, at, M, K);
            const View bv = view(b, bt, K, N);
            std::vector<float> want = c0, got = c0;
            reference(M, N, K, av, bv, want.data(), N, acc);
            gemm::gemm(M, N, K, av, bv, got.data(), N, acc);
            EXPECT_TRUE(same_bits(got, want));
            // A and B pre-packed (operands shared by tasks), rows and k in whole pairs from an offset
            std::vector<float> ap(gemm::packed_a_floats(M, K)), bp(gemm::packed_b_floats(K, N));
            gemm::pack_operand(gemm::make_a(ap.data(), av, M, K));
            gemm::pack_operand(gemm::make_b(bp.data(), bv, K, N));
            const auto ao = gemm::make_a(ap.data(), av, M, K);
            const auto bo = gemm::make_b(bp.data(), bv, K, N);
            got = c0;
            gemm::gemm_ab(M, N, K, ao, 0, bo, 0, 0, got.data(), N, acc);
            EXPECT_TRUE(same_bits(got, want));
            if (M > gemm::kMr && K > 4 && N > gemm::kNr) {  // a sub-product: rows from kMr, k from 2, columns from kNr
              const int64_t k0 = 2, Ks = (K - k0) % 2 == 0 ? K - k0 : K - k0 - 1;
              const int64_t Ms = M - gemm::kMr, Ns = N - gemm::kNr;
              std::vector<float> w(Ms * Ns, 0.0f), g(Ms * Ns, 0.0f);
              reference(Ms, Ns, Ks, av.at_block(gemm::kMr, k0), bv.at_block(k0, gemm::kNr), w.data(), Ns, false);
              gemm::gemm_ab(Ms, Ns, Ks, ao, gemm::kMr, bo, k0, gemm::kNr, g.data(), Ns, false);
              EXPECT_TRUE(same_bits(g, w));
              g.assign(g.size(), 0.0f);
              gemm::gemm_b(Ms, Ns, Ks, av.at_block(gemm::kMr, k0), bo, k0, gemm::kNr, g.data(), Ns, false);
              EXPECT_TRUE(same_bits(g, w));
              g.assign(g.size(), 0.0f);
              gemm::gemm_a(Ms, Ns, Ks, ao, gemm::kMr, k0, bv.at_block(k0, gemm::kNr), g.data(), Ns, false);
              EXPECT_TRUE(same_bits(g, w));
            }
          }
    }
  }
}

TEST_F(Bf16Gemm, ASubRangeThatSplitsAPairIsRefused) {
  const gemm::PrecisionScope bf16(gemm::Precision::bf16);
  const int64_t M = 4, N = 4, K = 8;
  std::vector<float> a(M * K, 1.0f), b(K * N, 1.0f), c(M * N), bp(gemm::packed_b_floats(K, N));
  const auto bo = gemm::make_b(bp.data(), View{b.data(), N, 1}, K, N);
  gemm::pack_operand(bo);
  EXPECT_THROW(gemm::gemm_b(M, N, 3, View{a.data(), K, 1}, bo, 1, 0, c.data(), N, false), InternalError);
  EXPECT_THROW(gemm::gemm_b(M, N, 3, View{a.data(), K, 1}, bo, 2, 0, c.data(), N, false), InternalError);
  EXPECT_NO_THROW(gemm::gemm_b(M, N, 4, View{a.data(), K, 1}, bo, 4, 0, c.data(), N, false));
  EXPECT_EQ(c[0], 4.0f);
}

TEST_F(Bf16Gemm, Fp32IsUnchangedAndTheScopeRestores) {
  EXPECT_EQ(gemm::precision(), gemm::Precision::fp32);
  {
    const gemm::PrecisionScope s(gemm::Precision::bf16);
    EXPECT_EQ(gemm::precision(), gemm::Precision::bf16);
  }
  EXPECT_EQ(gemm::precision(), gemm::Precision::fp32);
  // 1 + 2^-10 is not a bf16: fp32 keeps it, bf16 rounds it to 1
  const int64_t M = 1, N = 1, K = 1;
  const float a = 1.0f + std::ldexp(1.0f, -10), b = 1.0f;
  float c = 0;
  gemm::gemm(M, N, K, View{&a, 1, 1}, View{&b, 1, 1}, &c, 1, false);
  EXPECT_EQ(c, a);
  const gemm::PrecisionScope s(gemm::Precision::bf16);
  gemm::gemm(M, N, K, View{&a, 1, 1}, View{&b, 1, 1}, &c, 1, false);
  EXPECT_EQ(c, 1.0f);
}

TEST_F(Bf16Gemm, ChoiceAndNames) {
  EXPECT_THROW(kern::select_bf16("fp8"), UserError);
  const std::string name = kern::bf16_name();
  if (!std::getenv("PAGEGRAM_BF16")) {
    if (kern::amx_bf16() && kern::amx_status().bit_identical) EXPECT_EQ(name, "amx");
    else if (kern::active_isa() == isa::Isa::avx512 && kern::native_bf16()) EXPECT_EQ(name, "vdpbf16ps");
    else EXPECT_EQ(name, std::string("emulated (") + kern::active_name() + ")");
  }
  kern::select_bf16("amx-emulated");
  EXPECT_EQ(kern::bf16_name(), std::string("amx-emulated (") + kern::active_name() + ")");
  EXPECT_NE(kern::active_bf16().core, nullptr);
  kern::select_bf16("emulated");
  EXPECT_EQ(kern::active_bf16().core, nullptr);
}

// Where the tiles are usable they follow the SDM's model (amx-emulated) within 1e-4 of products of size ~1 (bit for
// bit where the self-check said so: then EveryKernelGivesTheReferenceBitsInEveryLayout holds them to the bits);
// elsewhere choosing them is refused with the reason, and auto does not pick them.
TEST_F(Bf16Gemm, AmxTilesFollowTheirModel) {
  const kern::AmxStatus& st = kern::amx_status();
  if (!kern::amx_bf16()) {
    EXPECT_FALSE(st.usable);
    EXPECT_FALSE(st.reason.empty());
    // the permission's answer is the status's reason unless the permission was granted and the self-check failed
    const std::string& perm = kern::amx_request_permission();
    if (!perm.empty()) {
      EXPECT_EQ(st.reason, perm);
    }
    if (!isa::cpu_has_amx_bf16()) {
      EXPECT_EQ(perm, "this CPU has no AMX-BF16");
    }
    EXPECT_EQ(kern::amx_dot_probe(1000), 0.0) << "the probe ran without usable tiles";  // (else SIGILL here)
    try {
      kern::select_bf16("amx");
      ADD_FAILURE() << "PAGEGRAM_BF16=amx accepted without usable tiles";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(st.reason), std::string::npos) << e.what();
    }
    kern::select_bf16("auto");
    EXPECT_EQ(kern::active_bf16().core, nullptr);
    return;
  }
  kern::select_bf16("auto");
  EXPECT_EQ(kern::active_bf16().core != nullptr, st.bit_identical) << "auto picks the tiles only with the model's bits";
  EXPECT_TRUE(st.reason.empty());
  const gemm::PrecisionScope bf16(gemm::Precision::bf16);
  uint32_t seed = 50;
  for (const Case cs : {Case{16, 16, 32}, Case{45, 70, 83}, Case{130, 40, 800}}) {
    const std::vector<float> a = testing::randn(cs.M * cs.K, seed++), b = testing::randn(cs.K * cs.N, seed++);
    std::vector<float> hw(cs.M * cs.N), model(cs.M * cs.N);
    kern::select_bf16("amx");
    gemm::gemm(cs.M, cs.N, cs.K, View{a.data(), cs.K, 1}, View{b.data(), cs.N, 1}, hw.data(), cs.N, false);
    kern::select_bf16("amx-emulated");
    gemm::gemm(cs.M, cs.N, cs.K, View{a.data(), cs.K, 1}, View{b.data(), cs.N, 1}, model.data(), cs.N, false);
    int64_t differ = 0;
    for (size_t i = 0; i < hw.size(); ++i) {
      differ += bits(hw[i]) != bits(model[i]);
      EXPECT_NEAR(hw[i], model[i], 1e-4 * std::sqrt(static_cast<double>(cs.K))) << i;
    }
    std::printf("AMX tiles vs model, %lldx%lldx%lld: %lld of %zu outputs differ\n", static_cast<long long>(cs.M),
                static_cast<long long>(cs.N), static_cast<long long>(cs.K), static_cast<long long>(differ), hw.size());
    if (st.bit_identical) {
      EXPECT_EQ(differ, 0);
    }
  }
}

}  // namespace
}  // namespace pg
