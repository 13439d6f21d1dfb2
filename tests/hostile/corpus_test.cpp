// Replays tests/hostile/expected.tsv: every corpus file is read the way its
// row says and must give exactly the expected outcome (error code, message
// part, and context). A corpus file without a row, or a row without a file,
// fails the suite.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "modelzip/archive.hpp"
#include "modelzip/convert.hpp"
#include "modelzip/error.hpp"
#include "modelzip/finalfusion/convert.hpp"
#include "test_support.hpp"

using namespace modelzip;
namespace fs = std::filesystem;

namespace {

struct Row {
  int line = 0;
  std::string file, mode, code, message, entry, tag, line_field, offset;
};

// "\xHH" -> the byte, "\\" -> "\".
std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out += s[i];
    } else if (s[i + 1] == '\\') {
      out += '\\';
      ++i;
    } else if (s[i + 1] == 'x' && i + 3 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 2, 2), nullptr, 16));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

fs::path hostile_dir() {
  return testing::tests_dir() / "hostile";
}

std::vector<Row> manifest() {
  std::ifstream in(hostile_dir() / "expected.tsv");
  REQUIRE_MESSAGE(in.good(), "cannot read expected.tsv");
  std::vector<Row> rows;
  std::string text;
  int number = 0;
  bool header_seen = false;
  while (std::getline(in, text)) {
    ++number;
    if (text.empty() || text[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ss(text);
    std::string field;
    while (std::getline(ss, field, '\t')) f.push_back(field);
    INFO("expected.tsv line " << number << ": " << text);
    REQUIRE(f.size() == 8);
    if (!header_seen) {
      header_seen = true;
      REQUIRE(f[0] == "file");
      continue;
    }
    rows.push_back(
        Row{number, f[0], f[1], f[2], unescape(f[3]), unescape(f[4]), unescape(f[5]), f[6], f[7]});
  }
  return rows;
}

std::optional<ErrorCode> code_named(const std::string& name) {
  for (ErrorCode c : {ErrorCode::io, ErrorCode::corrupt, ErrorCode::not_found,
                      ErrorCode::invalid_argument, ErrorCode::already_exists,
                      ErrorCode::unsupported, ErrorCode::limit_exceeded, ErrorCode::cancelled})
    if (error_code_name(c) == name) return c;
  return std::nullopt;
}

// Runs the row's operation; returns the verify() problems (verify mode).
std::vector<Problem> run(const Row& row, const fs::path& path) {
  if (row.mode == "open") {
    Archive::open(path);
  } else if (row.mode == "load") {
    Archive a = Archive::open(path);
    for (const auto& tag : a.tags()) {
      a.load(tag);
      a.load(tag, {.mode = ReadMode::copy});
      a.load(tag, {.mode = ReadMode::private_view});
      for (const auto& s : a.updater_states(tag)) a.updater_state(s.name, s.state, tag);
    }
  } else if (row.mode == "verify") {
    return Archive::open(path).verify();
  } else if (row.mode == "fifu") {
    finalfusion::load(path, finalfusion::EmbeddingFormat::finalfusion);
  } else if (row.mode == "word2vec") {
    finalfusion::load(path, finalfusion::EmbeddingFormat::word2vec_binary);
  } else if (row.mode == "fasttext") {
    finalfusion::load(path, finalfusion::EmbeddingFormat::fasttext);
  } else if (row.mode == "textdims") {
    finalfusion::load(path, finalfusion::EmbeddingFormat::text_dims);
  } else if (row.mode == "tensorfile") {
    convert::read_tensor_file(path);
  } else {
    FAIL("unknown mode '" << row.mode << "'");
  }
  return {};
}

void check_text(const char* what, const std::string& expected, const std::string& actual) {
  if (expected == "*") return;
  INFO(what);
  if (expected == "-")
    CHECK(actual.empty());
  else
    CHECK(actual == expected);
}

void check_number(const char* what, const std::string& expected,
                  const std::optional<std::uint64_t>& actual) {
  if (expected == "*") return;
  INFO(what);
  if (expected == "-")
    CHECK_FALSE(actual.has_value());
  else
    CHECK(actual == std::optional<std::uint64_t>(std::stoull(expected)));
}

}  // namespace

TEST_SUITE("hostile") {
  TEST_CASE("Every corpus file gives the outcome expected.tsv names") {
    const auto rows = manifest();
    REQUIRE(rows.size() > 100);
    for (const Row& row : rows) {
      CAPTURE(row.file);
      CAPTURE(row.line);
      const fs::path path = hostile_dir() / "corpus" / row.file;
      REQUIRE_MESSAGE(fs::exists(path), "expected.tsv lists a missing file");
      std::optional<Error> error;
      std::vector<Problem> problems;
      try {
        problems = run(row, path);
      } catch (const Error& e) {
        error = e;
      }
      if (row.code == "ok") {
        CHECK_MESSAGE(!error, (error ? error->what() : ""));
        CHECK(problems.empty());
        continue;
      }
      if (row.code == "problem") {
        REQUIRE_MESSAGE(!error, (error ? error->what() : ""));
        bool found = false;
        for (const auto& p : problems)
          found =
              found || (p.entry == row.entry && p.message.find(row.message) != std::string::npos);
        CHECK_MESSAGE(found,
                      "no problem naming '" << row.entry << "' with '" << row.message << "'");
        continue;
      }
      const auto code = code_named(row.code);
      REQUIRE_MESSAGE(code.has_value(), "unknown code " << row.code);
      REQUIRE_MESSAGE(error.has_value(), "accepted, expected " << row.code);
      CAPTURE(std::string(error->what()));
      CHECK(error_code_name(error->code()) == row.code);
      CHECK(std::string(error->what()).find(row.message) != std::string::npos);
      const ErrorContext& c = error->context();
      CHECK(c.archive == path.string());
      check_text("entry", row.entry, c.entry);
      check_text("tag", row.tag, c.tag);
      check_number("line", row.line_field, c.line);
      check_number("offset", row.offset, c.offset);
      if (row.mode == "load") {
        // verify() checks every blob: it must find the same fault.
        bool found = false;
        for (const auto& p : Archive::open(path).verify())
          found =
              found || (p.entry == row.entry && p.message.find(row.message) != std::string::npos);
        CHECK_MESSAGE(found, "verify() reports no problem naming '" << row.entry << "' with '"
                                                                    << row.message << "'");
      }
    }
  }

  TEST_CASE("Every corpus file has a row in expected.tsv, and the corpus is small") {
    std::set<std::string> listed;
    for (const Row& row : manifest()) {
      CAPTURE(row.file);
      CHECK(listed.insert(row.file).second);  // one row per file
    }
    std::uintmax_t total = 0;
    for (const auto& f : fs::directory_iterator(hostile_dir() / "corpus")) {
      const std::string name = f.path().filename().string();
      CAPTURE(name);
      CHECK(listed.count(name) == 1);
      total += f.file_size();
    }
    CHECK(total < (1u << 20));
  }
}
