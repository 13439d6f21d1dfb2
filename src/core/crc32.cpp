#include "core/crc32.hpp"

#include <zlib.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>

namespace modelzip::detail {
namespace {

#if defined(__x86_64__)
// CRC-32 (the zip / zlib polynomial, bit-reflected) of `len` bytes by
// folding with carry-less multiplication, as in Intel's white paper "Fast
// CRC Computation for Generic Polynomials Using PCLMULQDQ" (the constants
// are its bit-reflected ones for this polynomial). `crc` and the result are
// the raw CRC register: the caller inverts zlib's value before and after.
// Requires len >= 64 and len a multiple of 16; the CPU must have PCLMULQDQ
// and SSE4.1 (checked by the caller).
#define MODELZIP_CLMUL __attribute__((target("pclmul,sse4.1")))

MODELZIP_CLMUL inline __m128i load16(const std::byte* p) noexcept {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// x folded forward by the distance that `k` encodes, plus `next`.
MODELZIP_CLMUL inline __m128i fold16(__m128i x, __m128i k, __m128i next) noexcept {
  const __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
  const __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
  return _mm_xor_si128(_mm_xor_si128(hi, next), lo);
}

// Folding constants: the pair for a distance of D bits is x^(D+32) mod P
// and x^(D-32) mod P, bit-reflected and shifted left by one (the white
// paper's k1..k4 are those of D = 512 and D = 128).
alignas(16) constexpr std::uint64_t k1k2[] = {0x0154442bd4, 0x01c6e41596};  // 512
alignas(16) constexpr std::uint64_t k3k4[] = {0x01751997d0, 0x00ccaa009e};  // 128

// Continues the fold of `x1` (the 128-bit remainder of the bytes before
// `buf`, standing at their last 16 bytes) over the `len` bytes at `buf` (a
// multiple of 16), then reduces it to the CRC register. The end of both
// folding loops.
MODELZIP_CLMUL std::uint32_t crc32_tail(__m128i x1, const std::byte* buf,
                                        std::size_t len) noexcept {
  alignas(16) static const std::uint64_t k5k0[] = {0x0163cd6124, 0x0000000000};
  alignas(16) static const std::uint64_t poly[] = {0x01db710641, 0x01f7011641};
  const __m128i k34 = _mm_load_si128(reinterpret_cast<const __m128i*>(k3k4));
  while (len >= 16) {
    x1 = fold16(x1, k34, load16(buf));
    buf += 16;
    len -= 16;
  }
  // 128 bits to 64, then Barrett reduction to 32.
  const __m128i mask = _mm_setr_epi32(~0, 0, ~0, 0);
  __m128i k = k34;
  __m128i t = _mm_clmulepi64_si128(x1, k, 0x10);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
  k = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k5k0));
  t = _mm_srli_si128(x1, 4);
  x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask), k, 0x00);
  x1 = _mm_xor_si128(x1, t);
  k = _mm_load_si128(reinterpret_cast<const __m128i*>(poly));
  t = _mm_clmulepi64_si128(_mm_and_si128(x1, mask), k, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, mask), k, 0x00);
  x1 = _mm_xor_si128(x1, t);
  return static_cast<std::uint32_t>(_mm_extract_epi32(x1, 1));
}

MODELZIP_CLMUL std::uint32_t crc32_fold(const std::byte* buf, std::size_t len,
                                        std::uint32_t crc) noexcept {
  __m128i x1 = load16(buf), x2 = load16(buf + 16), x3 = load16(buf + 32), x4 = load16(buf + 48);
  x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128(static_cast<int>(crc)));
  __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(k1k2));
  buf += 64;
  len -= 64;
  while (len >= 64) {  // four lanes, 64 bytes apart
    x1 = fold16(x1, k, load16(buf));
    x2 = fold16(x2, k, load16(buf + 16));
    x3 = fold16(x3, k, load16(buf + 32));
    x4 = fold16(x4, k, load16(buf + 48));
    buf += 64;
    len -= 64;
  }
  // The four lanes into one, then the remaining 16-byte blocks.
  k = _mm_load_si128(reinterpret_cast<const __m128i*>(k3k4));
  x1 = fold16(x1, k, x2);
  x1 = fold16(x1, k, x3);
  x1 = fold16(x1, k, x4);
  return crc32_tail(x1, buf, len);
}

// The same with 512-bit registers (VPCLMULQDQ): four of them, 256 bytes a
// step, folded by 2048 bits, then into one 128-bit lane and crc32_tail.
// Requires len >= 256 and len a multiple of 16; the CPU must have AVX-512F
// and VPCLMULQDQ (checked by the caller).
#define MODELZIP_CLMUL512 __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.1")))

MODELZIP_CLMUL512 inline __m512i fold64(__m512i x, __m512i k, __m512i next) noexcept {
  const __m512i lo = _mm512_clmulepi64_epi128(x, k, 0x00);
  const __m512i hi = _mm512_clmulepi64_epi128(x, k, 0x11);
  return _mm512_ternarylogic_epi64(lo, hi, next, 0x96);  // lo ^ hi ^ next
}

MODELZIP_CLMUL512 inline __m512i load64(const std::byte* p) noexcept {
  return _mm512_loadu_si512(p);
}

// A folding pair in every 128-bit lane.
MODELZIP_CLMUL512 inline __m512i broadcast_pair(const std::uint64_t* pair) noexcept {
  return _mm512_maskz_broadcast_i32x4(0xFFFF,
                                      _mm_load_si128(reinterpret_cast<const __m128i*>(pair)));
}

// `x` folded forward by the distance of `pair`, without the next block.
MODELZIP_CLMUL512 inline __m128i fold_by(__m128i x, const std::uint64_t* pair) noexcept {
  const __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(pair));
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

MODELZIP_CLMUL512 std::uint32_t crc32_fold512(const std::byte* buf, std::size_t len,
                                              std::uint32_t crc) noexcept {
  alignas(16) static const std::uint64_t k2048[] = {0x011542778a, 0x01322d1430};
  alignas(16) static const std::uint64_t k384[] = {0x003db1ecdc, 0x0174359406};
  alignas(16) static const std::uint64_t k256[] = {0x00f1da05aa, 0x015a546366};
  __m512i x0 = load64(buf), x1 = load64(buf + 64), x2 = load64(buf + 128), x3 = load64(buf + 192);
  x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(crc))));
  buf += 256;
  len -= 256;
  const __m512i k = broadcast_pair(k2048);
  while (len >= 256) {
    x0 = fold64(x0, k, load64(buf));
    x1 = fold64(x1, k, load64(buf + 64));
    x2 = fold64(x2, k, load64(buf + 128));
    x3 = fold64(x3, k, load64(buf + 192));
    buf += 256;
    len -= 256;
  }
  // The four registers into one (64 bytes apart: the 512-bit distance)...
  const __m512i k512 = broadcast_pair(k1k2);
  x1 = fold64(x0, k512, x1);
  x2 = fold64(x1, k512, x2);
  x3 = fold64(x2, k512, x3);
  // ...and its four 128-bit lanes into the last one (384, 256 and 128 bits
  // before it).
  __m128i r = _mm512_maskz_extracti32x4_epi32(0xF, x3, 3);
  r = _mm_xor_si128(r, fold_by(_mm512_maskz_extracti32x4_epi32(0xF, x3, 0), k384));
  r = _mm_xor_si128(r, fold_by(_mm512_maskz_extracti32x4_epi32(0xF, x3, 1), k256));
  r = _mm_xor_si128(r, fold_by(_mm512_maskz_extracti32x4_epi32(0xF, x3, 2), k3k4));
  return crc32_tail(r, buf, len);
}
#undef MODELZIP_CLMUL512
#undef MODELZIP_CLMUL

bool have_crc32_fold() noexcept {
  static const bool have = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return have;
}

bool have_crc32_fold512() noexcept {
  static const bool have = have_crc32_fold() && __builtin_cpu_supports("avx512f") &&
                           __builtin_cpu_supports("avx512vl") &&
                           __builtin_cpu_supports("vpclmulqdq");
  return have;
}
#endif

}  // namespace

std::uint32_t crc32_update(std::uint32_t crc, std::span<const std::byte> data) noexcept {
  const std::byte* p = data.data();
  std::size_t n = data.size();
#if defined(__x86_64__)
  if (n >= 64 && have_crc32_fold()) {
    const std::size_t folded = n & ~std::size_t{15};
    crc = folded >= 1024 && have_crc32_fold512() ? ~crc32_fold512(p, folded, ~crc)
                                                 : ~crc32_fold(p, folded, ~crc);
    p += folded;
    n -= folded;
  }
#endif
  while (n > 0) {
    auto part = static_cast<uInt>(std::min<std::size_t>(n, 1u << 30));
    crc = static_cast<std::uint32_t>(::crc32(crc, reinterpret_cast<const Bytef*>(p), part));
    p += part;
    n -= part;
  }
  return crc;
}

std::uint32_t crc32_of(std::span<const std::byte> data) noexcept {
  return crc32_update(0, data);
}

std::uint32_t crc32_concat(std::uint32_t crc_a, std::uint32_t crc_b,
                           std::uint64_t length_b) noexcept {
  return static_cast<std::uint32_t>(
      ::crc32_combine64(crc_a, crc_b, static_cast<z_off64_t>(length_b)));
}

namespace {

// x^(8 * bytes) mod P: the operator that appends `bytes` zeros to a CRC
// register's linear part.
std::uint32_t shift_op(std::uint64_t bytes) noexcept {
  return static_cast<std::uint32_t>(::crc32_combine_gen64(static_cast<z_off64_t>(bytes)));
}

std::uint32_t apply(std::uint32_t op, std::uint32_t v) noexcept {
  return static_cast<std::uint32_t>(::crc32_combine_op(v, 0, op));
}

// The CRC-32 of `bytes` zeros: the inverted initial register shifted over
// them, inverted again.
std::uint32_t crc_of_zeros(std::uint64_t bytes) noexcept {
  return apply(shift_op(bytes), 0xFFFFFFFFu) ^ 0xFFFFFFFFu;
}

}  // namespace

bool SparseCrc32::add(std::uint64_t offset, std::uint64_t length, std::uint32_t crc) noexcept {
  if (offset < end_ || offset > size_ || length > size_ - offset) return false;
  const std::uint64_t stride = offset - end_ + length;
  if (stride != stride_) {
    stride_op_ = shift_op(stride);
    stride_ = stride;
  }
  if (length != length_) {
    zeros_ = crc_of_zeros(length);
    length_ = length;
  }
  acc_ = apply(stride_op_, acc_) ^ crc ^ zeros_;
  end_ = offset + length;
  covered_ += length;
  return true;
}

std::uint32_t SparseCrc32::value() const noexcept {
  return apply(shift_op(size_ - end_), acc_);
}

std::uint32_t SparseCrc32::crc_of_run(std::uint64_t size, std::uint32_t xored_values) noexcept {
  return crc_of_zeros(size) ^ xored_values;
}

}  // namespace modelzip::detail
