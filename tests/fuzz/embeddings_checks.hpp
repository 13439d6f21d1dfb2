// What the finalfusion-related fuzz targets do with embeddings they managed
// to read: the queries of `modelzip embed / similar / analogy`, and a write
// and re-read.
//
// Invariants: a row is reachable for every word; lookups of known words
// succeed; written embeddings read back with the same vocabulary and shape.
// Throws nothing but what the library throws (Error is a finding here: the
// embeddings were accepted as valid).
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "modelzip/finalfusion/convert.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

namespace modelzip::fuzz {

inline void check_embeddings(const finalfusion::Embeddings& embeddings) {
  const std::size_t dims = embeddings.dims();
  const auto words = embeddings.vocab().words();
  FUZZ_CHECK(embeddings.rows() >= words.size());
  std::vector<float> row(dims);
  if (embeddings.rows() > 0) {
    embeddings.row(0, row);
    embeddings.row(embeddings.rows() - 1, row);
  }
  keep(embeddings.matrix().size() + embeddings.norms().size());

  const std::size_t probes = std::min<std::size_t>(words.size(), 3);
  for (std::size_t i = 0; i < probes; ++i) {
    FUZZ_CHECK(embeddings.vocab().word_index(words[i]) == i);
    FUZZ_CHECK(embeddings.embedding(words[i]).has_value());
    keep(embeddings.norm(words[i]).has_value());
    keep(embeddings.similar(words[i], 3).has_value());
  }
  // Unknown words go through the subword indexers.
  for (std::string_view unknown : {"fuzz-unknown-word", "\xc3\xa4\xe2\x82\xac", ""}) {
    keep(embeddings.embedding(unknown).has_value());
  }
  if (probes >= 3) keep(embeddings.analogy(words[0], words[1], words[2], 2).has_value());
  std::vector<std::string_view> batch(words.begin(),
                                      words.begin() + static_cast<std::ptrdiff_t>(probes));
  batch.push_back("fuzz-unknown-word");
  std::vector<float> out(batch.size() * dims);
  keep(embeddings.embeddings_into(batch, out));

  const finalfusion::Embeddings again = finalfusion::Embeddings::read(embeddings.to_bytes());
  FUZZ_CHECK(again.dims() == dims && again.rows() == embeddings.rows());
  FUZZ_CHECK(again.vocab() == embeddings.vocab());
}

// The option sets the converter targets read their input with: strict
// UTF-8 and normalised, lossy UTF-8 and not normalised, escaped UTF-8 and
// normalised.
inline const finalfusion::ConvertOptions kConvertOptionSets[] = {
    {finalfusion::Utf8Policy::strict, true},
    {finalfusion::Utf8Policy::lossy, false},
    {finalfusion::Utf8Policy::escape, true}};

// Runs `read` (a modelzip::Error is the answer to bad input; a corrupt
// input's names the line or offset: attempt_located) and checks the
// embeddings it returned, if any.
template <class Read>
void read_and_check(Read read) {
  std::optional<finalfusion::Embeddings> embeddings;
  if (!attempt_located([&] { embeddings.emplace(read()); })) return;
  FUZZ_CHECK(attempt([&] { check_embeddings(*embeddings); }));
}

}  // namespace modelzip::fuzz
