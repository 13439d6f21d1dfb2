// Product quantization of an embedding matrix: optional normalisation and
// random rotation, then k-means (Lloyd's algorithm) per subquantizer on its
// slice of the dimensions. Deterministic for a given seed: the random
// numbers come from std::mt19937_64 (fully specified by the standard) and
// this file's own uniform/normal transforms, never from distributions whose
// output the standard leaves to the implementation.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <thread>

#include "finalfusion/embeddings_state.hpp"
#include "finalfusion/vector_math.hpp"

namespace modelzip::finalfusion {
namespace {

using detail::SharedArray;

class Random {
 public:
  explicit Random(std::uint64_t seed) : engine_(seed) {}
  std::uint64_t next() { return engine_(); }
  // Uniform in [0, n) without modulo bias. Precondition: n > 0.
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t limit =
        std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % n;
    std::uint64_t x;
    do x = engine_();
    while (x >= limit);
    return x % n;
  }
  // Uniform in (0, 1].
  double unit() { return (static_cast<double>(engine_() >> 11) + 1.0) * 0x1.0p-53; }
  // Standard normal (Box-Muller).
  double normal() {
    const double pi = 3.14159265358979323846;
    return std::sqrt(-2.0 * std::log(unit())) * std::cos(2.0 * pi * unit());
  }

 private:
  std::mt19937_64 engine_;
};

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A random orthogonal D x D matrix: modified Gram-Schmidt on Gaussian rows.
std::vector<float> random_rotation(std::size_t d, Random& rng) {
  std::vector<double> g(d * d);
  for (;;) {
    for (auto& v : g) v = rng.normal();
    bool degenerate = false;
    for (std::size_t i = 0; i < d && !degenerate; ++i) {
      double* gi = g.data() + i * d;
      for (std::size_t j = 0; j < i; ++j) {
        const double* gj = g.data() + j * d;
        double p = 0;
        for (std::size_t t = 0; t < d; ++t) p += gi[t] * gj[t];
        for (std::size_t t = 0; t < d; ++t) gi[t] -= p * gj[t];
      }
      double norm = 0;
      for (std::size_t t = 0; t < d; ++t) norm += gi[t] * gi[t];
      norm = std::sqrt(norm);
      if (norm < 1e-9) degenerate = true;
      for (std::size_t t = 0; t < d; ++t) gi[t] /= norm;
    }
    if (!degenerate) break;
  }
  return std::vector<float>(g.begin(), g.end());
}

// k-means on n points of dimension ds (row-major `data`); returns K
// centroids (K x ds) and writes each point's centroid to codes[i * stride].
std::vector<float> kmeans(const std::vector<float>& data, std::size_t n, std::size_t ds,
                          std::uint32_t k, std::uint32_t iterations, Random& rng,
                          std::uint8_t* codes, std::size_t stride) {
  std::vector<float> centroids(static_cast<std::size_t>(k) * ds, 0.0f);
  // Initialise with distinct random points (repeating points if n < k).
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  for (std::uint32_t c = 0; c < k && n > 0; ++c) {
    std::size_t pick;
    if (c < n) {
      const std::size_t j = c + static_cast<std::size_t>(rng.below(n - c));
      std::swap(order[c], order[j]);
      pick = order[c];
    } else {
      pick = static_cast<std::size_t>(rng.below(n));
    }
    std::copy_n(data.data() + pick * ds, ds, centroids.data() + c * ds);
  }
  std::vector<std::uint32_t> assignment(n, 0);
  std::vector<float> distance(n, 0.0f);
  std::vector<float> centroid_sq(k);
  auto assign = [&] {
    for (std::uint32_t c = 0; c < k; ++c)
      centroid_sq[c] = detail::dot(centroids.data() + c * ds, centroids.data() + c * ds, ds);
    for (std::size_t i = 0; i < n; ++i) {
      const float* x = data.data() + i * ds;
      float best = std::numeric_limits<float>::infinity();
      std::uint32_t best_c = 0;
      for (std::uint32_t c = 0; c < k; ++c) {
        const float dist = centroid_sq[c] - 2 * detail::dot(x, centroids.data() + c * ds, ds);
        if (dist < best) {
          best = dist;
          best_c = c;
        }
      }
      assignment[i] = best_c;
      distance[i] = best + detail::dot(x, x, ds);
    }
  };
  std::vector<double> sums(static_cast<std::size_t>(k) * ds);
  std::vector<std::size_t> counts(k);
  for (std::uint32_t it = 0; it < iterations && n > 0; ++it) {
    assign();
    std::fill(sums.begin(), sums.end(), 0.0);
    std::fill(counts.begin(), counts.end(), 0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t c = assignment[i];
      ++counts[c];
      const float* x = data.data() + i * ds;
      for (std::size_t t = 0; t < ds; ++t) sums[c * ds + t] += x[t];
    }
    for (std::uint32_t c = 0; c < k; ++c) {
      if (counts[c] == 0) {
        // Empty cluster: move it onto the point farthest from its centroid.
        const auto far = static_cast<std::size_t>(
            std::max_element(distance.begin(), distance.end()) - distance.begin());
        std::copy_n(data.data() + far * ds, ds, centroids.data() + c * ds);
        distance[far] = -1;
        continue;
      }
      for (std::size_t t = 0; t < ds; ++t)
        centroids[c * ds + t] = static_cast<float>(sums[c * ds + t] / counts[c]);
    }
  }
  assign();
  for (std::size_t i = 0; i < n; ++i) codes[i * stride] = static_cast<std::uint8_t>(assignment[i]);
  return centroids;
}

std::uint32_t default_subquantizers(std::uint32_t d) {
  for (std::uint32_t m = std::max<std::uint32_t>(1, d / 2); m > 1; --m)
    if (d % m == 0) return m;
  return 1;
}

}  // namespace

PqResult Embeddings::quantize(const PqOptions& options) const {
  const Embeddings& embeddings = *this;
  if (embeddings.quantized())
    throw Error(ErrorCode::invalid_argument, "embeddings are already quantized");
  const std::size_t n = embeddings.rows();
  const std::size_t d = embeddings.dims();
  if (d == 0 || d > UINT32_MAX) throw Error(ErrorCode::invalid_argument, "cannot quantize 0 dims");
  const std::uint32_t m_count = options.n_subquantizers
                                    ? options.n_subquantizers
                                    : default_subquantizers(static_cast<std::uint32_t>(d));
  if (m_count > d || d % m_count != 0)
    throw Error(
        ErrorCode::invalid_argument,
        std::to_string(m_count) + " subquantizers do not divide " + std::to_string(d) + " dims");
  if (options.n_centroids == 0 || options.n_centroids > 256)
    throw Error(ErrorCode::invalid_argument, "n_centroids must be 1..256 (u8 codes)");
  const std::uint32_t k = options.n_centroids;
  const std::size_t ds = d / m_count;
  const auto source = embeddings.matrix();

  // What gets quantized: rows, optionally normalised, optionally rotated.
  std::vector<float> work(source.begin(), source.end());
  std::vector<float> pq_norms;
  if (options.normalize) {
    pq_norms.resize(n);
    for (std::size_t r = 0; r < n; ++r) pq_norms[r] = detail::l2_normalize(work.data() + r * d, d);
  }
  std::vector<float> projection;
  if (options.random_rotation) {
    Random rng(mix(options.seed ^ 0x726f746174696f6eull));
    projection = random_rotation(d, rng);
    std::vector<float> row(d);
    for (std::size_t r = 0; r < n; ++r) {
      float* x = work.data() + r * d;
      std::fill(row.begin(), row.end(), 0.0f);
      for (std::size_t i = 0; i < d; ++i)
        for (std::size_t j = 0; j < d; ++j) row[j] += x[i] * projection[i * d + j];
      std::copy(row.begin(), row.end(), x);
    }
  }

  std::vector<float> centroids(static_cast<std::size_t>(m_count) * k * ds);
  std::vector<std::uint8_t> codes(n * m_count);
  std::atomic<std::uint32_t> next{0};
  auto worker = [&] {
    std::vector<float> slice(n * ds);
    for (std::uint32_t m; (m = next.fetch_add(1)) < m_count;) {
      for (std::size_t r = 0; r < n; ++r)
        std::copy_n(work.data() + r * d + m * ds, ds, slice.data() + r * ds);
      Random rng(mix(options.seed + 0x9e3779b97f4a7c15ull * (m + 1)));
      auto c = kmeans(slice, n, ds, k, options.n_iterations, rng, codes.data() + m, m_count);
      std::copy(c.begin(), c.end(), centroids.begin() + static_cast<std::ptrdiff_t>(m * k * ds));
    }
  };
  const unsigned threads =
      std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), m_count));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();

  auto state = std::make_shared<detail::EmbeddingsState>();
  const auto& in = Embeddings::Access::state(embeddings);
  state->name = in.name;
  state->vocab = in.vocab;
  state->metadata = in.metadata;
  state->norms = in.norms;
  state->has_norms = in.has_norms;
  state->storage.quantized = true;
  auto& q = state->storage.pq;
  q.n_subquantizers = m_count;
  q.n_centroids = k;
  q.dims = static_cast<std::uint32_t>(d);
  q.rows = n;
  if (!projection.empty()) q.projection = SharedArray<float>::owned(std::move(projection));
  q.centroids = SharedArray<float>::owned(std::move(centroids));
  if (options.normalize) q.norms = SharedArray<float>::owned(std::move(pq_norms));
  q.codes = SharedArray<std::uint8_t>::owned(std::move(codes));

  double error = 0;
  std::vector<float> rebuilt(d);
  for (std::size_t r = 0; r < n; ++r) {
    q.reconstruct(r, rebuilt.data());
    for (std::size_t i = 0; i < d; ++i) {
      const double diff = static_cast<double>(source[r * d + i]) - rebuilt[i];
      error += diff * diff;
    }
  }
  const double mse = n ? error / (static_cast<double>(n) * static_cast<double>(d)) : 0.0;
  return PqResult{Embeddings::Access::make(std::move(state)), mse};
}

Embeddings Embeddings::dequantize() const {
  const Embeddings& embeddings = *this;
  if (!embeddings.quantized()) return embeddings;
  const std::size_t n = embeddings.rows(), d = embeddings.dims();
  std::vector<float> matrix(n * d);
  for (std::size_t r = 0; r < n; ++r)
    Embeddings::Access::state(embeddings).storage.pq.reconstruct(r, matrix.data() + r * d);
  std::optional<std::vector<float>> norms;
  if (embeddings.has_norms()) norms.emplace(embeddings.norms().begin(), embeddings.norms().end());
  auto out = Embeddings::from_matrix(embeddings.vocab(), std::move(matrix), d, std::move(norms),
                                     embeddings.metadata());
  return out;
}

}  // namespace modelzip::finalfusion
