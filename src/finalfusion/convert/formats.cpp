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

std::optional<Format> format_from_name(std::string_view name) noexcept {
  if (name == "finalfusion" || name == "fifu") return Format::finalfusion;
  if (name == "word2vec") return Format::word2vec_binary;
  if (name == "text") return Format::text;
  if (name == "textdims") return Format::text_dims;
  if (name == "fasttext") return Format::fasttext;
  if (name == "floret") return Format::floret_text;
  return std::nullopt;
}

std::string_view format_name(Format format) noexcept {
  switch (format) {
    case Format::finalfusion:
      return "finalfusion";
    case Format::word2vec_binary:
      return "word2vec";
    case Format::text:
      return "text";
    case Format::text_dims:
      return "textdims";
    case Format::fasttext:
      return "fasttext";
    case Format::floret_text:
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

std::optional<Format> detect_format(const std::filesystem::path& path,
                                    std::string_view head) noexcept {
  if (head.starts_with("FiFu")) return Format::finalfusion;
  if (head.starts_with(std::string_view("\xBA\x16\x4F\x2F", 4))) return Format::fasttext;
  const std::string ext = lower_extension(path);
  if (ext == ".ftz") return Format::fasttext;
  if (ext == ".bin") return Format::word2vec_binary;
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
    return dims_line ? Format::text_dims : Format::text;
  }
  return std::nullopt;
}

std::optional<Format> format_for_extension(const std::filesystem::path& path) noexcept {
  const std::string ext = lower_extension(path);
  if (ext == ".fifu") return Format::finalfusion;
  if (ext == ".bin") return Format::word2vec_binary;
  if (ext == ".txt") return Format::text;
  if (ext == ".vec") return Format::text_dims;
  return std::nullopt;
}

namespace {

// What `read()` returns; an Error it throws is rethrown naming `source` as
// ErrorContext::archive (unless it names one already).
template <class Read>
Embeddings read_from(std::string_view source, Read&& read) {
  try {
    return read();
  } catch (const Error& e) {
    throw e.with_context(ErrorContext{.archive = std::string(source)});
  }
}

}  // namespace

Embeddings read_word2vec_binary(const Bytes& data, const ConvertOptions& options,
                                std::string_view source) {
  return read_from(source, [&] { return read_word2vec_binary(data, options); });
}
Embeddings read_text(const Bytes& data, const ConvertOptions& options, std::string_view source) {
  return read_from(source, [&] { return read_text(data, options); });
}
Embeddings read_text_dims(const Bytes& data, const ConvertOptions& options,
                          std::string_view source) {
  return read_from(source, [&] { return read_text_dims(data, options); });
}
Embeddings read_fasttext(const Bytes& data, const ConvertOptions& options,
                         std::string_view source) {
  return read_from(source, [&] { return read_fasttext(data, options); });
}
Embeddings read_floret_text(const Bytes& data, std::string_view source) {
  return read_from(source, [&] { return read_floret_text(data); });
}

Embeddings load(const std::filesystem::path& path, Format format, const ConvertOptions& options) {
  if (format == Format::finalfusion) return Embeddings::open(path, true);
  detail::refuse_url(path);
  Bytes data = io::map_file(path);
  try {
    switch (format) {
      case Format::word2vec_binary:
        return read_word2vec_binary(data, options);
      case Format::text:
        return read_text(data, options);
      case Format::text_dims:
        return read_text_dims(data, options);
      case Format::fasttext:
        return read_fasttext(data, options);
      case Format::floret_text:
        return read_floret_text(data);
      case Format::finalfusion:
        break;
    }
  } catch (const Error& e) {
    throw e.with_context(ErrorContext{.archive = path.string()});
  }
  throw Error(ErrorCode::invalid_argument, "unknown input format");
}

void store(const std::filesystem::path& path, const Embeddings& embeddings, Format format,
           bool unnormalize) {
  if (format == Format::fasttext)
    throw Error(ErrorCode::unsupported, "writing fastText models is not supported");
  if (format == Format::finalfusion) {
    embeddings.save(path);
    return;
  }
  io::write_file_atomically(
      path,
      [&](std::ostream& out) {
        switch (format) {
          case Format::word2vec_binary:
            write_word2vec_binary(out, embeddings, unnormalize);
            break;
          case Format::text:
            write_text(out, embeddings, unnormalize);
            break;
          case Format::text_dims:
            write_text_dims(out, embeddings, unnormalize);
            break;
          case Format::floret_text:
            write_floret_text(out, embeddings);
            break;
          case Format::finalfusion:
          case Format::fasttext:
            break;
        }
      },
      true);
}

}  // namespace modelzip::finalfusion
