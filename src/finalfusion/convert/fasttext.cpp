// fastText models (.bin and quantized .ftz, format versions up to 12): the
// arguments, the dictionary (words, then the labels of supervised models,
// then the pruning table of quantized models) and the input matrix (dense,
// or product-quantized as fastText's QuantMatrix writes it). The output
// matrix that follows is not needed for word vectors and is not read.
#include <cstring>
#include <numeric>
#include <unordered_map>

#include <cmath>
#include "core/checked.hpp"
#include "core/fail.hpp"
#include "core/utf8.hpp"
#include "finalfusion/convert/embedding_builder.hpp"
#include "finalfusion/embeddings_state.hpp"
#include "finalfusion/subwords.hpp"
#include "finalfusion/vector_math.hpp"

namespace modelzip::finalfusion {

using modelzip::detail::ByteReader;

namespace {

constexpr std::uint32_t kMagic = 793712314;
constexpr std::uint32_t kMaxVersion = 12;
constexpr std::string_view kEndOfSentence = "</s>";

struct Args {
  std::int32_t dim, ws, epoch, min_count, neg, word_ngrams, loss, model, bucket, minn, maxn,
      lr_update_rate;
  double t;
};

using modelzip::detail::fail_corrupt;
using modelzip::detail::fail_unsupported;

std::string_view loss_name(std::int32_t loss) {
  switch (loss) {
    case 1:
      return "HierarchicalSoftmax";
    case 2:
      return "NegativeSampling";
    case 3:
      return "Softmax";
    case 4:
      return "OneVsAll";
  }
  return {};
}

std::string_view model_name(std::int32_t model) {
  switch (model) {
    case 1:
      return "CBOW";
    case 2:
      return "SkipGram";
    case 3:
      return "Supervised";
  }
  return {};
}

// Maps an n-gram bucket to its input matrix row offset (after the words):
// the bucket itself, or through the pruning table of a quantized model
// (nullopt: the bucket was pruned away), as Dictionary::pushHash does.
struct BucketMap {
  bool pruned = false;
  std::unordered_map<std::uint32_t, std::uint32_t> kept;
  std::optional<std::uint64_t> operator()(std::uint32_t bucket) const {
    if (!pruned) return bucket;
    auto it = kept.find(bucket);
    if (it == kept.end()) return std::nullopt;
    return it->second;
  }
};

// The input rows fastText averages for a vocabulary word: its own row, then
// (unless it is "</s>") its character n-grams as Dictionary::computeSubwords
// finds them: over UTF-8 code points of "<word>", lengths minn..maxn, except
// the 1-grams "<" and ">"; pruned buckets are skipped.
void fasttext_word_rows(std::string_view word, std::size_t index, const Args& args,
                        const BucketMap& buckets, std::uint64_t nwords,
                        std::vector<std::uint64_t>& rows) {
  rows.clear();
  rows.push_back(index);
  if (word == kEndOfSentence || args.maxn <= 0 || args.bucket <= 0) return;
  std::string s = "<";
  s += word;
  s += '>';
  const auto maxn = static_cast<std::size_t>(args.maxn);
  const auto minn = static_cast<std::size_t>(args.minn < 0 ? 0 : args.minn);
  for (std::size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;
    std::size_t j = i;
    for (std::size_t n = 1; j < s.size() && n <= maxn; ++n) {
      ++j;
      while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) ++j;
      if (n >= minn && !(n == 1 && (i == 0 || j == s.size()))) {
        const std::uint32_t h = detail::fasttext_ngram_hash(std::string_view(s).substr(i, j - i));
        if (auto row = buckets(h % static_cast<std::uint32_t>(args.bucket)))
          rows.push_back(nwords + *row);
      }
    }
  }
}

// The input matrix: dense (DenseMatrix::save: i64 m, i64 n, m x n f32) or
// product-quantized (QuantMatrix::save: bool qnorm, i64 m, i64 n,
// i32 codesize, codesize u8 codes, a ProductQuantizer, and with qnorm m u8 norm
// codes and a one-dimensional ProductQuantizer for the norms).
// ProductQuantizer::save: i32 dim, nsubq, dsub, lastdsub, dim x 256 f32
// centroids; sub-quantizer m < nsubq - 1 covers components m*dsub .. +dsub,
// the last one lastdsub components; its centroid k starts at
// (m*256 + k)*dsub (the last one: m*256*dsub + k*lastdsub).
struct ProductQuantizer {
  std::uint32_t dim = 0, nsubq = 0, dsub = 0, lastdsub = 0;
  std::span<const std::byte> centroids;  // dim x 256 f32 (unaligned: read with memcpy)
  std::uint64_t centroids_at = 0;        // their offset in the file
  static constexpr std::uint32_t kCentroids = 256;

  std::uint32_t width(std::uint32_t m) const noexcept { return m + 1 == nsubq ? lastdsub : dsub; }
  // The index of component j of centroid k of sub-quantizer m among the centroid values.
  std::size_t index(std::uint32_t m, std::uint32_t k, std::uint32_t j) const noexcept {
    return (m + 1 == nsubq ? static_cast<std::size_t>(m) * kCentroids * dsub + k * lastdsub
                           : (static_cast<std::size_t>(m) * kCentroids + k) * dsub) +
           j;
  }
  float centroid(std::uint32_t m, std::uint32_t k, std::uint32_t j) const noexcept {
    return modelzip::detail::load_le<float>(centroids.data() + index(m, k, j) * 4);
  }
  // The offset in the file of that component.
  std::uint64_t centroid_at(std::uint32_t m, std::uint32_t k, std::uint32_t j) const noexcept {
    return centroids_at + index(m, k, j) * 4;
  }
};

ProductQuantizer read_pq(ByteReader& r, std::string_view what) {
  const std::uint64_t at = r.absolute_position();
  ProductQuantizer pq;
  const auto dim = r.read<std::int32_t>(what);
  const auto nsubq = r.read<std::int32_t>(what);
  const auto dsub = r.read<std::int32_t>(what);
  const auto lastdsub = r.read<std::int32_t>(what);
  // fastText's ProductQuantizer(dim, dsub): nsubq = ceil(dim / dsub), the
  // last sub-quantizer takes the rest.
  if (dim <= 0 || dsub <= 0 || nsubq != dim / dsub + (dim % dsub != 0) ||
      lastdsub != (dim % dsub ? dim % dsub : dsub))
    fail_corrupt("fastText: " + std::string(what) + ": inconsistent layout dim " +
                     std::to_string(dim) + ", nsubq " + std::to_string(nsubq) + ", dsub " +
                     std::to_string(dsub) + ", lastdsub " + std::to_string(lastdsub),
                 {.offset = at});
  pq.dim = static_cast<std::uint32_t>(dim);
  pq.nsubq = static_cast<std::uint32_t>(nsubq);
  pq.dsub = static_cast<std::uint32_t>(dsub);
  pq.lastdsub = static_cast<std::uint32_t>(lastdsub);
  pq.centroids_at = r.absolute_position();
  pq.centroids =
      r.bytes(detail::checked_product(r, pq.dim, ProductQuantizer::kCentroids * 4, what), what);
  return pq;
}

struct InputMatrix {
  std::uint64_t rows = 0;
  std::uint32_t dims = 0;
  bool quantized = false;
  std::vector<float> dense;    // rows x dims
  std::uint64_t dense_at = 0;  // its offset in the file
  // Quantized:
  ProductQuantizer pq;
  std::span<const std::byte> codes;  // rows x nsubq
  std::uint64_t codes_at = 0;        // their offset in the file
  bool qnorm = false;
  ProductQuantizer npq;                   // dim 1
  std::span<const std::byte> norm_codes;  // rows

  // The norm factor of row r (1 without qnorm).
  float alpha(std::uint64_t r) const noexcept {
    return qnorm ? npq.centroid(0, static_cast<std::uint8_t>(norm_codes[r]), 0) : 1.0f;
  }
  // The offset in the file where row r is stored (quantized: its codes).
  std::uint64_t row_at(std::uint64_t r) const noexcept {
    return quantized ? codes_at + r * pq.nsubq : dense_at + r * dims * 4;
  }
  // The first value that is not finite among those row r is made of, as
  // fastText reconstructs it (stored components; a quantized row's norm
  // factor, then its centroids' components); nullopt when all are finite.
  struct NonFinite {
    bool norm_factor;      // the quantized norm factor, else a component
    std::uint32_t column;  // the 0-based component
    std::uint64_t offset;  // where the value is in the file
    float value;
  };
  std::optional<NonFinite> nonfinite(std::uint64_t r) const {
    if (!quantized) {
      for (std::uint32_t t = 0; t < dims; ++t)
        if (const float v = dense[r * dims + t]; !std::isfinite(v))
          return NonFinite{false, t, dense_at + (r * dims + t) * 4, v};
      return std::nullopt;
    }
    if (const float a = alpha(r); !std::isfinite(a))
      return NonFinite{true, 0, npq.centroid_at(0, static_cast<std::uint8_t>(norm_codes[r]), 0), a};
    const std::byte* code = codes.data() + r * pq.nsubq;
    for (std::uint32_t m = 0; m < pq.nsubq; ++m) {
      const auto k = static_cast<std::uint8_t>(code[m]);
      for (std::uint32_t j = 0; j < pq.width(m); ++j)
        if (const float v = pq.centroid(m, k, j); !std::isfinite(v))
          return NonFinite{false, m * pq.dsub + j, pq.centroid_at(m, k, j), v};
    }
    return std::nullopt;
  }
  // out += row r, as fastText's addToVector / addcode do.
  void add_row(std::uint64_t r, float* out) const {
    if (!quantized) {
      const float* src = dense.data() + r * dims;
      for (std::uint32_t t = 0; t < dims; ++t) out[t] += src[t];
      return;
    }
    const float a = alpha(r);
    const std::byte* code = codes.data() + r * pq.nsubq;
    for (std::uint32_t m = 0; m < pq.nsubq; ++m) {
      const auto k = static_cast<std::uint8_t>(code[m]);
      for (std::uint32_t j = 0; j < pq.width(m); ++j)
        out[m * pq.dsub + j] += a * pq.centroid(m, k, j);
    }
  }
};

InputMatrix read_input_matrix(ByteReader& r, const Args& a, std::uint64_t expected_rows) {
  InputMatrix in;
  const std::uint64_t quant_at = r.absolute_position();
  const auto quant = r.read<std::uint8_t>("fastText quantization flag");
  if (quant > 1)
    fail_corrupt("fastText: quantization flag " + std::to_string(quant), {.offset = quant_at});
  in.quantized = quant == 1;
  const std::uint64_t matrix_at = r.absolute_position();
  std::int32_t codesize = 0;
  if (in.quantized) in.qnorm = r.read<std::uint8_t>("fastText qnorm flag") != 0;
  const auto m = r.read<std::int64_t>("fastText matrix rows");
  const auto n = r.read<std::int64_t>("fastText matrix columns");
  if (in.quantized) codesize = r.read<std::int32_t>("fastText code size");
  if (m < 0 || static_cast<std::uint64_t>(m) != expected_rows || n != a.dim)
    fail_corrupt("fastText: input matrix is " + std::to_string(m) + " x " + std::to_string(n) +
                     ", expected " + std::to_string(expected_rows) + " x " + std::to_string(a.dim),
                 {.offset = matrix_at});
  in.rows = static_cast<std::uint64_t>(m);
  in.dims = static_cast<std::uint32_t>(n);
  if (!in.quantized) {
    const std::uint64_t bytes =
        detail::checked_product(r, in.rows * in.dims, 4, "fastText input matrix");
    if (bytes > r.remaining())
      fail_corrupt("fastText: input matrix needs " + std::to_string(bytes) + " bytes, " +
                       std::to_string(r.remaining()) + " left",
                   {.offset = matrix_at});
    in.dense.resize(static_cast<std::size_t>(in.rows * in.dims));
    in.dense_at = r.absolute_position();
    auto values = r.bytes(bytes, "fastText input matrix");
    if (bytes) std::memcpy(in.dense.data(), values.data(), bytes);
    return in;
  }
  if (codesize < 0) fail_corrupt("fastText: negative code size", {.offset = matrix_at});
  in.codes_at = r.absolute_position();
  in.codes = r.bytes(static_cast<std::uint64_t>(codesize), "fastText quantized codes");
  in.pq = read_pq(r, "product quantizer");
  if (in.pq.dim != in.dims ||
      static_cast<std::uint64_t>(codesize) !=
          detail::checked_product(r, in.rows, in.pq.nsubq, "fastText codes"))
    fail_corrupt("fastText: quantizer of dim " + std::to_string(in.pq.dim) + " with " +
                     std::to_string(in.pq.nsubq) + " sub-quantizers and " +
                     std::to_string(codesize) + " codes does not fit a " + std::to_string(in.rows) +
                     " x " + std::to_string(in.dims) + " matrix",
                 {.offset = matrix_at});
  if (in.qnorm) {
    in.norm_codes = r.bytes(in.rows, "fastText norm codes");
    const std::uint64_t npq_at = r.absolute_position();
    in.npq = read_pq(r, "norm quantizer");
    if (in.npq.dim != 1)
      fail_corrupt("fastText: norm quantizer of dim " + std::to_string(in.npq.dim),
                   {.offset = npq_at});
  }
  return in;
}

// "fastText word 3 ('cat')".
std::string word_name(std::uint64_t index, std::string_view word) {
  return "fastText word " + std::to_string(index) + " ('" + modelzip::detail::utf8_escape(word) +
         "')";
}

// "component 2 of input row 7 is inf", of a value nonfinite() found.
std::string describe(const InputMatrix::NonFinite& bad, std::uint64_t row) {
  std::string value;
  detail::append_float(value, bad.value);
  return (bad.norm_factor ? "the quantized norm factor of input row " + std::to_string(row)
                          : "component " + std::to_string(bad.column + 1) + " of input row " +
                                std::to_string(row)) +
         " is " + value;
}

// Refuses the vector of vocabulary word `index` (`dims` components at
// `vector`, made of the input `rows`: the word's own row first, then its
// n-grams'), which cannot be normalized: Error(corrupt) at the offset of the
// first value among those rows that is not finite or, when all are finite
// (their sum or norm overflows), at the word's own row.
[[noreturn]] void refuse_word_vector(const InputMatrix& in, std::uint64_t index,
                                     std::string_view word, std::span<const std::uint64_t> rows,
                                     const float* vector) {
  const std::string who = word_name(index, word);
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (auto bad = in.nonfinite(rows[i]))
      fail_corrupt(who + ": " + describe(*bad, rows[i]) +
                       (i == 0 ? " (the word's own row)" : " (a row of one of its n-grams)") +
                       ", and its vector has no norm to normalize by" +
                       std::string(detail::kKeepRowHint),
                   {.offset = bad->offset});
  std::string problem = detail::unnormalizable(vector, in.dims);
  if (problem.empty()) problem = "its norm is beyond float32's range";
  fail_corrupt(who + ": " + problem + std::string(detail::kKeepRowHint),
               {.offset = in.row_at(rows.front())});
}

// Refuses word vectors that cannot be normalized: the `rows` x `dims` matrix
// of vectors, each made of the input rows `rows_of(i, out)` gives.
template <class RowsOf>
void check_word_vectors(const InputMatrix& in, const std::vector<std::string>& words,
                        const float* vectors, RowsOf&& rows_of) {
  std::vector<std::uint64_t> rows;
  for (std::uint64_t i = 0; i < words.size(); ++i) {
    const float* v = vectors + i * in.dims;
    // Only vectors whose float sum of squares is not a normal number need
    // the check (as normalize_rows).
    if (std::isnormal(detail::dot(v, v, in.dims)) || detail::unnormalizable(v, in.dims).empty())
      continue;
    rows_of(i, rows);
    refuse_word_vector(in, i, words[i], rows, v);
  }
}

// The limit on what a quantized or pruned model may expand to.
constexpr std::uint64_t kMaxExpansion = 256;

void check_expansion(std::uint64_t bytes, std::uint64_t file_size, std::string_view what) {
  if (bytes / kMaxExpansion > file_size)
    throw Error(ErrorCode::limit_exceeded, "fastText: " + std::string(what) + " would take " +
                                               std::to_string(bytes) + " bytes, more than " +
                                               std::to_string(kMaxExpansion) +
                                               " times the model file's size");
}

// The rows quantized_storage reconstructs: as fastText stores them (its
// quantized norms, if any, are the storage norms), or of unit length.
enum class QuantizedRows { as_stored, unit_length };

// Product-quantized storage for the first `rows` rows of a quantized input
// matrix, exactly: fastText's sub-quantizers of dsub components (the last
// of lastdsub) become finalfusion sub-quantizers of g = gcd(dsub, lastdsub)
// components each (one fastText code repeated dsub / g times), and the
// quantized norms become the storage norms. With QuantizedRows::unit_length,
// the storage norms are instead 1 / |centroid concatenation| and
// `word_norms` receives the norms of the rows fastText reconstructs; a row
// whose norm is not finite is then refused (refuse_word_vector, naming
// words[r]).
detail::QuantizedStorage quantized_storage(const InputMatrix& in, std::uint64_t rows,
                                           QuantizedRows shape, std::uint64_t file_size,
                                           const std::vector<std::string>& words,
                                           std::vector<float>& word_norms) {
  const ProductQuantizer& pq = in.pq;
  const std::uint32_t g = std::gcd(pq.dsub, pq.lastdsub);
  const std::uint32_t M = pq.dim / g;
  check_expansion(rows * M + static_cast<std::uint64_t>(pq.dim) * ProductQuantizer::kCentroids * 4,
                  file_size, "the quantized storage");
  detail::QuantizedStorage q;
  q.n_subquantizers = M;
  q.n_centroids = ProductQuantizer::kCentroids;
  q.dims = pq.dim;
  q.rows = static_cast<std::size_t>(rows);
  // Finalfusion sub-quantizer p covers components p*g .. p*g + g: fastText
  // sub-quantizer p*g / dsub, from component p*g % dsub of its centroids.
  std::vector<float> centroids(static_cast<std::size_t>(M) * q.n_centroids * g);
  for (std::uint32_t p = 0; p < M; ++p)
    for (std::uint32_t k = 0; k < q.n_centroids; ++k)
      for (std::uint32_t j = 0; j < g; ++j)
        centroids[(static_cast<std::size_t>(p) * q.n_centroids + k) * g + j] =
            pq.centroid(p * g / pq.dsub, k, p * g % pq.dsub + j);
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(rows) * M);
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint32_t p = 0; p < M; ++p)
      codes[r * M + p] = static_cast<std::uint8_t>(in.codes[r * pq.nsubq + p * g / pq.dsub]);
  q.centroids = detail::SharedArray<float>::owned(std::move(centroids));
  q.codes = detail::SharedArray<std::uint8_t>::owned(std::move(codes));
  const bool unit = shape == QuantizedRows::unit_length;
  if (unit || in.qnorm) {
    std::vector<float> norms(static_cast<std::size_t>(rows));
    std::vector<float> y(pq.dim);
    for (std::uint64_t r = 0; r < rows; ++r) {
      if (!unit) {
        norms[r] = in.alpha(r);
        continue;
      }
      q.reconstruct_unscaled(static_cast<std::size_t>(r), y.data());
      float length = 0;
      for (float v : y) length += v * v;
      length = std::sqrt(length);
      const float word_norm = std::fabs(in.alpha(r)) * length;
      if (!std::isfinite(word_norm)) {
        for (float& v : y) v *= in.alpha(r);
        refuse_word_vector(in, r, words[static_cast<std::size_t>(r)], std::span(&r, 1), y.data());
      }
      norms[r] = length > 0 ? 1.0f / length : 0.0f;
      word_norms.push_back(word_norm);
    }
    q.norms = detail::SharedArray<float>::owned(std::move(norms));
  }
  return q;
}

Embeddings read_fasttext_bytes(const Bytes& data, const ConvertOptions& options) {
  ByteReader r(data.span());
  if (r.read<std::uint32_t>("fastText magic") != kMagic)
    throw Error(ErrorCode::corrupt, "not a fastText model (wrong magic number)",
                ErrorContext{.offset = 0});
  const auto version = r.read<std::uint32_t>("fastText version");
  if (version > kMaxVersion)
    fail_unsupported("fastText: format version " + std::to_string(version), {.offset = 4});

  Args a{};
  const std::uint64_t args_at = r.absolute_position();
  a.dim = r.read<std::int32_t>("fastText dim");
  a.ws = r.read<std::int32_t>("fastText ws");
  a.epoch = r.read<std::int32_t>("fastText epoch");
  a.min_count = r.read<std::int32_t>("fastText minCount");
  a.neg = r.read<std::int32_t>("fastText neg");
  a.word_ngrams = r.read<std::int32_t>("fastText wordNgrams");
  a.loss = r.read<std::int32_t>("fastText loss");
  a.model = r.read<std::int32_t>("fastText model");
  a.bucket = r.read<std::int32_t>("fastText bucket");
  a.minn = r.read<std::int32_t>("fastText minn");
  a.maxn = r.read<std::int32_t>("fastText maxn");
  a.lr_update_rate = r.read<std::int32_t>("fastText lrUpdateRate");
  a.t = r.read<double>("fastText t");
  if (loss_name(a.loss).empty())
    fail_corrupt("fastText: unknown loss " + std::to_string(a.loss), {.offset = args_at + 24});
  if (model_name(a.model).empty())
    fail_corrupt("fastText: unknown model " + std::to_string(a.model), {.offset = args_at + 28});
  // A vector has at least one component. With none, the input matrix holds
  // no bytes, so nothing in the file would bound its row count (the bucket
  // count every row of which is visited).
  if (a.dim <= 0)
    fail_corrupt(
        "fastText: dimension " + std::to_string(a.dim) + " (a vector needs at least one component)",
        {.offset = args_at});
  if (a.bucket < 0) fail_corrupt("fastText: negative bucket count", {.offset = args_at + 32});
  // fastText hashes character n-grams modulo the bucket count.
  if (a.maxn > 0 && a.bucket == 0)
    fail_corrupt(
        "fastText: character n-grams (maxn " + std::to_string(a.maxn) + ") without buckets",
        {.offset = args_at + 32});

  const std::uint64_t dict_at = r.absolute_position();
  const auto size = r.read<std::int32_t>("fastText dictionary size");
  const auto nwords = r.read<std::int32_t>("fastText word count");
  const auto nlabels = r.read<std::int32_t>("fastText label count");
  r.read<std::int64_t>("fastText token count");
  const auto prune_size = r.read<std::int64_t>("fastText pruned index size");
  if (size < 0 || nwords < 0 || nlabels < 0 || static_cast<std::int64_t>(nwords) + nlabels != size)
    fail_corrupt("fastText: inconsistent dictionary sizes (" + std::to_string(size) + " entries, " +
                     std::to_string(nwords) + " words, " + std::to_string(nlabels) + " labels)",
                 {.offset = dict_at});
  // Each entry takes at least '\0' + i64 count + i8 type.
  if (static_cast<std::uint64_t>(size) > r.remaining() / 10)
    fail_corrupt("fastText: dictionary of " + std::to_string(size) + " words exceeds the file",
                 {.offset = dict_at});

  // Words first (type 0), then labels (type 1): fastText sorts them so.
  detail::WordDecoder decoder(options);
  std::vector<std::string> raw_words;
  std::vector<std::string> words;
  raw_words.reserve(static_cast<std::size_t>(nwords));
  words.reserve(static_cast<std::size_t>(nwords));
  for (std::int32_t i = 0; i < size; ++i) {
    const std::uint64_t at = r.absolute_position();
    const auto rest = r.all().subspan(r.position());
    const void* nul = rest.empty() ? nullptr : std::memchr(rest.data(), 0, rest.size());
    if (!nul) fail_corrupt("fastText: unterminated word", {.offset = at});
    const auto length = static_cast<std::size_t>(static_cast<const std::byte*>(nul) - rest.data());
    auto raw = r.string(length, "fastText word");
    r.skip(1, "fastText word");
    r.read<std::int64_t>("fastText word count");
    const std::uint64_t type_at = r.absolute_position();
    const auto type = r.read<std::int8_t>("fastText entry type");
    if (type != (i < nwords ? 0 : 1))
      fail_corrupt("fastText: entry " + std::to_string(i) + " has type " + std::to_string(type) +
                       ", expected " + (i < nwords ? "0 (word)" : "1 (label)"),
                   {.offset = type_at});
    if (i >= nwords) continue;  // labels have no input rows
    words.push_back(
        decoder.decode(raw, "fastText word " + std::to_string(i), ErrorContext{.offset = at}));
    raw_words.emplace_back(raw);
  }
  // Quantized models pruned with -cutoff keep some n-gram buckets, each
  // mapped to a row after the words.
  BucketMap buckets;
  if (prune_size >= 0) {
    const std::uint64_t at = r.absolute_position();
    buckets.pruned = true;
    if (static_cast<std::uint64_t>(prune_size) > r.remaining() / 8)
      fail_corrupt(
          "fastText: pruning table of " + std::to_string(prune_size) + " entries exceeds the file",
          {.offset = dict_at + 20});
    for (std::int64_t i = 0; i < prune_size; ++i) {
      const auto bucket = r.read<std::int32_t>("fastText pruned bucket");
      const auto row = r.read<std::int32_t>("fastText pruned row");
      if (bucket < 0 || bucket >= a.bucket || row < 0 || row >= prune_size)
        fail_corrupt("fastText: pruning table maps bucket " + std::to_string(bucket) + " to row " +
                         std::to_string(row) + " (" + std::to_string(a.bucket) + " buckets, " +
                         std::to_string(prune_size) + " kept)",
                     {.offset = at + 8 * static_cast<std::uint64_t>(i)});
      buckets.kept[static_cast<std::uint32_t>(bucket)] = static_cast<std::uint32_t>(row);
    }
  }
  const std::uint64_t word_count = static_cast<std::uint64_t>(nwords);
  const std::uint64_t ngram_rows = buckets.pruned ? static_cast<std::uint64_t>(prune_size)
                                                  : static_cast<std::uint64_t>(a.bucket);
  const InputMatrix in = read_input_matrix(r, a, word_count + ngram_rows);
  decoder.finish(words, "fastText dictionary", ErrorContext{.offset = dict_at});

  std::vector<std::string> keys = {"dims",
                                   "window_size",
                                   "epoch",
                                   "min_count",
                                   "neg",
                                   "word_ngrams",
                                   "loss",
                                   "model",
                                   "bucket",
                                   "min_n",
                                   "max_n",
                                   "lr_update_rate",
                                   "sampling_threshold"};
  std::vector<MetadataValue> values_meta = {MetadataValue::integer(a.dim),
                                            MetadataValue::integer(a.ws),
                                            MetadataValue::integer(a.epoch),
                                            MetadataValue::integer(a.min_count),
                                            MetadataValue::integer(a.neg),
                                            MetadataValue::integer(a.word_ngrams),
                                            MetadataValue::string(std::string(loss_name(a.loss))),
                                            MetadataValue::string(std::string(model_name(a.model))),
                                            MetadataValue::integer(a.bucket),
                                            MetadataValue::integer(a.minn),
                                            MetadataValue::integer(a.maxn),
                                            MetadataValue::integer(a.lr_update_rate),
                                            MetadataValue::floating(a.t)};
  if (nlabels > 0) {
    keys.emplace_back("labels");
    values_meta.push_back(MetadataValue::integer(nlabels));
  }
  if (in.quantized) {
    keys.emplace_back("quantized");
    values_meta.push_back(MetadataValue::boolean(true));
  }
  if (buckets.pruned) {
    keys.emplace_back("kept_buckets");
    values_meta.push_back(MetadataValue::integer(prune_size));
  }
  auto metadata = decoder.mark(EmbeddingsMetadata::from_table(
      MetadataValue::table(std::move(keys), std::move(values_meta))));
  const std::size_t dims = in.dims;

  // Without character n-grams a word's vector is its own row: a simple
  // vocabulary over the word rows, quantized storage kept as it is.
  const bool char_ngrams = a.maxn > 0 && a.bucket > 0 && a.maxn >= std::max(a.minn, 1) &&
                           !(buckets.pruned && prune_size == 0);
  if (!char_ngrams) {
    if (!in.quantized) {
      std::vector<float> matrix(in.dense.begin(),
                                in.dense.begin() + static_cast<std::ptrdiff_t>(word_count * dims));
      std::optional<std::vector<float>> norms;
      if (options.normalize) {
        check_word_vectors(in, words, matrix.data(),
                           [](std::uint64_t i, std::vector<std::uint64_t>& rows) { rows = {i}; });
        norms = detail::normalize_rows(matrix, word_count, dims);
      }
      Vocab vocab = Vocab::Access::make(detail::make_simple_vocab(
          std::move(words), detail::Failure{ErrorCode::corrupt, {.offset = dict_at}}));
      return Embeddings::from_matrix(std::move(vocab), std::move(matrix), dims, std::move(norms),
                                     std::move(metadata));
    }
    auto state = std::make_shared<detail::EmbeddingsState>();
    std::vector<float> word_norms;
    state->storage.quantized = true;
    state->storage.pq = quantized_storage(
        in, word_count, options.normalize ? QuantizedRows::unit_length : QuantizedRows::as_stored,
        data.size(), words, word_norms);
    state->vocab = Vocab::Access::make(detail::make_simple_vocab(
        std::move(words), detail::Failure{ErrorCode::corrupt, {.offset = dict_at}}));
    state->metadata = std::move(metadata);
    if (options.normalize) {
      state->norms = detail::SharedArray<float>::owned(std::move(word_norms));
      state->has_norms = true;
    }
    detail::check_consistency(*state, detail::Failure{ErrorCode::corrupt, {.offset = dict_at}});
    return Embeddings::Access::make(std::move(state));
  }

  // With character n-grams: a fastText vocabulary over a dense matrix of the
  // word vectors (the mean of their rows, as fastText computes them) and
  // all n-gram buckets (pruned buckets are zero rows: they add nothing).
  const std::uint64_t out_rows = word_count + static_cast<std::uint64_t>(a.bucket);
  const std::uint64_t out_bytes = detail::checked_product(r, out_rows * dims, 4, "fastText matrix");
  if (in.quantized || buckets.pruned) check_expansion(out_bytes, data.size(), "the dense matrix");
  std::vector<float> matrix(static_cast<std::size_t>(out_rows * dims), 0.0f);
  std::vector<std::uint64_t> word_rows;
  for (std::size_t i = 0; i < raw_words.size(); ++i) {
    fasttext_word_rows(raw_words[i], i, a, buckets, word_count, word_rows);
    float* out = matrix.data() + i * dims;
    for (auto row : word_rows) in.add_row(row, out);
    const float scale = 1.0f / static_cast<float>(word_rows.size());
    for (std::size_t t = 0; t < dims; ++t) out[t] *= scale;
  }
  if (options.normalize)
    check_word_vectors(in, words, matrix.data(),
                       [&](std::uint64_t i, std::vector<std::uint64_t>& rows) {
                         fasttext_word_rows(raw_words[i], i, a, buckets, word_count, rows);
                       });
  for (std::uint32_t b = 0; b < static_cast<std::uint32_t>(a.bucket); ++b)
    if (auto row = buckets(b)) {
      in.add_row(word_count + *row, matrix.data() + (word_count + b) * dims);
      // An unknown word's vector is the normalized sum of its n-gram rows.
      if (options.normalize)
        if (auto bad = in.nonfinite(word_count + *row))
          fail_corrupt("fastText n-gram bucket " + std::to_string(b) + ": " +
                           describe(*bad, word_count + *row) +
                           ", and the vector of any word with an n-gram in that bucket would "
                           "have no norm to normalize by" +
                           std::string(detail::kKeepRowHint),
                       {.offset = bad->offset});
    }

  Vocab vocab = Vocab::Access::make(detail::make_fasttext_vocab(
      std::move(words), static_cast<std::uint32_t>(std::max(a.minn, 1)),
      static_cast<std::uint32_t>(a.maxn), static_cast<std::uint32_t>(a.bucket),
      detail::Failure{ErrorCode::corrupt, {.offset = dict_at}}));
  std::optional<std::vector<float>> norms;
  if (options.normalize) norms = detail::normalize_rows(matrix, word_count, dims);
  return Embeddings::from_matrix(std::move(vocab), std::move(matrix), dims, std::move(norms),
                                 std::move(metadata));
}

}  // namespace

Embeddings read_fasttext(const Bytes& data, const ConvertOptions& options,
                         std::string_view source) {
  return detail::read_from(source, [&] { return read_fasttext_bytes(data, options); });
}

}  // namespace modelzip::finalfusion
