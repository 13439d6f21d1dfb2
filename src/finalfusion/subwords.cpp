#include "finalfusion/subwords.hpp"

#include <cstring>

#include "modelzip/error.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

namespace modelzip::finalfusion {
namespace detail {

std::size_t utf8_length(std::string_view text) noexcept {
  std::size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

namespace {

constexpr std::uint64_t kFnv64Offset = 0xcbf29ce484222325ull;
constexpr std::uint64_t kFnv64Prime = 0x100000001b3ull;

constexpr std::uint64_t fnv64_bytes(std::uint64_t h, std::uint64_t value, int n) noexcept {
  for (int i = 0; i < n; ++i) {
    h ^= (value >> (8 * i)) & 0xFF;
    h *= kFnv64Prime;
  }
  return h;
}

// FNV state after the 8-byte length prefix, for short n-grams.
struct LengthPrefixes {
  std::uint64_t state[64];
  constexpr LengthPrefixes() : state() {
    for (std::uint64_t n = 0; n < 64; ++n) state[n] = fnv64_bytes(kFnv64Offset, n, 8);
  }
};
constexpr LengthPrefixes kLengthPrefixes;

inline std::uint64_t rotl64(std::uint64_t x, int r) noexcept {
  return (x << r) | (x >> (64 - r));
}

inline std::uint64_t fmix64(std::uint64_t k) noexcept {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

}  // namespace

std::uint64_t finalfusion_ngram_hash(std::string_view ngram, std::uint64_t char_count) noexcept {
  std::uint64_t h = char_count < 64 ? kLengthPrefixes.state[char_count]
                                    : fnv64_bytes(kFnv64Offset, char_count, 8);
  std::size_t i = 0;
  while (i < ngram.size()) {
    const auto c = static_cast<unsigned char>(ngram[i]);
    std::uint32_t cp;
    std::size_t len;
    if (c < 0x80) {
      cp = c;
      len = 1;
    } else if (c < 0xE0) {
      cp = c & 0x1F;
      len = 2;
    } else if (c < 0xF0) {
      cp = c & 0x0F;
      len = 3;
    } else {
      cp = c & 0x07;
      len = 4;
    }
    for (std::size_t k = 1; k < len && i + k < ngram.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(ngram[i + k]) & 0x3F);
    h = fnv64_bytes(h, cp, 4);
    i += len;
  }
  return h;
}

std::uint32_t fasttext_ngram_hash(std::string_view ngram) noexcept {
  std::uint32_t h = 2166136261u;
  for (char c : ngram) {
    h ^= static_cast<std::uint32_t>(static_cast<std::int32_t>(static_cast<signed char>(c)));
    h *= 16777619u;
  }
  return h;
}

std::array<std::uint64_t, 2> murmur3_x64_128(std::string_view data, std::uint32_t seed) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const std::size_t len = data.size();
  const std::size_t nblocks = len / 16;
  std::uint64_t h1 = seed, h2 = seed;
  constexpr std::uint64_t c1 = 0x87c37b91114253d5ull;
  constexpr std::uint64_t c2 = 0x4cf5ad432745937full;
  for (std::size_t i = 0; i < nblocks; ++i) {
    std::uint64_t k1, k2;
    std::memcpy(&k1, p + 16 * i, 8);
    std::memcpy(&k2, p + 16 * i + 8, 8);
    k1 *= c1;
    k1 = rotl64(k1, 31);
    k1 *= c2;
    h1 ^= k1;
    h1 = rotl64(h1, 27);
    h1 += h2;
    h1 = h1 * 5 + 0x52dce729;
    k2 *= c2;
    k2 = rotl64(k2, 33);
    k2 *= c1;
    h2 ^= k2;
    h2 = rotl64(h2, 31);
    h2 += h1;
    h2 = h2 * 5 + 0x38495ab5;
  }
  const unsigned char* tail = p + nblocks * 16;
  const std::size_t rest = len & 15;
  std::uint64_t k1 = 0, k2 = 0;
  for (std::size_t i = rest; i > 8; --i)
    k2 ^= static_cast<std::uint64_t>(tail[i - 1]) << (8 * (i - 9));
  if (rest > 8) {
    k2 *= c2;
    k2 = rotl64(k2, 33);
    k2 *= c1;
    h2 ^= k2;
  }
  for (std::size_t i = rest < 8 ? rest : 8; i > 0; --i)
    k1 ^= static_cast<std::uint64_t>(tail[i - 1]) << (8 * (i - 1));
  if (rest > 0) {
    k1 *= c1;
    k1 = rotl64(k1, 31);
    k1 *= c2;
    h1 ^= k1;
  }
  h1 ^= len;
  h2 ^= len;
  h1 += h2;
  h2 += h1;
  h1 = fmix64(h1);
  h2 = fmix64(h2);
  h1 += h2;
  h2 += h1;
  return {h1, h2};
}

}  // namespace detail

std::vector<std::string> ngrams(std::string_view text, std::uint32_t min_n, std::uint32_t max_n) {
  if (min_n == 0 || min_n > max_n)
    throw Error(ErrorCode::invalid_argument, "n-gram lengths need 1 <= min_n <= max_n");
  std::vector<std::string> out;
  detail::for_each_ngram(text, min_n, max_n,
                         [&](std::string_view g, std::size_t) { out.emplace_back(g); });
  return out;
}

std::uint64_t finalfusion_bucket(std::string_view ngram, std::uint32_t exponent) {
  if (exponent > 64) throw Error(ErrorCode::invalid_argument, "bucket exponent above 64");
  const std::uint64_t mask = exponent == 64 ? ~0ull : (1ull << exponent) - 1;
  return detail::finalfusion_ngram_hash(ngram, detail::utf8_length(ngram)) & mask;
}

std::uint32_t fasttext_hash(std::string_view ngram) noexcept {
  return detail::fasttext_ngram_hash(ngram);
}

std::uint64_t fasttext_bucket(std::string_view ngram, std::uint32_t n_buckets) {
  if (n_buckets == 0) throw Error(ErrorCode::invalid_argument, "fastText needs at least 1 bucket");
  return detail::fasttext_ngram_hash(ngram) % n_buckets;
}

std::vector<std::uint64_t> floret_buckets(std::string_view ngram, std::uint64_t n_buckets,
                                          std::uint32_t n_hashes, std::uint32_t seed) {
  if (n_buckets == 0 || n_hashes == 0 || n_hashes > 4)
    throw Error(ErrorCode::invalid_argument, "floret needs n_buckets >= 1 and 1..4 hashes");
  const auto h = detail::murmur3_x64_128(ngram, seed);
  const std::uint32_t words[4] = {
      static_cast<std::uint32_t>(h[0]), static_cast<std::uint32_t>(h[0] >> 32),
      static_cast<std::uint32_t>(h[1]), static_cast<std::uint32_t>(h[1] >> 32)};
  std::vector<std::uint64_t> out(n_hashes);
  for (std::uint32_t i = 0; i < n_hashes; ++i) out[i] = words[i] % n_buckets;
  return out;
}

}  // namespace modelzip::finalfusion
