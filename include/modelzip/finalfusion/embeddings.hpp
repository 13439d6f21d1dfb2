// finalfusion word embeddings: reading, writing, lookups, similarity
// queries and product quantization.
//
// A finalfusion file (".fifu") is a header followed by chunks: optional
// TOML metadata, one vocabulary (simple, subword buckets, fastText buckets,
// explicit n-grams or floret), one storage (dense f32 matrix or product-
// quantized matrix) and optional norms. modelzip reads and writes the
// layout the reference implementation (finalfusion-rust) really produces,
// including its quirks (4 - pos % 4 padding, 1 to 4 bytes, never 0).
//
// Ownership and lifetime: Vocab, EmbeddingsMetadata and Embeddings are immutable
// values with shared state; copies are cheap and share memory. Embeddings
// read from Bytes keep those Bytes alive: the dense matrix, the norms and the
// quantized codes are zero-copy views into them whenever the data is 4-byte
// aligned in memory (always the case for a mapped file or an archive entry
// at a 64-byte aligned address), and owned copies otherwise. The spans
// accessors return (words(), matrix(), norms()...) view the shared state:
// they are valid while a Vocab or Embeddings sharing it lives. Called on a
// temporary (as in `for (auto& w : Embeddings::open(p).vocab().words())`),
// they return a KeptView (modelzip/bytes.hpp) that keeps the state alive as
// long as it lives, and accessors that return a reference return a copy
// (Embeddings::vocab(), name(), metadata()). MetadataValue and EmbeddingsMetadata are
// plain values: called on a temporary, their accessors return copies.
//
// Thread safety: all const member functions may be called concurrently
// (lazily built caches are initialised once, thread-safely).
//
// Errors: every failure throws modelzip::Error. Malformed files give
// Error(corrupt) with the byte offset and the chunk; unknown chunk types or
// data types give Error(unsupported). Sizes read from a file are checked
// against the bytes really present before any allocation.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "modelzip/bytes.hpp"
#include "modelzip/error.hpp"
#include "modelzip/export.hpp"

namespace modelzip::finalfusion {

namespace detail {
struct VocabImpl;
struct EmbeddingsState;
}  // namespace detail

// ---------------------------------------------------------------------------
// EmbeddingsMetadata (chunk 5): TOML text plus a parsed, TOML-library-free value tree.

class MODELZIP_API MetadataValue {
 public:
  enum class Kind { string, integer, floating, boolean, datetime, array, table };

  MetadataValue();  // an empty table
  static MetadataValue string(std::string value);
  static MetadataValue integer(std::int64_t value);
  static MetadataValue floating(double value);
  static MetadataValue boolean(bool value);
  // A TOML date, time or date-time, kept as its TOML text (e.g.
  // "1979-05-27T07:32:00Z").
  static MetadataValue datetime(std::string toml_text);
  static MetadataValue array(std::vector<MetadataValue> items);
  static MetadataValue table(std::vector<std::string> keys, std::vector<MetadataValue> values);

  Kind kind() const noexcept { return kind_; }
  bool is_table() const noexcept { return kind_ == Kind::table; }

  // Typed access: nullptr / nullopt when the value has another kind. The
  // accessors that return a pointer into the value return a copy (or
  // nullopt) when called on an rvalue (a temporary, as in
  // `EmbeddingsMetadata::parse(text).root().get("model")`), which outlives it.
  const std::string* as_string() const& noexcept;  // also the text of a datetime
  std::optional<std::string> as_string() const&& {
    if (const std::string* s = as_string()) return *s;
    return std::nullopt;
  }
  std::optional<std::int64_t> as_integer() const noexcept;
  // Floating values, and integers converted to double.
  std::optional<double> as_number() const noexcept;
  std::optional<bool> as_boolean() const noexcept;
  // Array items, or table values (in key order of the table). On an rvalue
  // (a temporary, as in `EmbeddingsMetadata::parse(text).root().items()`), a copy.
  std::span<const MetadataValue> items() const& noexcept { return items_; }
  std::vector<MetadataValue> items() const&& { return items_; }
  // Table keys (empty for other kinds); keys()[i] names items()[i]. On an
  // rvalue, a copy.
  std::span<const std::string> keys() const& noexcept { return keys_; }
  std::vector<std::string> keys() const&& { return keys_; }

  // A member of a table, or nullptr; on an rvalue, a copy or nullopt.
  const MetadataValue* get(std::string_view key) const& noexcept;
  std::optional<MetadataValue> get(std::string_view key) const&& {
    if (const MetadataValue* v = get(key)) return *v;
    return std::nullopt;
  }
  // Follows a dotted path of table keys ("vocab_config.min_n"), or nullptr;
  // on an rvalue, a copy or nullopt.
  const MetadataValue* find(std::string_view dotted_path) const& noexcept;
  std::optional<MetadataValue> find(std::string_view dotted_path) const&& {
    if (const MetadataValue* v = find(dotted_path)) return *v;
    return std::nullopt;
  }

  // Appends or replaces a member (this must be a table, else
  // Error(invalid_argument)).
  void set(std::string key, MetadataValue value);

  bool operator==(const MetadataValue& other) const;

 private:
  Kind kind_ = Kind::table;
  std::string text_;  // string and datetime
  std::int64_t integer_ = 0;
  double floating_ = 0;
  bool boolean_ = false;
  std::vector<std::string> keys_;
  std::vector<MetadataValue> items_;
};

class MODELZIP_API EmbeddingsMetadata {
 public:
  // Parses TOML text. Throws Error(corrupt) with the line on invalid TOML
  // or invalid UTF-8.
  static EmbeddingsMetadata parse(std::string_view toml_text);
  // Serialises a table to TOML. Throws Error(invalid_argument) if `root` is
  // not a table or holds a value TOML cannot represent.
  static EmbeddingsMetadata from_table(const MetadataValue& root);

  // The TOML text as stored (written back unchanged); on an rvalue (a
  // temporary), a copy, which outlives it.
  const std::string& toml() const& noexcept { return text_; }
  std::string toml() const&& { return text_; }
  // The parsed document (always a table); on an rvalue, a copy.
  const MetadataValue& root() const& noexcept { return root_; }
  MetadataValue root() const&& { return root_; }
  // root().find(dotted_path); on an rvalue, a copy or nullopt.
  const MetadataValue* find(std::string_view dotted_path) const& noexcept {
    return root_.find(dotted_path);
  }
  std::optional<MetadataValue> find(std::string_view dotted_path) const&& {
    if (const MetadataValue* v = root_.find(dotted_path)) return *v;
    return std::nullopt;
  }
  bool operator==(const EmbeddingsMetadata& other) const { return root_ == other.root_; }

 private:
  std::string text_;
  MetadataValue root_;
};

// ---------------------------------------------------------------------------
// Vocabularies (chunks 1, 3, 7, 8, 9) and their subword indexers.

enum class VocabKind {
  simple,             // chunk 1: words only
  bucket_subwords,    // chunk 3: finalfusion n-gram buckets, FNV-1a 64, 2^exponent buckets
  fasttext_subwords,  // chunk 7: fastText n-gram buckets, FNV-1a 32, n buckets
  explicit_ngrams,    // chunk 8: an explicit n-gram -> row table
  floret,             // chunk 9: no words; murmur3 hashes of the word and its n-grams
};
MODELZIP_API std::string_view vocab_kind_name(VocabKind kind) noexcept;

class MODELZIP_API Vocab {
 public:
  // Copies share the same immutable state. Moving copies too, so a Vocab
  // moved from stays usable (its accessors are noexcept).
  Vocab(const Vocab&) = default;
  Vocab& operator=(const Vocab&) = default;
  Vocab(Vocab&& other) noexcept : impl_(other.impl_) {}
  Vocab& operator=(Vocab&& other) noexcept {
    impl_ = other.impl_;
    return *this;
  }
  ~Vocab() = default;

  // Throw Error(invalid_argument) on duplicate words, invalid UTF-8,
  // min_n == 0 or min_n > max_n, or sizes that overflow.
  static Vocab simple(std::vector<std::string> words);
  static Vocab bucket_subwords(std::vector<std::string> words, std::uint32_t min_n,
                               std::uint32_t max_n, std::uint32_t bucket_exponent);
  static Vocab fasttext_subwords(std::vector<std::string> words, std::uint32_t min_n,
                                 std::uint32_t max_n, std::uint32_t n_buckets);
  // `ngrams` pairs each n-gram with an index; indices are renumbered by order
  // of first appearance (n-grams sharing an index share a row), as the
  // reference implementation does when it reads the chunk.
  static Vocab explicit_ngrams(std::vector<std::string> words, std::uint32_t min_n,
                               std::uint32_t max_n,
                               std::vector<std::pair<std::string, std::uint64_t>> ngrams);
  static Vocab floret(std::uint32_t min_n, std::uint32_t max_n, std::uint64_t n_buckets,
                      std::uint32_t n_hashes, std::uint32_t seed, std::string bow = "<",
                      std::string eow = ">");

  VocabKind kind() const noexcept;
  // The spans of a Vocab: on an rvalue (a temporary, as in
  // `Embeddings::open(p).vocab().words()`), views that keep the state alive
  // (KeptView, modelzip/bytes.hpp).
  std::span<const std::string> words() const& noexcept;
  KeptView<std::span<const std::string>> words() const&& noexcept { return {words(), impl_}; }
  std::size_t words_len() const noexcept;
  // Rows the storage must have: words plus subword rows.
  std::uint64_t rows() const noexcept;
  std::optional<std::size_t> word_index(std::string_view word) const;
  bool has_subwords() const noexcept { return kind() != VocabKind::simple; }

  // Subword parameters (0 / empty for a simple vocabulary).
  std::uint32_t min_n() const noexcept;
  std::uint32_t max_n() const noexcept;
  std::uint32_t bucket_exponent() const noexcept;  // bucket_subwords
  std::uint64_t n_buckets() const noexcept;        // fasttext_subwords, floret, or 2^exponent
  std::uint32_t n_hashes() const noexcept;         // floret
  std::uint32_t seed() const noexcept;             // floret
  // The word markers; on an rvalue Vocab (a temporary), copies.
  const std::string& bow() const& noexcept;  // begin-of-word marker ("<")
  std::string bow() const&&;
  const std::string& eow() const& noexcept;  // end-of-word marker (">")
  std::string eow() const&&;
  // explicit_ngrams: the n-grams and their (renumbered) indices, in stored order.
  std::span<const std::string> ngrams() const& noexcept;
  KeptView<std::span<const std::string>> ngrams() const&& noexcept { return {ngrams(), impl_}; }
  std::span<const std::uint64_t> ngram_indices() const& noexcept;
  KeptView<std::span<const std::uint64_t>> ngram_indices() const&& noexcept {
    return {ngram_indices(), impl_};
  }

  // Storage rows of the subword units of `word`, duplicates kept: every
  // n-gram of bow + word + eow with min_n..max_n characters (Unicode code
  // points), mapped by the indexer (explicit vocabularies skip unknown
  // n-grams; fastText vocabularies skip the 1-grams "<" and ">" at the
  // brackets, as fastText does); floret adds the whole bracketed word and
  // maps every unit to n_hashes rows. Empty when there is none (or for a
  // simple vocabulary).
  std::vector<std::uint64_t> subword_rows(std::string_view word) const;
  void subword_rows(std::string_view word, std::vector<std::uint64_t>& out) const;
  // The same, grouped by unit (n-gram text, or for floret also the whole
  // bracketed word first), in lookup order; units without a row (unknown
  // n-grams of an explicit vocabulary) are left out.
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> ngram_rows(
      std::string_view word) const;

  bool operator==(const Vocab& other) const;

  // Makes a Vocab and reads its state (opaque: defined and used only inside
  // modelzip).
  class Access;

 private:
  explicit Vocab(std::shared_ptr<const detail::VocabImpl> impl);
  std::shared_ptr<const detail::VocabImpl> impl_;
};

// Free-standing indexers, exposed for inspection and tests.
// All n-grams of `text` (already bracketed) with min_n..max_n code points,
// in the reference order (per start position, longest first). `text` must be
// valid UTF-8.
MODELZIP_API std::vector<std::string> ngrams(std::string_view text, std::uint32_t min_n,
                                             std::uint32_t max_n);
// finalfusion bucket index: FNV-1a 64 over the code-point count (u64 LE)
// and each code point (u32 LE), masked to `exponent` bits (exponent <= 64).
MODELZIP_API std::uint64_t finalfusion_bucket(std::string_view ngram, std::uint32_t exponent);
// fastText bucket index: FNV-1a 32 over the sign-extended UTF-8 bytes, mod n_buckets.
MODELZIP_API std::uint32_t fasttext_hash(std::string_view ngram) noexcept;
MODELZIP_API std::uint64_t fasttext_bucket(std::string_view ngram, std::uint32_t n_buckets);
// floret: murmurhash3 x64 128 of the UTF-8 bytes with `seed`, split in four
// u32 words (low word of the low half first); bucket i = word[i] % n_buckets.
MODELZIP_API std::vector<std::uint64_t> floret_buckets(std::string_view ngram,
                                                       std::uint64_t n_buckets,
                                                       std::uint32_t n_hashes, std::uint32_t seed);

// ---------------------------------------------------------------------------
// Embeddings.

struct MODELZIP_API WordSimilarity {
  std::string word{};
  float similarity{};  // cosine similarity
  bool operator==(const WordSimilarity&) const = default;
};

// Layout of a product quantizer (chunk 4).
struct PqOptions;
struct PqResult;

struct MODELZIP_API QuantizerInfo {
  std::uint32_t n_subquantizers{};  // M: codes per row
  std::uint32_t n_centroids{};      // K: centroids per subquantizer (<= 256)
  std::uint32_t dims{};             // D: reconstructed length, a multiple of M
  bool has_projection{};            // a D x D rotation applied before quantization
  bool has_norms{};                 // rows were normalised; reconstruction is scaled
};

// How Embeddings::open reads a file.
struct MODELZIP_API EmbeddingsOpenOptions {
  // Map the file (its pages are read when used; the Embeddings view them);
  // false: read it into memory first.
  bool mmap = true;
};

class MODELZIP_API Embeddings {
 public:
  // Copies share the same immutable state. Moving copies too, so a Embeddings
  // moved from stays usable (its accessors are noexcept).
  Embeddings(const Embeddings&) = default;
  Embeddings& operator=(const Embeddings&) = default;
  Embeddings(Embeddings&& other) noexcept : state_(other.state_) {}
  Embeddings& operator=(Embeddings&& other) noexcept {
    state_ = other.state_;
    return *this;
  }
  ~Embeddings() = default;

  // Parses a complete .fifu file. `name` is used in error messages (as the
  // entry name). The result keeps `file` alive (see the top of this file).
  static Embeddings read(Bytes file, std::string name = {});
  // Maps (EmbeddingsOpenOptions::mmap) or reads the file, then parses it.
  static Embeddings open(const std::filesystem::path& path,
                         const EmbeddingsOpenOptions& options = {});
#ifndef MODELZIP_NO_DEPRECATED
  // The spelling of 0.1, removed in 0.3 (docs/cpp.md, "Changes in 0.2"); a
  // template, so that `open(path, {})` picks EmbeddingsOpenOptions.
  template <std::same_as<bool> Bool>
  [[deprecated(
      "use Embeddings::open(path, EmbeddingsOpenOptions{.mmap = mmap})")]] static Embeddings
  open(const std::filesystem::path& path, Bool mmap) {
    return open(path, EmbeddingsOpenOptions{.mmap = mmap});
  }
#endif

  // Builds embeddings from a row-major matrix of vocab.rows() x dims.
  // `norms` (one per word) are optional, as is `metadata`. Throws
  // Error(invalid_argument) on shape mismatches.
  static Embeddings from_matrix(Vocab vocab, std::vector<float> matrix, std::size_t dims,
                                std::optional<std::vector<float>> norms = std::nullopt,
                                std::optional<EmbeddingsMetadata> metadata = std::nullopt);

  // Writes a .fifu file the reference implementation reads (to_bytes: the same bytes): the file
  // read() or open() parsed, byte for byte, no encoding; for ones made otherwise (from_matrix,
  // conversions, with_*, quantize...) an encoding. Throws Error(io) if the stream fails.
  void write(std::ostream& out) const;
  Bytes to_bytes() const;
#ifndef MODELZIP_NO_DEPRECATED
  // The spelling of 0.1, removed in 0.3 (docs/cpp.md, "Changes in 0.2"):
  // the one way to write a file is finalfusion::store
  // (<modelzip/finalfusion/convert.hpp>).
  [[deprecated(
      "use finalfusion::store(path, embeddings, EmbeddingFormat::finalfusion, "
      "WriteOptions{.durable = durable})")]] void
  save(const std::filesystem::path& path, bool durable = true) const;
#endif

  // Product quantization of every storage row (words and subword rows),
  // keeping vocabulary, metadata and word norms (PqOptions, PqResult below).
  // Throws Error(invalid_argument) on bad options or quantized embeddings.
  PqResult quantize(const PqOptions& options) const;
  // A dense copy of quantized embeddings (dense ones are returned as they
  // are), as Tensor::dequantize() of a quantized tensor.
  Embeddings dequantize() const;

  // A copy with other metadata or norms (norms: one per word, or nullopt).
  Embeddings with_metadata(std::optional<EmbeddingsMetadata> metadata) const;
  Embeddings with_norms(std::optional<std::vector<float>> norms) const;

  // name(), vocab() and metadata() return a copy when called on rvalue
  // Embeddings (a temporary, as in `Embeddings::open(p).vocab()`), whose
  // state may die before a reference would be used.
  const std::string& name() const& noexcept;
  std::string name() const&&;
  const Vocab& vocab() const& noexcept;
  Vocab vocab() const&& noexcept;
  std::size_t dims() const noexcept;
  std::size_t rows() const noexcept;
  const std::optional<EmbeddingsMetadata>& metadata() const& noexcept;
  std::optional<EmbeddingsMetadata> metadata() const&&;
  // Per-word norms of the original vectors (empty if the file has none).
  // norms() and matrix() of rvalue Embeddings are views that keep the state
  // alive (KeptView, modelzip/bytes.hpp).
  std::span<const float> norms() const& noexcept;
  KeptView<std::span<const float>> norms() const&& noexcept {
    return {norms(), state_};
  }
  bool has_norms() const noexcept;
  bool quantized() const noexcept;
  std::optional<QuantizerInfo> quantizer() const noexcept;
  // The dense matrix, rows() x dims() row-major (empty when quantized).
  std::span<const float> matrix() const& noexcept;
  KeptView<std::span<const float>> matrix() const&& noexcept {
    return {matrix(), state_};
  }
  // True when the dense matrix (or the quantized codes) is a zero-copy view
  // into the Bytes given to read().
  bool storage_is_view() const noexcept;
  // Row `r` (reconstructed if quantized) into `out` (dims() floats).
  // Throws Error(invalid_argument) if r >= rows() or out is too small.
  void row(std::size_t r, std::span<float> out) const;

  // Lookups. A known word gives its row (reconstructed if quantized). An
  // unknown word gives the sum of its subword rows, L2-normalised (floret:
  // the mean of its subword rows, as floret computes it). A word without
  // subwords gives nullopt / false.
  std::optional<std::vector<float>> embedding(std::string_view word) const;
  bool embedding_into(std::string_view word, std::span<float> out) const;
  // Batch lookup: row i of `out` (words.size() x dims(), row-major) gets the
  // embedding of words[i], or zeros; found[i] (if found is not empty) tells
  // which. Returns the number of words found.
  std::size_t embeddings_into(std::span<const std::string_view> words, std::span<float> out,
                              std::span<bool> found = {}) const;
  // The norm of the word's original vector: the stored norm of a known word
  // (or the L2 norm of its row if the file has no norms); for an unknown
  // word the L2 norm of its subword sum before normalisation (floret: of the
  // mean). nullopt when there is no embedding.
  std::optional<float> norm(std::string_view word) const;

  // The unit vector of `word` that similar() and analogy() compare: a known
  // word's row as stored when the embeddings have norms (rows stored as unit
  // vectors), otherwise its embedding() normalised as the converters
  // normalise rows; an unknown word's embedding() (floret: normalised).
  // The same vectors give the same bits whether they are stored as unit rows
  // with norms or as read (a raw .fifu, a conversion with normalize false).
  // nullopt when there is no embedding.
  std::optional<std::vector<float>> unit_embedding(std::string_view word) const;

  // The k words most similar (cosine) to `word`, best first, the word itself
  // excluded; ties (equal similarity) broken by word, in byte order. Rows
  // are compared as unit vectors (unit_embedding; rows kept as read are
  // normalised as a conversion would store them), so the same vectors give
  // the same results, bit for bit, from every storage of them; quantized
  // storage compares its reconstructed rows. nullopt if `word` has no
  // embedding.
  std::optional<std::vector<WordSimilarity>> similar(std::string_view word, std::size_t k) const;
  // The k words most similar to `query` (dims() floats), skipping `skip`.
  std::vector<WordSimilarity> similar_to(std::span<const float> query, std::size_t k,
                                         std::span<const std::string_view> skip = {}) const;
  // "a is to b as c is to ?": words most similar to b - a + c (normalised)
  // of their unit vectors (unit_embedding), the three query words excluded;
  // otherwise as similar(). nullopt if one of them has no embedding.
  std::optional<std::vector<WordSimilarity>> analogy(std::string_view a, std::string_view b,
                                                     std::string_view c, std::size_t k) const;

  // Makes Embeddings and reads their state (opaque: defined and used only
  // inside modelzip).
  class Access;

 private:
  explicit Embeddings(std::shared_ptr<const detail::EmbeddingsState> state);
  std::shared_ptr<const detail::EmbeddingsState> state_;
};

// ---------------------------------------------------------------------------
// What a .fifu file holds, from its chunk headers only (words, n-grams and
// matrices are not read): cheap enough for listings of large files.

struct MODELZIP_API FileSummary {
  VocabKind vocab = VocabKind::simple;
  std::uint64_t words = 0;         // known words (0 for floret)
  std::uint64_t subword_rows = 0;  // storage rows after the words (buckets, n-gram rows)
  std::uint32_t min_n = 0;         // n-gram lengths (0 for a simple vocabulary)
  std::uint32_t max_n = 0;
  std::uint64_t rows = 0;                    // storage rows
  std::uint64_t dims = 0;                    // components per row
  std::optional<QuantizerInfo> quantizer{};  // set for QuantizedArray storage
  bool norms = false;                        // an NdNorms chunk is present
  bool metadata = false;                     // a Metadata chunk is present
};

// Reads the header and chunk frames of a .fifu file held in `file`, and the
// fixed fields at the start of its vocabulary and storage chunks.
// Throws Error(corrupt) / Error(unsupported) as Embeddings::read would, with
// the same message, for a broken header or frame or a vocabulary whose
// fixed fields Embeddings::read refuses (n-gram range, buckets, more words
// declared than the chunk can hold); the bodies beyond the fixed fields
// are not checked: use Embeddings::read for that.
MODELZIP_API FileSummary summarize(const Bytes& file);
// One line for listings, e.g. "fasttext_subwords 30 words + 1000 buckets
// (n 3-6); 16 dims, array, norms".
MODELZIP_API std::string summary_text(const FileSummary& summary);
// A one-line JSON object with the keys vocab, words, subword_rows, min_n,
// max_n, rows, dims, storage ("array" or "quantized"), quantizer (null, or
// {"subquantizers", "centroids", "projection", "norms"}), norms, metadata.
MODELZIP_API std::string summary_json(const FileSummary& summary);

// ---------------------------------------------------------------------------
// Product quantization.

struct MODELZIP_API PqOptions {
  std::uint32_t n_subquantizers = 0;  // M; must divide dims (0: dims / 2 rounded to a divisor)
  std::uint32_t n_centroids = 256;    // K, 1..256
  std::uint32_t n_iterations = 25;    // k-means iterations per subquantizer
  std::uint64_t seed = 42;            // deterministic: same seed, same result
  bool normalize = true;              // quantize unit rows and store their norms
  bool random_rotation = false;       // apply a seeded random orthogonal projection first
};

struct MODELZIP_API PqResult {
  Embeddings embeddings;
  // Mean over all rows and components of (original - reconstructed)^2.
  double mean_squared_error{};
};

#ifndef MODELZIP_NO_DEPRECATED
// The spellings of 0.1, removed in 0.3 (docs/cpp.md, "Changes in 0.2"):
// with `using namespace` of both modelzip and modelzip::finalfusion,
// Metadata and QuantizeResult named two types (define
// MODELZIP_NO_DEPRECATED to drop these now).
using Metadata [[deprecated("use finalfusion::EmbeddingsMetadata")]] = EmbeddingsMetadata;
using QuantizeResult [[deprecated("use finalfusion::PqResult")]] = PqResult;
[[deprecated("use embeddings.quantize(options)")]] inline PqResult quantize(
    const Embeddings& embeddings, const PqOptions& options) {
  return embeddings.quantize(options);
}
[[deprecated("use embeddings.dequantize()")]] inline Embeddings dequantize(
    const Embeddings& embeddings) {
  return embeddings.dequantize();
}
#endif

}  // namespace modelzip::finalfusion
