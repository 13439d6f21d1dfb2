// Chunk 3, BucketSubwordVocab (finalfusion n-gram buckets). As real files
// have it: vocab_len u64, min_n u32, max_n u32, bucket exponent u32, then
// vocab_len words. Storage rows: words + 2^exponent.
#include "finalfusion/vocab_chunks.hpp"

namespace modelzip::finalfusion::detail {

Vocab read_bucket_vocab(modelzip::detail::ByteReader& body) {
  const Failure failure = corrupt_at(body);
  const auto count = body.read<std::uint64_t>("BucketSubwordVocab length");
  const auto min_n = body.read<std::uint32_t>("BucketSubwordVocab min_n");
  const auto max_n = body.read<std::uint32_t>("BucketSubwordVocab max_n");
  const auto exponent = body.read<std::uint32_t>("BucketSubwordVocab bucket exponent");
  auto words = read_words(body, count, "BucketSubwordVocab word");
  return Vocab::Access::make(make_bucket_vocab(std::move(words), min_n, max_n, exponent, failure));
}

void write_bucket_vocab(Sink& sink, const VocabImpl& vocab) {
  sink.chunk_start(ChunkId::bucket_subword_vocab, 8 + 12 + words_size(vocab.words));
  sink.u64(vocab.words.size());
  sink.u32(vocab.min_n);
  sink.u32(vocab.max_n);
  sink.u32(vocab.bucket_exponent);
  write_words(sink, vocab.words);
}

}  // namespace modelzip::finalfusion::detail
