// Chunk 9, FloretSubwordVocab (as finalfusion-rust writes it): min_n u32,
// max_n u32, n_buckets u64, n_hashes u32 (1..4), seed u32, bow string, eow
// string (u32 length + UTF-8). There are no words; storage rows: n_buckets.
#include "finalfusion/vocab_chunks.hpp"

namespace modelzip::finalfusion::detail {

VocabFields read_floret_fields(modelzip::detail::ByteReader& body) {
  const Failure failure = corrupt_at(body);
  VocabFields f;
  f.kind = VocabKind::floret;
  f.min_n = body.read<std::uint32_t>("FloretSubwordVocab min_n");
  f.max_n = body.read<std::uint32_t>("FloretSubwordVocab max_n");
  f.buckets = body.read<std::uint64_t>("FloretSubwordVocab buckets");
  f.hashes = body.read<std::uint32_t>("FloretSubwordVocab hashes");
  f.seed = body.read<std::uint32_t>("FloretSubwordVocab seed");
  f.bow = read_string(body, "FloretSubwordVocab begin-of-word marker");
  f.eow = read_string(body, "FloretSubwordVocab end-of-word marker");
  check_ngram_range(f.min_n, f.max_n, failure);
  check_floret_parameters(f.buckets, f.hashes, f.bow, f.eow, failure);
  return f;
}

Vocab read_floret_vocab(modelzip::detail::ByteReader& body) {
  const Failure failure = corrupt_at(body);
  VocabFields f = read_floret_fields(body);
  return Vocab::Access::make(make_floret_vocab(f.min_n, f.max_n, f.buckets, f.hashes, f.seed,
                                               std::move(f.bow), std::move(f.eow), failure));
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
