// Helpers of the convert tests: golden file paths, tensors from typed
// values, typed copies of tensor values, error expectations.
#pragma once

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "io/mapped_file.hpp"
#include "modelzip/convert.hpp"
#include "modelzip/error.hpp"
#include "test_support.hpp"

namespace modelzip::testing {

inline std::filesystem::path golden_convert(const std::string& name) {
  return tests_dir() / "golden" / "convert" / name;
}

inline Bytes golden_bytes(const std::string& name) {
  return io::map_file(golden_convert(name));
}

template <class T>
Bytes bytes_of_values(const std::vector<T>& values) {
  std::vector<std::byte> b(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(b.data(), values.data(), b.size());
  return Bytes::take(std::move(b));
}

template <class T>
Tensor dense(DType dtype, Shape shape, const std::vector<T>& values) {
  return Tensor::dense(dtype, std::move(shape), bytes_of_values(values));
}

// A copy of the values (works whatever the alignment).
template <class T>
std::vector<T> values_of(const Tensor& t) {
  REQUIRE(t.values().size() % sizeof(T) == 0);
  std::vector<T> v(t.values().size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), t.values().data(), t.values().size());
  return v;
}

inline std::vector<std::string> strings_of(const Tensor& t) {
  std::vector<std::string> s;
  for (std::uint64_t i = 0; i < t.numel(); ++i) s.emplace_back(t.string_at(i));
  return s;
}

inline std::vector<std::int64_t> indices_of(const Tensor& t) {
  std::vector<std::int64_t> v(t.indices().size() / 8);
  if (!v.empty()) std::memcpy(v.data(), t.indices().data(), t.indices().size());
  return v;
}

// Runs `f`, expecting Error with `code` whose message contains `part`.
inline void expect_error(const std::function<void()>& f, ErrorCode code,
                         const std::string& part = "") {
  try {
    f();
    FAIL("expected an Error(" << error_code_name(code) << ") containing '" << part << "'");
  } catch (const Error& e) {
    INFO("what(): " << e.what());
    CHECK(e.code() == code);
    if (!part.empty()) CHECK(std::string(e.what()).find(part) != std::string::npos);
  }
}

inline const Tensor& find_tensor(const std::vector<convert::NamedTensor>& tensors,
                                 const std::string& name) {
  for (const auto& t : tensors)
    if (t.name == name) return t.tensor;
  FAIL("no tensor named " << name);
  throw std::logic_error("unreachable");
}

}  // namespace modelzip::testing
