// Hand-built zip archives for tests: every field of every structure can be
// set or falsified, so that the directory parser can be tested against
// archives that libzip would never write (ZIP64 records for small files, data
// descriptors, comments holding EOCD signatures, lying sizes, overlaps...).
//
// The layout written is the plain one of APPNOTE 6.3: local header + name +
// extra + data (+ data descriptor) per entry, then the central directory,
// then (optionally) the ZIP64 end record and locator, then the end record and
// the archive comment. BuiltZip reports where each structure starts, so tests
// can cut or patch at structural boundaries.
//
// Header-only test helper; not thread-safe (plain values).
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace modelzip::testing {

inline std::uint32_t crc32_of(const std::string& s) {
  return static_cast<std::uint32_t>(
      ::crc32(0, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())));
}

// Raw deflate (no zlib header), as zip method 8 stores it.
inline std::string deflate_raw(const std::string& plain, int level = 9) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2 failed");
  std::string out(deflateBound(&z, plain.size()) + 16, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(plain.data()));
  z.avail_in = static_cast<uInt>(plain.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate failed");
  out.resize(z.total_out);
  return out;
}

inline void put16(std::string& s, std::uint64_t v) {
  s += static_cast<char>(v & 0xFF);
  s += static_cast<char>((v >> 8) & 0xFF);
}
inline void put32(std::string& s, std::uint64_t v) {
  put16(s, v & 0xFFFF);
  put16(s, (v >> 16) & 0xFFFF);
}
inline void put64(std::string& s, std::uint64_t v) {
  put32(s, v & 0xFFFFFFFFu);
  put32(s, v >> 32);
}
// Overwrites little-endian integers inside an existing string.
inline void patch16(std::string& s, std::size_t at, std::uint64_t v) {
  s[at] = static_cast<char>(v & 0xFF);
  s[at + 1] = static_cast<char>((v >> 8) & 0xFF);
}
inline void patch32(std::string& s, std::size_t at, std::uint64_t v) {
  patch16(s, at, v & 0xFFFF);
  patch16(s, at + 2, (v >> 16) & 0xFFFF);
}
inline void patch64(std::string& s, std::size_t at, std::uint64_t v) {
  patch32(s, at, v & 0xFFFFFFFFu);
  patch32(s, at + 4, v >> 32);
}
inline std::uint64_t get16(const std::string& s, std::size_t at) {
  return static_cast<unsigned char>(s[at]) | (static_cast<unsigned char>(s[at + 1]) << 8);
}
inline std::uint64_t get32(const std::string& s, std::size_t at) {
  return get16(s, at) | (get16(s, at + 2) << 16);
}

struct ZipEntrySpec {
  std::string name;
  std::string content;           // the uncompressed content
  std::uint16_t method = 0;      // 0 store, 8 deflate (content is deflated), others: stored raw
  std::uint16_t flags = 0x0800;  // UTF-8 names
  bool data_descriptor = false;  // flag bit 3: sizes and CRC after the data
  bool zip64 = false;            // central (and local) sizes/offset via a ZIP64 extra field
  std::string comment;           // entry comment (central directory)
  std::string central_extra;     // extra fields appended in the central directory
  std::string local_extra;       // extra fields appended in the local header
  // Falsifications of the central directory record (nullopt: the truth).
  std::optional<std::uint32_t> crc;
  std::optional<std::uint64_t> compressed_size;
  std::optional<std::uint64_t> uncompressed_size;
  std::optional<std::uint64_t> local_offset;
  std::optional<std::uint16_t> disk_start;
  std::optional<std::string> local_name;  // name written in the local header
  std::optional<std::string> raw_data;    // bytes written as data instead of the real ones
};

struct ZipSpec {
  std::vector<ZipEntrySpec> entries;
  std::string prefix;      // bytes before the first local header (self-extractor stub)
  std::string comment;     // archive comment (after the EOCD)
  bool zip64_end = false;  // write ZIP64 end record + locator, EOCD fields 0xFFFF...
  // With zip64_end: the EOCD's fields hold the real values (as Python's
  // zipfile writes beyond 2 GiB) instead of the escape values.
  bool zip64_real_32bit = false;
  std::string trailing;  // bytes after the archive comment
  std::string between;   // bytes between the last entry and the central directory
  // Falsifications of the end records (nullopt: the truth).
  std::optional<std::uint64_t> count;
  std::optional<std::uint64_t> cd_size;
  std::optional<std::uint64_t> cd_offset;
  std::optional<std::uint16_t> disk;
  std::optional<std::uint16_t> comment_length;
};

struct BuiltZip {
  std::string bytes;
  std::vector<std::uint64_t> local_offsets;  // per entry
  std::vector<std::uint64_t> data_offsets;   // per entry
  std::vector<std::uint64_t> central_offsets;
  std::uint64_t cd_offset = 0, cd_size = 0;
  std::optional<std::uint64_t> zip64_end_offset, zip64_locator_offset;
  std::uint64_t eocd_offset = 0;
  // Every offset where a structure begins or ends (sorted, unique): the
  // boundaries at which truncation tests cut.
  std::vector<std::uint64_t> boundaries() const;
};

inline std::vector<std::uint64_t> BuiltZip::boundaries() const {
  std::vector<std::uint64_t> b = {0,           cd_offset,        cd_offset + cd_size,
                                  eocd_offset, eocd_offset + 22, bytes.size()};
  for (auto v : local_offsets) b.push_back(v), b.push_back(v + 30);
  for (auto v : data_offsets) b.push_back(v);
  for (auto v : central_offsets) b.push_back(v), b.push_back(v + 46);
  if (zip64_end_offset) b.push_back(*zip64_end_offset), b.push_back(*zip64_end_offset + 56);
  if (zip64_locator_offset) b.push_back(*zip64_locator_offset);
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  while (!b.empty() && b.back() > bytes.size()) b.pop_back();
  return b;
}

inline BuiltZip build_zip(const ZipSpec& spec) {
  BuiltZip out;
  std::string& z = out.bytes;
  z = spec.prefix;
  struct Written {
    std::uint32_t crc;
    std::uint64_t csize, usize, offset;
  };
  std::vector<Written> written;
  for (const auto& e : spec.entries) {
    std::string data =
        e.raw_data ? *e.raw_data : (e.method == 8 ? deflate_raw(e.content) : e.content);
    Written w{crc32_of(e.content), data.size(), e.content.size(), z.size()};
    written.push_back(w);
    out.local_offsets.push_back(z.size());
    const std::string& lname = e.local_name ? *e.local_name : e.name;
    std::uint16_t flags = e.flags | (e.data_descriptor ? 0x0008 : 0);
    std::string extra;
    if (e.zip64) {
      put16(extra, 0x0001);
      put16(extra, 16);
      put64(extra, e.data_descriptor ? 0 : w.usize);
      put64(extra, e.data_descriptor ? 0 : w.csize);
    }
    extra += e.local_extra;
    put32(z, 0x04034b50);
    put16(z, e.zip64 ? 45 : 20);
    put16(z, flags);
    put16(z, e.method);
    put32(z, 0x00210000);  // 1980-01-01 00:00
    put32(z, e.data_descriptor ? 0 : w.crc);
    put32(z, e.zip64 ? 0xFFFFFFFFu : (e.data_descriptor ? 0 : w.csize));
    put32(z, e.zip64 ? 0xFFFFFFFFu : (e.data_descriptor ? 0 : w.usize));
    put16(z, lname.size());
    put16(z, extra.size());
    z += lname;
    z += extra;
    out.data_offsets.push_back(z.size());
    z += data;
    if (e.data_descriptor) {
      put32(z, 0x08074b50);
      put32(z, w.crc);
      if (e.zip64) {
        put64(z, w.csize);
        put64(z, w.usize);
      } else {
        put32(z, w.csize);
        put32(z, w.usize);
      }
    }
  }
  z += spec.between;
  out.cd_offset = z.size();
  for (std::size_t i = 0; i < spec.entries.size(); ++i) {
    const auto& e = spec.entries[i];
    const Written& w = written[i];
    out.central_offsets.push_back(z.size());
    std::uint32_t crc = e.crc ? *e.crc : w.crc;
    std::uint64_t csize = e.compressed_size ? *e.compressed_size : w.csize;
    std::uint64_t usize = e.uncompressed_size ? *e.uncompressed_size : w.usize;
    std::uint64_t offset = e.local_offset ? *e.local_offset : w.offset;
    std::string extra;
    if (e.zip64) {
      put16(extra, 0x0001);
      put16(extra, 24);
      put64(extra, usize);
      put64(extra, csize);
      put64(extra, offset);
    }
    extra += e.central_extra;
    put32(z, 0x02014b50);
    put16(z, 0x031E);  // made by: Unix, 3.0
    put16(z, e.zip64 ? 45 : 20);
    put16(z, e.flags | (e.data_descriptor ? 0x0008 : 0));
    put16(z, e.method);
    put32(z, 0x00210000);
    put32(z, crc);
    put32(z, e.zip64 ? 0xFFFFFFFFu : csize);
    put32(z, e.zip64 ? 0xFFFFFFFFu : usize);
    put16(z, e.name.size());
    put16(z, extra.size());
    put16(z, e.comment.size());
    put16(z, e.disk_start ? *e.disk_start : 0);
    put16(z, 0);            // internal attributes
    put32(z, 0x81A40000u);  // external attributes: -rw-r--r--
    put32(z, e.zip64 ? 0xFFFFFFFFu : offset);
    z += e.name;
    z += extra;
    z += e.comment;
  }
  out.cd_size = z.size() - out.cd_offset;
  const std::uint64_t count = spec.count ? *spec.count : spec.entries.size();
  const std::uint64_t cd_size = spec.cd_size ? *spec.cd_size : out.cd_size;
  const std::uint64_t cd_offset = spec.cd_offset ? *spec.cd_offset : out.cd_offset;
  if (spec.zip64_end) {
    out.zip64_end_offset = z.size();
    put32(z, 0x06064b50);
    put64(z, 44);  // size of the rest of the record
    put16(z, 45);
    put16(z, 45);
    put32(z, 0);  // this disk
    put32(z, 0);  // central directory disk
    put64(z, count);
    put64(z, count);
    put64(z, cd_size);
    put64(z, cd_offset);
    out.zip64_locator_offset = z.size();
    put32(z, 0x07064b50);
    put32(z, 0);
    put64(z, *out.zip64_end_offset);
    put32(z, 1);  // total disks
  }
  out.eocd_offset = z.size();
  put32(z, 0x06054b50);
  put16(z, spec.disk ? *spec.disk : 0);
  put16(z, 0);
  const bool escape = spec.zip64_end && !spec.zip64_real_32bit;
  const std::uint64_t count16 = escape ? 0xFFFF : count;
  put16(z, count16);
  put16(z, count16);
  put32(z, escape ? 0xFFFFFFFFu : cd_size);
  put32(z, escape ? 0xFFFFFFFFu : cd_offset);
  put16(z, spec.comment_length ? *spec.comment_length : spec.comment.size());
  z += spec.comment;
  z += spec.trailing;
  return out;
}

// A stored entry / a deflated entry with default (truthful) fields.
inline ZipEntrySpec stored(std::string name, std::string content) {
  ZipEntrySpec e;
  e.name = std::move(name);
  e.content = std::move(content);
  return e;
}
inline ZipEntrySpec deflated(std::string name, std::string content) {
  ZipEntrySpec e = stored(std::move(name), std::move(content));
  e.method = 8;
  return e;
}

}  // namespace modelzip::testing
