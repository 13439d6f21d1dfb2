// The state behind modelzip::finalfusion::Vocab: words, their index, and the
// parameters of the subword indexer of each vocabulary kind.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/utf8.hpp"
#include "finalfusion/subwords.hpp"
#include "modelzip/error.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

namespace modelzip::finalfusion::detail {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};
using StringIndex = std::unordered_map<std::string, std::uint64_t, StringHash, std::equal_to<>>;

struct VocabImpl {
  VocabKind kind = VocabKind::simple;
  std::vector<std::string> words;
  StringIndex word_index;
  std::uint32_t min_n = 0;
  std::uint32_t max_n = 0;
  std::uint32_t bucket_exponent = 0;  // bucket_subwords
  std::uint64_t n_buckets = 0;        // fasttext_subwords, floret (2^exponent for buckets)
  std::uint32_t n_hashes = 0;         // floret
  std::uint32_t seed = 0;             // floret
  std::string bow = "<";
  std::string eow = ">";
  std::vector<std::string> ngrams;        // explicit_ngrams, stored order
  std::vector<std::uint64_t> ngram_rows;  // renumbered index of ngrams[i]
  StringIndex ngram_index;                // n-gram -> renumbered index
  std::uint64_t ngram_bound = 0;          // number of distinct indices

  // Rows of subword units, words first.
  std::uint64_t subword_row_count() const noexcept;
  std::uint64_t rows() const noexcept { return words.size() + subword_row_count(); }

  // Calls fn(unit_text, unit_number, row) for every subword unit row of
  // `word` (see Vocab::subword_rows); unit_number counts the units (n-grams,
  // and for floret the whole word) from 0. `word` may be invalid UTF-8: it is then replaced
  // lossily first.
  template <class F>
  void for_each_subword_row(std::string_view word, F&& fn) const;
  void append_subword_rows(std::string_view word, std::vector<std::uint64_t>& out) const;

 private:
  template <class F>
  void for_each_unit_row(std::string_view unit, std::size_t char_count, std::size_t unit_number,
                         F& fn) const;
};

template <class F>
void VocabImpl::for_each_unit_row(std::string_view unit, std::size_t char_count,
                                  std::size_t unit_number, F& fn) const {
  const std::uint64_t base = words.size();
  switch (kind) {
    case VocabKind::simple:
      return;
    case VocabKind::bucket_subwords: {
      const std::uint64_t mask = n_buckets - 1;
      fn(unit, unit_number, base + (finalfusion_ngram_hash(unit, char_count) & mask));
      return;
    }
    case VocabKind::fasttext_subwords:
      fn(unit, unit_number, base + fasttext_ngram_hash(unit) % n_buckets);
      return;
    case VocabKind::explicit_ngrams: {
      auto it = ngram_index.find(unit);
      if (it != ngram_index.end()) fn(unit, unit_number, base + it->second);
      return;
    }
    case VocabKind::floret: {
      const auto h = murmur3_x64_128(unit, seed);
      const std::uint32_t parts[4] = {
          static_cast<std::uint32_t>(h[0]), static_cast<std::uint32_t>(h[0] >> 32),
          static_cast<std::uint32_t>(h[1]), static_cast<std::uint32_t>(h[1] >> 32)};
      for (std::uint32_t i = 0; i < n_hashes; ++i)
        fn(unit, unit_number, base + parts[i] % n_buckets);
      return;
    }
  }
}

template <class F>
void VocabImpl::for_each_subword_row(std::string_view word, F&& fn) const {
  if (kind == VocabKind::simple) return;
  // bow + word + eow, on the stack when short.
  const std::string lossy =
      modelzip::detail::utf8_valid(word) ? std::string() : modelzip::detail::utf8_lossy(word);
  const std::string_view w = lossy.empty() ? word : std::string_view(lossy);
  const std::size_t size = bow.size() + w.size() + eow.size();
  char small[256];
  std::string large;
  char* p = small;
  if (size > sizeof small) {
    large.resize(size);
    p = large.data();
  }
  std::memcpy(p, bow.data(), bow.size());
  std::memcpy(p + bow.size(), w.data(), w.size());
  std::memcpy(p + bow.size() + w.size(), eow.data(), eow.size());
  const std::string_view bracketed(p, size);
  std::size_t unit_number = 0;
  if (kind == VocabKind::floret)
    for_each_unit_row(bracketed, utf8_length(bracketed), unit_number++, fn);
  // fastText (Dictionary::computeSubwords) never uses the 1-grams made of the
  // opening or the closing bracket alone; with min_n = 1 neither do we.
  const bool skip_bracket_unigrams = kind == VocabKind::fasttext_subwords;
  for_each_ngram(bracketed, min_n, max_n, [&](std::string_view g, std::size_t n) {
    if (skip_bracket_unigrams && n == 1 &&
        (g.data() == bracketed.data() || g.data() + g.size() == bracketed.data() + size))
      return;
    for_each_unit_row(g, n, unit_number++, fn);
  });
}

// How vocab builders report invalid input: Error(code) with context.
struct Failure {
  ErrorCode code = ErrorCode::invalid_argument;
  ErrorContext context;
};

// The builders' checks of their fixed parameters, which the chunk readers
// also apply to a chunk's fixed fields before its words (read_vocab_fields,
// vocab_chunks.hpp): the n-gram range (min_n >= 1, min_n <= max_n); a bucket
// exponent of at most 63 (returns 2^exponent); at least one fastText bucket;
// floret's buckets, 1 to 4 hashes and UTF-8 word boundary markers.
void check_ngram_range(std::uint32_t min_n, std::uint32_t max_n, const Failure& f);
std::uint64_t bucket_count(std::uint32_t exponent, const Failure& f);
void check_fasttext_buckets(std::uint32_t n_buckets, const Failure& f);
void check_floret_parameters(std::uint64_t n_buckets, std::uint32_t n_hashes, std::string_view bow,
                             std::string_view eow, const Failure& f);

// Builders validate their input (duplicates, UTF-8, n-gram range, sizes)
// and throw Error(failure.code, ..., failure.context).
std::shared_ptr<VocabImpl> make_simple_vocab(std::vector<std::string> words, const Failure& f);
std::shared_ptr<VocabImpl> make_bucket_vocab(std::vector<std::string> words, std::uint32_t min_n,
                                             std::uint32_t max_n, std::uint32_t exponent,
                                             const Failure& f);
std::shared_ptr<VocabImpl> make_fasttext_vocab(std::vector<std::string> words, std::uint32_t min_n,
                                               std::uint32_t max_n, std::uint32_t n_buckets,
                                               const Failure& f);
std::shared_ptr<VocabImpl> make_explicit_vocab(
    std::vector<std::string> words, std::uint32_t min_n, std::uint32_t max_n,
    std::vector<std::pair<std::string, std::uint64_t>> ngrams, const Failure& f);
std::shared_ptr<VocabImpl> make_floret_vocab(std::uint32_t min_n, std::uint32_t max_n,
                                             std::uint64_t n_buckets, std::uint32_t n_hashes,
                                             std::uint32_t seed, std::string bow, std::string eow,
                                             const Failure& f);

}  // namespace modelzip::finalfusion::detail

namespace modelzip::finalfusion {

class Vocab::Access {
 public:
  static Vocab make(std::shared_ptr<const detail::VocabImpl> impl) {
    return Vocab(std::move(impl));
  }
  static const detail::VocabImpl& impl(const Vocab& vocab) noexcept { return *vocab.impl_; }
};

}  // namespace modelzip::finalfusion
