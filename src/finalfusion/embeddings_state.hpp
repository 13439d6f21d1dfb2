// The state behind modelzip::finalfusion::Embeddings, shared by copies.
#pragma once

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "finalfusion/storage.hpp"
#include "finalfusion/vocab_impl.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

namespace modelzip::finalfusion::detail {

struct EmbeddingsState {
  std::string name;
  Vocab vocab = Vocab::Access::make(nullptr);
  std::optional<EmbeddingsMetadata> metadata;
  Storage storage;
  SharedArray<float> norms;  // one per word, or empty
  bool has_norms = false;
  // The complete finalfusion file this state was parsed from (Embeddings::read
  // and open), which writing gives back byte for byte; empty for a state made
  // any other way (from_matrix, conversions, with_metadata, with_norms,
  // quantize), which writing encodes.
  Bytes file;

  // Lazily computed for similarity queries: 1 / |row| of every word row
  // (0 for zero rows); for quantized storage, of the unscaled
  // reconstruction; for dense rows without norms, of the unit row that
  // queries compare (l2_normalize_any of the row).
  mutable std::once_flag inverse_norms_once;
  mutable std::vector<float> inverse_norms;
  // With them, for dense rows without norms: what l2_normalize divides each
  // word row by (its f32 norm), or NaN for a row that l2_normalize_any
  // normalizes otherwise (zero, tiny, huge or non-finite rows).
  mutable std::vector<float> row_divisors;
  const std::vector<float>& word_inverse_norms() const;
};

// Checks that vocabulary, storage and norms agree; Error(failure) otherwise.
void check_consistency(const EmbeddingsState& state, const Failure& failure);

// remote::refuse_url_of_file(path, "embedding"): embedding files are read
// from local paths only.
void refuse_url(const std::filesystem::path& path);

}  // namespace modelzip::finalfusion::detail

namespace modelzip::finalfusion {

class Embeddings::Access {
 public:
  static Embeddings make(std::shared_ptr<const detail::EmbeddingsState> state) {
    return Embeddings(std::move(state));
  }
  static const detail::EmbeddingsState& state(const Embeddings& embeddings) noexcept {
    return *embeddings.state_;
  }
};

}  // namespace modelzip::finalfusion
