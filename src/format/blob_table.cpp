#include "format/blob_table.hpp"
#include "core/printable.hpp"

#include <algorithm>
#include <array>
#include <charconv>

#include "core/fail.hpp"
#include "format/name_escape.hpp"
#include "format/tag_name.hpp"
#include "format/text_lines.hpp"
#include "modelzip/error.hpp"

namespace modelzip::format {
namespace {

using modelzip::detail::fail_corrupt;

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

namespace {

// <n> of a blob reference: "0" or [1-9][0-9]{0,14}.
std::optional<std::uint64_t> blob_index(std::string_view digits) noexcept {
  if (digits.empty() || digits.size() > 15 || (digits.size() > 1 && digits[0] == '0'))
    return std::nullopt;
  std::uint64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

}  // namespace

std::optional<BlobFile> blob_file_of(std::string_view rest) noexcept {
  for (TableKind kind : {TableKind::params, TableKind::updater}) {
    const std::string_view folder = table_folder(kind);
    if (rest.size() <= folder.size() || !rest.starts_with(folder) || rest[folder.size()] != '/')
      continue;
    std::string_view file = rest.substr(folder.size() + 1);
    BlobFormat format = BlobFormat::tensor;
    if (file.ends_with(".fb")) {
      file.remove_suffix(3);
    } else if (kind == TableKind::params && file.ends_with(".fifu")) {
      file.remove_suffix(5);
      format = BlobFormat::fifu;
    } else {
      return std::nullopt;
    }
    if (auto n = blob_index(file)) return BlobFile{kind, *n, format};
    return std::nullopt;
  }
  return std::nullopt;
}

BlobRef parse_blob_ref(std::string_view field, TableKind kind) {
  BlobRef ref;
  std::string_view rest = field;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    ref.tag = std::string(rest.substr(0, slash));
    if (auto why = invalid_tag_reason(ref.tag); !why.empty())
      fail_corrupt("blob reference " + modelzip::detail::quote_name(field) + ": " + why);
    rest = rest.substr(slash + 1);
  }
  constexpr std::string_view fifu = ".fifu";
  if (rest.size() > fifu.size() && rest.substr(rest.size() - fifu.size()) == fifu) {
    if (kind != TableKind::params)
      fail_corrupt("blob reference " + modelzip::detail::quote_name(field) +
                   ": .fifu blobs belong in params.txt");
    ref.format = BlobFormat::fifu;
    rest.remove_suffix(fifu.size());
  }
  const std::optional<std::uint64_t> index = blob_index(rest);
  if (!index)
    fail_corrupt("blob reference " + modelzip::detail::quote_name(field) +
                 " is not [<tag>/]<n>[.fifu] with <n> a decimal number without leading zeros");
  ref.index = *index;
  return ref;
}

std::string blob_ref_text(const BlobRef& ref) {
  std::string s = ref.tag.empty() ? "" : ref.tag + "/";
  s += std::to_string(ref.index);
  if (ref.format == BlobFormat::fifu) s += ".fifu";
  return s;
}

void blob_entry_name_into(std::string& out, const BlobRef& ref, std::string_view own_tag,
                          TableKind kind) {
  char digits[20];
  const auto end = std::to_chars(digits, digits + sizeof digits, ref.index).ptr;
  out.assign(ref.tag.empty() ? own_tag : std::string_view(ref.tag));
  out += '/';
  out += table_folder(kind);
  out += '/';
  out.append(digits, end);
  out += ref.format == BlobFormat::fifu ? ".fifu" : ".fb";
}

std::string blob_entry_name(const BlobRef& ref, std::string_view own_tag, TableKind kind) {
  std::string out;
  blob_entry_name_into(out, ref, own_tag, kind);
  return out;
}

std::uint64_t row_key_hash(TableKind kind, std::string_view first,
                           std::string_view second) noexcept {
  std::uint64_t h = detail::hash_key(first);
  if (kind == TableKind::updater) h = h * 0x9E3779B97F4A7C15ull ^ detail::hash_key(second);
  return h;
}

bool row_has_keys(const BlobRow& row, TableKind kind, std::string_view first,
                  std::string_view second) noexcept {
  if (kind == TableKind::params) return row.keys.size() == 1 && row.keys[0] == first;
  return row.keys.size() == 2 && row.keys[0] == first && row.keys[1] == second;
}

std::vector<BlobRow> parse_blob_table(std::string_view text, TableKind kind, const Limits& limits,
                                      detail::PositionIndex* index,
                                      const std::function<void(const Error&)>& report) {
  const std::size_t keys = key_count(kind);
  // At most one row per line; the reservation is capped because the line
  // count comes from the input.
  const auto lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  std::vector<BlobRow> rows;
  rows.reserve(std::min<std::size_t>(lines, std::size_t{1} << 16));
  detail::PositionIndex seen(rows.capacity());  // rows by keys
  auto parse_line = [&](const TextLine& line) {
    if (!line.text.empty() && line.text.front() == '#') return;
    try {
      std::array<std::string_view, 3> fields;
      std::size_t count = 0;
      std::size_t start = 0;
      for (;;) {
        std::size_t sp = line.text.find(' ', start);
        if (count < fields.size()) fields[count] = line.text.substr(start, sp - start);
        ++count;
        if (sp == std::string_view::npos) break;
        start = sp + 1;
      }
      if (count != keys + 1)
        fail_corrupt("expected " + std::to_string(keys + 1) +
                     " fields separated by single spaces, found " + std::to_string(count));
      BlobRow row;
      row.line = line.number;
      row.keys.reserve(keys);
      for (std::size_t k = 0; k < keys; ++k) row.keys.push_back(unescape_name(fields[k]));
      row.ref = parse_blob_ref(fields[keys], kind);
      const std::string_view first = row.keys[0];
      const std::string_view second =
          keys == 2 ? std::string_view(row.keys[1]) : std::string_view();
      std::size_t earlier =
          seen.insert(row_key_hash(kind, first, second), rows.size(),
                      [&](std::size_t p) { return row_has_keys(rows[p], kind, first, second); });
      if (earlier != detail::PositionIndex::npos)
        fail_corrupt(
            modelzip::detail::quote_name(row.keys[0] + (keys == 2 ? " " + row.keys[1] : "")) +
            " is listed already on line " + std::to_string(rows[earlier].line));
      rows.push_back(std::move(row));
    } catch (const Error& e) {
      if (!report) throw e.with_context({.line = line.number});
      report(e.with_context({.line = line.number}));
    }
  };
  if (report) {
    for_each_line(text, limits, parse_line, report);
  } else {
    for (const auto& line : lines_of(text, limits)) parse_line(line);
  }
  if (index) *index = std::move(seen);
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
