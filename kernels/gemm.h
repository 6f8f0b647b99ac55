// Single-threaded fp32 GEMM engine (packed operands; AVX-512 or AVX2 micro-kernels chosen at run time, see
// kernels/kernels.h) for the backbone and the memory readout, and the double path (Eigen) used by the
// gradient-check instantiations.
//
// Every call is single-threaded: callers split work into fixed chunks (never by thread count), so a
// result never depends on which thread computed it or how many threads there are. Within one call the
// summation order over k is a pure function of K (k-blocks of k_block(K)), so identical inputs give
// identical bits, whatever the row/column offsets or the blocking over M and N. In fact every output element
// is one sequential FMA chain over k = 0..K-1, so the bits do not depend on the kernel's ISA either.
//
// Precision (set_precision / PrecisionScope): in bf16 every float GEMM rounds both operands to bf16 while packing
// (round-to-nearest-even, NaN kept quiet, denormals to signed zero: VCVTNE2PS2BF16's rule) and accumulates in
// fp32 as VDPBF16PS does: k taken in pairs (2p, 2p+1), per pair c += a[2p+1]*b[2p+1], then c += a[2p]*b[2p], each an
// fp32 FMA with denormal inputs read as zero and denormal results flushed to zero (round to nearest even; tininess
// after rounding). K is padded with a zero pair element when odd. Products of bf16 values are exact in fp32, so
// this is one sequential FMA chain again, the same bits for the instruction and for its emulation (fp32 FMAs under
// MXCSR DAZ|FTZ) on every ISA; gemm_bf16_reference is the scalar definition the tests compare against.
//
// AMX order (the AMX-BF16 kernels, kernels/kernels_amx.cpp; kern::active_bf16 says which order a run uses): TDPBF16PS
// as the Intel SDM defines it. The k pairs of a product are taken in groups of 16 from its first k (the last group
// completed with zero pairs); per group an even chain e = fma(a[2p], b[2p], e) and an odd chain o = fma(a[2p+1],
// b[2p+1], o), both from +0, then c = c + (e + o): every operation fp32 with DAZ, FTZ and round to nearest even.
// Other bits than VDPBF16PS's (not one chain), a pure function of K again (the kernels' k-blocks are whole groups);
// gemm_bf16_amx_reference is its scalar definition.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace pg::gemm {

// What the float GEMMs compute (see the top of this file). Process-wide: change it only outside parallel regions
// (the packed operands of one product must be packed and used under the same precision).
enum class Precision { fp32, bf16 };
const char* precision_name(Precision p);  // "fp32", "bf16"
Precision precision();
void set_precision(Precision p);
// Sets a precision for its lifetime and restores the previous one.
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision p) : prev_(precision()) { set_precision(p); }
  ~PrecisionScope() { set_precision(prev_); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision prev_;
};

// fp32 -> bf16 bits as VCVTNE2PS2BF16: round to nearest even, NaN made quiet, zero and denormals to signed zero.
inline uint16_t to_bf16(float x) {
  uint32_t u;
  __builtin_memcpy(&u, &x, 4);
  if ((u & 0x7F800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
inline float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float x;
  __builtin_memcpy(&x, &u, 4);
  return x;
}

inline constexpr int64_t kMr = 14;  // micro-kernel rows (A broadcast side)
inline constexpr int64_t kNr = 32;  // micro-kernel columns (two 16-float vectors)
inline constexpr int64_t kKc = 384;  // k-block: an A micro-panel (kMr x kKc) stays in L1
inline constexpr int64_t kMc = 168;  // rows per A block (kMc x kKc in L2)
inline constexpr int64_t kNc = 512;  // column group: a B block (kKc x kNc) stays in L2

// A strided matrix view: element (i, j) at p[i * rs + j * cs].
template <class T>
struct StridedView {
  const T* p;
  int64_t rs, cs;
  T at(int64_t i, int64_t j) const { return p[i * rs + j * cs]; }
  StridedView at_block(int64_t i, int64_t j) const { return {p + i * rs + j * cs, rs, cs}; }
};
using View = StridedView<float>;
using ViewD = StridedView<double>;

// The bf16 product as defined at the top of this file, scalar (element by element, no packing):
// C (M x N) = [C +] A * B; the tests' reference for the packed kernels. Its FTZ is done in software (results of
// magnitude < FLT_MIN after fp32 rounding with denormals), which differs from the hardware's (tininess after rounding
// to 24 bits with unbounded exponent) only for exact results within 2^-150 below FLT_MIN.
void gemm_bf16_reference(int64_t M, int64_t N, int64_t K, View a, View b, float* c, int64_t ldc, bool accumulate);
// The AMX order (top of this file), scalar, the same FTZ in software.
void gemm_bf16_amx_reference(int64_t M, int64_t N, int64_t K, View a, View b, float* c, int64_t ldc, bool accumulate);

// A (M x K) packed into panels of kMr rows: panel q holds A(q*kMr + i, k) at data[q * k_cap * kMr + k * kMr + i].
struct PackedA {
  const float* data = nullptr;
  int64_t k_cap = 0;
};
// B (K x N) packed into panels of kNr columns: panel q holds B(k, q*kNr + j) at data[q * k_cap * kNr + k * kNr + j],
// zero-padded for columns >= N.
// In bf16 both hold 32-bit words of two bf16 (low half k = 2p, high half k = 2p + 1; 0 past K) in the same
// buffers (they need fewer bytes): A's panel q, pair p, row i at word q * kp * kMr + p * kMr + i, B's panel q, pair
// p, column j at word q * kp * kNr + p * kNr + j, with kp = (k_cap + 1) / 2. A product over [k0, k0+K) of a
// pre-packed operand then needs k0 even and K even unless k0 + K = k_cap (checked).
struct PackedB {
  const float* data = nullptr;
  int64_t k_cap = 0;
};

// K split into equal-ish blocks of at most kKc (a pure function of K).
inline int64_t k_block(int64_t K) {
  const int64_t nblk = (K + kKc - 1) / kKc;
  const int64_t kc = (K + nblk - 1) / nblk;
  return std::min<int64_t>(kKc, (kc + 7) / 8 * 8);
}

inline int64_t packed_a_panels(int64_t M) { return (M + kMr - 1) / kMr; }
inline int64_t packed_b_panels(int64_t N) { return (N + kNr - 1) / kNr; }
inline int64_t packed_a_floats(int64_t M, int64_t K) { return packed_a_panels(M) * kMr * K; }
inline int64_t packed_b_floats(int64_t K, int64_t N) { return packed_b_panels(N) * kNr * K; }

// Packs row panels [q0, q1) of A (M x K) / column panels [q0, q1) of B (K x N) into dst.
void pack_a(float* dst, View a, int64_t M, int64_t K, int64_t q0, int64_t q1);
// Packs columns [k0, k1) of every row panel of A (M x K) into dst (laid out for the whole K); for an
// M-contiguous A (rs == 1) this reads whole source rows, so a k-range split streams through memory.
void pack_a_krange(float* dst, View a, int64_t M, int64_t K, int64_t k0, int64_t k1);
void pack_b(float* dst, View b, int64_t K, int64_t N, int64_t q0, int64_t q1);

// C (M x N, row stride ldc) = [C +] A (M x K) * Bp[k0 : k0+K, n0 : n0+N]; n0 a multiple of kNr.
// A given as a view is packed block by block into thread-local scratch.
void gemm_packed(int64_t M, int64_t N, int64_t K, View a, const PackedB& b, int64_t k0, int64_t n0, float* c,
                 int64_t ldc, bool accumulate);
// The same with A pre-packed: rows [i0, i0+M) (i0 a multiple of kMr), k range [k0, k0+K) of both operands.
void gemm_packed(int64_t M, int64_t N, int64_t K, const PackedA& a, int64_t i0, const PackedB& b, int64_t k0,
                 int64_t n0, float* c, int64_t ldc, bool accumulate);
// C (M x N) = [C +] A (M x K) * B (K x N) for strided views; B is packed whole into thread-local scratch.
void gemm(int64_t M, int64_t N, int64_t K, View a, View b, float* c, int64_t ldc, bool accumulate);
// The same with A pre-packed (rows [i0, i0+M), k range [k0, k0+K)).
void gemm(int64_t M, int64_t N, int64_t K, const PackedA& a, int64_t i0, int64_t k0, View b, float* c, int64_t ldc,
          bool accumulate);

// Double-precision GEMM (Eigen): same contract as gemm, for the double (gradient-check) instantiation.
void gemm(int64_t M, int64_t N, int64_t K, ViewD a, ViewD b, double* c, int64_t ldc, bool accumulate);

// Operands reused by many GEMM calls: in float they are packed once (pack_operand) and then shared read-only
// by all tasks; in double they are used through their view (packed == nullptr).
template <class T>
struct AOperand {  // A (M x K)
  StridedView<T> src{nullptr, 0, 0};
  int64_t M = 0, K = 0;
  T* packed = nullptr;
};
template <class T>
struct BOperand {  // B (K x N)
  StridedView<T> src{nullptr, 0, 0};
  int64_t K = 0, N = 0;
  T* packed = nullptr;
};
inline AOperand<float> make_a(float* buf, View src, int64_t M, int64_t K) { return {src, M, K, buf}; }
inline AOperand<double> make_a(double*, ViewD src, int64_t M, int64_t K) { return {src, M, K, nullptr}; }
inline BOperand<float> make_b(float* buf, View src, int64_t K, int64_t N) { return {src, K, N, buf}; }
inline BOperand<double> make_b(double*, ViewD src, int64_t K, int64_t N) { return {src, K, N, nullptr}; }

// Packs an operand with an orphaned `omp for` over fixed pieces (k-ranges of A, panels of B): call it from
// every thread of a parallel region (it ends with a barrier) or from serial code. The _serial forms are for
// use inside one task.
void pack_operand(const AOperand<float>& a);
void pack_operand(const BOperand<float>& b);
inline void pack_operand(const AOperand<double>&) {}
inline void pack_operand(const BOperand<double>&) {}
void pack_operand_serial(const AOperand<float>& a);
void pack_operand_serial(const BOperand<float>& b);
inline void pack_operand_serial(const AOperand<double>&) {}
inline void pack_operand_serial(const BOperand<double>&) {}

// C (M x N) = [C +] A (M x K) * B[k0 : k0+K, n0 : n0+N]   (n0 a multiple of kNr)
inline void gemm_b(int64_t M, int64_t N, int64_t K, View a, const BOperand<float>& b, int64_t k0, int64_t n0, float* c,
                   int64_t ldc, bool accumulate) {
  gemm_packed(M, N, K, a, PackedB{b.packed, b.K}, k0, n0, c, ldc, accumulate);
}
inline void gemm_b(int64_t M, int64_t N, int64_t K, ViewD a, const BOperand<double>& b, int64_t k0, int64_t n0,
                   double* c, int64_t ldc, bool accumulate) {
  gemm(M, N, K, a, b.src.at_block(k0, n0), c, ldc, accumulate);
}
// C (M x N) = [C +] A[i0 : i0+M, k0 : k0+K] * B[k0 : k0+K, n0 : n0+N]   (i0 a multiple of kMr)
inline void gemm_ab(int64_t M, int64_t N, int64_t K, const AOperand<float>& a, int64_t i0, const BOperand<float>& b,
                    int64_t k0, int64_t n0, float* c, int64_t ldc, bool accumulate) {
  gemm_packed(M, N, K, PackedA{a.packed, a.K}, i0, PackedB{b.packed, b.K}, k0, n0, c, ldc, accumulate);
}
inline void gemm_ab(int64_t M, int64_t N, int64_t K, const AOperand<double>& a, int64_t i0, const BOperand<double>& b,
                    int64_t k0, int64_t n0, double* c, int64_t ldc, bool accumulate) {
  gemm(M, N, K, a.src.at_block(i0, k0), b.src.at_block(k0, n0), c, ldc, accumulate);
}
// C (M x N) = [C +] A[i0 : i0+M, k0 : k0+K] * B (K x N, a view)
inline void gemm_a(int64_t M, int64_t N, int64_t K, const AOperand<float>& a, int64_t i0, int64_t k0, View b, float* c,
                   int64_t ldc, bool accumulate) {
  gemm(M, N, K, PackedA{a.packed, a.K}, i0, k0, b, c, ldc, accumulate);
}
inline void gemm_a(int64_t M, int64_t N, int64_t K, const AOperand<double>& a, int64_t i0, int64_t k0, ViewD b,
                   double* c, int64_t ldc, bool accumulate) {
  gemm(M, N, K, a.src.at_block(i0, k0), b, c, ldc, accumulate);
}

}  // namespace pg::gemm
