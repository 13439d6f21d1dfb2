// Embedding storage: the dense matrix (chunk 2, NdArray) and the product-
// quantized matrix (chunk 4, QuantizedArray), plus the norms (chunk 6).
// Arrays are zero-copy views into the file's Bytes when aligned, owned
// copies otherwise.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "finalfusion/chunk_io.hpp"
#include "modelzip/bytes.hpp"

namespace modelzip::finalfusion::detail {

// An immutable array that keeps its memory alive: a view into Bytes, or an
// owned vector. Cheap to copy.
template <class T>
class SharedArray {
 public:
  SharedArray() = default;
  static SharedArray owned(std::vector<T> values) {
    SharedArray a;
    auto owner = std::make_shared<const std::vector<T>>(std::move(values));
    a.data_ = owner->data();
    a.size_ = owner->size();
    a.owned_ = std::move(owner);
    return a;
  }
  // `count` values at `offset` in `bytes` (the range must be inside): a view
  // when the address is aligned for T, a copy otherwise.
  static SharedArray from_bytes(const Bytes& bytes, std::uint64_t offset, std::size_t count) {
    const std::byte* p = bytes.data() + offset;
    if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) == 0) {
      SharedArray a;
      a.bytes_ = bytes.slice(offset, count * sizeof(T));
      a.data_ = reinterpret_cast<const T*>(a.bytes_.data());
      a.size_ = count;
      a.view_ = true;
      return a;
    }
    std::vector<T> copy(count);
    if (count) std::memcpy(copy.data(), p, count * sizeof(T));
    return owned(std::move(copy));
  }
  std::span<const T> span() const noexcept { return {data_, size_}; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  bool is_view() const noexcept { return view_; }

 private:
  const T* data_ = nullptr;
  std::size_t size_ = 0;
  Bytes bytes_;
  std::shared_ptr<const std::vector<T>> owned_;
  bool view_ = false;
};

struct DenseStorage {
  SharedArray<float> data;  // rows x cols, row-major
  std::size_t rows = 0;
  std::size_t cols = 0;
  const float* row(std::size_t r) const noexcept { return data.data() + r * cols; }
};

struct QuantizedStorage {
  std::uint32_t n_subquantizers = 0;  // M
  std::uint32_t n_centroids = 0;      // K
  std::uint32_t dims = 0;             // D
  std::size_t rows = 0;
  SharedArray<float> projection;    // D x D, or empty
  SharedArray<float> centroids;     // M x K x (D / M)
  SharedArray<float> norms;         // rows, or empty
  SharedArray<std::uint8_t> codes;  // rows x M

  std::uint32_t sub_dims() const noexcept { return dims / n_subquantizers; }
  const float* centroid(std::uint32_t m, std::uint32_t k) const noexcept {
    return centroids.data() + (static_cast<std::size_t>(m) * n_centroids + k) * sub_dims();
  }
  // Row r reconstructed into out[0..dims): the concatenated centroids,
  // multiplied by the transposed projection, scaled by the norm.
  void reconstruct(std::size_t r, float* out) const;
  // Without the norm scaling (what was quantized).
  void reconstruct_unscaled(std::size_t r, float* out) const;
};

struct Storage {
  bool quantized = false;
  DenseStorage dense;
  QuantizedStorage pq;
  std::size_t rows() const noexcept { return quantized ? pq.rows : dense.rows; }
  std::size_t dims() const noexcept { return quantized ? pq.dims : dense.cols; }
  bool is_view() const noexcept { return quantized ? pq.codes.is_view() : dense.data.is_view(); }
  void row(std::size_t r, float* out) const {
    if (quantized)
      pq.reconstruct(r, out);
    else if (dense.cols != 0)  // zero-dimensional rows: `out` may be null
      std::memcpy(out, dense.row(r), dense.cols * sizeof(float));
  }
  // out[i] += row r [i]
  void add_row(std::size_t r, float* out, float* scratch) const;
};

// Chunk readers take a ByteReader over exactly the chunk body and the
// whole file (for zero-copy views).
DenseStorage read_ndarray(modelzip::detail::ByteReader& body, const Bytes& file);
void write_ndarray(Sink& sink, const DenseStorage& storage);

QuantizedStorage read_quantized(modelzip::detail::ByteReader& body, const Bytes& file);
void write_quantized(Sink& sink, const QuantizedStorage& storage);

SharedArray<float> read_norms(modelzip::detail::ByteReader& body, const Bytes& file);
void write_norms(Sink& sink, std::span<const float> norms);

}  // namespace modelzip::finalfusion::detail
