// Fuzz target: the text entries of an archive (src/format): tags.txt,
// params.txt, updater.txt, modelzip.toml, <tag>/metadata.toml and the escaped
// names in them. The
// same bytes go to every parser.
//
// Invariant: whatever a parser accepts, its writer writes, and the written
// text parses back to the same value.
#include <cstdint>
#include <string>
#include <vector>

#include "format/archive_metadata.hpp"
#include "format/blob_table.hpp"
#include "format/name_escape.hpp"
#include "format/tag_metadata.hpp"
#include "format/tags_file.hpp"
#include "fuzz_support.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;
using namespace modelzip::format;

namespace {

void tags(std::string_view text, const Limits& limits) {
  std::vector<std::string> parsed;
  if (!attempt([&] { parsed = parse_tags_file(text, limits); })) return;
  std::vector<std::string> again;
  FUZZ_CHECK(attempt([&] { again = parse_tags_file(write_tags_file(parsed), limits); }));
  FUZZ_CHECK(again == parsed);
}

void blob_table(std::string_view text, TableKind kind, const Limits& limits) {
  std::vector<BlobRow> rows;
  if (!attempt([&] { rows = parse_blob_table(text, kind, limits); })) return;
  std::vector<BlobRow> again;
  FUZZ_CHECK(
      attempt([&] { again = parse_blob_table(write_blob_table(rows, kind), kind, limits); }));
  FUZZ_CHECK(again.size() == rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    FUZZ_CHECK(again[i].keys == rows[i].keys);
    FUZZ_CHECK(again[i].ref == rows[i].ref);
    FUZZ_CHECK(parse_blob_ref(blob_ref_text(rows[i].ref), kind) == rows[i].ref);
  }
}

void metadata(std::string_view text, const Limits& limits) {
  Metadata parsed;
  if (!attempt([&] { parsed = parse_metadata(text, limits); })) return;
  Metadata again;
  FUZZ_CHECK(attempt([&] { again = parse_metadata(write_metadata(parsed), limits); }));
  FUZZ_CHECK(again == parsed);
}

void tag_metadata(std::string_view text, const Limits& limits) {
  TagMetadata parsed;
  if (!attempt([&] { parsed = parse_tag_metadata(text, limits); })) return;
  TagMetadata again;
  FUZZ_CHECK(attempt([&] { again = parse_tag_metadata(write_tag_metadata(parsed), limits); }));
  FUZZ_CHECK(again == parsed);
}

void name(std::string_view text) {
  std::string unescaped;
  if (!attempt([&] { unescaped = unescape_name(text); })) return;
  std::string again;
  FUZZ_CHECK(attempt([&] { again = unescape_name(escape_name(unescaped)); }));
  FUZZ_CHECK(again == unescaped);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = input_text(data, size);
  const Limits limits;
  tags(text, limits);
  blob_table(text, TableKind::params, limits);
  blob_table(text, TableKind::updater, limits);
  metadata(text, limits);
  tag_metadata(text, limits);
  name(text);
  return 0;
}
