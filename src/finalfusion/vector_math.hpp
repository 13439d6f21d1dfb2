// Small dense kernels for lookups and similarity queries.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstring>

namespace modelzip::finalfusion::detail {

// Dot product of a and f(b) with four independent 4-wide accumulators (GCC/Clang vector
// extensions: SSE on x86-64, NEON on arm64), unaligned loads; f maps a 4-wide vector of b
// and, for the tail, one float, element by element.
template <class F>
inline float dot_mapped(const float* a, const float* b, std::size_t n, F f) noexcept {
  typedef float v4 __attribute__((vector_size(16)));
  v4 acc0 = {0, 0, 0, 0}, acc1 = acc0, acc2 = acc0, acc3 = acc0;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v4 a0, a1, a2, a3, b0, b1, b2, b3;
    std::memcpy(&a0, a + i, 16);
    std::memcpy(&a1, a + i + 4, 16);
    std::memcpy(&a2, a + i + 8, 16);
    std::memcpy(&a3, a + i + 12, 16);
    std::memcpy(&b0, b + i, 16);
    std::memcpy(&b1, b + i + 4, 16);
    std::memcpy(&b2, b + i + 8, 16);
    std::memcpy(&b3, b + i + 12, 16);
    acc0 += a0 * f(b0);
    acc1 += a1 * f(b1);
    acc2 += a2 * f(b2);
    acc3 += a3 * f(b3);
  }
  for (; i + 4 <= n; i += 4) {
    v4 a0, b0;
    std::memcpy(&a0, a + i, 16);
    std::memcpy(&b0, b + i, 16);
    acc0 += a0 * f(b0);
  }
  const v4 acc = (acc0 + acc1) + (acc2 + acc3);
  float s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (; i < n; ++i) s += a[i] * f(b[i]);
  return s;
}

inline float dot(const float* a, const float* b, std::size_t n) noexcept {
  return dot_mapped(a, b, n, [](auto x) { return x; });
}

// dot(a, u) where u[i] = b[i] / divisor in float, bit for bit, without
// storing u (l2_normalize divides so).
inline float dot_divided(const float* a, const float* b, float divisor, std::size_t n) noexcept {
  return dot_mapped(a, b, n, [divisor](auto x) { return x / divisor; });
}

// out[i] += x[i] (4-wide vector extension, unaligned loads and stores).
inline void add(float* out, const float* x, std::size_t n) noexcept {
  typedef float v4 __attribute__((vector_size(16)));
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    v4 a, b;
    std::memcpy(&a, out + i, 16);
    std::memcpy(&b, x + i, 16);
    a += b;
    std::memcpy(out + i, &a, 16);
  }
  for (; i < n; ++i) out[i] += x[i];
}

inline float l2_norm(const float* a, std::size_t n) noexcept {
  return std::sqrt(dot(a, a, n));
}

// Divides by the L2 norm (if not 0) and returns the norm.
inline float l2_normalize(float* a, std::size_t n) noexcept {
  const float norm = l2_norm(a, n);
  if (norm != 0)
    for (std::size_t i = 0; i < n; ++i) a[i] /= norm;
  return norm;
}

// l2_normalize for any finite row: when the float sum of squares overflows
// or underflows (components beyond about 1e19 or below about 1e-19), the
// norm is computed in double and the row divided by it. Rows whose float sum
// of squares is a normal number get exactly l2_normalize's result. Returns
// the norm (infinite or NaN, the row unchanged, for a non-finite component).
inline double l2_normalize_any(float* a, std::size_t n) noexcept {
  if (std::isnormal(dot(a, a, n))) return l2_normalize(a, n);
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * a[i];
  const double norm = std::sqrt(sum);
  if (norm != 0 && std::isfinite(norm))
    for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<float>(a[i] / norm);
  return norm;
}

}  // namespace modelzip::finalfusion::detail
