// Random models for round-trip tests: every dtype, ranks 0-5, empty
// tensors, strings, sparse tensors, odd names. Deterministic for a seed.
#pragma once

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "modelzip/tensor.hpp"
#include "test_support.hpp"

namespace modelzip::testing {

inline Shape random_shape(std::mt19937_64& rng, std::size_t rank, bool allow_zero) {
  Shape s;
  for (std::size_t i = 0; i < rank; ++i)
    s.push_back(static_cast<std::int64_t>(rng() % (rank >= 4 ? 4 : 9)) + (allow_zero ? 0 : 1));
  return s;
}

inline Tensor random_tensor(std::mt19937_64& rng, DType dtype) {
  std::size_t rank = rng() % 6;
  bool allow_zero = rng() % 5 == 0;
  Shape shape = random_shape(rng, rank, allow_zero);
  std::uint64_t n = shape_numel(shape);
  if (dtype == DType::utf8) {
    std::vector<std::string> words;
    const char* samples[] = {"",
                             "a",
                             "hello world",
                             ("\xC3\xBC"  // split: "\xBCber" would be one escape
                              "ber"),
                             "line\nbreak",
                             "tab\there",
                             "\xF0\x9F\x98\x80"};
    for (std::uint64_t i = 0; i < n; ++i) words.push_back(samples[rng() % 7]);
    return Tensor::strings(shape, words);
  }
  if (dtype != DType::bool_ && dtype != DType::float8_e8m0fnu && dtype != DType::float4_e2m1fn_x2 &&
      rng() % 6 == 0 && n > 0) {
    // Sparse (never for the MX types, FORMAT.md section 6): a few distinct coordinates.
    std::uint64_t nnz = std::min<std::uint64_t>(n, 1 + rng() % 5);
    std::vector<std::int64_t> idx;
    for (std::uint64_t k = 0; k < nnz; ++k) {
      std::uint64_t flat = k * (n / nnz);
      std::vector<std::int64_t> coord(shape.size());
      for (std::size_t d = shape.size(); d-- > 0;) {
        coord[d] = static_cast<std::int64_t>(flat % static_cast<std::uint64_t>(shape[d]));
        flat /= static_cast<std::uint64_t>(shape[d]);
      }
      idx.insert(idx.end(), coord.begin(), coord.end());
    }
    std::vector<std::byte> ib(idx.size() * 8);
    if (!ib.empty()) std::memcpy(ib.data(), idx.data(), ib.size());  // nnz 0: no data pointer
    return Tensor::sparse_coo(dtype, shape, nnz, Bytes::take(std::move(ib)),
                              random_bytes(rng, nnz * dtype_size(dtype)));
  }
  std::vector<std::byte> data(n * dtype_size(dtype));
  for (auto& b : data) b = static_cast<std::byte>(rng());
  if (dtype == DType::bool_)
    for (auto& b : data) b = static_cast<std::byte>(static_cast<unsigned>(b) & 1);
  return Tensor::dense(dtype, shape, Bytes::take(std::move(data)));
}

inline std::string odd_name(std::mt19937_64& rng, int i) {
  const char* parts[] = {"layer",     "w eight",           "a/b/c", "#hash", "100%",
                         "new\nline", "\xC3\xA9t\xC3\xA9", "tab\t", " lead", "trail ",
                         "x"};
  return std::string(parts[rng() % 11]) + "." + std::to_string(i);
}

}  // namespace modelzip::testing
