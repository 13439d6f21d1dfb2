#include "finalfusion/chunk_io.hpp"

#include <cstring>

#include "core/utf8.hpp"
#include "modelzip/error.hpp"

namespace modelzip::finalfusion::detail {

using modelzip::detail::ByteReader;

std::string_view chunk_name(ChunkId id) noexcept {
  switch (id) {
    case ChunkId::header:
      return "Header";
    case ChunkId::simple_vocab:
      return "SimpleVocab";
    case ChunkId::ndarray:
      return "NdArray";
    case ChunkId::bucket_subword_vocab:
      return "BucketSubwordVocab";
    case ChunkId::quantized_array:
      return "QuantizedArray";
    case ChunkId::metadata:
      return "Metadata";
    case ChunkId::ndnorms:
      return "NdNorms";
    case ChunkId::fasttext_subword_vocab:
      return "FastTextSubwordVocab";
    case ChunkId::explicit_subword_vocab:
      return "ExplicitSubwordVocab";
    case ChunkId::floret_subword_vocab:
      return "FloretSubwordVocab";
  }
  return "unknown";
}

bool is_known_chunk(std::uint32_t id) noexcept {
  return id >= 1 && id <= 9;
}

std::uint32_t read_header_start(ByteReader& reader) {
  auto magic = reader.bytes(4, "finalfusion magic");
  if (std::memcmp(magic.data(), kMagic, 4) != 0)
    throw Error(ErrorCode::corrupt, "not a finalfusion file (magic is not 'FiFu')",
                ErrorContext{.offset = 0});
  const std::uint64_t version_at = reader.absolute_position();
  const auto version = reader.read<std::uint32_t>("finalfusion version");
  if (version != kVersion)
    throw Error(ErrorCode::unsupported, "finalfusion version " + std::to_string(version),
                ErrorContext{.offset = version_at});
  return reader.read<std::uint32_t>("header chunk count");
}

std::vector<ChunkId> read_header(ByteReader& reader) {
  const std::uint32_t count = read_header_start(reader);
  if (count > reader.remaining() / 4)
    reader.fail("header", "lists " + std::to_string(count) + " chunks, the file is too short");
  std::vector<ChunkId> ids;
  ids.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint64_t at = reader.absolute_position();
    const auto id = reader.read<std::uint32_t>("header chunk identifier");
    if (!is_known_chunk(id))
      throw Error(ErrorCode::unsupported,
                  "header lists unknown chunk identifier " + std::to_string(id),
                  ErrorContext{.offset = at});
    ids.push_back(static_cast<ChunkId>(id));
  }
  return ids;
}

ChunkFrame read_chunk_frame(ByteReader& reader) {
  const std::uint64_t start = reader.absolute_position();
  const auto id = reader.read<std::uint32_t>("chunk identifier");
  if (!is_known_chunk(id))
    throw Error(ErrorCode::unsupported, "unknown chunk identifier " + std::to_string(id),
                ErrorContext{.offset = start});
  const auto length = reader.read<std::uint64_t>("chunk length");
  const std::string name(chunk_name(static_cast<ChunkId>(id)));
  if (length > reader.remaining())
    reader.fail(name + " chunk", "declares " + std::to_string(length) + " bytes, only " +
                                     std::to_string(reader.remaining()) + " left in the file");
  return ChunkFrame{static_cast<ChunkId>(id), start, reader.absolute_position(), length};
}

void expect_type(ByteReader& reader, std::uint32_t expected, std::string_view what) {
  const std::uint64_t at = reader.absolute_position();
  const auto type = reader.read<std::uint32_t>(what);
  if (type != expected)
    throw Error(ErrorCode::unsupported,
                std::string(what) + ": data type " + std::to_string(type) + ", expected " +
                    std::to_string(expected),
                ErrorContext{.offset = at});
}

void skip_padding(ByteReader& reader, std::string_view what) {
  reader.skip(padding_at(reader.absolute_position()), what);
}

std::uint64_t checked_product(const ByteReader& reader, std::uint64_t a, std::uint64_t b,
                              std::string_view what) {
  std::uint64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    reader.fail(what, std::to_string(a) + " x " + std::to_string(b) + " overflows 64 bits");
  return r;
}

void expect_chunk_end(const ByteReader& reader, const ChunkFrame& frame) {
  const std::uint64_t used = reader.absolute_position() - frame.body_offset;
  if (used != frame.body_length)
    reader.fail(std::string(chunk_name(frame.id)) + " chunk",
                "declared length " + std::to_string(frame.body_length) + " but contents take " +
                    std::to_string(used) + " bytes");
}

std::string_view read_string(ByteReader& reader, std::string_view what) {
  const auto length = reader.read<std::uint32_t>(what);
  const std::uint64_t at = reader.absolute_position();
  auto text = reader.string(length, what);
  if (auto bad = modelzip::detail::utf8_invalid_at(text))
    throw Error(ErrorCode::corrupt, std::string(what) + ": invalid UTF-8",
                ErrorContext{.offset = at + *bad});
  return text;
}

void Sink::string(std::string_view s) {
  if (s.size() > UINT32_MAX)
    throw Error(ErrorCode::invalid_argument,
                "string of " + std::to_string(s.size()) + " bytes does not fit a u32 length");
  u32(static_cast<std::uint32_t>(s.size()));
  bytes(s.data(), s.size());
}

void Sink::padding() {
  static constexpr std::byte zeros[4] = {};
  bytes(zeros, padding_at(position()));
}

void StreamSink::put(const std::byte* data, std::size_t size) {
  out_.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out_) throw Error(ErrorCode::io, "cannot write finalfusion data to the output stream");
}

}  // namespace modelzip::finalfusion::detail
