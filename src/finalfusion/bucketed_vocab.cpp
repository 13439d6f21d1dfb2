// Chunks 3, BucketSubwordVocab (finalfusion n-gram buckets), and 7,
// FastTextSubwordVocab: one layout, as real files have it: vocab_len u64,
// min_n u32, max_n u32, buckets u32, then vocab_len words. Chunk 3's
// buckets field is an exponent (storage rows: words + 2^exponent), chunk
// 7's the bucket count (storage rows: words + buckets).
#include "finalfusion/vocab_chunks.hpp"

namespace modelzip::finalfusion::detail {
namespace {

using MakeVocab = std::shared_ptr<VocabImpl> (*)(std::vector<std::string> words,
                                                 std::uint32_t min_n, std::uint32_t max_n,
                                                 std::uint32_t buckets, const Failure& f);

// The fixed fields of chunk `id`; `buckets_what` names its buckets field in
// errors.
VocabFields read_bucketed_fields(modelzip::detail::ByteReader& body, ChunkId id,
                                 std::string_view buckets_what) {
  const Failure failure = corrupt_at(body);
  const std::string chunk(chunk_name(id));
  VocabFields f;
  const bool exponent = id == ChunkId::bucket_subword_vocab;
  f.kind = exponent ? VocabKind::bucket_subwords : VocabKind::fasttext_subwords;
  f.words = body.read<std::uint64_t>(chunk + " length");
  f.min_n = body.read<std::uint32_t>(chunk + " min_n");
  f.max_n = body.read<std::uint32_t>(chunk + " max_n");
  f.buckets_field = body.read<std::uint32_t>(chunk + " " + std::string(buckets_what));
  check_ngram_range(f.min_n, f.max_n, failure);
  if (exponent) {
    f.buckets = bucket_count(f.buckets_field, failure);
  } else {
    check_fasttext_buckets(f.buckets_field, failure);
    f.buckets = f.buckets_field;
  }
  check_item_count(body, f.words, chunk + " word");
  return f;
}

// The vocabulary of chunk `id` (fields as read_bucketed_fields), made by
// `make`.
Vocab read_bucketed(modelzip::detail::ByteReader& body, ChunkId id, std::string_view buckets_what,
                    MakeVocab make) {
  const Failure failure = corrupt_at(body);
  const VocabFields f = read_bucketed_fields(body, id, buckets_what);
  auto words = read_words(body, f.words, std::string(chunk_name(id)) + " word");
  return Vocab::Access::make(make(std::move(words), f.min_n, f.max_n, f.buckets_field, failure));
}

void write_bucketed(Sink& sink, ChunkId id, const VocabImpl& vocab, std::uint32_t buckets) {
  sink.chunk_start(id, 8 + 12 + words_size(vocab.words));
  sink.u64(vocab.words.size());
  sink.u32(vocab.min_n);
  sink.u32(vocab.max_n);
  sink.u32(buckets);
  write_words(sink, vocab.words);
}

}  // namespace

VocabFields read_bucket_fields(modelzip::detail::ByteReader& body) {
  return read_bucketed_fields(body, ChunkId::bucket_subword_vocab, "bucket exponent");
}

VocabFields read_fasttext_fields(modelzip::detail::ByteReader& body) {
  return read_bucketed_fields(body, ChunkId::fasttext_subword_vocab, "buckets");
}

Vocab read_bucket_vocab(modelzip::detail::ByteReader& body) {
  return read_bucketed(body, ChunkId::bucket_subword_vocab, "bucket exponent", &make_bucket_vocab);
}

void write_bucket_vocab(Sink& sink, const VocabImpl& vocab) {
  write_bucketed(sink, ChunkId::bucket_subword_vocab, vocab, vocab.bucket_exponent);
}

Vocab read_fasttext_vocab(modelzip::detail::ByteReader& body) {
  return read_bucketed(body, ChunkId::fasttext_subword_vocab, "buckets", &make_fasttext_vocab);
}

void write_fasttext_vocab(Sink& sink, const VocabImpl& vocab) {
  write_bucketed(sink, ChunkId::fasttext_subword_vocab, vocab,
                 static_cast<std::uint32_t>(vocab.n_buckets));
}

}  // namespace modelzip::finalfusion::detail
