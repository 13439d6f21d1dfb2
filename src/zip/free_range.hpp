// Free ranges: bytes before an archive's tail that no entry of its central
// directory covers, left where entries were removed in place (FORMAT.md
// section 8.5). Each is *formatted* as one stored entry that only its local
// header announces (the central directory does not list it), named
// `.modelzip-free/<offset>`, whose data runs to the end of the range and
// whose CRC-32 is that of the bytes there. Streaming readers, which walk
// the local headers in file order, read past it as an ordinary entry;
// readers that use the central directory never see it. Formatting writes
// the header only: the removed entries' bytes stay until a rewrite (gc)
// drops them.
//
// Pure functions of their arguments, except format_free_ranges, which
// writes through a descriptor. Thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/byte_source.hpp"
#include "zip/zip_directory.hpp"

namespace modelzip::zip {

struct ByteRange {
  std::uint64_t offset = 0, size = 0;
  std::uint64_t end() const noexcept { return offset + size; }
  bool operator==(const ByteRange&) const = default;
};

inline constexpr std::string_view kFreeEntryPrefix = ".modelzip-free/";
// A range shorter than this cannot hold a free entry's header with a safe
// name (at least 2 bytes); modelzip never frees one (a tag's entry has a
// name of at least 3 bytes).
inline constexpr std::uint64_t kMinFreeRange = 32;

// The extent of `entry` in the file: its local header through its data.
ByteRange entry_extent(const EntryInfo& entry) noexcept;

// The parts of [0, end) that none of `covered` covers, in file order.
// `covered` may be unsorted; its ranges must not overlap.
std::vector<ByteRange> gaps_between(std::vector<ByteRange> covered, std::uint64_t end);

// The free entry name of `range`: kFreeEntryPrefix and the offset in
// decimal, cut to `range.size - 30` bytes when the range is shorter than
// its header (never below 2 bytes: such ranges are not formatted).
std::string free_entry_name(const ByteRange& range);

// Whether the bytes at `range` in `file` are its free entry's local header
// with the sizes that end it exactly at the range's end (the CRC is not
// checked: that would read the range).
bool is_free_entry(std::span<const std::byte> file, const ByteRange& range);

// Whether `range` (a gap before the tail) may be formatted: long enough,
// and starting with a local header signature (a formatted range, or entries
// the central directory no longer lists). Other gaps (bytes another tool
// left, such as data descriptors) are not modelzip's to overwrite.
bool is_freed_range(std::span<const std::byte> file, const ByteRange& range);

// The local header that formats `range` as a free entry over the bytes
// that are in `file` now. Its CRC-32 follows from the CRCs that the local
// headers of the entries in the range declare (a stored entry's data is
// not read; the range's bytes are read where no such header describes
// them), so the cost is O(entries), not O(bytes). `source` (optional): the
// ByteSource that fills `file` on demand (a remote archive's mapping); the
// bytes read are ensure()d first.
std::vector<std::byte> free_entry_header(std::span<const std::byte> file, const ByteRange& range,
                                         const io::ByteSource* source = nullptr);

// Formats each of `ranges` that is freed (is_freed_range) and not yet a
// free entry: computes every header from `file` (the archive's current
// bytes, e.g. its mapping) first, then writes them through `fd`. Returns
// the number of bytes written (headers). Error(io) naming `file_name`.
std::uint64_t format_free_ranges(int fd, const std::string& file_name,
                                 std::span<const std::byte> file,
                                 const std::vector<ByteRange>& ranges);

}  // namespace modelzip::zip
