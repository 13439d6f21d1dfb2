// Chunk 1, SimpleVocab: vocab_len u64, then vocab_len words.
#include "finalfusion/vocab_chunks.hpp"

namespace modelzip::finalfusion::detail {

Vocab read_simple_vocab(modelzip::detail::ByteReader& body) {
  const Failure failure = corrupt_at(body);
  const auto count = body.read<std::uint64_t>("SimpleVocab length");
  auto words = read_words(body, count, "SimpleVocab word");
  return Vocab::Access::make(make_simple_vocab(std::move(words), failure));
}

void write_simple_vocab(Sink& sink, const VocabImpl& vocab) {
  sink.chunk_start(ChunkId::simple_vocab, 8 + words_size(vocab.words));
  sink.u64(vocab.words.size());
  write_words(sink, vocab.words);
}

}  // namespace modelzip::finalfusion::detail
