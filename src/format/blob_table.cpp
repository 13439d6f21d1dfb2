#include "format/blob_table.hpp"

#include <unordered_map>

#include "format/name_escape.hpp"
#include "format/tag_name.hpp"
#include "format/text_lines.hpp"
#include "modelzip/error.hpp"

namespace modelzip::format {
namespace {

[[noreturn]] void corrupt(const std::string& what) {
  throw Error(ErrorCode::corrupt, what);
}

std::size_t key_count(TableKind kind) {
  return kind == TableKind::params ? 1 : 2;
}

}  // namespace

std::string_view table_entry_name(TableKind kind) noexcept {
  return kind == TableKind::params ? "params.txt" : "updater.txt";
}

std::string_view table_folder(TableKind kind) noexcept {
  return kind == TableKind::params ? "params" : "updater";
}

BlobRef parse_blob_ref(std::string_view field, TableKind kind) {
  BlobRef ref;
  std::string_view rest = field;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    ref.tag = std::string(rest.substr(0, slash));
    if (auto why = invalid_tag_reason(ref.tag); !why.empty())
      corrupt("blob reference '" + std::string(field) + "': " + why);
    rest = rest.substr(slash + 1);
  }
  constexpr std::string_view fifu = ".fifu";
  if (rest.size() > fifu.size() && rest.substr(rest.size() - fifu.size()) == fifu) {
    if (kind != TableKind::params)
      corrupt("blob reference '" + std::string(field) + "': .fifu blobs belong in params.txt");
    ref.format = BlobFormat::fifu;
    rest.remove_suffix(fifu.size());
  }
  bool digits = !rest.empty() && rest.size() <= 15;
  for (char c : rest) digits = digits && c >= '0' && c <= '9';
  if (!digits || (rest.size() > 1 && rest[0] == '0'))
    corrupt("blob reference '" + std::string(field) +
            "' is not [<tag>/]<n>[.fifu] with <n> a decimal number without leading zeros");
  for (char c : rest) ref.index = ref.index * 10 + static_cast<std::uint64_t>(c - '0');
  return ref;
}

std::string blob_ref_text(const BlobRef& ref) {
  std::string s = ref.tag.empty() ? "" : ref.tag + "/";
  s += std::to_string(ref.index);
  if (ref.format == BlobFormat::fifu) s += ".fifu";
  return s;
}

std::string blob_entry_name(const BlobRef& ref, std::string_view own_tag, TableKind kind) {
  std::string owner = ref.tag.empty() ? std::string(own_tag) : ref.tag;
  return owner + "/" + std::string(table_folder(kind)) + "/" + std::to_string(ref.index) +
         (ref.format == BlobFormat::fifu ? ".fifu" : ".fb");
}

std::vector<BlobRow> parse_blob_table(std::string_view text, TableKind kind, const Limits& limits) {
  const std::size_t keys = key_count(kind);
  std::vector<BlobRow> rows;
  std::unordered_map<std::string, std::uint64_t> seen;  // joined keys -> line
  for (const auto& line : split_lines(text, limits)) {
    if (!line.text.empty() && line.text.front() == '#') continue;
    try {
      std::vector<std::string_view> fields;
      std::size_t start = 0;
      for (;;) {
        std::size_t sp = line.text.find(' ', start);
        fields.push_back(line.text.substr(start, sp - start));
        if (sp == std::string_view::npos) break;
        start = sp + 1;
      }
      if (fields.size() != keys + 1)
        corrupt("expected " + std::to_string(keys + 1) +
                " fields separated by single spaces, found " + std::to_string(fields.size()));
      BlobRow row;
      row.line = line.number;
      for (std::size_t k = 0; k < keys; ++k) row.keys.push_back(unescape_name(fields[k]));
      row.ref = parse_blob_ref(fields[keys], kind);
      std::string joined = row.keys[0];
      if (keys == 2) joined += std::string(1, '\0') + row.keys[1];
      auto [it, inserted] = seen.emplace(joined, line.number);
      if (!inserted)
        corrupt("'" + row.keys[0] + (keys == 2 ? " " + row.keys[1] : "") +
                "' is listed already on line " + std::to_string(it->second));
      rows.push_back(std::move(row));
    } catch (const Error& e) {
      throw e.with_context({.line = line.number});
    }
  }
  return rows;
}

std::string write_blob_table(const std::vector<BlobRow>& rows, TableKind kind) {
  std::string out;
  for (const auto& row : rows) {
    for (std::size_t k = 0; k < key_count(kind); ++k) out += escape_name(row.keys.at(k)) + " ";
    out += blob_ref_text(row.ref) + "\n";
  }
  return out;
}

}  // namespace modelzip::format
