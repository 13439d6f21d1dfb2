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

void check_storage_rows(ChunkId vocab_id, const VocabFields& vocab, ChunkId storage,
                        std::uint64_t rows, std::uint64_t storage_start) {
  // words <= the chunk's bytes / 4 (check_item_count) and buckets <= 2^63:
  // words + buckets does not wrap; words + ngrams is capped.
  std::uint64_t least = vocab.words + vocab.buckets, most = least;
  std::string declared;
  if (vocab.kind != VocabKind::floret) declared = std::to_string(vocab.words) + " words";
  if (vocab.kind == VocabKind::explicit_ngrams) {
    declared += " and " + std::to_string(vocab.ngrams) + " n-grams";
    least = vocab.words + (vocab.ngrams ? 1 : 0);
    most = vocab.ngrams > UINT64_MAX - vocab.words ? UINT64_MAX : vocab.words + vocab.ngrams;
  } else if (vocab.kind != VocabKind::simple) {
    declared += (declared.empty() ? "" : " + ") + std::to_string(vocab.buckets) + " buckets";
  }
  if (rows >= least && rows <= most) return;
  if (vocab.kind != VocabKind::simple)
    declared += " = " +
                (least == most ? std::to_string(least)
                               : std::to_string(least) + " to " + std::to_string(most)) +
                " rows";
  throw Error(ErrorCode::corrupt,
              std::string(chunk_name(storage)) + " chunk has " + std::to_string(rows) +
                  " rows, but " + std::string(chunk_name(vocab_id)) + " declares " + declared,
              ErrorContext{.offset = storage_start});
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
