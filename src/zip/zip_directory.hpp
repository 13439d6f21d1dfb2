// Bounds-checked parser of a zip archive's structure (end of central
// directory, ZIP64 records, central directory, local headers), giving each
// entry's data offset so stored entries can be read in place (libzip has no
// public API for offsets; design notes section 2).
//
// Accepted: single-disk archives, methods 0 (store) and 8 (deflate), ZIP64
// (also end records beside 32-bit fields that hold the real values, as long
// as both agree), an archive comment, and trailing bytes after the end
// record (schemas/FORMAT.md section 1 fixes how the end record is found).
// Rejected with Error(corrupt) naming the entry: unreadable structures,
// sizes or offsets outside the file (checked with overflow-safe arithmetic),
// entries overlapping each other or the central directory, a stored entry
// whose sizes differ, duplicate names, names that are not valid UTF-8, and
// names that could escape a folder (absolute, "..", backslash, drive
// letters). Encrypted entries and other methods: Error(unsupported).
//
// Pure function of its input; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/position_index.hpp"
#include "io/byte_source.hpp"
#include "modelzip/limits.hpp"

namespace modelzip::zip {

inline constexpr std::uint16_t kMethodStore = 0;
inline constexpr std::uint16_t kMethodDeflate = 8;
inline constexpr std::uint64_t kLocalHeaderFixedSize = 30;
// EntryInfo::data_offset of an entry whose local header was not read yet
// (parse_directory with a source: remote archives; EntryReader reads it).
inline constexpr std::uint64_t kDataOffsetUnknown = UINT64_MAX;

struct EntryInfo {
  std::string name;
  std::uint16_t method = kMethodStore;
  std::uint16_t flags = 0;
  std::uint32_t crc32 = 0;
  std::uint64_t compressed_size = 0;
  std::uint64_t uncompressed_size = 0;
  std::uint64_t local_header_offset = 0;
  // First byte of the (compressed) data, or kDataOffsetUnknown until the
  // local header is checked (then ask EntryReader::data_offset).
  std::uint64_t data_offset = 0;
  // Where the next entry in file order (or the central directory) begins:
  // this entry's local header, extra fields and data must end by then.
  std::uint64_t area_end = 0;
  bool stored() const noexcept { return method == kMethodStore; }
};

struct Directory {
  std::vector<EntryInfo> entries;  // central directory order
  std::uint64_t central_directory_offset = 0;
  std::uint64_t central_directory_size = 0;
  // One past the end-of-central-directory record and its comment; bytes
  // after it (trailing bytes) are ignored.
  std::uint64_t end_of_archive = 0;
  std::string comment;  // the archive comment (bytes as they are)
  // Positions in `entries` by name (built by parse_directory while it checks
  // that names are unique). A Directory whose entries are changed afterwards
  // must not use find().
  detail::PositionIndex by_name;

  // The entry named exactly `name`, or nullptr.
  const EntryInfo* find(std::string_view name) const;
};

// Parses the structure of the zip archive `file` (the complete file).
// Errors carry the entry name (when known) and the offset. With a `source`
// (remote archives), the ranges it touches are ensured first: the tail, the
// ZIP64 records, the central directory; local headers are then not read
// (data_offset is kDataOffsetUnknown): EntryReader checks each one with
// check_local_header when the entry is first read, fetched together with
// its data. Overlaps are then checked at open with each entry's smallest
// possible local header (30 bytes + its name), and the rest by
// check_local_header against area_end: the same checks, later.
Directory parse_directory(std::span<const std::byte> file, const Limits& limits,
                          const io::ByteSource* source = nullptr);

// Checks entry `e`'s local header in `file` against the central directory
// (signature, name, and the data [data offset, + compressed size) ending by
// `area_end`) and returns the data offset. The header's fixed part and name
// must be present in `file`. Throws Error(corrupt) naming the entry.
std::uint64_t check_local_header(std::span<const std::byte> file, const EntryInfo& e,
                                 std::uint64_t area_end);

// Why `name` is not a safe relative entry name, or "" if it is.
std::string unsafe_name_reason(std::string_view name);

}  // namespace modelzip::zip
