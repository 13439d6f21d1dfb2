// Lookups and similarity queries on Embeddings.
#include <algorithm>
#include <cmath>
#include <limits>

#include "finalfusion/embeddings_state.hpp"
#include "finalfusion/vector_math.hpp"

namespace modelzip::finalfusion {
namespace {

using detail::EmbeddingsState;

// Writes the embedding of `word` into out[0..dims) and its norm into *norm.
// False (out unspecified) when the word has no embedding.
bool lookup(const EmbeddingsState& s, std::string_view word, float* out, float* norm) {
  const std::size_t d = s.storage.dims();
  if (auto idx = s.vocab.word_index(word)) {
    s.storage.row(*idx, out);
    if (norm) *norm = s.has_norms ? s.norms.data()[*idx] : detail::l2_norm(out, d);
    return true;
  }
  if (!s.vocab.has_subwords()) return false;
  std::fill(out, out + d, 0.0f);
  std::size_t count = 0;
  if (s.storage.quantized) {
    std::vector<float> scratch(d);
    Vocab::Access::impl(s.vocab).for_each_subword_row(
        word, [&](std::string_view, std::size_t, std::uint64_t row) {
          s.storage.add_row(static_cast<std::size_t>(row), out, scratch.data());
          ++count;
        });
  } else {
    const auto& dense = s.storage.dense;
    Vocab::Access::impl(s.vocab).for_each_subword_row(
        word, [&](std::string_view, std::size_t, std::uint64_t row) {
          detail::add(out, dense.row(static_cast<std::size_t>(row)), d);
          ++count;
        });
  }
  if (count == 0) return false;
  float n;
  if (s.vocab.kind() == VocabKind::floret) {
    // floret averages its hashed units.
    for (std::size_t i = 0; i < d; ++i) out[i] /= static_cast<float>(count);
    n = detail::l2_norm(out, d);
  } else {
    n = detail::l2_normalize(out, d);
  }
  if (norm) *norm = n;
  return true;
}

// Whether word rows are compared as the unit vectors import would store
// for them, computed on the fly: dense rows kept as read (no norms: a
// finalfusion file of raw rows, an import with --no-normalize). Rows of
// embeddings with norms are unit vectors already; quantized rows are
// compared as reconstructed.
bool normalizes_rows(const EmbeddingsState& s) {
  return !s.storage.quantized && !s.has_norms;
}

// The unit vector of `word` (Embeddings::unit_embedding) into out[0..dims).
bool unit_lookup(const EmbeddingsState& s, std::string_view word, float* out) {
  if (!lookup(s, word, out, nullptr)) return false;
  const bool known = s.vocab.word_index(word).has_value();
  if (known ? !s.has_norms : s.vocab.kind() == VocabKind::floret)
    detail::l2_normalize_any(out, s.storage.dims());
  return true;
}

struct Candidate {
  float similarity;
  std::uint32_t row;
};

std::vector<WordSimilarity> top_k(const EmbeddingsState& s, const float* query, std::size_t k,
                                  std::span<const std::string_view> skip) {
  const std::size_t d = s.storage.dims();
  const std::size_t n = s.vocab.words_len();
  if (k == 0 || n == 0) return {};
  const auto& words = Vocab::Access::impl(s.vocab).words;
  std::vector<float> q(query, query + d);
  detail::l2_normalize(q.data(), d);
  const std::vector<float>& inverse = s.word_inverse_norms();

  std::vector<std::size_t> skip_rows;
  for (auto w : skip)
    if (auto idx = s.vocab.word_index(w)) skip_rows.push_back(*idx);
  std::sort(skip_rows.begin(), skip_rows.end());

  // A max-heap of the k best so far whose top is the worst of them.
  auto better = [&](const Candidate& a, const Candidate& b) {
    if (a.similarity != b.similarity) return a.similarity > b.similarity;
    return words[a.row] < words[b.row];
  };
  std::vector<Candidate> heap;
  heap.reserve(std::min(k, n) + 1);
  auto offer = [&](std::size_t r, float sim) {
    if (std::isnan(sim)) return;
    Candidate c{sim, static_cast<std::uint32_t>(r)};
    if (heap.size() < k) {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(c, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = c;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  };
  auto skipped = [&](std::size_t r) {
    return !skip_rows.empty() && std::binary_search(skip_rows.begin(), skip_rows.end(), r);
  };

  if (normalizes_rows(s)) {
    // The same bits as the stored unit rows of a normalized import.
    const std::vector<float>& divisors = s.row_divisors;
    std::vector<float> unit(d);
    for (std::size_t r = 0; r < n; ++r) {
      if (skipped(r)) continue;
      const float* row = s.storage.dense.row(r);
      if (!std::isnan(divisors[r])) {
        offer(r, detail::dot_divided(q.data(), row, divisors[r], d) * inverse[r]);
        continue;
      }
      std::copy(row, row + d, unit.begin());
      detail::l2_normalize_any(unit.data(), d);
      offer(r, detail::dot(q.data(), unit.data(), d) * inverse[r]);
    }
  } else if (!s.storage.quantized) {
    for (std::size_t r = 0; r < n; ++r) {
      if (skipped(r)) continue;
      offer(r, detail::dot(q.data(), s.storage.dense.row(r), d) * inverse[r]);
    }
  } else {
    // Asymmetric distance computation: dot(q, x P^T) = dot(q P, x), and x is
    // a concatenation of centroids, so a table of per-centroid partial dot
    // products gives every row in M lookups.
    const auto& pq = s.storage.pq;
    std::vector<float> qp(d);
    if (pq.projection.empty()) {
      qp = q;
    } else {
      const float* p = pq.projection.data();
      for (std::size_t i = 0; i < d; ++i)
        for (std::size_t j = 0; j < d; ++j) qp[j] += q[i] * p[i * d + j];
    }
    const std::uint32_t m_count = pq.n_subquantizers, k_count = pq.n_centroids;
    const std::uint32_t ds = pq.sub_dims();
    std::vector<float> table(static_cast<std::size_t>(m_count) * k_count);
    for (std::uint32_t m = 0; m < m_count; ++m)
      for (std::uint32_t c = 0; c < k_count; ++c)
        table[static_cast<std::size_t>(m) * k_count + c] =
            detail::dot(qp.data() + static_cast<std::size_t>(m) * ds, pq.centroid(m, c), ds);
    const std::uint8_t* codes = pq.codes.data();
    for (std::size_t r = 0; r < n; ++r) {
      if (skipped(r)) continue;
      const std::uint8_t* code = codes + r * m_count;
      float sim = 0;
      for (std::uint32_t m = 0; m < m_count; ++m)
        sim += table[static_cast<std::size_t>(m) * k_count + code[m]];
      offer(r, sim * inverse[r]);
    }
  }

  std::sort(heap.begin(), heap.end(), better);
  std::vector<WordSimilarity> out;
  out.reserve(heap.size());
  for (const auto& c : heap) out.push_back(WordSimilarity{words[c.row], c.similarity});
  return out;
}

}  // namespace

namespace detail {

const std::vector<float>& EmbeddingsState::word_inverse_norms() const {
  std::call_once(inverse_norms_once, [this] {
    const std::size_t n = vocab.words_len();
    const std::size_t d = storage.dims();
    inverse_norms.resize(n);
    if (!storage.quantized && !has_norms) row_divisors.resize(n);
    std::vector<float> buffer(d);
    for (std::size_t r = 0; r < n; ++r) {
      const float* row;
      float sign = 1;
      if (storage.quantized) {
        storage.pq.reconstruct_unscaled(r, buffer.data());
        row = buffer.data();
        if (!storage.pq.norms.empty()) {
          const float norm = storage.pq.norms.data()[r];
          sign = norm > 0 ? 1.0f : norm < 0 ? -1.0f : 0.0f;
        }
      } else if (!has_norms) {
        // Of the unit row top_k compares (normalizes_rows).
        const float* raw = storage.dense.row(r);
        const float squares = dot(raw, raw, d);
        row_divisors[r] =
            std::isnormal(squares) ? std::sqrt(squares) : std::numeric_limits<float>::quiet_NaN();
        std::copy(raw, raw + d, buffer.begin());
        l2_normalize_any(buffer.data(), d);
        row = buffer.data();
      } else {
        row = storage.dense.row(r);
      }
      double sum = 0;
      for (std::size_t i = 0; i < d; ++i) sum += static_cast<double>(row[i]) * row[i];
      inverse_norms[r] = sum > 0 ? sign * static_cast<float>(1.0 / std::sqrt(sum)) : 0.0f;
    }
  });
  return inverse_norms;
}

}  // namespace detail

std::optional<std::vector<float>> Embeddings::embedding(std::string_view word) const {
  std::vector<float> out(dims());
  if (!lookup(*state_, word, out.data(), nullptr)) return std::nullopt;
  return out;
}

bool Embeddings::embedding_into(std::string_view word, std::span<float> out) const {
  if (out.size() < dims())
    throw Error(ErrorCode::invalid_argument, "output buffer of " + std::to_string(out.size()) +
                                                 " floats for " + std::to_string(dims()) + " dims");
  return lookup(*state_, word, out.data(), nullptr);
}

std::size_t Embeddings::embeddings_into(std::span<const std::string_view> words,
                                        std::span<float> out, std::span<bool> found) const {
  const std::size_t d = dims();
  if (out.size() / (d ? d : 1) < words.size() && d != 0)
    throw Error(ErrorCode::invalid_argument, "output buffer of " + std::to_string(out.size()) +
                                                 " floats for " + std::to_string(words.size()) +
                                                 " x " + std::to_string(d));
  if (!found.empty() && found.size() < words.size())
    throw Error(ErrorCode::invalid_argument, "found flags shorter than the word list");
  std::size_t hits = 0;
  for (std::size_t i = 0; i < words.size(); ++i) {
    float* row = out.data() + i * d;
    const bool ok = lookup(*state_, words[i], row, nullptr);
    if (!ok) std::fill(row, row + d, 0.0f);
    if (!found.empty()) found[i] = ok;
    hits += ok;
  }
  return hits;
}

std::optional<float> Embeddings::norm(std::string_view word) const {
  std::vector<float> scratch(dims());
  float n;
  if (!lookup(*state_, word, scratch.data(), &n)) return std::nullopt;
  return n;
}

std::optional<std::vector<float>> Embeddings::unit_embedding(std::string_view word) const {
  std::vector<float> out(dims());
  if (!unit_lookup(*state_, word, out.data())) return std::nullopt;
  return out;
}

std::optional<std::vector<WordSimilarity>> Embeddings::similar(std::string_view word,
                                                               std::size_t k) const {
  auto query = unit_embedding(word);
  if (!query) return std::nullopt;
  const std::string_view skip[1] = {word};
  return top_k(*state_, query->data(), k, skip);
}

std::vector<WordSimilarity> Embeddings::similar_to(std::span<const float> query, std::size_t k,
                                                   std::span<const std::string_view> skip) const {
  if (query.size() != dims())
    throw Error(ErrorCode::invalid_argument, "query of " + std::to_string(query.size()) +
                                                 " floats for " + std::to_string(dims()) + " dims");
  return top_k(*state_, query.data(), k, skip);
}

std::optional<std::vector<WordSimilarity>> Embeddings::analogy(std::string_view a,
                                                               std::string_view b,
                                                               std::string_view c,
                                                               std::size_t k) const {
  auto ea = unit_embedding(a), eb = unit_embedding(b), ec = unit_embedding(c);
  if (!ea || !eb || !ec) return std::nullopt;
  std::vector<float> query(dims());
  for (std::size_t i = 0; i < query.size(); ++i) query[i] = (*eb)[i] - (*ea)[i] + (*ec)[i];
  detail::l2_normalize(query.data(), query.size());
  const std::string_view skip[3] = {a, b, c};
  return top_k(*state_, query.data(), k, skip);
}

}  // namespace modelzip::finalfusion
