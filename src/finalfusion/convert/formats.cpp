// Format names, and loading/storing files in any format.
#include <fstream>

#include "finalfusion/embeddings_state.hpp"
#include "io/durable_file.hpp"
#include "io/mapped_file.hpp"
#include "modelzip/finalfusion_convert.hpp"

namespace modelzip::finalfusion {

std::optional<Format> parse_format(std::string_view name) noexcept {
  if (name == "finalfusion" || name == "fifu") return Format::finalfusion;
  if (name == "word2vec") return Format::word2vec_binary;
  if (name == "text") return Format::text;
  if (name == "textdims") return Format::text_dims;
  if (name == "fasttext") return Format::fasttext;
  if (name == "floret") return Format::floret_text;
  return std::nullopt;
}

std::string_view to_string(Format format) noexcept {
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

Embeddings load(const std::filesystem::path& path, Format format, const ConvertOptions& options) {
  if (format == Format::finalfusion) return Embeddings::open(path, true);
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

void store(const Embeddings& embeddings, const std::filesystem::path& path, Format format,
           bool unnormalize) {
  if (format == Format::fasttext)
    throw Error(ErrorCode::unsupported, "writing fastText models is not supported");
  if (format == Format::finalfusion) {
    embeddings.save(path);
    return;
  }
  auto temp = io::TempFile::beside(path);
  try {
    std::ofstream out(temp.path(), std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorCode::io, "cannot create " + temp.path().string());
    switch (format) {
      case Format::word2vec_binary:
        write_word2vec_binary(embeddings, out, unnormalize);
        break;
      case Format::text:
        write_text(embeddings, out, unnormalize);
        break;
      case Format::text_dims:
        write_text_dims(embeddings, out, unnormalize);
        break;
      case Format::floret_text:
        write_floret_text(embeddings, out);
        break;
      case Format::finalfusion:
      case Format::fasttext:
        break;
    }
    out.flush();
    if (!out) throw Error(ErrorCode::io, "cannot write " + temp.path().string());
  } catch (const Error& e) {
    throw e.with_context(ErrorContext{.archive = path.string()});
  }
  temp.commit(true);
}

}  // namespace modelzip::finalfusion
