"""The text every C++ kernel library starts with: includes, glibc's vector math declared
SIMD-callable, and the small inline helpers the op table's rules call (codegen/cpp/kernel.py)."""

PRELUDE = r"""#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <omp.h>

#if defined(__x86_64__) && defined(__GLIBC__) && !defined(KS_NO_VECTOR_MATH)
// glibc's vector math library (libmvec, linked through libm): declared SIMD-callable,
// the float functions run 4, 8 or 16 lanes at a time inside `omp simd` loops instead of
// one lane at a time (within 4 ulp, as libmvec documents).
extern "C" {
#define KS_SIMD1(f) __attribute__((simd("notinbranch"))) float f(float) noexcept;
#define KS_SIMD2(f) __attribute__((simd("notinbranch"))) float f(float, float) noexcept;
KS_SIMD1(expf) KS_SIMD1(exp2f) KS_SIMD1(expm1f) KS_SIMD1(logf) KS_SIMD1(log2f)
KS_SIMD1(log10f) KS_SIMD1(log1pf) KS_SIMD1(sinf) KS_SIMD1(cosf) KS_SIMD1(tanf)
KS_SIMD1(asinf) KS_SIMD1(acosf) KS_SIMD1(atanf) KS_SIMD1(sinhf) KS_SIMD1(coshf)
KS_SIMD1(tanhf) KS_SIMD1(asinhf) KS_SIMD1(acoshf) KS_SIMD1(atanhf) KS_SIMD1(erff)
KS_SIMD1(erfcf) KS_SIMD1(cbrtf) KS_SIMD2(powf) KS_SIMD2(atan2f) KS_SIMD2(hypotf)
#undef KS_SIMD1
#undef KS_SIMD2
}
#endif

// Outputs per block of an interchanged column reduction (codegen/cpp/kernel.py, _column_body):
// the outputs shared among the threads, a multiple of 16, at most `cap`.
static inline int64_t ks_column_block(int64_t n, int64_t cap) {
  const int64_t t = omp_get_max_threads(), b = ((n + t - 1) / t + 15) / 16 * 16;
  return b < cap ? b : cap;
}
// debug_index_asserts: an indirect index outside its dim stops the process, as a failed
// device-side assert stops a GPU kernel.
[[noreturn]] static inline void ks_index_error(const char* kernel, int64_t i, int64_t n) {
  std::fprintf(stderr, "%s: index out of bounds: 0 <= %lld < %lld\n", kernel,
               static_cast<long long>(i), static_cast<long long>(n));
  std::abort();
}
template <typename T> static inline T ks_max(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> static inline T ks_min(T a, T b) { return (a != a || a < b) ? a : b; }
template <typename T> static inline T ks_floordiv(T a, T b) {
  T q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T> static inline T ks_mod(T a, T b) {
  T r = std::fmod(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline int64_t ks_mod(int64_t a, int64_t b) {
  int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <typename T> static inline T ks_ipow(T a, T b) {
  if (b < 0) return (a == 1) ? 1 : (a == -1) ? ((b % 2) ? -1 : 1) : 0;
  T r = 1;
  while (b) { if (b & 1) r *= a; a *= a; b >>= 1; }
  return r;
}
static inline float ks_bf16_to_float(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16; float f; std::memcpy(&f, &bits, 4); return f;
}
static inline uint16_t ks_float_to_bf16(float f) {
  uint32_t bits; std::memcpy(&bits, &f, 4);
  if (f != f) return 0x7fc0;
  bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}
"""
