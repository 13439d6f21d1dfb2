// summarize(): the vocabulary, storage and norms of a .fifu file from the
// fixed-size fields at the start of each chunk (schemas/FINALFUSION.md
// sections 1 to 6), skipping everything else by the chunk lengths. Those
// fields are read, and checked, by the chunk readers' own field readers
// (read_vocab_fields, read_storage_fields), and the storage's rows checked
// against the vocabulary's (check_storage_rows): a summary fails where a
// full read fails on them, with the same error.
#include "finalfusion/chunk_io.hpp"
#include "finalfusion/storage_shape.hpp"
#include "finalfusion/vocab_chunks.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

namespace modelzip::finalfusion {

using modelzip::detail::ByteReader;

FileSummary summarize(const Bytes& file) {
  ByteReader reader(file.span());
  detail::read_header(reader);
  FileSummary s;
  bool have_vocab = false, have_storage = false;
  detail::ChunkId vocab_id{}, storage_id{};
  detail::VocabFields vocab;
  std::uint64_t storage_start = 0;
  while (!reader.at_end()) {
    const detail::ChunkFrame frame = detail::read_chunk_frame(reader);
    ByteReader body(reader.bytes(frame.body_length, "chunk body"), frame.body_offset);
    using detail::ChunkId;
    switch (frame.id) {
      case ChunkId::simple_vocab:
      case ChunkId::bucket_subword_vocab:
      case ChunkId::fasttext_subword_vocab:
      case ChunkId::explicit_subword_vocab:
      case ChunkId::floret_subword_vocab: {
        vocab = detail::read_vocab_fields(frame.id, body);
        vocab_id = frame.id;
        have_vocab = true;
        break;
      }
      case ChunkId::ndarray:
      case ChunkId::quantized_array: {
        const detail::StorageFields fields = detail::read_storage_fields(frame.id, body);
        s.rows = fields.rows;
        s.dims = fields.dims;
        s.quantizer = fields.quantizer;
        storage_id = frame.id;
        storage_start = frame.start;
        have_storage = true;
        break;
      }
      case ChunkId::ndnorms:
        s.norms = true;
        break;
      case ChunkId::metadata:
        s.metadata = true;
        break;
      case ChunkId::header:
        break;
    }
  }
  if (!have_vocab || !have_storage)
    throw Error(ErrorCode::corrupt,
                std::string("finalfusion file without ") + (have_vocab ? "storage" : "vocabulary") +
                    " chunk",
                ErrorContext{.offset = file.size()});
  detail::check_storage_rows(vocab_id, vocab, storage_id, s.rows, storage_start);
  s.vocab = vocab.kind;
  s.words = vocab.words;
  s.min_n = vocab.min_n;
  s.max_n = vocab.max_n;
  // An explicit vocabulary's distinct indices: the storage's rows past the
  // words (within 1 to its n-grams, as checked).
  s.subword_rows = vocab.kind == VocabKind::explicit_ngrams ? s.rows - vocab.words : vocab.buckets;
  return s;
}

std::string summary_text(const FileSummary& s) {
  std::string t(vocab_kind_name(s.vocab));
  if (s.vocab != VocabKind::floret) t += " " + std::to_string(s.words) + " words";
  if (s.vocab != VocabKind::simple) {
    t += (s.vocab == VocabKind::floret ? " " : " + ") + std::to_string(s.subword_rows) +
         (s.vocab == VocabKind::explicit_ngrams ? " n-gram rows" : " buckets");
    t += " (n " + std::to_string(s.min_n) + "-" + std::to_string(s.max_n) + ")";
  }
  t += "; " + std::to_string(s.dims) + " dims, ";
  if (s.quantizer)
    t += "quantized (" + std::to_string(s.quantizer->n_subquantizers) + " x " +
         std::to_string(s.quantizer->n_centroids) + ")";
  else
    t += "array";
  t += s.norms ? ", norms" : ", no norms";
  return t;
}

std::string summary_json(const FileSummary& s) {
  auto boolean = [](bool b) { return b ? std::string("true") : std::string("false"); };
  std::string j =
      "{\"vocab\": \"" + std::string(vocab_kind_name(s.vocab)) +
      "\", \"words\": " + std::to_string(s.words) +
      ", \"subword_rows\": " + std::to_string(s.subword_rows) +
      ", \"min_n\": " + std::to_string(s.min_n) + ", \"max_n\": " + std::to_string(s.max_n) +
      ", \"rows\": " + std::to_string(s.rows) + ", \"dims\": " + std::to_string(s.dims) +
      ", \"storage\": \"" + (s.quantizer ? "quantized" : "array") + "\", \"quantizer\": ";
  if (s.quantizer)
    j += "{\"subquantizers\": " + std::to_string(s.quantizer->n_subquantizers) +
         ", \"centroids\": " + std::to_string(s.quantizer->n_centroids) +
         ", \"projection\": " + boolean(s.quantizer->has_projection) +
         ", \"norms\": " + boolean(s.quantizer->has_norms) + "}";
  else
    j += "null";
  return j + ", \"norms\": " + boolean(s.norms) + ", \"metadata\": " + boolean(s.metadata) + "}";
}

}  // namespace modelzip::finalfusion
