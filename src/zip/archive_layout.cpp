#include "zip/archive_layout.hpp"

#include <algorithm>
#include <vector>

#include "core/checked.hpp"
#include "zip/free_range.hpp"

namespace modelzip::zip {
namespace {

constexpr std::uint32_t kEocdSignature = 0x06054b50;
constexpr std::uint64_t kEocdSize = 22;
constexpr std::uint64_t kZip64EndRecordsSize = 56 + 20;  // record + locator

std::uint64_t end_of_data(const EntryInfo& e) {
  return e.data_offset + e.compressed_size;  // no overflow: the parser checked it
}

const EntryInfo* last_entry(const Directory& directory) {
  const EntryInfo* last = nullptr;
  for (const auto& e : directory.entries)
    if (!last || e.local_header_offset > last->local_header_offset) last = &e;
  return last;
}

}  // namespace

std::uint64_t tail_start(const Directory& directory, std::string_view tail_entry) {
  const EntryInfo* e = directory.find(tail_entry);
  if (e && end_of_data(*e) == directory.central_directory_offset) return e->local_header_offset;
  return directory.central_directory_offset;
}

std::uint64_t unused_bytes(const Directory& directory, std::span<const std::byte> file) {
  // The parser rejects overlaps, so the covered ranges add up exactly.
  std::uint64_t covered = directory.central_directory_size;
  for (const auto& e : directory.entries) covered += end_of_data(e) - e.local_header_offset;
  const std::uint64_t cd_end =
      directory.central_directory_offset + directory.central_directory_size;
  if (directory.end_of_archive > cd_end) covered += directory.end_of_archive - cd_end;
  return file.size() > covered ? file.size() - covered : 0;
}

bool appendable_in_place(const Directory& directory, std::span<const std::byte> file,
                         std::string_view tail_entry) {
  if (directory.end_of_archive != file.size()) return false;
  const EntryInfo* last = last_entry(directory);
  if (!last || last->name != tail_entry || end_of_data(*last) != directory.central_directory_offset)
    return false;
  std::vector<ByteRange> covered;
  covered.reserve(directory.entries.size());
  for (const auto& e : directory.entries) covered.push_back(entry_extent(e));
  std::uint64_t freed = 0;
  for (const ByteRange& gap : gaps_between(std::move(covered), last->local_header_offset)) {
    if (!is_freed_range(file, gap)) return false;
    freed += gap.size;
  }
  if (unused_bytes(directory, file) != freed) return false;
  const std::uint64_t cd_end =
      directory.central_directory_offset + directory.central_directory_size;
  const std::uint64_t end_record = kEocdSize + directory.comment.size();
  const std::uint64_t ends = file.size() - cd_end;
  if (ends != end_record && ends != end_record + kZip64EndRecordsSize) return false;
  const std::byte* eocd = file.data() + file.size() - end_record;
  return detail::load_le<std::uint32_t>(eocd) == kEocdSignature &&
         detail::load_le<std::uint16_t>(eocd + 20) == directory.comment.size();
}

}  // namespace modelzip::zip
