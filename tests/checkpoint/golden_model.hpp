// The content of the committed golden archive tests/golden/core/v1.zip.
// Used by make_golden (which wrote that file once) and by golden_test.cpp,
// which checks the file against expectations written out by hand.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "modelzip/writer.hpp"

namespace modelzip::testing {

template <class T>
Bytes le_bytes(std::vector<T> v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return Bytes::take(std::move(b));
}

inline const char* kOddName = "a b/c#%\n\xC3\xA9";

inline void write_golden(const std::filesystem::path& path) {
  Writer w = Writer::open(path);
  Metadata m;
  m.model_name = "golden";
  m.model_version = "1";
  m.description = "format regression archive";
  w.update_metadata([m](Metadata& current) { current = m; });
  NewTag base;
  base.add("matrix", Tensor::dense(DType::float32, {2, 3}, le_bytes<float>({1, 2, 3, 4, 5, 6})));
  base.add("count", Tensor::dense(DType::int64, {}, le_bytes<std::int64_t>({42})));
  std::vector<std::string> words = {"a", "b c"};
  base.add("words", Tensor::strings({2}, words));
  base.add("sparse",
           Tensor::sparse_coo(DType::float64, {3, 3}, 2, le_bytes<std::int64_t>({0, 1, 2, 2}),
                              le_bytes<double>({1.5, -2.0})));
  base.add("flags", Tensor::dense(DType::bool_, {2}, le_bytes<std::uint8_t>({1, 0})));
  base.add("bf16", Tensor::dense(DType::bfloat16, {2}, le_bytes<std::uint16_t>({0x3F80, 0x4000})));
  base.add("half", Tensor::dense(DType::float16, {1}, le_bytes<std::uint16_t>({0x3C00})));
  base.add("empty", Tensor::dense(DType::uint8, {0, 4}, Bytes()));
  base.add(kOddName, Tensor::dense(DType::int16, {3}, le_bytes<std::int16_t>({-1, 0, 1})));
  w.add_tag("base", std::move(base));
  NewTag fine;
  fine.share("matrix", "base", "matrix");
  fine.add("count", Tensor::dense(DType::int64, {}, le_bytes<std::int64_t>({43})),
           ParamOptions{Compression::deflate});
  fine.add("words", Tensor::strings({2}, words));  // deduplicated
  fine.add_updater_state(
      "matrix", "M", Tensor::dense(DType::float32, {2, 3}, le_bytes<float>({0, 0, 0, 0, 0, 0})));
  fine.add_updater_state(
      "matrix", "V", Tensor::dense(DType::float32, {2, 3}, le_bytes<float>({1, 1, 1, 1, 1, 1})));
  w.add_tag("Fine-Tune", std::move(fine));
  w.commit();
}

}  // namespace modelzip::testing
