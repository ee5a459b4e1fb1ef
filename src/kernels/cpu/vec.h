// Vec8: eight fp32 lanes, AVX2+FMA when the translation unit is built for it (the cpu/
// kernels are), a plain array otherwise; the same kernel source serves both. In the spirit
// of ATen's Vectorized<float>: explicit vector loops with a scalar tail computing the same
// formula through the scalar helpers at the bottom of this file.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define MS_VEC8_AVX2 1
#endif

namespace mindspeed::cpu {

// exp(x) by range reduction x = n ln2 + r, |r| <= ln2/2, and a degree-6 polynomial (Cephes
// expf coefficients); about 1 ulp. Inputs below -87.3 give 0 (so -inf gives 0).
namespace expc {
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f;
constexpr float kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
constexpr float kMax = 88.3762626647949f, kMin = -87.3365478515625f;
constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting rounds to integer
}  // namespace expc

inline float exp_scalar(float x) {
  using namespace expc;
  if (x < kMin) return 0.0f;
  x = x > kMax ? kMax : x;
  const float n = std::fma(x, kLog2e, kRound) - kRound;  // as the vector path
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = kP0;
  p = std::fma(p, r, kP1);
  p = std::fma(p, r, kP2);
  p = std::fma(p, r, kP3);
  p = std::fma(p, r, kP4);
  p = std::fma(p, r, kP5);
  p = std::fma(p * r, r, r + 1.0f);
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

#if MS_VEC8_AVX2
struct Vec8 {
  __m256 v;
  static constexpr int kSize = 8;
  static Vec8 load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static Vec8 set1(float x) { return {_mm256_set1_ps(x)}; }
  static Vec8 zero() { return {_mm256_setzero_ps()}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  friend Vec8 operator+(Vec8 a, Vec8 b) { return {_mm256_add_ps(a.v, b.v)}; }
  friend Vec8 operator-(Vec8 a, Vec8 b) { return {_mm256_sub_ps(a.v, b.v)}; }
  friend Vec8 operator*(Vec8 a, Vec8 b) { return {_mm256_mul_ps(a.v, b.v)}; }
  friend Vec8 operator/(Vec8 a, Vec8 b) { return {_mm256_div_ps(a.v, b.v)}; }
  /// a*b + c in one rounding.
  static Vec8 fma(Vec8 a, Vec8 b, Vec8 c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  static Vec8 max(Vec8 a, Vec8 b) { return {_mm256_max_ps(a.v, b.v)}; }
  static Vec8 min(Vec8 a, Vec8 b) { return {_mm256_min_ps(a.v, b.v)}; }
  static Vec8 sqrt(Vec8 a) { return {_mm256_sqrt_ps(a.v)}; }
  /// lanes where a < b take x, the others y.
  static Vec8 select_lt(Vec8 a, Vec8 b, Vec8 x, Vec8 y) {
    return {_mm256_blendv_ps(y.v, x.v, _mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ))};
  }
  static Vec8 exp(Vec8 x) {
    using namespace expc;
    const __m256 below = _mm256_cmp_ps(x.v, _mm256_set1_ps(kMin), _CMP_LT_OQ);
    __m256 xc = _mm256_min_ps(x.v, _mm256_set1_ps(kMax));
    xc = _mm256_max_ps(xc, _mm256_set1_ps(kMin));
    const __m256 round = _mm256_set1_ps(kRound);
    const __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(xc, _mm256_set1_ps(kLog2e), round), round);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), xc);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
    __m256 p = _mm256_set1_ps(kP0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i bits = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    const __m256 result = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
    return {_mm256_andnot_ps(below, result)};
  }
  float reduce_add() const {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
  }
  float reduce_max() const {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_max_ps(lo, hi);
    lo = _mm_max_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_max_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
  }
};
#else
struct Vec8 {
  float v[8];
  static constexpr int kSize = 8;
  static Vec8 load(const float* p) {
    Vec8 r;
    for (int i = 0; i < 8; ++i) r.v[i] = p[i];
    return r;
  }
  static Vec8 set1(float x) {
    Vec8 r;
    for (float& e : r.v) e = x;
    return r;
  }
  static Vec8 zero() { return set1(0.0f); }
  void store(float* p) const {
    for (int i = 0; i < 8; ++i) p[i] = v[i];
  }
  template <typename F>
  static Vec8 map2(Vec8 a, Vec8 b, F f) {
    Vec8 r;
    for (int i = 0; i < 8; ++i) r.v[i] = f(a.v[i], b.v[i]);
    return r;
  }
  friend Vec8 operator+(Vec8 a, Vec8 b) { return map2(a, b, [](float x, float y) { return x + y; }); }
  friend Vec8 operator-(Vec8 a, Vec8 b) { return map2(a, b, [](float x, float y) { return x - y; }); }
  friend Vec8 operator*(Vec8 a, Vec8 b) { return map2(a, b, [](float x, float y) { return x * y; }); }
  friend Vec8 operator/(Vec8 a, Vec8 b) { return map2(a, b, [](float x, float y) { return x / y; }); }
  static Vec8 fma(Vec8 a, Vec8 b, Vec8 c) {
    Vec8 r;
    for (int i = 0; i < 8; ++i) r.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
    return r;
  }
  static Vec8 max(Vec8 a, Vec8 b) { return map2(a, b, [](float x, float y) { return x > y ? x : y; }); }
  static Vec8 min(Vec8 a, Vec8 b) { return map2(a, b, [](float x, float y) { return x < y ? x : y; }); }
  static Vec8 sqrt(Vec8 a) {
    Vec8 r;
    for (int i = 0; i < 8; ++i) r.v[i] = std::sqrt(a.v[i]);
    return r;
  }
  static Vec8 select_lt(Vec8 a, Vec8 b, Vec8 x, Vec8 y) {
    Vec8 r;
    for (int i = 0; i < 8; ++i) r.v[i] = a.v[i] < b.v[i] ? x.v[i] : y.v[i];
    return r;
  }
  static Vec8 exp(Vec8 x) {
    Vec8 r;
    for (int i = 0; i < 8; ++i) r.v[i] = exp_scalar(x.v[i]);
    return r;
  }
  float reduce_add() const {
    float s = 0.0f;
    for (float e : v) s += e;
    return s;
  }
  float reduce_max() const {
    float m = v[0];
    for (float e : v) m = e > m ? e : m;
    return m;
  }
};
#endif

}  // namespace mindspeed::cpu
