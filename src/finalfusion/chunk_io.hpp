// Chunk framing of finalfusion files: chunk identifiers, data type
// identifiers, the padding rule real files follow, and a position-tracking
// byte sink for writers.
//
// Every chunk is `id u32, length u64, body`; `length` counts the body bytes.
// Before f32 data, writers insert 4 - (pos % 4) zero bytes, where pos is the
// absolute position in the file: 1 to 4 bytes, never 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/checked.hpp"

namespace modelzip::finalfusion::detail {

enum class ChunkId : std::uint32_t {
  header = 0,
  simple_vocab = 1,
  ndarray = 2,
  bucket_subword_vocab = 3,
  quantized_array = 4,
  metadata = 5,
  ndnorms = 6,
  fasttext_subword_vocab = 7,
  explicit_subword_vocab = 8,
  floret_subword_vocab = 9,
};

std::string_view chunk_name(ChunkId id) noexcept;
// True for identifiers 1..9.
bool is_known_chunk(std::uint32_t id) noexcept;

inline constexpr std::uint32_t kTypeU8 = 1;
inline constexpr std::uint32_t kTypeF32 = 10;

// Bytes of padding before f32 data that starts after absolute position `pos`.
inline std::uint64_t padding_at(std::uint64_t pos) noexcept {
  return 4 - pos % 4;
}

// The frame of one chunk inside a file.
struct ChunkFrame {
  ChunkId id;
  std::uint64_t start;        // absolute offset of the identifier
  std::uint64_t body_offset;  // absolute offset of the body
  std::uint64_t body_length;
};

// The file header: magic, version, the number of chunk identifiers listed
// (u32), then those identifiers (u32 each).
inline constexpr char kMagic[4] = {'F', 'i', 'F', 'u'};
inline constexpr std::uint32_t kVersion = 0;
// Bytes of the header before the identifiers.
inline constexpr std::uint64_t kHeaderStartBytes = 12;

// Reads the header up to the identifiers (magic "FiFu", version 0) and
// returns how many identifiers it lists; the reader is left before them.
// Error(corrupt) for a wrong magic or a short file, Error(unsupported) for
// another version.
std::uint32_t read_header_start(modelzip::detail::ByteReader& reader);

// Reads the file header (magic "FiFu", version 0, the listed chunk
// identifiers) and returns the identifiers; the reader is left after it.
// Error(corrupt) for a wrong magic or a short file, Error(unsupported) for
// another version or an unknown identifier.
std::vector<ChunkId> read_header(modelzip::detail::ByteReader& reader);

// Reads an identifier and a length at the reader's position and checks that
// the body fits in the remaining bytes. Unknown identifiers give
// Error(unsupported). The reader is left at the start of the body.
ChunkFrame read_chunk_frame(modelzip::detail::ByteReader& reader);

// Reads a u32 data type identifier and checks it equals `expected`
// (Error(unsupported) naming `what` otherwise).
void expect_type(modelzip::detail::ByteReader& reader, std::uint32_t expected,
                 std::string_view what);

// Skips padding_at(absolute position) bytes.
void skip_padding(modelzip::detail::ByteReader& reader, std::string_view what);

// a * b, or Error(corrupt) at the reader's position naming `what`.
std::uint64_t checked_product(const modelzip::detail::ByteReader& reader, std::uint64_t a,
                              std::uint64_t b, std::string_view what);

// Checks the chunk body was consumed exactly.
void expect_chunk_end(const modelzip::detail::ByteReader& reader, const ChunkFrame& frame);

// A length-prefixed (u32) UTF-8 string. Error(corrupt) on invalid UTF-8.
std::string_view read_string(modelzip::detail::ByteReader& reader, std::string_view what);

// Destination of a writer, tracking the absolute position for padding.
class Sink {
 public:
  virtual ~Sink() = default;
  std::uint64_t position() const noexcept { return position_; }
  void bytes(const void* data, std::size_t size) {
    put(static_cast<const std::byte*>(data), size);
    position_ += size;
  }
  void u8(std::uint8_t v) { bytes(&v, 1); }
  void u32(std::uint32_t v) { bytes(&v, 4); }
  void u64(std::uint64_t v) { bytes(&v, 8); }
  void f32s(std::span<const float> v) { bytes(v.data(), v.size() * sizeof(float)); }
  void string(std::string_view s);  // u32 length + bytes
  void padding();                   // padding_at(position()) zero bytes
  void chunk_start(ChunkId id, std::uint64_t body_length) {
    u32(static_cast<std::uint32_t>(id));
    u64(body_length);
  }

 protected:
  virtual void put(const std::byte* data, std::size_t size) = 0;

 private:
  std::uint64_t position_ = 0;
};

class VectorSink final : public Sink {
 public:
  explicit VectorSink(std::vector<std::byte>& out) : out_(out) {}

 protected:
  void put(const std::byte* data, std::size_t size) override {
    out_.insert(out_.end(), data, data + size);
  }

 private:
  std::vector<std::byte>& out_;
};

// Throws Error(io) when the stream fails.
class StreamSink final : public Sink {
 public:
  explicit StreamSink(std::ostream& out) : out_(out) {}

 protected:
  void put(const std::byte* data, std::size_t size) override;

 private:
  std::ostream& out_;
};

// Counts bytes only (to compute chunk lengths).
class CountingSink final : public Sink {
 protected:
  void put(const std::byte*, std::size_t) override {}
};

}  // namespace modelzip::finalfusion::detail
