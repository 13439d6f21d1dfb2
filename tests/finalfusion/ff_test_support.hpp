// Helpers for the finalfusion tests.
#pragma once

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "io/mapped_file.hpp"
#include "modelzip/finalfusion/embeddings.hpp"
#include "test_support.hpp"

namespace modelzip::testing {

// /work/shared/testdata/finalfusion/<name>
inline std::filesystem::path ff_data(const std::string& name) {
  return shared_testdata() / "finalfusion" / name;
}

inline Bytes ff_bytes(const std::string& name) {
  return io::read_file(ff_data(name));
}

inline float l2(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return static_cast<float>(std::sqrt(s));
}

inline std::vector<std::string> words_of(const std::vector<finalfusion::WordSimilarity>& r) {
  std::vector<std::string> out;
  for (const auto& x : r) out.push_back(x.word);
  return out;
}

}  // namespace modelzip::testing
