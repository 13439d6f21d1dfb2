#include <doctest/doctest.h>

#include <cstring>

#include "modelzip/error.hpp"
#include "modelzip/tensor.hpp"

using namespace modelzip;

namespace {
template <class T>
Bytes bytes_from(std::vector<T> v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return Bytes::take(std::move(b));
}
}  // namespace

TEST_CASE("Dense tensors check their byte size") {
  Tensor t = Tensor::dense(DType::float32, {2, 3}, bytes_from<float>({1, 2, 3, 4, 5, 6}));
  CHECK(t.numel() == 6);
  CHECK(t.as<float>()[5] == 6.0f);
  CHECK_THROWS_AS(t.as<double>(), Error);
  CHECK_THROWS_AS(Tensor::dense(DType::float32, {2, 3}, bytes_from<float>({1})), Error);
  CHECK_THROWS_AS(Tensor::dense(DType::float32, {-1}, Bytes()), Error);
}

TEST_CASE("Scalars and empty tensors") {
  Tensor s = Tensor::dense(DType::int64, {}, bytes_from<std::int64_t>({42}));
  CHECK(s.rank() == 0);
  CHECK(s.numel() == 1);
  Tensor e = Tensor::dense(DType::float64, {3, 0, 2}, Bytes());
  CHECK(e.numel() == 0);
  CHECK(e.nbytes() == 0);
}

TEST_CASE("Shapes whose element count overflows are rejected") {
  CHECK_THROWS_AS(shape_numel(std::vector<std::int64_t>{1ll << 40, 1ll << 40}), Error);
  CHECK(shape_numel(std::vector<std::int64_t>{0, 1ll << 62, 1ll << 62}) == 0);
}

TEST_CASE("String tensors") {
  std::vector<std::string> words = {"", "a b", "\xC3\xBC", "line\nbreak"};
  Tensor t = Tensor::strings({2, 2}, words);
  for (std::size_t i = 0; i < words.size(); ++i) CHECK(t.string_at(i) == words[i]);
  CHECK_THROWS_AS(t.string_at(4), Error);
  std::vector<std::string> bad = {"\xFF"};
  CHECK_THROWS_AS(Tensor::strings({1}, bad), Error);
  // Rebuilding from parts validates offsets.
  Tensor again = Tensor::strings({2, 2}, t.offsets(), t.values());
  CHECK(again == t);
  CHECK_THROWS_AS(Tensor::strings({4}, bytes_from<std::uint64_t>({0, 9, 2, 3, 4}), t.values()),
                  Error);
}

TEST_CASE("Sparse COO tensors validate coordinates") {
  Tensor t = Tensor::sparse_coo(DType::float32, {3, 4}, 2, bytes_from<std::int64_t>({0, 1, 2, 3}),
                                bytes_from<float>({1.5f, -2.0f}));
  CHECK(t.layout() == Layout::sparse_coo);
  CHECK(t.nnz() == 2);
  CHECK_THROWS_AS(Tensor::sparse_coo(DType::float32, {3, 4}, 1, bytes_from<std::int64_t>({3, 0}),
                                     bytes_from<float>({1.f})),
                  Error);
  CHECK_THROWS_AS(Tensor::sparse_coo(DType::float32, {3, 4}, 1, bytes_from<std::int64_t>({0}),
                                     bytes_from<float>({1.f})),
                  Error);
}

TEST_CASE("to_owned copies and equality compares bytes") {
  std::vector<float> v = {1, 2};
  Tensor view =
      Tensor::dense(DType::float32, {2}, Bytes::borrow(std::as_bytes(std::span(v)), nullptr));
  Tensor owned = view.to_owned();
  CHECK(owned == view);
  v[0] = 9;
  CHECK_FALSE(owned == view);
}
