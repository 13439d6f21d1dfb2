// Chunk 1, SimpleVocab: vocab_len u64, then vocab_len words.
#include "finalfusion/vocab_chunks.hpp"

namespace modelzip::finalfusion::detail {

VocabFields read_simple_fields(modelzip::detail::ByteReader& body) {
  VocabFields f;
  f.kind = VocabKind::simple;
  f.words = body.read<std::uint64_t>("SimpleVocab length");
  check_item_count(body, f.words, "SimpleVocab word");
  return f;
}

Vocab read_simple_vocab(modelzip::detail::ByteReader& body) {
  const Failure failure = corrupt_at(body);
  const VocabFields fields = read_simple_fields(body);
  auto words = read_words(body, fields.words, "SimpleVocab word");
  return Vocab::Access::make(make_simple_vocab(std::move(words), failure));
}

void write_simple_vocab(Sink& sink, const VocabImpl& vocab) {
  sink.chunk_start(ChunkId::simple_vocab, 8 + words_size(vocab.words));
  sink.u64(vocab.words.size());
  write_words(sink, vocab.words);
}

}  // namespace modelzip::finalfusion::detail
