// Helpers shared by the doctest suites: temporary folders, test data paths,
// deterministic random data.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "modelzip/bytes.hpp"

namespace modelzip::testing {

// A fresh folder under the system temp folder, removed with its contents on
// destruction.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    auto base = std::filesystem::temp_directory_path();
    for (;;) {
      path_ = base / ("modelzip-test-" + std::to_string(rd()) + std::to_string(rd()));
      if (std::filesystem::create_directory(path_)) break;
    }
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// ../shared/testdata (set by meson as MODELZIP_SHARED_TESTDATA).
inline std::filesystem::path shared_testdata() {
  const char* p = std::getenv("MODELZIP_SHARED_TESTDATA");
  return p ? std::filesystem::path(p) : std::filesystem::path("../shared/testdata");
}

// tests/ in the source tree (set by meson as MODELZIP_TESTS_DIR).
inline std::filesystem::path tests_dir() {
  const char* p = std::getenv("MODELZIP_TESTS_DIR");
  return p ? std::filesystem::path(p) : std::filesystem::path("tests");
}

inline Bytes random_bytes(std::mt19937_64& rng, std::size_t n) {
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return Bytes::take(std::move(v));
}

// The whole content of a file ("" if it cannot be read).
inline std::string io_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const std::filesystem::path& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

inline Bytes bytes_of(const std::string& s) {
  return Bytes::copy_of(s);
}

}  // namespace modelzip::testing
