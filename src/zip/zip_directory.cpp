#include "zip/zip_directory.hpp"
#include "core/printable.hpp"

#include <algorithm>
#include <optional>

#include "core/checked.hpp"
#include "core/fail.hpp"
#include "core/utf8.hpp"
#include "modelzip/error.hpp"

namespace modelzip::zip {
namespace {

using detail::ByteReader;
using detail::load_le;

constexpr std::uint32_t kEocdSignature = 0x06054b50;
constexpr std::uint32_t kZip64EocdSignature = 0x06064b50;
constexpr std::uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr std::uint32_t kCentralSignature = 0x02014b50;
constexpr std::uint32_t kLocalSignature = 0x04034b50;
constexpr std::uint64_t kEocdSize = 22;
constexpr std::uint64_t kCentralFixedSize = 46;
constexpr std::uint64_t kLocalFixedSize = kLocalHeaderFixedSize;
constexpr std::uint16_t kZip64ExtraId = 0x0001;

using modelzip::detail::fail_corrupt;

// Position of the end-of-central-directory record, searched in the last
// 22 + 65535 bytes: the last signature whose comment ends exactly at the end
// of the file; if there is none, the last signature whose comment fits in
// the file (the bytes after the comment are trailing bytes, which readers
// ignore, as unzip and Python's zipfile do).
std::uint64_t find_eocd(std::span<const std::byte> file) {
  if (file.size() < kEocdSize)
    fail_corrupt("not a zip archive: " + std::to_string(file.size()) +
                     " bytes is shorter than an end-of-central-directory record",
                 {.offset = 0});
  const std::uint64_t last = file.size() - kEocdSize;
  const std::uint64_t first = last > 0xFFFF ? last - 0xFFFF : 0;
  std::optional<std::uint64_t> fitting;
  for (std::uint64_t pos = last + 1; pos-- > first;) {
    if (load_le<std::uint32_t>(file.data() + pos) != kEocdSignature) continue;
    auto comment = load_le<std::uint16_t>(file.data() + pos + 20);
    if (pos + kEocdSize + comment == file.size()) return pos;
    if (!fitting && pos + kEocdSize + comment < file.size()) fitting = pos;
  }
  if (fitting) return *fitting;
  fail_corrupt("not a zip archive: no end-of-central-directory record", {.offset = file.size()});
}

struct Zip64Sizes {
  std::uint64_t uncompressed, compressed, offset;
};

// Applies the ZIP64 extended-information extra field to the values that are
// 0xFFFFFFFF in the fixed header (in the order the specification fixes).
void apply_zip64(std::span<const std::byte> extra, Zip64Sizes& v, bool need_unc, bool need_comp,
                 bool need_off, std::uint64_t base, const std::string& name) {
  ByteReader r(extra, base);
  while (r.remaining() >= 4) {
    auto id = r.read<std::uint16_t>("extra field id");
    auto len = r.read<std::uint16_t>("extra field length");
    auto body = r.bytes(len, "extra field");
    if (id != kZip64ExtraId) continue;
    ByteReader z(body, base);
    if (need_unc) v.uncompressed = z.read<std::uint64_t>("ZIP64 uncompressed size");
    if (need_comp) v.compressed = z.read<std::uint64_t>("ZIP64 compressed size");
    if (need_off) v.offset = z.read<std::uint64_t>("ZIP64 local header offset");
    return;
  }
  if (need_unc || need_comp || need_off)
    fail_corrupt("sizes need a ZIP64 extra field, but there is none",
                 {.entry = name, .offset = base});
}

// A fast check that accepts the common case: printable ASCII names without
// backslash, drive letter, absolute path, or ".", ".." or empty components
// (a trailing '/' is allowed). False means "look closer", not "unsafe": the
// full rules below then decide and name the reason.
bool plainly_safe(std::string_view name) noexcept {
  if (name.empty() || name.front() == '/' || (name.size() >= 2 && name[1] == ':')) return false;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= name.size(); ++i) {
    if (i < name.size()) {
      const auto c = static_cast<unsigned char>(name[i]);
      if (c < 0x20 || c >= 0x7F || c == '\\') return false;
      if (c != '/') continue;
    }
    const std::size_t length = i - start;
    if (length == 0 && i != name.size()) return false;
    if (length == 1 && name[start] == '.') return false;
    if (length == 2 && name[start] == '.' && name[start + 1] == '.') return false;
    start = i + 1;
  }
  return true;
}

}  // namespace

const EntryInfo* Directory::find(std::string_view name) const {
  std::size_t at =
      by_name.find(detail::hash_key(name), [&](std::size_t p) { return entries[p].name == name; });
  return at == detail::PositionIndex::npos ? nullptr : &entries[at];
}

std::string unsafe_name_reason(std::string_view name) {
  if (plainly_safe(name)) return {};
  if (name.empty()) return "empty entry name";
  if (name.find('\0') != std::string_view::npos) return "entry name contains a NUL byte";
  if (name.find('\\') != std::string_view::npos) return "entry name contains a backslash";
  if (name.front() == '/') return "absolute entry name";
  if (name.size() >= 2 && name[1] == ':') return "entry name starts with a drive letter";
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    std::string_view part = name.substr(start, end - start);
    if (part == "..") return "entry name contains a '..' component";
    if (part == ".") return "entry name contains a '.' component";
    if (part.empty() && end != name.size()) return "entry name contains an empty component";
    start = end + 1;
  }
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7F) return "entry name contains a control character";
  if (auto bad = detail::utf8_invalid_at(name))
    return "entry name is not valid UTF-8 at byte " + std::to_string(*bad);
  return {};
}

std::uint64_t check_local_header(std::span<const std::byte> file, const EntryInfo& e,
                                 std::uint64_t area_end) {
  const std::uint64_t lh = e.local_header_offset;
  if (!detail::range_fits(lh, kLocalFixedSize, std::min<std::uint64_t>(area_end, file.size())))
    fail_corrupt("local header offset " + std::to_string(lh) + " is outside the entry area",
                 {.entry = e.name, .offset = lh});
  ByteReader lr(file.subspan(lh, kLocalFixedSize), lh);
  if (lr.read<std::uint32_t>("local header signature") != kLocalSignature)
    fail_corrupt("bad local header signature", {.entry = e.name, .offset = lh});
  lr.skip(22, "local header fields");
  std::uint64_t lname = lr.read<std::uint16_t>("local name length");
  std::uint64_t lextra = lr.read<std::uint16_t>("local extra length");
  const std::uint64_t data = lh + kLocalFixedSize + lname + lextra;
  if (!detail::range_fits(lh + kLocalFixedSize, lname, area_end) ||
      std::string_view(reinterpret_cast<const char*>(file.data()) + lh + kLocalFixedSize, lname) !=
          e.name)
    fail_corrupt("local header name differs from the central directory",
                 {.entry = e.name, .offset = lh});
  if (!detail::range_fits(data, e.compressed_size, area_end))
    fail_corrupt("entry data [" + std::to_string(data) + ", +" + std::to_string(e.compressed_size) +
                     ") extends past the entry area (" + std::to_string(area_end) + ")",
                 {.entry = e.name, .offset = lh});
  return data;
}

Directory parse_directory(std::span<const std::byte> file, const Limits& limits,
                          const io::ByteSource* source) {
  // Fetches what a remote archive's parse touches next; no-op for local files.
  auto ensure = [&](std::uint64_t offset, std::uint64_t length) {
    if (source) source->ensure(offset, length);
  };
  // The tail: the end record with the longest possible comment, which also
  // holds the ZIP64 records and often the whole central directory.
  const std::uint64_t tail = std::min<std::uint64_t>(file.size(), kEocdSize + 0xFFFF);
  ensure(file.size() - tail, tail);
  const std::uint64_t eocd = find_eocd(file);
  ByteReader er(file.subspan(eocd, kEocdSize), eocd);
  er.skip(4, "signature");
  auto disk = er.read<std::uint16_t>("disk number");
  auto cd_disk = er.read<std::uint16_t>("central directory disk");
  auto disk_entries = er.read<std::uint16_t>("entries on disk");
  std::uint64_t count = er.read<std::uint16_t>("entry count");
  std::uint64_t cd_size = er.read<std::uint32_t>("central directory size");
  std::uint64_t cd_offset = er.read<std::uint32_t>("central directory offset");
  if (disk != 0 || cd_disk != 0 || disk_entries != count)
    fail_corrupt("multi-disk archives are not supported", {.offset = eocd});

  // The ZIP64 end records are used when a 32-bit field holds its escape
  // value (0xFFFF, 0xFFFFFFFF), or when a ZIP64 locator precedes the end
  // record and the 32-bit central directory does not end exactly at the end
  // record (Python's zipfile writes ZIP64 records beyond 2 GiB while the
  // 32-bit fields still hold the real values). Then the ZIP64 values win and
  // every 32-bit field must hold either its escape value or the same value.
  std::uint64_t records_end = eocd;  // where the central directory must end
  const bool plain_fits =
      detail::range_fits(cd_offset, cd_size, eocd) && cd_offset + cd_size == eocd;
  if (eocd >= 20) ensure(eocd - 20, 20);
  const bool locator =
      eocd >= 20 && load_le<std::uint32_t>(file.data() + eocd - 20) == kZip64LocatorSignature;
  const bool escaped = count == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF;
  if (escaped && !locator)
    fail_corrupt("ZIP64 end-of-central-directory locator missing",
                 {.offset = eocd >= 20 ? eocd - 20 : eocd});
  if (escaped || (locator && !plain_fits)) {
    const std::uint64_t loc = eocd - 20;
    ByteReader lr(file.subspan(loc, 20), loc);
    lr.skip(4, "ZIP64 locator signature");
    auto record_disk = lr.read<std::uint32_t>("ZIP64 record disk");
    auto z64 = lr.read<std::uint64_t>("ZIP64 record offset");
    auto disks = lr.read<std::uint32_t>("ZIP64 total disks");
    if (record_disk != 0 || disks > 1)
      fail_corrupt("multi-disk archives are not supported", {.offset = loc});
    if (!detail::range_fits(z64, 56, loc))
      fail_corrupt("ZIP64 end-of-central-directory record offset out of range", {.offset = loc});
    ensure(z64, loc - z64);
    ByteReader zr(file.subspan(z64, loc - z64), z64);
    if (zr.read<std::uint32_t>("ZIP64 record signature") != kZip64EocdSignature)
      fail_corrupt("bad ZIP64 end-of-central-directory signature", {.offset = z64});
    auto record_size = zr.read<std::uint64_t>("ZIP64 record size");
    if (record_size < 44 || record_size != loc - z64 - 12)
      fail_corrupt("ZIP64 end-of-central-directory record of " + std::to_string(record_size) +
                       " bytes does not end where the locator begins (" + std::to_string(loc) + ")",
                   {.offset = z64});
    zr.skip(2 + 2, "ZIP64 record versions");
    auto z64_disk = zr.read<std::uint32_t>("ZIP64 disk number");
    auto z64_cd_disk = zr.read<std::uint32_t>("ZIP64 central directory disk");
    auto z64_disk_entries = zr.read<std::uint64_t>("ZIP64 entries on disk");
    auto z64_count = zr.read<std::uint64_t>("ZIP64 entry count");
    auto z64_cd_size = zr.read<std::uint64_t>("ZIP64 central directory size");
    auto z64_cd_offset = zr.read<std::uint64_t>("ZIP64 central directory offset");
    if (z64_disk != 0 || z64_cd_disk != 0 || z64_disk_entries != z64_count)
      fail_corrupt("multi-disk archives are not supported", {.offset = z64});
    auto agree = [&](const char* what, std::uint64_t value32, std::uint64_t escape,
                     std::uint64_t value64) {
      if (value32 != escape && value32 != value64)
        fail_corrupt(std::string("the end-of-central-directory record and the ZIP64 end record "
                                 "disagree on the ") +
                         what + " (" + std::to_string(value32) + " vs " + std::to_string(value64) +
                         ")",
                     {.offset = eocd});
    };
    agree("entry count", count, 0xFFFF, z64_count);
    agree("central directory size", cd_size, 0xFFFFFFFF, z64_cd_size);
    agree("central directory offset", cd_offset, 0xFFFFFFFF, z64_cd_offset);
    count = z64_count;
    cd_size = z64_cd_size;
    cd_offset = z64_cd_offset;
    records_end = z64;
  }
  if (!detail::range_fits(cd_offset, cd_size, records_end) || cd_offset + cd_size != records_end)
    fail_corrupt("central directory [" + std::to_string(cd_offset) + ", +" +
                     std::to_string(cd_size) + ") does not end where the end records begin (" +
                     std::to_string(records_end) + ")",
                 {.offset = eocd});
  if (count > limits.max_entries)
    throw Error(ErrorCode::limit_exceeded,
                "archive declares " + std::to_string(count) + " entries, the limit is " +
                    std::to_string(limits.max_entries),
                ErrorContext{.offset = eocd});
  if (count > cd_size / kCentralFixedSize)
    fail_corrupt("archive declares " + std::to_string(count) +
                     " entries in a central directory of " + std::to_string(cd_size) + " bytes",
                 {.offset = eocd});

  ensure(cd_offset, cd_size);
  Directory dir;
  dir.central_directory_offset = cd_offset;
  dir.central_directory_size = cd_size;
  {
    const std::uint64_t comment_size = load_le<std::uint16_t>(file.data() + eocd + 20);
    dir.end_of_archive = eocd + kEocdSize + comment_size;
    dir.comment.assign(reinterpret_cast<const char*>(file.data()) + eocd + kEocdSize, comment_size);
  }
  dir.entries.reserve(count);
  ByteReader cr(file.subspan(cd_offset, cd_size), cd_offset);
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t at = cr.absolute_position();
    if (cr.read<std::uint32_t>("central directory signature") != kCentralSignature)
      fail_corrupt("bad central directory signature for entry " + std::to_string(i),
                   {.offset = at});
    cr.skip(4, "versions");
    EntryInfo e;
    e.flags = cr.read<std::uint16_t>("flags");
    e.method = cr.read<std::uint16_t>("method");
    cr.skip(4, "time");
    e.crc32 = cr.read<std::uint32_t>("crc");
    Zip64Sizes v{};
    v.compressed = cr.read<std::uint32_t>("compressed size");
    v.uncompressed = cr.read<std::uint32_t>("uncompressed size");
    auto name_len = cr.read<std::uint16_t>("name length");
    auto extra_len = cr.read<std::uint16_t>("extra length");
    auto comment_len = cr.read<std::uint16_t>("comment length");
    auto start_disk = cr.read<std::uint16_t>("disk number start");
    cr.skip(6, "attributes");
    v.offset = cr.read<std::uint32_t>("local header offset");
    e.name = std::string(cr.string(name_len, "entry name"));
    const std::uint64_t extra_at = cr.absolute_position();
    auto extra = cr.bytes(extra_len, "extra fields");
    cr.skip(comment_len, "entry comment");
    if (auto why = unsafe_name_reason(e.name); !why.empty())
      fail_corrupt(why, {.entry = e.name, .offset = at});
    if (start_disk != 0 && start_disk != 0xFFFF)
      fail_corrupt("multi-disk entry", {.entry = e.name, .offset = at});
    apply_zip64(extra, v, v.uncompressed == 0xFFFFFFFF, v.compressed == 0xFFFFFFFF,
                v.offset == 0xFFFFFFFF, extra_at, e.name);
    e.compressed_size = v.compressed;
    e.uncompressed_size = v.uncompressed;
    e.local_header_offset = v.offset;
    if (e.flags & 0x0001)
      throw Error(ErrorCode::unsupported, "encrypted entries are not supported",
                  ErrorContext{.entry = e.name});
    if (e.method != kMethodStore && e.method != kMethodDeflate)
      throw Error(ErrorCode::unsupported,
                  "compression method " + std::to_string(e.method) +
                      " is not supported (only store and deflate)",
                  ErrorContext{.entry = e.name});
    if (e.stored() && e.compressed_size != e.uncompressed_size)
      fail_corrupt("stored entry declares " + std::to_string(e.uncompressed_size) +
                       " bytes but holds " + std::to_string(e.compressed_size),
                   {.entry = e.name, .offset = at});
    if (!e.stored() && e.compressed_size < (UINT64_MAX - 1024) / limits.max_deflate_ratio &&
        e.uncompressed_size > e.compressed_size * limits.max_deflate_ratio + 1024)
      throw Error(ErrorCode::limit_exceeded,
                  "deflated entry declares " + std::to_string(e.uncompressed_size) +
                      " bytes from " + std::to_string(e.compressed_size) +
                      ": beyond deflate's maximal ratio (zip bomb?)",
                  ErrorContext{.entry = e.name});
    // The local header must lie before the central directory and agree.
    const std::uint64_t lh = e.local_header_offset;
    if (!detail::range_fits(lh, kLocalFixedSize, cd_offset))
      fail_corrupt("local header offset " + std::to_string(lh) + " is outside the entry area",
                   {.entry = e.name, .offset = at});
    dir.entries.push_back(std::move(e));
  }
  // Local archives: every local header now. Remote ones: when first read;
  // now only what the central directory tells (the smallest local header).
  for (EntryInfo& e : dir.entries) {
    if (!source) {
      e.data_offset = check_local_header(file, e, cd_offset);
      continue;
    }
    e.data_offset = kDataOffsetUnknown;
    const std::uint64_t least = e.local_header_offset + kLocalFixedSize + e.name.size();
    if (!detail::range_fits(least, e.compressed_size, cd_offset))
      fail_corrupt("entry data [" + std::to_string(least) + ", +" +
                       std::to_string(e.compressed_size) + ") extends past the entry area (" +
                       std::to_string(cd_offset) + ")",
                   {.entry = e.name, .offset = e.local_header_offset});
  }
  dir.by_name = detail::PositionIndex(dir.entries.size());
  for (std::size_t i = 0; i < dir.entries.size(); ++i) {
    const std::string& name = dir.entries[i].name;
    auto same = [&](std::size_t p) { return dir.entries[p].name == name; };
    if (dir.by_name.insert(detail::hash_key(name), i, same) != detail::PositionIndex::npos)
      fail_corrupt("duplicate entry name", {.entry = name, .offset = dir.central_directory_offset});
  }

  // No two entries may overlap (a classic zip-bomb and confusion trick).
  std::vector<EntryInfo*> by_offset;
  by_offset.reserve(dir.entries.size());
  for (auto& e : dir.entries) by_offset.push_back(&e);
  auto earlier = [](auto* a, auto* b) { return a->local_header_offset < b->local_header_offset; };
  // Writers list entries in file order: sort only when they are not.
  if (!std::is_sorted(by_offset.begin(), by_offset.end(), earlier))
    std::sort(by_offset.begin(), by_offset.end(), earlier);
  // An unread local header is at least 30 bytes and the name (checked above
  // to fit before the central directory with the data: no overflow).
  auto data_end = [](const EntryInfo* e) {
    return (e->data_offset != kDataOffsetUnknown
                ? e->data_offset
                : e->local_header_offset + kLocalFixedSize + e->name.size()) +
           e->compressed_size;
  };
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const auto* prev = by_offset[i - 1];
    if (by_offset[i]->local_header_offset < data_end(prev))
      fail_corrupt("entry overlaps entry " + modelzip::detail::quote_name(prev->name),
                   {.entry = by_offset[i]->name, .offset = by_offset[i]->local_header_offset});
  }
  for (std::size_t i = 0; i < by_offset.size(); ++i)
    by_offset[i]->area_end =
        i + 1 < by_offset.size() ? by_offset[i + 1]->local_header_offset : cd_offset;
  return dir;
}

}  // namespace modelzip::zip
