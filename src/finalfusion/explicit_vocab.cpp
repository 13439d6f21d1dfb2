// Chunk 8, ExplicitSubwordVocab: words_len u64, ngrams_len u64, min_n u32,
// max_n u32, words_len words, then ngrams_len times {n-gram string, index
// u64}. Indices are renumbered by order of first appearance when read;
// storage rows: words + number of distinct indices.
#include "finalfusion/vocab_chunks.hpp"

namespace modelzip::finalfusion::detail {

VocabFields read_explicit_fields(modelzip::detail::ByteReader& body) {
  const Failure failure = corrupt_at(body);
  VocabFields f;
  f.kind = VocabKind::explicit_ngrams;
  f.words = body.read<std::uint64_t>("ExplicitSubwordVocab words length");
  f.ngrams = body.read<std::uint64_t>("ExplicitSubwordVocab n-grams length");
  f.min_n = body.read<std::uint32_t>("ExplicitSubwordVocab min_n");
  f.max_n = body.read<std::uint32_t>("ExplicitSubwordVocab max_n");
  check_ngram_range(f.min_n, f.max_n, failure);
  check_item_count(body, f.words, "ExplicitSubwordVocab word");
  return f;
}

Vocab read_explicit_vocab(modelzip::detail::ByteReader& body) {
  const Failure failure = corrupt_at(body);
  const VocabFields fields = read_explicit_fields(body);
  const std::uint64_t ngrams_len = fields.ngrams;
  auto words = read_words(body, fields.words, "ExplicitSubwordVocab word");
  // Each n-gram takes at least 4 + 8 bytes.
  if (ngrams_len > body.remaining() / 12)
    body.fail("ExplicitSubwordVocab n-grams",
              "declares " + std::to_string(ngrams_len) + " n-grams, but only " +
                  std::to_string(body.remaining()) + " bytes are left in the chunk");
  std::vector<std::pair<std::string, std::uint64_t>> ngrams;
  ngrams.reserve(static_cast<std::size_t>(ngrams_len));
  for (std::uint64_t i = 0; i < ngrams_len; ++i) {
    std::string ngram(read_string(body, "ExplicitSubwordVocab n-gram"));
    const auto index = body.read<std::uint64_t>("ExplicitSubwordVocab n-gram index");
    ngrams.emplace_back(std::move(ngram), index);
  }
  return Vocab::Access::make(make_explicit_vocab(std::move(words), fields.min_n, fields.max_n,
                                                 std::move(ngrams), failure));
}

void write_explicit_vocab(Sink& sink, const VocabImpl& vocab) {
  std::uint64_t ngram_bytes = 0;
  for (const auto& g : vocab.ngrams) ngram_bytes += 4 + g.size() + 8;
  sink.chunk_start(ChunkId::explicit_subword_vocab,
                   8 + 8 + 4 + 4 + words_size(vocab.words) + ngram_bytes);
  sink.u64(vocab.words.size());
  sink.u64(vocab.ngrams.size());
  sink.u32(vocab.min_n);
  sink.u32(vocab.max_n);
  write_words(sink, vocab.words);
  for (std::size_t i = 0; i < vocab.ngrams.size(); ++i) {
    sink.string(vocab.ngrams[i]);
    sink.u64(vocab.ngram_rows[i]);
  }
}

}  // namespace modelzip::finalfusion::detail
