#include "finalfusion/vocab_chunks.hpp"

namespace modelzip::finalfusion::detail {

using modelzip::detail::ByteReader;

void check_item_count(const ByteReader& body, std::uint64_t count, std::string_view what) {
  if (count > body.remaining() / 4)
    body.fail(what, "declares " + std::to_string(count) + " items, but only " +
                        std::to_string(body.remaining()) + " bytes are left in the chunk");
}

std::vector<std::string> read_words(ByteReader& body, std::uint64_t count, std::string_view what) {
  check_item_count(body, count, what);
  std::vector<std::string> words;
  words.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t i = 0; i < count; ++i) words.emplace_back(read_string(body, what));
  return words;
}

void write_words(Sink& sink, const std::vector<std::string>& words) {
  for (const auto& w : words) sink.string(w);
}

std::uint64_t words_size(const std::vector<std::string>& words) {
  std::uint64_t n = 0;
  for (const auto& w : words) n += 4 + w.size();
  return n;
}

Failure corrupt_at(const ByteReader& body) {
  return Failure{ErrorCode::corrupt, ErrorContext{.offset = body.absolute_position()}};
}

ChunkId vocab_chunk_id(VocabKind kind) noexcept {
  switch (kind) {
    case VocabKind::simple:
      return ChunkId::simple_vocab;
    case VocabKind::bucket_subwords:
      return ChunkId::bucket_subword_vocab;
    case VocabKind::fasttext_subwords:
      return ChunkId::fasttext_subword_vocab;
    case VocabKind::explicit_ngrams:
      return ChunkId::explicit_subword_vocab;
    case VocabKind::floret:
      return ChunkId::floret_subword_vocab;
  }
  return ChunkId::simple_vocab;
}

bool is_vocab_chunk(ChunkId id) noexcept {
  return id == ChunkId::simple_vocab || id == ChunkId::bucket_subword_vocab ||
         id == ChunkId::fasttext_subword_vocab || id == ChunkId::explicit_subword_vocab ||
         id == ChunkId::floret_subword_vocab;
}

Vocab read_vocab_chunk(ChunkId id, ByteReader& body) {
  switch (id) {
    case ChunkId::simple_vocab:
      return read_simple_vocab(body);
    case ChunkId::bucket_subword_vocab:
      return read_bucket_vocab(body);
    case ChunkId::fasttext_subword_vocab:
      return read_fasttext_vocab(body);
    case ChunkId::explicit_subword_vocab:
      return read_explicit_vocab(body);
    case ChunkId::floret_subword_vocab:
      return read_floret_vocab(body);
    default:
      break;
  }
  body.fail(chunk_name(id), "is not a vocabulary chunk");
}

VocabFields read_vocab_fields(ChunkId id, ByteReader& body) {
  switch (id) {
    case ChunkId::simple_vocab:
      return read_simple_fields(body);
    case ChunkId::bucket_subword_vocab:
      return read_bucket_fields(body);
    case ChunkId::fasttext_subword_vocab:
      return read_fasttext_fields(body);
    case ChunkId::explicit_subword_vocab:
      return read_explicit_fields(body);
    case ChunkId::floret_subword_vocab:
      return read_floret_fields(body);
    default:
      break;
  }
  body.fail(chunk_name(id), "is not a vocabulary chunk");
}

void write_vocab_chunk(Sink& sink, const VocabImpl& vocab) {
  switch (vocab.kind) {
    case VocabKind::simple:
      return write_simple_vocab(sink, vocab);
    case VocabKind::bucket_subwords:
      return write_bucket_vocab(sink, vocab);
    case VocabKind::fasttext_subwords:
      return write_fasttext_vocab(sink, vocab);
    case VocabKind::explicit_ngrams:
      return write_explicit_vocab(sink, vocab);
    case VocabKind::floret:
      return write_floret_vocab(sink, vocab);
  }
}

}  // namespace modelzip::finalfusion::detail
