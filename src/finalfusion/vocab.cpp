// Vocabulary construction and lookups (the chunk formats are in
// simple_vocab.cpp, bucketed_vocab.cpp, explicit_vocab.cpp and
// floret_vocab.cpp).
#include <algorithm>

#include "core/fail.hpp"
#include "core/kept_symbol.hpp"
#include "core/utf8.hpp"
#include "finalfusion/vocab_impl.hpp"

namespace modelzip::finalfusion {
namespace detail {
namespace {

std::string quote_word(std::string_view s) {
  std::string out = "'";
  out.append(s.substr(0, 64));
  if (s.size() > 64) out += "...";
  return out + "'";
}

std::shared_ptr<VocabImpl> with_words(VocabKind kind, std::vector<std::string> words,
                                      const Failure& f) {
  auto v = std::make_shared<VocabImpl>();
  v->kind = kind;
  v->word_index.reserve(words.size());
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (auto bad = modelzip::detail::utf8_invalid_at(words[i]))
      modelzip::detail::fail(
          f.code,
          "word " + std::to_string(i) + " is not valid UTF-8 (byte " + std::to_string(*bad) + ")",
          f.context);
    auto [it, inserted] = v->word_index.emplace(words[i], i);
    if (!inserted)
      modelzip::detail::fail(f.code,
                             "duplicate word " + quote_word(words[i]) + " at indices " +
                                 std::to_string(it->second) + " and " + std::to_string(i),
                             f.context);
  }
  v->words = std::move(words);
  return v;
}

}  // namespace

void check_ngram_range(std::uint32_t min_n, std::uint32_t max_n, const Failure& f) {
  if (min_n == 0) modelzip::detail::fail(f.code, "minimum n-gram length is 0", f.context);
  if (min_n > max_n)
    modelzip::detail::fail(f.code,
                           "minimum n-gram length " + std::to_string(min_n) +
                               " exceeds the maximum " + std::to_string(max_n),
                           f.context);
}

std::uint64_t bucket_count(std::uint32_t exponent, const Failure& f) {
  if (exponent > 63)
    modelzip::detail::fail(f.code, "bucket exponent " + std::to_string(exponent) + " exceeds 63",
                           f.context);
  return std::uint64_t{1} << exponent;
}

void check_fasttext_buckets(std::uint32_t n_buckets, const Failure& f) {
  if (n_buckets == 0)
    modelzip::detail::fail(f.code, "fastText vocabulary with 0 buckets", f.context);
}

void check_floret_parameters(std::uint64_t n_buckets, std::uint32_t n_hashes, std::string_view bow,
                             std::string_view eow, const Failure& f) {
  if (n_buckets == 0) modelzip::detail::fail(f.code, "floret vocabulary with 0 buckets", f.context);
  if (n_hashes == 0 || n_hashes > 4)
    modelzip::detail::fail(f.code,
                           "floret needs 1 to 4 hashes per n-gram, got " + std::to_string(n_hashes),
                           f.context);
  if (!modelzip::detail::utf8_valid(bow) || !modelzip::detail::utf8_valid(eow))
    modelzip::detail::fail(f.code, "floret word boundary markers are not valid UTF-8", f.context);
}

std::uint64_t VocabImpl::subword_row_count() const noexcept {
  switch (kind) {
    case VocabKind::simple:
      return 0;
    case VocabKind::bucket_subwords:
    case VocabKind::fasttext_subwords:
    case VocabKind::floret:
      return n_buckets;
    case VocabKind::explicit_ngrams:
      return ngram_bound;
  }
  return 0;
}

void VocabImpl::append_subword_rows(std::string_view word, std::vector<std::uint64_t>& out) const {
  for_each_subword_row(
      word, [&](std::string_view, std::size_t, std::uint64_t row) { out.push_back(row); });
}

std::shared_ptr<VocabImpl> make_simple_vocab(std::vector<std::string> words, const Failure& f) {
  return with_words(VocabKind::simple, std::move(words), f);
}

std::shared_ptr<VocabImpl> make_bucket_vocab(std::vector<std::string> words, std::uint32_t min_n,
                                             std::uint32_t max_n, std::uint32_t exponent,
                                             const Failure& f) {
  check_ngram_range(min_n, max_n, f);
  const std::uint64_t buckets = bucket_count(exponent, f);
  if (words.size() > UINT64_MAX - buckets)
    modelzip::detail::fail(f.code, "vocabulary size overflows 64 bits", f.context);
  auto v = with_words(VocabKind::bucket_subwords, std::move(words), f);
  v->min_n = min_n;
  v->max_n = max_n;
  v->bucket_exponent = exponent;
  v->n_buckets = buckets;
  return v;
}

std::shared_ptr<VocabImpl> make_fasttext_vocab(std::vector<std::string> words, std::uint32_t min_n,
                                               std::uint32_t max_n, std::uint32_t n_buckets,
                                               const Failure& f) {
  check_ngram_range(min_n, max_n, f);
  check_fasttext_buckets(n_buckets, f);
  auto v = with_words(VocabKind::fasttext_subwords, std::move(words), f);
  v->min_n = min_n;
  v->max_n = max_n;
  v->n_buckets = n_buckets;
  return v;
}

std::shared_ptr<VocabImpl> make_explicit_vocab(
    std::vector<std::string> words, std::uint32_t min_n, std::uint32_t max_n,
    std::vector<std::pair<std::string, std::uint64_t>> ngrams, const Failure& f) {
  check_ngram_range(min_n, max_n, f);
  auto v = with_words(VocabKind::explicit_ngrams, std::move(words), f);
  v->min_n = min_n;
  v->max_n = max_n;
  // Renumber indices by order of first appearance.
  std::unordered_map<std::uint64_t, std::uint64_t> renumbered;
  renumbered.reserve(ngrams.size());
  v->ngrams.reserve(ngrams.size());
  v->ngram_rows.reserve(ngrams.size());
  v->ngram_index.reserve(ngrams.size());
  for (auto& [ngram, original] : ngrams) {
    if (auto bad = modelzip::detail::utf8_invalid_at(ngram))
      modelzip::detail::fail(
          f.code, "n-gram " + std::to_string(v->ngrams.size()) + " is not valid UTF-8", f.context);
    const auto next = static_cast<std::uint64_t>(renumbered.size());
    const std::uint64_t index = renumbered.emplace(original, next).first->second;
    auto [it, inserted] = v->ngram_index.emplace(ngram, index);
    if (!inserted)
      modelzip::detail::fail(f.code, "duplicate n-gram " + quote_word(ngram), f.context);
    v->ngrams.push_back(std::move(ngram));
    v->ngram_rows.push_back(index);
  }
  v->ngram_bound = renumbered.size();
  if (v->words.size() > UINT64_MAX - v->ngram_bound)
    modelzip::detail::fail(f.code, "vocabulary size overflows 64 bits", f.context);
  return v;
}

std::shared_ptr<VocabImpl> make_floret_vocab(std::uint32_t min_n, std::uint32_t max_n,
                                             std::uint64_t n_buckets, std::uint32_t n_hashes,
                                             std::uint32_t seed, std::string bow, std::string eow,
                                             const Failure& f) {
  check_ngram_range(min_n, max_n, f);
  check_floret_parameters(n_buckets, n_hashes, bow, eow, f);
  auto v = std::make_shared<VocabImpl>();
  v->kind = VocabKind::floret;
  v->min_n = min_n;
  v->max_n = max_n;
  v->n_buckets = n_buckets;
  v->n_hashes = n_hashes;
  v->seed = seed;
  v->bow = std::move(bow);
  v->eow = std::move(eow);
  return v;
}

}  // namespace detail

std::string_view vocab_kind_name(VocabKind kind) noexcept {
  switch (kind) {
    case VocabKind::simple:
      return "simple";
    case VocabKind::bucket_subwords:
      return "bucket_subwords";
    case VocabKind::fasttext_subwords:
      return "fasttext_subwords";
    case VocabKind::explicit_ngrams:
      return "explicit_ngrams";
    case VocabKind::floret:
      return "floret";
  }
  return "unknown";
}

Vocab::Vocab(std::shared_ptr<const detail::VocabImpl> impl) : impl_(std::move(impl)) {}

Vocab Vocab::simple(std::vector<std::string> words) {
  return Vocab::Access::make(detail::make_simple_vocab(std::move(words), {}));
}
Vocab Vocab::bucket_subwords(std::vector<std::string> words, std::uint32_t min_n,
                             std::uint32_t max_n, std::uint32_t bucket_exponent) {
  return Vocab::Access::make(
      detail::make_bucket_vocab(std::move(words), min_n, max_n, bucket_exponent, {}));
}
Vocab Vocab::fasttext_subwords(std::vector<std::string> words, std::uint32_t min_n,
                               std::uint32_t max_n, std::uint32_t n_buckets) {
  return Vocab::Access::make(
      detail::make_fasttext_vocab(std::move(words), min_n, max_n, n_buckets, {}));
}
Vocab Vocab::explicit_ngrams(std::vector<std::string> words, std::uint32_t min_n,
                             std::uint32_t max_n,
                             std::vector<std::pair<std::string, std::uint64_t>> ngrams) {
  return Vocab::Access::make(
      detail::make_explicit_vocab(std::move(words), min_n, max_n, std::move(ngrams), {}));
}
Vocab Vocab::floret(std::uint32_t min_n, std::uint32_t max_n, std::uint64_t n_buckets,
                    std::uint32_t n_hashes, std::uint32_t seed, std::string bow, std::string eow) {
  return Vocab::Access::make(detail::make_floret_vocab(min_n, max_n, n_buckets, n_hashes, seed,
                                                       std::move(bow), std::move(eow), {}));
}

VocabKind Vocab::kind() const noexcept {
  return impl_->kind;
}
std::span<const std::string> Vocab::words() const& noexcept {
  return impl_->words;
}
// 0.1.0's unqualified form (core/kept_symbol.hpp).
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip11finalfusion5Vocab5wordsB5cxx11Ev,
                     _ZNKR8modelzip11finalfusion5Vocab5wordsB5cxx11Ev);
std::size_t Vocab::words_len() const noexcept {
  return impl_->words.size();
}
std::uint64_t Vocab::rows() const noexcept {
  return impl_->rows();
}

std::optional<std::size_t> Vocab::word_index(std::string_view word) const {
  auto it = impl_->word_index.find(word);
  if (it == impl_->word_index.end()) return std::nullopt;
  return static_cast<std::size_t>(it->second);
}

std::uint32_t Vocab::min_n() const noexcept {
  return impl_->min_n;
}
std::uint32_t Vocab::max_n() const noexcept {
  return impl_->max_n;
}
std::uint32_t Vocab::bucket_exponent() const noexcept {
  return impl_->bucket_exponent;
}
std::uint64_t Vocab::n_buckets() const noexcept {
  return impl_->n_buckets;
}
std::uint32_t Vocab::n_hashes() const noexcept {
  return impl_->n_hashes;
}
std::uint32_t Vocab::seed() const noexcept {
  return impl_->seed;
}
const std::string& Vocab::bow() const& noexcept {
  return impl_->bow;
}
std::string Vocab::bow() const&& {
  return impl_->bow;
}
const std::string& Vocab::eow() const& noexcept {
  return impl_->eow;
}
std::string Vocab::eow() const&& {
  return impl_->eow;
}
// 0.1.0's unqualified forms (core/kept_symbol.hpp).
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip11finalfusion5Vocab3bowB5cxx11Ev,
                     _ZNKR8modelzip11finalfusion5Vocab3bowB5cxx11Ev);
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip11finalfusion5Vocab3eowB5cxx11Ev,
                     _ZNKR8modelzip11finalfusion5Vocab3eowB5cxx11Ev);
std::span<const std::string> Vocab::ngrams() const& noexcept {
  return impl_->ngrams;
}
std::span<const std::uint64_t> Vocab::ngram_indices() const& noexcept {
  return impl_->ngram_rows;
}
// 0.1.0's unqualified forms (core/kept_symbol.hpp).
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip11finalfusion5Vocab6ngramsB5cxx11Ev,
                     _ZNKR8modelzip11finalfusion5Vocab6ngramsB5cxx11Ev);
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip11finalfusion5Vocab13ngram_indicesEv,
                     _ZNKR8modelzip11finalfusion5Vocab13ngram_indicesEv);

std::vector<std::uint64_t> Vocab::subword_rows(std::string_view word) const {
  std::vector<std::uint64_t> out;
  impl_->append_subword_rows(word, out);
  return out;
}

void Vocab::subword_rows(std::string_view word, std::vector<std::uint64_t>& out) const {
  out.clear();
  impl_->append_subword_rows(word, out);
}

std::vector<std::pair<std::string, std::vector<std::uint64_t>>> Vocab::ngram_rows(
    std::string_view word) const {
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> out;
  std::size_t last_unit = SIZE_MAX;
  impl_->for_each_subword_row(word,
                              [&](std::string_view unit, std::size_t number, std::uint64_t row) {
                                if (number != last_unit)
                                  out.emplace_back(std::string(unit), std::vector<std::uint64_t>{});
                                last_unit = number;
                                out.back().second.push_back(row);
                              });
  return out;
}

bool Vocab::operator==(const Vocab& other) const {
  const auto& a = *impl_;
  const auto& b = *other.impl_;
  return a.kind == b.kind && a.words == b.words && a.min_n == b.min_n && a.max_n == b.max_n &&
         a.bucket_exponent == b.bucket_exponent && a.n_buckets == b.n_buckets &&
         a.n_hashes == b.n_hashes && a.seed == b.seed && a.bow == b.bow && a.eow == b.eow &&
         a.ngrams == b.ngrams && a.ngram_rows == b.ngram_rows;
}

}  // namespace modelzip::finalfusion
