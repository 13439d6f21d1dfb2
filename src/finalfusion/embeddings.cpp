// Embeddings: reading a whole .fifu file, writing it, and accessors.
// Queries are in queries.cpp, quantization in quantize.cpp.
#include <cmath>
#include <cstring>
#include <ostream>

#include "core/kept_symbol.hpp"
#include "finalfusion/embeddings_state.hpp"
#include "finalfusion/metadata_chunk.hpp"
#include "finalfusion/storage_shape.hpp"
#include "finalfusion/vocab_chunks.hpp"
#include "io/atomic_write.hpp"
#include "io/mapped_file.hpp"
#include "remote/remote_source.hpp"

namespace modelzip::finalfusion {
namespace detail {

using modelzip::detail::ByteReader;

void refuse_url(const std::filesystem::path& path) {
  remote::refuse_url_of_file(path.native(), "embedding");
}

namespace {

std::string ids_text(const std::vector<ChunkId>& ids) {
  std::string s;
  for (auto id : ids) {
    if (!s.empty()) s += ", ";
    s += chunk_name(id);
  }
  return "[" + s + "]";
}

std::shared_ptr<EmbeddingsState> parse_file(const Bytes& file) {
  ByteReader reader(file.span());
  const auto header = read_header(reader);
  auto state = std::make_shared<EmbeddingsState>();
  std::vector<ChunkId> seen;
  bool have_vocab = false, have_storage = false;
  ChunkId vocab_id{};
  VocabFields vocab_fields;  // what the storage's rows are checked against
  while (!reader.at_end()) {
    const ChunkFrame frame = read_chunk_frame(reader);
    const std::string name(chunk_name(frame.id));
    ByteReader body(file.span().subspan(frame.body_offset, frame.body_length), frame.body_offset);
    auto unexpected = [&](const std::string& why) {
      throw Error(ErrorCode::corrupt, name + " chunk " + why, ErrorContext{.offset = frame.start});
    };
    if (frame.id == ChunkId::metadata) {
      if (!seen.empty()) unexpected("must come first");
      state->metadata = read_metadata(body);
    } else if (is_vocab_chunk(frame.id)) {
      if (have_vocab) unexpected("follows another vocabulary");
      ByteReader fields = body;
      vocab_fields = read_vocab_fields(frame.id, fields);
      vocab_id = frame.id;
      state->vocab = read_vocab_chunk(frame.id, body);
      have_vocab = true;
    } else if (frame.id == ChunkId::ndarray || frame.id == ChunkId::quantized_array) {
      if (!have_vocab) unexpected("precedes the vocabulary");
      if (have_storage) unexpected("follows another storage chunk");
      ByteReader fields = body;
      check_storage_rows(vocab_id, vocab_fields, frame.id,
                         read_storage_fields(frame.id, fields).rows, frame.start);
      if (frame.id == ChunkId::ndarray) {
        state->storage.dense = read_ndarray(body, file);
      } else {
        state->storage.quantized = true;
        state->storage.pq = read_quantized(body, file);
      }
      have_storage = true;
    } else if (frame.id == ChunkId::ndnorms) {
      if (!have_storage) unexpected("precedes the storage");
      if (state->has_norms) unexpected("appears twice");
      state->norms = read_norms(body, file);
      state->has_norms = true;
    } else {
      unexpected("is not expected in an embeddings file");
    }
    expect_chunk_end(body, frame);
    reader.skip(frame.body_length, "chunk body");
    seen.push_back(frame.id);
  }
  if (!have_vocab || !have_storage)
    throw Error(ErrorCode::corrupt,
                std::string("finalfusion file without ") + (have_vocab ? "storage" : "vocabulary") +
                    " chunk",
                ErrorContext{.offset = file.size()});
  // Older writers append NdNorms without listing it in the header.
  auto listed = seen;
  if (header.size() + 1 == seen.size() && seen.back() == ChunkId::ndnorms) listed.pop_back();
  if (listed != header)
    throw Error(ErrorCode::corrupt,
                "header lists chunks " + ids_text(header) + " but the file has " + ids_text(seen),
                ErrorContext{.offset = 12});
  check_consistency(*state, Failure{ErrorCode::corrupt, {}});
  return state;
}

}  // namespace

void check_consistency(const EmbeddingsState& state, const Failure& failure) {
  const std::uint64_t rows = state.storage.rows();
  if (state.vocab.rows() != rows)
    throw Error(failure.code,
                "vocabulary needs " + std::to_string(state.vocab.rows()) + " storage rows (" +
                    std::to_string(state.vocab.words_len()) + " words + " +
                    std::to_string(state.vocab.rows() - state.vocab.words_len()) +
                    " subword rows), storage has " + std::to_string(rows),
                failure.context);
  if (state.has_norms && state.norms.size() != state.vocab.words_len())
    throw Error(failure.code,
                std::to_string(state.norms.size()) + " norms for " +
                    std::to_string(state.vocab.words_len()) + " words",
                failure.context);
}

void write_file(Sink& sink, const EmbeddingsState& state) {
  std::vector<ChunkId> ids;
  if (state.metadata) ids.push_back(ChunkId::metadata);
  ids.push_back(vocab_chunk_id(state.vocab.kind()));
  ids.push_back(state.storage.quantized ? ChunkId::quantized_array : ChunkId::ndarray);
  if (state.has_norms) ids.push_back(ChunkId::ndnorms);
  sink.bytes(kMagic, 4);
  sink.u32(kVersion);
  sink.u32(static_cast<std::uint32_t>(ids.size()));
  for (auto id : ids) sink.u32(static_cast<std::uint32_t>(id));
  if (state.metadata) write_metadata(sink, *state.metadata);
  write_vocab_chunk(sink, Vocab::Access::impl(state.vocab));
  if (state.storage.quantized)
    write_quantized(sink, state.storage.pq);
  else
    write_ndarray(sink, state.storage.dense);
  if (state.has_norms) write_norms(sink, state.norms.span());
}

}  // namespace detail

using detail::EmbeddingsState;

Embeddings::Embeddings(std::shared_ptr<const EmbeddingsState> state) : state_(std::move(state)) {}

Embeddings Embeddings::read(Bytes file, std::string name) {
  try {
    auto state = detail::parse_file(file);
    state->name = std::move(name);
    state->file = std::move(file);
    return Embeddings::Access::make(std::move(state));
  } catch (const Error& e) {
    throw e.with_context(ErrorContext{.entry = name});
  }
}

Embeddings Embeddings::open(const std::filesystem::path& path,
                            const EmbeddingsOpenOptions& options) {
  detail::refuse_url(path);
  Bytes bytes = options.mmap ? io::map_file(path) : io::read_file(path);
  try {
    auto state = detail::parse_file(bytes);
    state->name = path.string();
    state->file = std::move(bytes);
    return Embeddings::Access::make(std::move(state));
  } catch (const Error& e) {
    throw e.with_context(ErrorContext{.archive = path.string()});
  }
}

Embeddings Embeddings::from_matrix(Vocab vocab, std::vector<float> matrix, std::size_t dims,
                                   std::optional<std::vector<float>> norms,
                                   std::optional<EmbeddingsMetadata> metadata) {
  auto state = std::make_shared<EmbeddingsState>();
  const std::uint64_t rows = vocab.rows();
  if (dims == 0 ? !matrix.empty() : matrix.size() % dims != 0 || matrix.size() / dims != rows)
    throw Error(ErrorCode::invalid_argument, "matrix of " + std::to_string(matrix.size()) +
                                                 " values is not " + std::to_string(rows) +
                                                 " rows x " + std::to_string(dims) + " dims");
  state->vocab = std::move(vocab);
  state->storage.dense.rows = static_cast<std::size_t>(rows);
  state->storage.dense.cols = dims;
  state->storage.dense.data = detail::SharedArray<float>::owned(std::move(matrix));
  if (norms) {
    state->norms = detail::SharedArray<float>::owned(std::move(*norms));
    state->has_norms = true;
  }
  state->metadata = std::move(metadata);
  detail::check_consistency(*state, detail::Failure{ErrorCode::invalid_argument, {}});
  return Embeddings::Access::make(std::move(state));
}

void Embeddings::write(std::ostream& out) const {
  detail::StreamSink sink(out);
  if (!state_->file.empty())
    sink.bytes(state_->file.data(), state_->file.size());
  else
    detail::write_file(sink, *state_);
}

Bytes Embeddings::to_bytes() const {
  if (!state_->file.empty()) return state_->file;
  std::vector<std::byte> out;
  detail::VectorSink sink(out);
  detail::write_file(sink, *state_);
  return Bytes::take(std::move(out));
}

void Embeddings::save(const std::filesystem::path& path, bool durable) const {
  io::write_file_atomically(
      path, [&](std::ostream& out) { write(out); }, durable);
}

namespace {
std::shared_ptr<EmbeddingsState> copy_state(const EmbeddingsState& s) {
  auto c = std::make_shared<EmbeddingsState>();
  c->name = s.name;
  c->vocab = s.vocab;
  c->metadata = s.metadata;
  c->storage = s.storage;
  c->norms = s.norms;
  c->has_norms = s.has_norms;
  return c;
}
}  // namespace

Embeddings Embeddings::with_metadata(std::optional<EmbeddingsMetadata> metadata) const {
  auto c = copy_state(*state_);
  c->metadata = std::move(metadata);
  return Embeddings::Access::make(std::move(c));
}

Embeddings Embeddings::with_norms(std::optional<std::vector<float>> norms) const {
  auto c = copy_state(*state_);
  c->has_norms = norms.has_value();
  c->norms =
      norms ? detail::SharedArray<float>::owned(std::move(*norms)) : detail::SharedArray<float>{};
  detail::check_consistency(*c, detail::Failure{ErrorCode::invalid_argument, {}});
  return Embeddings::Access::make(std::move(c));
}

const std::string& Embeddings::name() const& noexcept {
  return state_->name;
}
std::string Embeddings::name() const&& {
  return state_->name;
}
const Vocab& Embeddings::vocab() const& noexcept {
  return state_->vocab;
}
Vocab Embeddings::vocab() const&& noexcept {
  return state_->vocab;
}
std::size_t Embeddings::dims() const noexcept {
  return state_->storage.dims();
}
std::size_t Embeddings::rows() const noexcept {
  return state_->storage.rows();
}
const std::optional<EmbeddingsMetadata>& Embeddings::metadata() const& noexcept {
  return state_->metadata;
}
std::optional<EmbeddingsMetadata> Embeddings::metadata() const&& {
  return state_->metadata;
}
// 0.1.0's unqualified forms (core/kept_symbol.hpp).
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip11finalfusion10Embeddings4nameB5cxx11Ev,
                     _ZNKR8modelzip11finalfusion10Embeddings4nameB5cxx11Ev);
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip11finalfusion10Embeddings5vocabEv,
                     _ZNKR8modelzip11finalfusion10Embeddings5vocabEv);
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip11finalfusion10Embeddings8metadataEv,
                     _ZNKR8modelzip11finalfusion10Embeddings8metadataEv);
std::span<const float> Embeddings::norms() const& noexcept {
  return state_->norms.span();
}
bool Embeddings::has_norms() const noexcept {
  return state_->has_norms;
}
bool Embeddings::quantized() const noexcept {
  return state_->storage.quantized;
}

std::optional<QuantizerInfo> Embeddings::quantizer() const noexcept {
  if (!state_->storage.quantized) return std::nullopt;
  const auto& q = state_->storage.pq;
  return QuantizerInfo{q.n_subquantizers, q.n_centroids, q.dims, !q.projection.empty(),
                       !q.norms.empty()};
}

std::span<const float> Embeddings::matrix() const& noexcept {
  if (state_->storage.quantized) return {};
  return state_->storage.dense.data.span();
}
// 0.1.0's unqualified forms (core/kept_symbol.hpp).
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip11finalfusion10Embeddings5normsEv,
                     _ZNKR8modelzip11finalfusion10Embeddings5normsEv);
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip11finalfusion10Embeddings6matrixEv,
                     _ZNKR8modelzip11finalfusion10Embeddings6matrixEv);

bool Embeddings::storage_is_view() const noexcept {
  return state_->storage.is_view();
}

void Embeddings::row(std::size_t r, std::span<float> out) const {
  if (r >= rows())
    throw Error(ErrorCode::invalid_argument,
                "row " + std::to_string(r) + " of " + std::to_string(rows()));
  if (out.size() < dims())
    throw Error(ErrorCode::invalid_argument, "output buffer smaller than dims()");
  state_->storage.row(r, out.data());
}

}  // namespace modelzip::finalfusion
