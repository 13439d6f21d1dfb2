// Reading and writing the vocabulary chunks. Readers take a ByteReader over
// exactly the chunk body (its base offset is the body's absolute offset) and
// must consume it completely.
#pragma once

#include "finalfusion/chunk_io.hpp"
#include "finalfusion/vocab_impl.hpp"

namespace modelzip::finalfusion::detail {

// Shared by all vocabulary chunks: `count` words, each a u32 byte length
// and UTF-8 bytes. The count is checked against the remaining bytes before
// anything is allocated.
std::vector<std::string> read_words(modelzip::detail::ByteReader& body, std::uint64_t count,
                                    std::string_view what);
void write_words(Sink& sink, const std::vector<std::string>& words);
// Bytes write_words produces.
std::uint64_t words_size(const std::vector<std::string>& words);

// Error(corrupt) naming `what` unless `count` items of at least 4 bytes each
// (a word's u32 length) fit in the rest of `body`; read_words checks it first.
void check_item_count(const modelzip::detail::ByteReader& body, std::uint64_t count,
                      std::string_view what);

// A Failure that reports Error(corrupt) at the body's start.
Failure corrupt_at(const modelzip::detail::ByteReader& body);

// The fixed fields at the start of a vocabulary chunk's body, before its
// words (schemas/FINALFUSION.md section 2): all a summary needs. Each
// chunk's reader below reads them through its read_*_fields, the one place
// that parses them, which also checks them as the reader does, with the
// same errors: the n-gram range, the buckets, floret's hashes and markers,
// and that the declared words fit in the rest of the body. The reader is
// left before the words (floret, which has none: at the chunk's end).
struct VocabFields {
  VocabKind kind = VocabKind::simple;
  std::uint64_t words = 0;          // declared words (floret: 0)
  std::uint64_t ngrams = 0;         // explicit_ngrams: declared n-grams
  std::uint32_t min_n = 0;          // not simple
  std::uint32_t max_n = 0;          // not simple
  std::uint32_t buckets_field = 0;  // bucket_subwords: the exponent; fasttext: the count
  std::uint64_t buckets = 0;        // subword rows: bucket_subwords, fasttext_subwords, floret
  std::uint32_t hashes = 0;         // floret
  std::uint32_t seed = 0;           // floret
  std::string bow, eow;             // floret
};

// Error(corrupt) at `storage_start` (the storage chunk's offset) unless the
// storage chunk `storage` of `rows` rows has the rows the vocabulary chunk
// `vocab_id` with `vocab` declares: words + buckets (floret: buckets), or for
// explicit n-grams words + 1 to ngrams (its distinct indices; words when it
// has no n-grams). The message names both chunks and the numbers. Summaries
// and Embeddings::read check it before they read the storage.
void check_storage_rows(ChunkId vocab_id, const VocabFields& vocab, ChunkId storage,
                        std::uint64_t rows, std::uint64_t storage_start);

VocabFields read_simple_fields(modelzip::detail::ByteReader& body);
VocabFields read_bucket_fields(modelzip::detail::ByteReader& body);
VocabFields read_fasttext_fields(modelzip::detail::ByteReader& body);
VocabFields read_explicit_fields(modelzip::detail::ByteReader& body);
VocabFields read_floret_fields(modelzip::detail::ByteReader& body);
// The read_*_fields of chunk `id`; Error(corrupt) when it is no vocabulary.
VocabFields read_vocab_fields(ChunkId id, modelzip::detail::ByteReader& body);

Vocab read_simple_vocab(modelzip::detail::ByteReader& body);
Vocab read_bucket_vocab(modelzip::detail::ByteReader& body);
Vocab read_fasttext_vocab(modelzip::detail::ByteReader& body);
Vocab read_explicit_vocab(modelzip::detail::ByteReader& body);
Vocab read_floret_vocab(modelzip::detail::ByteReader& body);

void write_simple_vocab(Sink& sink, const VocabImpl& vocab);
void write_bucket_vocab(Sink& sink, const VocabImpl& vocab);
void write_fasttext_vocab(Sink& sink, const VocabImpl& vocab);
void write_explicit_vocab(Sink& sink, const VocabImpl& vocab);
void write_floret_vocab(Sink& sink, const VocabImpl& vocab);

ChunkId vocab_chunk_id(VocabKind kind) noexcept;
bool is_vocab_chunk(ChunkId id) noexcept;
Vocab read_vocab_chunk(ChunkId id, modelzip::detail::ByteReader& body);
void write_vocab_chunk(Sink& sink, const VocabImpl& vocab);

}  // namespace modelzip::finalfusion::detail
