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

// A Failure that reports Error(corrupt) at the body's start.
Failure corrupt_at(const modelzip::detail::ByteReader& body);

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
