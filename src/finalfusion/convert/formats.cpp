// Format names, and loading/storing files in any format.
#include <cctype>
#include <ostream>

#include "core/utf8.hpp"
#include "finalfusion/convert/embedding_builder.hpp"
#include "finalfusion/embeddings_state.hpp"
#include "io/atomic_write.hpp"
#include "io/mapped_file.hpp"
#include "modelzip/finalfusion/convert.hpp"

namespace modelzip::finalfusion {

std::optional<EmbeddingFormat> embedding_format_from_name(std::string_view name) noexcept {
  if (name == "finalfusion" || name == "fifu") return EmbeddingFormat::finalfusion;
  if (name == "word2vec") return EmbeddingFormat::word2vec_binary;
  if (name == "text") return EmbeddingFormat::text;
  if (name == "textdims") return EmbeddingFormat::text_dims;
  if (name == "fasttext") return EmbeddingFormat::fasttext;
  if (name == "floret") return EmbeddingFormat::floret_text;
  return std::nullopt;
}

std::string_view embedding_format_name(EmbeddingFormat format) noexcept {
  switch (format) {
    case EmbeddingFormat::finalfusion:
      return "finalfusion";
    case EmbeddingFormat::word2vec_binary:
      return "word2vec";
    case EmbeddingFormat::text:
      return "text";
    case EmbeddingFormat::text_dims:
      return "textdims";
    case EmbeddingFormat::fasttext:
      return "fasttext";
    case EmbeddingFormat::floret_text:
      return "floret";
  }
  return "unknown";
}

std::optional<Utf8Policy> utf8_policy_from_name(std::string_view name) noexcept {
  if (name == "strict") return Utf8Policy::strict;
  if (name == "lossy") return Utf8Policy::lossy;
  if (name == "escape") return Utf8Policy::escape;
  return std::nullopt;
}

std::string_view utf8_policy_name(Utf8Policy policy) noexcept {
  switch (policy) {
    case Utf8Policy::strict:
      return "strict";
    case Utf8Policy::lossy:
      return "lossy";
    case Utf8Policy::escape:
      return "escape";
  }
  return "unknown";
}

bool words_escaped(const Embeddings& embeddings) noexcept {
  if (!embeddings.metadata()) return false;
  const MetadataValue* v = embeddings.metadata()->find(kWordEscapeKey);
  return v && v->as_string() && *v->as_string() == kWordEscapeValue;
}

std::string original_word(const Embeddings& embeddings, std::string_view word) {
  if (!words_escaped(embeddings)) return std::string(word);
  auto bytes = modelzip::detail::utf8_unescape(word);
  if (!bytes)
    throw Error(ErrorCode::corrupt, "word '" + std::string(word.substr(0, 64)) +
                                        "' is not in the escaped form its metadata (" +
                                        std::string(kWordEscapeKey) + ") announces");
  return std::move(*bytes);
}

namespace {
std::string lower_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}
}  // namespace

std::optional<EmbeddingFormat> detect_embedding_format(const std::filesystem::path& path,
                                                       std::string_view head) noexcept {
  if (head.starts_with("FiFu")) return EmbeddingFormat::finalfusion;
  if (head.starts_with(std::string_view("\xBA\x16\x4F\x2F", 4))) return EmbeddingFormat::fasttext;
  const std::string ext = lower_extension(path);
  if (ext == ".ftz") return EmbeddingFormat::fasttext;
  if (ext == ".bin") return EmbeddingFormat::word2vec_binary;
  if (ext == ".txt" || ext == ".vec" || ext == ".w2v") {
    const std::string_view text = detail::without_utf8_bom(head);
    const std::string_view first = text.substr(0, text.find('\n'));
    const auto space = first.find(' ');
    auto digits = [](std::string_view s) {
      s = detail::trim_ascii(s);
      return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
    };
    const bool dims_line = space != std::string_view::npos && digits(first.substr(0, space)) &&
                           digits(first.substr(space + 1));
    return dims_line ? EmbeddingFormat::text_dims : EmbeddingFormat::text;
  }
  return std::nullopt;
}

std::optional<EmbeddingFormat> embedding_format_for_extension(
    const std::filesystem::path& path) noexcept {
  const std::string ext = lower_extension(path);
  if (ext == ".fifu") return EmbeddingFormat::finalfusion;
  if (ext == ".bin") return EmbeddingFormat::word2vec_binary;
  if (ext == ".txt") return EmbeddingFormat::text;
  if (ext == ".vec") return EmbeddingFormat::text_dims;
  return std::nullopt;
}

Embeddings load(const std::filesystem::path& path, EmbeddingFormat format,
                const ConvertOptions& options) {
  if (format == EmbeddingFormat::finalfusion) return Embeddings::open(path);
  detail::refuse_url(path);
  Bytes data = io::map_file(path);
  try {
    switch (format) {
      case EmbeddingFormat::word2vec_binary:
        return read_word2vec_binary(data, options);
      case EmbeddingFormat::text:
        return read_text(data, options);
      case EmbeddingFormat::text_dims:
        return read_text_dims(data, options);
      case EmbeddingFormat::fasttext:
        return read_fasttext(data, options);
      case EmbeddingFormat::floret_text:
        return read_floret_text(data);
      case EmbeddingFormat::finalfusion:
        break;
    }
  } catch (const Error& e) {
    throw e.with_context(ErrorContext{.archive = path.string()});
  }
  throw Error(ErrorCode::invalid_argument, "unknown input format");
}

void store(const std::filesystem::path& path, const Embeddings& embeddings, EmbeddingFormat format,
           const WriteOptions& options) {
  if (format == EmbeddingFormat::fasttext)
    throw Error(ErrorCode::unsupported, "writing fastText models is not supported");
  io::write_file_atomically(
      path,
      [&](std::ostream& out) {
        switch (format) {
          case EmbeddingFormat::finalfusion:
            embeddings.write(out);
            break;
          case EmbeddingFormat::word2vec_binary:
            write_word2vec_binary(out, embeddings, options);
            break;
          case EmbeddingFormat::text:
            write_text(out, embeddings, options);
            break;
          case EmbeddingFormat::text_dims:
            write_text_dims(out, embeddings, options);
            break;
          case EmbeddingFormat::floret_text:
            write_floret_text(out, embeddings);
            break;
          case EmbeddingFormat::fasttext:
            break;
        }
      },
      options.durable);
}

}  // namespace modelzip::finalfusion
