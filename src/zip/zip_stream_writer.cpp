#include "zip/zip_stream_writer.hpp"
#include "io/posix_file.hpp"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "core/checked.hpp"
#include "core/crc32.hpp"
#include "io/syscalls.hpp"
#include "modelzip/error.hpp"

namespace modelzip::zip {
namespace {

constexpr std::uint32_t kLocalSignature = 0x04034b50;
constexpr std::uint32_t kCentralSignature = 0x02014b50;
constexpr std::uint32_t kEocdSignature = 0x06054b50;
constexpr std::uint32_t kZip64EocdSignature = 0x06064b50;
constexpr std::uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr std::uint64_t k32 = 0xFFFFFFFFull;
// Write granularity, and the unit the CRC worker checksums while the same
// bytes are written (small enough to stay in the shared cache meanwhile).
constexpr std::size_t kChunk = 4u << 20;
// Stored entries up to this size are checksummed first and written with
// their local header in one write (no patch): handing them to the worker
// would cost more than the CRC itself.
constexpr std::uint64_t kInlineUpTo = 256u << 10;

// Little-endian serialization into a byte vector.
class Out {
 public:
  template <class T>
  void put(T v) {
    std::byte b[sizeof(T)];
    detail::store_le(b, v);
    bytes.insert(bytes.end(), b, b + sizeof(T));
  }
  void put_text(std::string_view s) {
    auto p = reinterpret_cast<const std::byte*>(s.data());
    bytes.insert(bytes.end(), p, p + s.size());
  }
  void zeros(std::size_t n) { bytes.insert(bytes.end(), n, std::byte{0}); }
  std::vector<std::byte> bytes;
};

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// Length of the padding extra field (header included) that moves data from
// `unpadded` to a multiple of kDataAlignment: 0, or 4..67.
std::uint16_t padding_length(std::uint64_t unpadded) {
  std::uint64_t pad = (kDataAlignment - unpadded % kDataAlignment) % kDataAlignment;
  if (pad != 0 && pad < 4) pad += kDataAlignment;
  return static_cast<std::uint16_t>(pad);
}

// `pieces` split into the runs of at most kChunk bytes that are written
// (and checksummed) one at a time; each run shares its piece's lifetime.
std::vector<Bytes> chunks_of(const std::vector<Bytes>& pieces) {
  std::vector<Bytes> out;
  for (const Bytes& p : pieces)
    for (std::size_t off = 0; off < p.size(); off += kChunk)
      out.push_back(p.slice(off, std::min(kChunk, p.size() - off)));
  return out;
}

}  // namespace

struct StreamZipWriter::Written {
  std::string name;
  std::uint16_t method = kMethodStore;
  std::uint16_t flags = 0;
  std::uint32_t crc = 0;
  std::uint64_t compressed = 0, uncompressed = 0;
  std::uint64_t local_offset = 0;
  bool zip64_local = false;
  std::uint64_t local_extra = 0;        // length of the local header's extra field
  std::optional<std::size_t> crc_slot;  // CRC still being computed by crc_queue_
};

StreamZipWriter::StreamZipWriter(int fd, std::string file_name, std::uint64_t start_offset,
                                 std::uint64_t expected_bytes, ProgressCallback progress)
    : fd_(fd),
      file_name_(std::move(file_name)),
      offset_(start_offset),
      progress_(std::move(progress), "save", ErrorContext{.archive = file_name_}) {
  progress_.set_total(expected_bytes);
}

StreamZipWriter::~StreamZipWriter() = default;

void StreamZipWriter::write_at(std::uint64_t offset, const void* data, std::size_t size) {
  io::pwrite_full(fd_, data, size, offset, ErrorContext{.archive = file_name_});
}

void StreamZipWriter::append(const void* data, std::size_t size) {
  write_at(offset_, data, size);
  offset_ += size;
}

void StreamZipWriter::report(std::uint64_t bytes) {
  progress_.advance(bytes);
}

std::vector<std::byte> encode_local_header(const LocalHeader& w, std::uint64_t offset, bool align) {
  const std::string_view name = w.name;
  if (name.size() > 0xFFFF)
    throw Error(ErrorCode::invalid_argument, "entry name longer than 65535 bytes",
                ErrorContext{.entry = std::string(name.substr(0, 200))});
  const bool zip64 = w.zip64;
  const std::uint64_t zip64_len = zip64 ? 20 : 0;
  const std::uint16_t pad = align ? padding_length(offset + 30 + name.size() + zip64_len) : 0;
  Out h;
  h.put<std::uint32_t>(kLocalSignature);
  h.put<std::uint16_t>(zip64 ? 45 : 20);
  h.put<std::uint16_t>(w.flags);
  h.put<std::uint16_t>(w.method);
  h.put<std::uint16_t>(kDosTime);
  h.put<std::uint16_t>(kDosDate);
  h.put<std::uint32_t>(w.crc);
  h.put<std::uint32_t>(zip64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(w.compressed));
  h.put<std::uint32_t>(zip64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(w.uncompressed));
  h.put<std::uint16_t>(static_cast<std::uint16_t>(name.size()));
  h.put<std::uint16_t>(static_cast<std::uint16_t>(zip64_len + pad));
  h.put_text(name);
  if (zip64) {
    h.put<std::uint16_t>(0x0001);
    h.put<std::uint16_t>(16);
    h.put<std::uint64_t>(w.uncompressed);
    h.put<std::uint64_t>(w.compressed);
  }
  if (pad) {
    h.put<std::uint16_t>(kPaddingExtraId);
    h.put<std::uint16_t>(static_cast<std::uint16_t>(pad - 4));
    h.zeros(pad - 4u);
  }
  return std::move(h.bytes);
}

std::uint16_t name_flags(std::string_view name) noexcept {
  return is_ascii(name) ? 0 : 0x0800;
}

std::vector<std::byte> StreamZipWriter::local_header(const Written& w, std::uint64_t at,
                                                     bool align) const {
  return encode_local_header(LocalHeader{.name = w.name,
                                         .method = w.method,
                                         .flags = w.flags,
                                         .crc = w.crc,
                                         .compressed = w.compressed,
                                         .uncompressed = w.uncompressed,
                                         .zip64 = w.zip64_local},
                             at, align);
}

void StreamZipWriter::begin_entry(Written& w, bool align) {
  w.local_offset = offset_;
  const std::vector<std::byte> header = local_header(w, offset_, align);
  w.local_extra = header.size() - 30 - w.name.size();
  append(header.data(), header.size());
}

void StreamZipWriter::patch_local(const Written& w, bool sizes) {
  std::byte fields[12];
  detail::store_le<std::uint32_t>(fields, w.crc);
  if (!sizes) {
    write_at(w.local_offset + 14, fields, 4);
  } else if (!w.zip64_local) {  // CRC and both sizes are contiguous: one write
    detail::store_le<std::uint32_t>(fields + 4, static_cast<std::uint32_t>(w.compressed));
    detail::store_le<std::uint32_t>(fields + 8, static_cast<std::uint32_t>(w.uncompressed));
    write_at(w.local_offset + 14, fields, 12);
  } else {
    write_at(w.local_offset + 14, fields, 4);
    std::byte z64[16];
    detail::store_le<std::uint64_t>(z64, w.uncompressed);
    detail::store_le<std::uint64_t>(z64 + 8, w.compressed);
    write_at(w.local_offset + 30 + w.name.size() + 4, z64, 16);
  }
}

void StreamZipWriter::keep(const EntryInfo& e) {
  Written w;
  w.name = e.name;
  w.method = e.method;
  w.flags = e.flags;
  w.crc = e.crc32;
  w.compressed = e.compressed_size;
  w.uncompressed = e.uncompressed_size;
  w.local_offset = e.local_header_offset;
  w.local_extra = e.data_offset - e.local_header_offset - 30 - e.name.size();
  entries_.push_back(std::move(w));
}

void StreamZipWriter::skip_to(std::uint64_t offset) {
  if (offset < offset_)
    throw Error(ErrorCode::invalid_argument,
                "cannot move the write position back from " + std::to_string(offset_) + " to " +
                    std::to_string(offset),
                ErrorContext{.archive = file_name_});
  offset_ = offset;
}

void StreamZipWriter::add_stored(const std::string& name, const std::vector<Bytes>& pieces) {
  Written w;
  w.name = name;
  w.flags = name_flags(name);
  for (const auto& p : pieces) w.uncompressed += p.size();
  w.compressed = w.uncompressed;
  w.zip64_local = needs_zip64_local(w.uncompressed);
  if (w.uncompressed <= kInlineUpTo) {
    w.local_offset = offset_;
    // CRC first, then header and data in one write.
    for (const auto& p : pieces) w.crc = detail::crc32_update(w.crc, p.span());
    std::vector<std::byte> out = local_header(w, offset_, true);
    w.local_extra = out.size() - 30 - w.name.size();
    out.reserve(out.size() + w.uncompressed);
    for (const auto& p : pieces) out.insert(out.end(), p.data(), p.data() + p.size());
    append(out.data(), out.size());
    report(w.uncompressed);
  } else {
    // Header with the CRC left 0; each chunk is queued for the CRC worker
    // just before it is written; finish() patches the CRC in.
    begin_entry(w, true);
    w.crc_slot = crc_queue_.new_slot();
    if (bulk_) {
      append_direct(pieces, w.uncompressed, &*w.crc_slot);
    } else {
      for (const Bytes& c : chunks_of(pieces)) {
        crc_queue_.push(*w.crc_slot, c);
        append(c.data(), c.size());
        report(c.size());
      }
    }
  }
  entries_.push_back(std::move(w));
}

void StreamZipWriter::add_stored_streamed(const std::string& name, std::uint64_t size,
                                          const std::function<void(const PieceSink&)>& produce) {
  Written w;
  w.name = name;
  w.flags = name_flags(name);
  w.uncompressed = w.compressed = size;
  w.zip64_local = needs_zip64_local(size);
  begin_entry(w, true);  // CRC patched in below
  std::uint64_t written = 0;
  std::uint32_t crc = 0;
  auto too_long = [&] {
    return Error(ErrorCode::io,
                 "the entry's data is longer than its announced " + std::to_string(size) + " bytes",
                 ErrorContext{.archive = file_name_, .entry = name});
  };
  produce([&](std::span<const std::byte> piece) {
    if (piece.size() > size - written) throw too_long();
    crc = detail::crc32_update(crc, piece);
    append(piece.data(), piece.size());
    written += piece.size();
    report(piece.size());
  });
  if (written != size)
    throw Error(ErrorCode::io,
                "the entry's data ended after " + std::to_string(written) + " of its announced " +
                    std::to_string(size) + " bytes",
                ErrorContext{.archive = file_name_, .entry = name});
  w.crc = crc;
  patch_local(w, false);
  entries_.push_back(std::move(w));
}

void StreamZipWriter::add_deflated(const std::string& name, const std::vector<Bytes>& pieces,
                                   int level) {
  Written w;
  w.name = name;
  w.method = kMethodDeflate;
  w.flags = name_flags(name);
  for (const auto& p : pieces) w.uncompressed += p.size();
  w.zip64_local =
      w.uncompressed >= k32 || ::deflateBound(nullptr, static_cast<uLong>(w.uncompressed)) >= k32;
  begin_entry(w, false);  // CRC and compressed size patched in below
  const std::uint64_t data_start = offset_;
  z_stream z{};
  if (::deflateInit2(&z, level, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw Error(ErrorCode::io, "cannot initialize deflate", ErrorContext{.entry = name});
  struct End {
    z_stream* z;
    ~End() { ::deflateEnd(z); }
  } end{&z};
  std::vector<unsigned char> out(1u << 20);
  std::uint32_t crc = 0;
  auto drain = [&](int flush) {
    int rc;
    do {
      z.next_out = out.data();
      z.avail_out = static_cast<uInt>(out.size());
      rc = ::deflate(&z, flush);
      if (rc == Z_STREAM_ERROR)
        throw Error(ErrorCode::io, "deflate failed", ErrorContext{.entry = name});
      append(out.data(), out.size() - z.avail_out);
    } while (z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
  };
  for (const Bytes& c : chunks_of(pieces)) {
    crc = detail::crc32_update(crc, c.span());
    z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(c.data()));
    z.avail_in = static_cast<uInt>(c.size());
    drain(Z_NO_FLUSH);
    report(c.size());
  }
  z.next_in = nullptr;
  z.avail_in = 0;
  drain(Z_FINISH);
  w.crc = crc;
  w.compressed = offset_ - data_start;
  if (!w.zip64_local && w.compressed >= k32)
    throw Error(ErrorCode::io, "deflated entry exceeded its size estimate",
                ErrorContext{.entry = name});
  patch_local(w, true);
  entries_.push_back(std::move(w));
}

void StreamZipWriter::add_raw(const std::string& name, const EntryInfo& e,
                              const Bytes& compressed) {
  Written w;
  w.name = name;
  w.method = e.method;
  w.flags = static_cast<std::uint16_t>((e.flags & 0x0800) | (is_ascii(name) ? 0 : 0x0800));
  w.crc = e.crc32;
  w.compressed = e.compressed_size;
  w.uncompressed = e.uncompressed_size;
  w.zip64_local = std::max(w.compressed, w.uncompressed) >= k32;
  begin_entry(w, e.method == kMethodStore);
  if (bulk_ && compressed.size() > kInlineUpTo) {
    append_direct({compressed}, compressed.size(), nullptr);
  } else {
    for (const Bytes& c : chunks_of({compressed})) {
      append(c.data(), c.size());
      report(c.size());
    }
  }
  entries_.push_back(std::move(w));
}

void StreamZipWriter::set_comment(std::string comment) {
  if (comment.size() > 0xFFFF)
    throw Error(
        ErrorCode::invalid_argument,
        "an archive comment holds at most 65535 bytes, not " + std::to_string(comment.size()),
        ErrorContext{.archive = file_name_});
  comment_ = std::move(comment);
}

void StreamZipWriter::write_large_data_directly() {
  if (!bulk_) bulk_ = io::SharedFileWriter::reopen(fd_, ErrorContext{.archive = file_name_}, false);
}

void StreamZipWriter::append_direct(const std::vector<Bytes>& pieces, std::uint64_t size,
                                    const std::size_t* crc_slot) {
  // Best effort: where the file system cannot allocate, the writes do.
  io::preallocate(fd_, offset_, size);
  // Runs end at multiples of kChunk in the file (a multiple of the writer's
  // 2 MiB stretches), so that consecutive runs are written directly across
  // their joints; each run is one progress report (and chance to cancel).
  for (const Bytes& piece : pieces) {
    held_.push_back(piece);
    for (std::size_t off = 0; off < piece.size();) {
      const std::size_t n = static_cast<std::size_t>(
          std::min<std::uint64_t>(piece.size() - off, kChunk - offset_ % kChunk));
      if (crc_slot) crc_queue_.push(*crc_slot, piece.slice(off, n));
      bulk_->write(piece.data() + off, n, offset_);
      offset_ += n;
      off += n;
      report(n);
    }
  }
}

// The central directory of `entries` starting at `cd_offset` with the ZIP64
// end records when needed (first), and the end-of-central-directory record
// with the comment (second).
std::pair<std::vector<std::byte>, std::vector<std::byte>> StreamZipWriter::directory_bytes(
    const std::vector<Written>& entries, std::uint64_t cd_offset) const {
  Out cd;
  for (const Written& w : entries) {
    const bool big_u = w.uncompressed >= k32, big_c = w.compressed >= k32,
               big_o = w.local_offset >= k32;
    const std::uint16_t zip64_extra =
        static_cast<std::uint16_t>((big_u || big_c || big_o) ? 4 + 8 * (big_u + big_c + big_o) : 0);
    // A padding field repeats the local header's extra bytes other than its
    // ZIP64 field (which holds both sizes when they need it): zipinfo
    // computes where an entry ends from the central header's lengths, with
    // the central ZIP64 field swapped for the local one (FORMAT.md section
    // 1).
    const std::uint64_t local_zip64 = (big_u || big_c) ? 20 : 0;
    const std::uint64_t filler =
        w.local_extra >= local_zip64 + 4u ? w.local_extra - local_zip64 : 0;
    const auto extra = static_cast<std::uint16_t>(zip64_extra + filler);
    const bool zip64 = zip64_extra != 0 || w.zip64_local;
    cd.put<std::uint32_t>(kCentralSignature);
    cd.put<std::uint16_t>(0x0300 | 45);  // made by: Unix, zip 4.5
    cd.put<std::uint16_t>(zip64 ? 45 : 20);
    cd.put<std::uint16_t>(w.flags);
    cd.put<std::uint16_t>(w.method);
    cd.put<std::uint16_t>(kDosTime);
    cd.put<std::uint16_t>(kDosDate);
    cd.put<std::uint32_t>(w.crc);
    cd.put<std::uint32_t>(big_c ? 0xFFFFFFFFu : static_cast<std::uint32_t>(w.compressed));
    cd.put<std::uint32_t>(big_u ? 0xFFFFFFFFu : static_cast<std::uint32_t>(w.uncompressed));
    cd.put<std::uint16_t>(static_cast<std::uint16_t>(w.name.size()));
    cd.put<std::uint16_t>(extra);
    cd.put<std::uint16_t>(0);  // comment
    cd.put<std::uint16_t>(0);  // disk
    cd.put<std::uint16_t>(0);  // internal attributes
    cd.put<std::uint32_t>(0100644u << 16);
    cd.put<std::uint32_t>(big_o ? 0xFFFFFFFFu : static_cast<std::uint32_t>(w.local_offset));
    cd.put_text(w.name);
    if (zip64_extra) {
      cd.put<std::uint16_t>(0x0001);
      cd.put<std::uint16_t>(static_cast<std::uint16_t>(zip64_extra - 4));
      if (big_u) cd.put<std::uint64_t>(w.uncompressed);
      if (big_c) cd.put<std::uint64_t>(w.compressed);
      if (big_o) cd.put<std::uint64_t>(w.local_offset);
    }
    if (filler) {
      cd.put<std::uint16_t>(kPaddingExtraId);
      cd.put<std::uint16_t>(static_cast<std::uint16_t>(filler - 4));
      cd.zeros(filler - 4);
    }
  }
  const std::uint64_t cd_size = cd.bytes.size();
  const std::uint64_t count = entries.size();
  if (count >= 0xFFFF || cd_size >= k32 || cd_offset >= k32) {
    const std::uint64_t z64 = cd_offset + cd_size;
    cd.put<std::uint32_t>(kZip64EocdSignature);
    cd.put<std::uint64_t>(44);
    cd.put<std::uint16_t>(0x0300 | 45);
    cd.put<std::uint16_t>(45);
    cd.put<std::uint32_t>(0);
    cd.put<std::uint32_t>(0);
    cd.put<std::uint64_t>(count);
    cd.put<std::uint64_t>(count);
    cd.put<std::uint64_t>(cd_size);
    cd.put<std::uint64_t>(cd_offset);
    cd.put<std::uint32_t>(kZip64LocatorSignature);
    cd.put<std::uint32_t>(0);
    cd.put<std::uint64_t>(z64);
    cd.put<std::uint32_t>(1);
  }
  std::vector<std::byte> central = std::move(cd.bytes);
  cd.bytes.clear();
  cd.put<std::uint32_t>(kEocdSignature);
  cd.put<std::uint16_t>(0);
  cd.put<std::uint16_t>(0);
  cd.put<std::uint16_t>(static_cast<std::uint16_t>(std::min<std::uint64_t>(count, 0xFFFF)));
  cd.put<std::uint16_t>(static_cast<std::uint16_t>(std::min<std::uint64_t>(count, 0xFFFF)));
  cd.put<std::uint32_t>(static_cast<std::uint32_t>(std::min(cd_size, k32)));
  cd.put<std::uint32_t>(static_cast<std::uint32_t>(std::min(cd_offset, k32)));
  cd.put<std::uint16_t>(static_cast<std::uint16_t>(comment_.size()));
  cd.put_text(comment_);
  return {std::move(central), std::move(cd.bytes)};
}

std::vector<std::byte> StreamZipWriter::render_tail(const std::string& name, const EntryInfo& e,
                                                    const Bytes& compressed,
                                                    std::uint64_t at) const {
  Written w;
  w.name = name;
  w.method = e.method;
  w.flags = e.flags;
  w.crc = e.crc32;
  w.compressed = e.compressed_size;
  w.uncompressed = e.uncompressed_size;
  w.zip64_local = std::max(w.compressed, w.uncompressed) >= k32;
  w.local_offset = at;
  std::vector<std::byte> out = local_header(w, at, e.method == kMethodStore);
  w.local_extra = out.size() - 30 - name.size();
  out.insert(out.end(), compressed.data(), compressed.data() + compressed.size());
  std::vector<Written> entries = entries_;
  entries.push_back(std::move(w));
  auto [central, end] = directory_bytes(entries, at + out.size());
  out.insert(out.end(), central.begin(), central.end());
  out.insert(out.end(), end.begin(), end.end());
  return out;
}

std::uint64_t StreamZipWriter::finish(const std::function<void()>& before_end_record) {
  progress_.finish();          // the last chance to cancel
  if (bulk_) bulk_->finish();  // before anything depends on the data being in the file
  held_.clear();
  const std::vector<std::uint32_t> crcs = crc_queue_.finish();
  for (Written& w : entries_)
    if (w.crc_slot) {
      w.crc = crcs[*w.crc_slot];
      w.crc_slot.reset();
      patch_local(w, false);
    }
  auto [central, end] = directory_bytes(entries_, offset_);
  append(central.data(), central.size());
  if (before_end_record) before_end_record();
  append(end.data(), end.size());
  if (io::sys::ftruncate(fd_, static_cast<off_t>(offset_)) != 0)
    throw io::errno_error("cannot set the file size", ErrorContext{.archive = file_name_});
  return offset_;
}

}  // namespace modelzip::zip
