// fastText .bin models (format versions up to 12): the arguments, the
// dictionary and the input matrix (nwords + bucket rows). Only unsupervised
// models without quantization or pruning convert.
#include <cstring>

#include "core/checked.hpp"
#include "finalfusion/convert/convert_util.hpp"
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

[[noreturn]] void unsupported(std::uint64_t at, const std::string& what) {
  throw Error(ErrorCode::unsupported, "fastText: " + what, ErrorContext{.offset = at});
}
[[noreturn]] void corrupt(std::uint64_t at, const std::string& what) {
  throw Error(ErrorCode::corrupt, "fastText: " + what, ErrorContext{.offset = at});
}

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

// The rows fastText sums for a vocabulary word: its own row, then (unless
// it is "</s>") its character n-grams as Dictionary::computeSubwords finds
// them: over UTF-8 code points of "<word>", lengths minn..maxn, except the
// 1-grams "<" and ">".
void fasttext_word_rows(std::string_view word, std::size_t index, const Args& args,
                        std::uint64_t nwords, std::vector<std::uint64_t>& rows) {
  rows.clear();
  rows.push_back(index);
  if (word == kEndOfSentence || args.maxn <= 0) return;
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
        rows.push_back(nwords + h % static_cast<std::uint32_t>(args.bucket));
      }
    }
  }
}

}  // namespace

Embeddings read_fasttext(const Bytes& data, const ConvertOptions& options) {
  ByteReader r(data.span());
  if (r.read<std::uint32_t>("fastText magic") != kMagic)
    throw Error(ErrorCode::corrupt, "not a fastText model (wrong magic number)",
                ErrorContext{.offset = 0});
  const auto version = r.read<std::uint32_t>("fastText version");
  if (version > kMaxVersion) unsupported(4, "format version " + std::to_string(version));

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
  if (loss_name(a.loss).empty()) corrupt(args_at + 24, "unknown loss " + std::to_string(a.loss));
  if (model_name(a.model).empty())
    corrupt(args_at + 28, "unknown model " + std::to_string(a.model));
  if (a.dim < 0) corrupt(args_at, "negative dimension");
  if (a.bucket <= 0) unsupported(args_at + 32, "model without n-gram buckets");
  if (a.minn <= 0 || a.maxn < a.minn)
    unsupported(args_at + 36, "n-gram lengths minn " + std::to_string(a.minn) + ", maxn " +
                                  std::to_string(a.maxn) + " (no character n-grams)");

  const std::uint64_t dict_at = r.absolute_position();
  const auto size = r.read<std::int32_t>("fastText dictionary size");
  const auto nwords = r.read<std::int32_t>("fastText word count");
  const auto nlabels = r.read<std::int32_t>("fastText label count");
  r.read<std::int64_t>("fastText token count");
  const auto prune_size = r.read<std::int64_t>("fastText pruned index size");
  if (nlabels != 0) unsupported(dict_at + 8, "supervised model with labels");
  if (size < 0 || nwords != size) corrupt(dict_at, "inconsistent dictionary sizes");
  if (prune_size >= 0) unsupported(dict_at + 20, "pruned (quantized) model");
  // Each entry takes at least '\0' + i64 count + i8 type.
  if (static_cast<std::uint64_t>(size) > r.remaining() / 10)
    corrupt(dict_at, "dictionary of " + std::to_string(size) + " words exceeds the file");

  std::vector<std::string> raw_words;
  std::vector<std::string> words;
  raw_words.reserve(static_cast<std::size_t>(size));
  words.reserve(static_cast<std::size_t>(size));
  for (std::int32_t i = 0; i < size; ++i) {
    const std::uint64_t at = r.absolute_position();
    const auto rest = r.all().subspan(r.position());
    const void* nul = std::memchr(rest.data(), 0, rest.size());
    if (!nul) corrupt(at, "unterminated word");
    const auto length = static_cast<std::size_t>(static_cast<const std::byte*>(nul) - rest.data());
    auto raw = r.string(length, "fastText word");
    r.skip(1, "fastText word");
    r.read<std::int64_t>("fastText word count");
    const std::uint64_t type_at = r.absolute_position();
    if (r.read<std::int8_t>("fastText entry type") != 0) unsupported(type_at, "label entry");
    words.push_back(detail::decode_token(raw, options.utf8, "fastText word " + std::to_string(i),
                                         ErrorContext{.offset = at}));
    raw_words.emplace_back(raw);
  }

  const std::uint64_t quant_at = r.absolute_position();
  if (r.read<std::uint8_t>("fastText quantization flag") != 0)
    unsupported(quant_at, "quantized input matrix");
  const std::uint64_t matrix_at = r.absolute_position();
  const auto m = r.read<std::int64_t>("fastText matrix rows");
  const auto n = r.read<std::int64_t>("fastText matrix columns");
  const std::uint64_t expected_rows =
      static_cast<std::uint64_t>(size) + static_cast<std::uint64_t>(a.bucket);
  if (m < 0 || static_cast<std::uint64_t>(m) != expected_rows || n != a.dim)
    corrupt(matrix_at, "input matrix is " + std::to_string(m) + " x " + std::to_string(n) +
                           ", expected " + std::to_string(expected_rows) + " x " +
                           std::to_string(a.dim));
  const std::uint64_t bytes = detail::checked_product(
      r, static_cast<std::uint64_t>(m) * static_cast<std::uint64_t>(n), 4, "fastText input matrix");
  if (bytes > r.remaining())
    corrupt(matrix_at, "input matrix needs " + std::to_string(bytes) + " bytes, " +
                           std::to_string(r.remaining()) + " left");
  const std::size_t rows = static_cast<std::size_t>(m), dims = static_cast<std::size_t>(n);
  std::vector<float> input(rows * dims);
  auto values = r.bytes(bytes, "fastText input matrix");
  if (bytes) std::memcpy(input.data(), values.data(), bytes);

  // Word vectors as fastText computes them: the mean of the rows.
  std::vector<float> matrix = input;
  std::vector<std::uint64_t> word_rows;
  for (std::size_t i = 0; i < raw_words.size(); ++i) {
    fasttext_word_rows(raw_words[i], i, a, static_cast<std::uint64_t>(size), word_rows);
    float* out = matrix.data() + i * dims;
    std::fill(out, out + dims, 0.0f);
    for (auto row : word_rows) {
      const float* src = input.data() + row * dims;
      for (std::size_t t = 0; t < dims; ++t) out[t] += src[t];
    }
    const float scale = 1.0f / static_cast<float>(word_rows.size());
    for (std::size_t t = 0; t < dims; ++t) out[t] *= scale;
  }

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
  auto metadata =
      Metadata::from_table(MetadataValue::table(std::move(keys), std::move(values_meta)));

  Vocab vocab(detail::make_fasttext_vocab(
      std::move(words), static_cast<std::uint32_t>(a.minn), static_cast<std::uint32_t>(a.maxn),
      static_cast<std::uint32_t>(a.bucket),
      detail::Failure{ErrorCode::corrupt, {.offset = dict_at}}));
  std::optional<std::vector<float>> norms;
  if (options.normalize)
    norms = detail::normalize_rows(matrix, static_cast<std::size_t>(size), dims);
  return Embeddings::from_matrix(std::move(vocab), std::move(matrix), dims, std::move(norms),
                                 std::move(metadata));
}

}  // namespace modelzip::finalfusion
