// Chunk 9, FloretSubwordVocab (as finalfusion-rust writes it): min_n u32,
// max_n u32, n_buckets u64, n_hashes u32 (1..4), seed u32, bow string, eow
// string (u32 length + UTF-8). There are no words; storage rows: n_buckets.
#include "finalfusion/vocab_chunks.hpp"

namespace modelzip::finalfusion::detail {

Vocab read_floret_vocab(modelzip::detail::ByteReader& body) {
  const Failure failure = corrupt_at(body);
  const auto min_n = body.read<std::uint32_t>("FloretSubwordVocab min_n");
  const auto max_n = body.read<std::uint32_t>("FloretSubwordVocab max_n");
  const auto buckets = body.read<std::uint64_t>("FloretSubwordVocab buckets");
  const auto hashes = body.read<std::uint32_t>("FloretSubwordVocab hashes");
  const auto seed = body.read<std::uint32_t>("FloretSubwordVocab seed");
  std::string bow(read_string(body, "FloretSubwordVocab begin-of-word marker"));
  std::string eow(read_string(body, "FloretSubwordVocab end-of-word marker"));
  return Vocab::Access::make(make_floret_vocab(min_n, max_n, buckets, hashes, seed, std::move(bow),
                                               std::move(eow), failure));
}

void write_floret_vocab(Sink& sink, const VocabImpl& vocab) {
  sink.chunk_start(ChunkId::floret_subword_vocab,
                   4 + 4 + 8 + 4 + 4 + 4 + vocab.bow.size() + 4 + vocab.eow.size());
  sink.u32(vocab.min_n);
  sink.u32(vocab.max_n);
  sink.u64(vocab.n_buckets);
  sink.u32(vocab.n_hashes);
  sink.u32(vocab.seed);
  sink.string(vocab.bow);
  sink.string(vocab.eow);
}

}  // namespace modelzip::finalfusion::detail
