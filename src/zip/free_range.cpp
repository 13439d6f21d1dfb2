#include "zip/free_range.hpp"

#include <algorithm>
#include <optional>

#include "core/checked.hpp"
#include "core/crc32.hpp"
#include "io/posix_file.hpp"
#include "modelzip/error.hpp"
#include "zip/zip_stream_writer.hpp"

namespace modelzip::zip {
namespace {

constexpr std::uint32_t kLocalSignature = 0x04034b50;
constexpr std::uint64_t k32 = 0xFFFFFFFFull;

// One local header and its data inside a range, as its header declares
// them: lengths and the CRC-32 of the data.
struct Item {
  std::uint64_t header = 0, data = 0;
  std::uint32_t data_crc = 0;
};

// The entry whose local header is at `at`, if a well-formed one lies
// wholly inside [at, end) without a data descriptor. A deflated entry's
// CRC covers its uncompressed bytes, so its data is read.
std::optional<Item> item_at(std::span<const std::byte> file, std::uint64_t at, std::uint64_t end,
                            const io::ByteSource* source) {
  if (!detail::range_fits(at, kLocalHeaderFixedSize, end)) return std::nullopt;
  if (source) source->ensure(at, kLocalHeaderFixedSize);
  const std::byte* h = file.data() + at;
  if (detail::load_le<std::uint32_t>(h) != kLocalSignature) return std::nullopt;
  const auto flags = detail::load_le<std::uint16_t>(h + 6);
  const auto method = detail::load_le<std::uint16_t>(h + 8);
  const auto crc = detail::load_le<std::uint32_t>(h + 14);
  std::uint64_t compressed = detail::load_le<std::uint32_t>(h + 18);
  std::uint64_t uncompressed = detail::load_le<std::uint32_t>(h + 22);
  const std::uint64_t name = detail::load_le<std::uint16_t>(h + 26);
  const std::uint64_t extra = detail::load_le<std::uint16_t>(h + 28);
  const std::uint64_t header = kLocalHeaderFixedSize + name + extra;
  if ((flags & 0x0008) != 0 || !detail::range_fits(at, header, end)) return std::nullopt;
  if (source) source->ensure(at, header);
  if (compressed == k32 || uncompressed == k32) {  // sizes in the ZIP64 extra field
    bool found = false;
    for (std::uint64_t p = at + kLocalHeaderFixedSize + name; p + 4 <= at + header;) {
      const auto id = detail::load_le<std::uint16_t>(file.data() + p);
      const std::uint64_t len = detail::load_le<std::uint16_t>(file.data() + p + 2);
      if (p + 4 + len > at + header) return std::nullopt;
      if (id == 0x0001 && len >= 16) {
        uncompressed = detail::load_le<std::uint64_t>(file.data() + p + 4);
        compressed = detail::load_le<std::uint64_t>(file.data() + p + 12);
        found = true;
        break;
      }
      p += 4 + len;
    }
    if (!found) return std::nullopt;
  }
  if (!detail::range_fits(at + header, compressed, end)) return std::nullopt;
  Item item{header, compressed, crc};
  if (method != kMethodStore && source) source->ensure(at + header, compressed);
  if (method != kMethodStore)
    item.data_crc = detail::crc32_of(file.subspan(at + header, compressed));
  else if (compressed != uncompressed)
    return std::nullopt;
  return item;
}

// The CRC-32 of file[begin, end): header bytes are read, stored data is
// taken from its header's CRC; where no well-formed header is found, the
// rest of the range is read.
std::uint32_t range_crc(std::span<const std::byte> file, std::uint64_t begin, std::uint64_t end,
                        const io::ByteSource* source) {
  std::uint32_t crc = 0;
  for (std::uint64_t at = begin; at < end;) {
    const std::optional<Item> item = item_at(file, at, end, source);
    if (!item && source) source->ensure(at, end - at);
    if (!item) return detail::crc32_update(crc, file.subspan(at, end - at));
    crc = detail::crc32_update(crc, file.subspan(at, item->header));
    crc = detail::crc32_concat(crc, item->data_crc, item->data);
    at += item->header + item->data;
  }
  return crc;
}

struct Layout {
  std::string name;
  std::uint64_t header = 0, data = 0;
  bool zip64 = false;
};

Layout layout_of(const ByteRange& range) {
  Layout l;
  l.name = free_entry_name(range);
  l.header = kLocalHeaderFixedSize + l.name.size();
  l.data = range.size - l.header;
  if (l.data >= k32) {
    l.zip64 = true;
    l.header += 20;
    l.data -= 20;
  }
  return l;
}

}  // namespace

ByteRange entry_extent(const EntryInfo& entry) noexcept {
  return ByteRange{entry.local_header_offset,
                   entry.data_offset + entry.compressed_size - entry.local_header_offset};
}

std::vector<ByteRange> gaps_between(std::vector<ByteRange> covered, std::uint64_t end) {
  std::sort(covered.begin(), covered.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
  std::vector<ByteRange> gaps;
  std::uint64_t at = 0;
  for (const ByteRange& r : covered) {
    if (r.offset >= end) break;
    if (r.offset > at) gaps.push_back(ByteRange{at, r.offset - at});
    at = std::max(at, r.end());
  }
  if (at < end) gaps.push_back(ByteRange{at, end - at});
  return gaps;
}

std::string free_entry_name(const ByteRange& range) {
  std::string name = std::string(kFreeEntryPrefix) + std::to_string(range.offset);
  if (range.size < kLocalHeaderFixedSize + name.size())
    name.resize(range.size > kLocalHeaderFixedSize + 2 ? range.size - kLocalHeaderFixedSize : 2);
  return name;
}

bool is_free_entry(std::span<const std::byte> file, const ByteRange& range) {
  if (range.size < kMinFreeRange || !detail::range_fits(range.offset, range.size, file.size()))
    return false;
  const Layout l = layout_of(range);
  const std::byte* h = file.data() + range.offset;
  const std::uint64_t size32 = l.zip64 ? k32 : l.data;
  if (detail::load_le<std::uint32_t>(h) != kLocalSignature ||
      detail::load_le<std::uint16_t>(h + 6) != 0 ||
      detail::load_le<std::uint16_t>(h + 8) != kMethodStore ||
      detail::load_le<std::uint32_t>(h + 18) != size32 ||
      detail::load_le<std::uint32_t>(h + 22) != size32 ||
      detail::load_le<std::uint16_t>(h + 26) != l.name.size() ||
      detail::load_le<std::uint16_t>(h + 28) != (l.zip64 ? 20 : 0))
    return false;
  const std::string_view name(reinterpret_cast<const char*>(h) + kLocalHeaderFixedSize,
                              l.name.size());
  if (name != l.name) return false;
  if (!l.zip64) return true;
  const std::byte* z = h + kLocalHeaderFixedSize + l.name.size();
  return detail::load_le<std::uint16_t>(z) == 0x0001 &&
         detail::load_le<std::uint16_t>(z + 2) == 16 &&
         detail::load_le<std::uint64_t>(z + 4) == l.data &&
         detail::load_le<std::uint64_t>(z + 12) == l.data;
}

bool is_freed_range(std::span<const std::byte> file, const ByteRange& range) {
  return range.size >= kMinFreeRange && detail::range_fits(range.offset, range.size, file.size()) &&
         detail::load_le<std::uint32_t>(file.data() + range.offset) == kLocalSignature;
}

std::vector<std::byte> free_entry_header(std::span<const std::byte> file, const ByteRange& range,
                                         const io::ByteSource* source) {
  if (range.size < kMinFreeRange || !detail::range_fits(range.offset, range.size, file.size()))
    throw Error(ErrorCode::invalid_argument, "cannot format a free range of " +
                                                 std::to_string(range.size) + " bytes at " +
                                                 std::to_string(range.offset));
  const Layout l = layout_of(range);
  // crc(range) = crc(head ++ data) = shift(crc(head), |data|) xor crc(data).
  if (source) source->ensure(range.offset, l.header);
  const std::uint32_t whole = range_crc(file, range.offset, range.end(), source);
  const std::uint32_t head = detail::crc32_of(file.subspan(range.offset, l.header));
  const std::uint32_t data_crc = whole ^ detail::crc32_concat(head, 0, l.data);
  return encode_local_header(LocalHeader{.name = l.name,
                                         .method = kMethodStore,
                                         .flags = 0,
                                         .crc = data_crc,
                                         .compressed = l.data,
                                         .uncompressed = l.data,
                                         .zip64 = l.zip64},
                             range.offset, false);
}

std::uint64_t format_free_ranges(int fd, const std::string& file_name,
                                 std::span<const std::byte> file,
                                 const std::vector<ByteRange>& ranges) {
  std::vector<std::pair<ByteRange, std::vector<std::byte>>> headers;
  for (const ByteRange& r : ranges)
    if (is_freed_range(file, r) && !is_free_entry(file, r))
      headers.emplace_back(r, free_entry_header(file, r, nullptr));
  std::uint64_t written = 0;
  for (const auto& [range, header] : headers) {
    io::pwrite_full(fd, header.data(), header.size(), range.offset,
                    ErrorContext{.archive = file_name, .offset = range.offset},
                    "cannot mark freed bytes as a free entry");
    written += header.size();
  }
  return written;
}

}  // namespace modelzip::zip
