// N-gram extraction and the four subword indexers of finalfusion:
// finalfusion buckets (FNV-1a 64), fastText buckets (FNV-1a 32), explicit
// n-gram tables and floret (murmurhash3 x64 128, several hashes).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace modelzip::finalfusion::detail {

// Calls fn(ngram, char_count) for every substring of `text` with min_n..max_n
// code points, in the reference order: by start position, longest first.
// `text` must be valid UTF-8 (byte positions that are continuation bytes are
// never n-gram boundaries). Precondition: 1 <= min_n <= max_n.
template <class F>
void for_each_ngram(std::string_view text, std::uint32_t min_n, std::uint32_t max_n, F&& fn) {
  // Byte offsets of the code points, plus the end offset.
  std::array<std::uint32_t, 128> small;
  std::vector<std::uint32_t> large;
  std::uint32_t* starts = small.data();
  std::size_t count = 0;
  if (text.size() + 1 > small.size()) {
    large.resize(text.size() + 1);
    starts = large.data();
  }
  for (std::size_t i = 0; i < text.size(); ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80)
      starts[count++] = static_cast<std::uint32_t>(i);
  starts[count] = static_cast<std::uint32_t>(text.size());
  for (std::size_t i = 0; i + min_n <= count; ++i) {
    const std::size_t left = count - i;
    std::size_t n = left < max_n ? left : max_n;
    for (; n >= min_n; --n) fn(text.substr(starts[i], starts[i + n] - starts[i]), n);
  }
}

// Number of code points of valid UTF-8.
std::size_t utf8_length(std::string_view text) noexcept;

// FNV-1a 64 over the code-point count (u64 LE) and each code point (u32 LE).
std::uint64_t finalfusion_ngram_hash(std::string_view ngram, std::uint64_t char_count) noexcept;
// fastText: FNV-1a 32 over the bytes, each sign-extended to 32 bits.
std::uint32_t fasttext_ngram_hash(std::string_view ngram) noexcept;
// MurmurHash3_x64_128 (Austin Appleby's reference algorithm): the two 64-bit
// halves h1, h2.
std::array<std::uint64_t, 2> murmur3_x64_128(std::string_view data, std::uint32_t seed) noexcept;

}  // namespace modelzip::finalfusion::detail
