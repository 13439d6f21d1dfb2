// Chunk 7, FastTextSubwordVocab: vocab_len u64, min_n u32, max_n u32,
// n_buckets u32, then vocab_len words. Storage rows: words + n_buckets.
#include "finalfusion/vocab_chunks.hpp"

namespace modelzip::finalfusion::detail {

Vocab read_fasttext_vocab(modelzip::detail::ByteReader& body) {
  const Failure failure = corrupt_at(body);
  const auto count = body.read<std::uint64_t>("FastTextSubwordVocab length");
  const auto min_n = body.read<std::uint32_t>("FastTextSubwordVocab min_n");
  const auto max_n = body.read<std::uint32_t>("FastTextSubwordVocab max_n");
  const auto buckets = body.read<std::uint32_t>("FastTextSubwordVocab buckets");
  auto words = read_words(body, count, "FastTextSubwordVocab word");
  return Vocab::Access::make(make_fasttext_vocab(std::move(words), min_n, max_n, buckets, failure));
}

void write_fasttext_vocab(Sink& sink, const VocabImpl& vocab) {
  sink.chunk_start(ChunkId::fasttext_subword_vocab, 8 + 12 + words_size(vocab.words));
  sink.u64(vocab.words.size());
  sink.u32(vocab.min_n);
  sink.u32(vocab.max_n);
  sink.u32(static_cast<std::uint32_t>(vocab.n_buckets));
  write_words(sink, vocab.words);
}

}  // namespace modelzip::finalfusion::detail
