// params.txt and updater.txt: tables that map names to blob entries.
//
//   params.txt   line = <name> SP <blob>
//   updater.txt  line = <variable> SP <state> SP <blob>
//
// Names are escaped (name_escape.hpp). Lines starting with '#' are comments.
// <blob> is  [<tag>/]<n>[.fifu]  where <n> is a decimal number without
// leading zeros (at most 15 digits). Without a tag it names a blob of the
// table's own tag; with one it names a blob stored under that tag (sharing).
// The blob entry is "<owner tag>/<folder>/<n>.fb" (or ".fifu"), folder being
// "params" for params.txt and "updater" for updater.txt. ".fifu" (a
// finalfusion embedding) is allowed in params.txt only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/position_index.hpp"
#include "modelzip/error.hpp"
#include "modelzip/limits.hpp"

namespace modelzip::format {

enum class BlobFormat : std::uint8_t { tensor, fifu };

struct BlobRef {
  std::string tag;  // owner tag; empty: the table's own tag
  std::uint64_t index = 0;
  BlobFormat format = BlobFormat::tensor;
  bool operator==(const BlobRef&) const = default;
};

enum class TableKind : std::uint8_t { params, updater };

struct BlobRow {
  std::vector<std::string> keys;  // params: {name}; updater: {variable, state}
  BlobRef ref;
  std::uint64_t line = 0;  // 1-based line in the file (0 for rows built in memory)
};

std::string_view table_entry_name(TableKind kind) noexcept;  // "params.txt" / "updater.txt"
std::string_view table_folder(TableKind kind) noexcept;      // "params" / "updater"

// Throws Error(corrupt) with the line number on any malformed line or a
// repeated key. If `index` is given, it receives the rows' positions by key
// (built anyway to find repeated keys): find them with row_key_hash() and
// row_has_keys(). With `report`, each bad line (malformed, or repeating the
// keys of an earlier row) is passed to it instead, with its line number, and
// left out of the rows; what concerns the whole text (its size, a
// byte-order mark) is still thrown.
std::vector<BlobRow> parse_blob_table(std::string_view text, TableKind kind, const Limits& limits,
                                      detail::PositionIndex* index = nullptr,
                                      const std::function<void(const Error&)>& report = {});
// The hash under which parse_blob_table indexes the row with keys
// {first} (params) or {first, second} (updater).
std::uint64_t row_key_hash(TableKind kind, std::string_view first,
                           std::string_view second = {}) noexcept;
bool row_has_keys(const BlobRow& row, TableKind kind, std::string_view first,
                  std::string_view second = {}) noexcept;
std::string write_blob_table(const std::vector<BlobRow>& rows, TableKind kind);

// The blob that the file `rest` of a tag folder is ("params/3.fb",
// "params/0.fifu", "updater/12.fb"), or nullopt: a blob file name is exactly
// <folder>/<n>.fb, or params/<n>.fifu, with <n> as in blob references (no
// leading zeros, at most 15 digits; extensions are case-sensitive). Every
// other file under params/ and updater/ ("00.fb", "1.FB", "1.fb.bak",
// "sub/1.fb") is an ordinary file of the tag: never decoded, never
// referenced, kept by writers (FORMAT.md section 2).
struct BlobFile {
  TableKind kind;
  std::uint64_t index;
  BlobFormat format;
};
std::optional<BlobFile> blob_file_of(std::string_view rest) noexcept;

// Parses one <blob> field; throws Error(corrupt).
BlobRef parse_blob_ref(std::string_view field, TableKind kind);
std::string blob_ref_text(const BlobRef& ref);
// The zip entry of `ref` as seen from the table of `own_tag`.
std::string blob_entry_name(const BlobRef& ref, std::string_view own_tag, TableKind kind);
// The same, written into `out` (replacing its contents; reuses its memory).
void blob_entry_name_into(std::string& out, const BlobRef& ref, std::string_view own_tag,
                          TableKind kind);

}  // namespace modelzip::format
