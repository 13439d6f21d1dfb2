#include "zip/zip_stream_writer.hpp"
#include "io/posix_file.hpp"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "core/checked.hpp"
#include "core/crc32.hpp"
#include "io/syscalls.hpp"
#include "modelzip/error.hpp"

namespace modelzip::zip {
namespace {

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
// Small pieces that lead a larger entry's data (a blob's FlatBuffer header
// and its padding), each up to this size, at most kMaxLeadPieces of them,
// go out in one write (with the local header where the CRC is known)
// instead of one write each.
constexpr std::size_t kLeadPieceUpTo = 4u << 10;
constexpr std::size_t kMaxLeadPieces = 16;

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

// `pieces` split into the runs of at most kChunk bytes that are written
// (and checksummed) one at a time; each run shares its piece's lifetime.
std::vector<Bytes> chunks_of(const std::vector<Bytes>& pieces) {
  std::vector<Bytes> out;
  for (const Bytes& p : pieces)
    for (std::size_t off = 0; off < p.size(); off += kChunk)
      out.push_back(p.slice(off, std::min(kChunk, p.size() - off)));
  return out;
}

// The number of leading pieces of `pieces` joined into one write (never
// the last piece), and their size.
std::pair<std::size_t, std::uint64_t> lead_of(const std::vector<Bytes>& pieces) {
  std::size_t n = 0;
  std::uint64_t size = 0;
  while (n + 1 < pieces.size() && n < kMaxLeadPieces && pieces[n].size() <= kLeadPieceUpTo)
    size += pieces[n++].size();
  return {n, size};
}

// `head` followed by the first `n` of `pieces`.
Bytes joined(std::vector<std::byte> head, const std::vector<Bytes>& pieces, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    head.insert(head.end(), pieces[i].data(), pieces[i].data() + pieces[i].size());
  return Bytes::take(std::move(head));
}

}  // namespace

// An entry of the new central directory.
struct StreamZipWriter::Written {
  EntryInfo info;
  bool zip64_local = false;
  // A new entry whose local header finish() writes, once crc_queue_ has
  // its CRC (slot).
  std::optional<EntryPlan> pending;
  std::size_t crc_slot = 0;
};

StreamZipWriter::StreamZipWriter(io::ByteSink& sink, std::string file_name,
                                 std::uint64_t start_offset, std::uint64_t expected_bytes,
                                 ProgressCallback progress)
    : sink_(sink),
      file_name_(std::move(file_name)),
      offset_(start_offset),
      progress_(std::move(progress), "save", ErrorContext{.archive = file_name_}) {
  progress_.set_total(expected_bytes);
}

StreamZipWriter::StreamZipWriter(int fd, std::string file_name, std::uint64_t start_offset,
                                 std::uint64_t expected_bytes, ProgressCallback progress)
    : own_sink_(std::make_unique<io::FileSink>(fd, ErrorContext{.archive = file_name}, false)),
      sink_(*own_sink_),
      file_name_(std::move(file_name)),
      offset_(start_offset),
      progress_(std::move(progress), "save", ErrorContext{.archive = file_name_}) {
  progress_.set_total(expected_bytes);
}

StreamZipWriter::~StreamZipWriter() = default;

void StreamZipWriter::append(const void* data, std::size_t size) {
  sink_.write_copy(offset_, std::span(static_cast<const std::byte*>(data), size));
  offset_ += size;
}

void StreamZipWriter::report(std::uint64_t bytes) {
  progress_.advance(bytes);
}

void StreamZipWriter::keep(const EntryInfo& e) {
  entries_.push_back(Written{.info = e});
}

void StreamZipWriter::skip_to(std::uint64_t offset) {
  if (offset < offset_)
    throw Error(ErrorCode::invalid_argument,
                "cannot move the write position back from " + std::to_string(offset_) + " to " +
                    std::to_string(offset),
                ErrorContext{.archive = file_name_});
  offset_ = offset;
}

void StreamZipWriter::add_stored(const std::string& name, const std::vector<Bytes>& pieces,
                                 std::optional<std::uint32_t> crc) {
  std::uint64_t size = 0;
  for (const auto& p : pieces) size += p.size();
  EntryPlan plan = plan_stored(name, offset_, size);
  Written w{.zip64_local = plan.zip64};
  if (size <= kInlineUpTo) {
    // CRC first (unless known), then header and data in one write.
    std::uint32_t value = 0;
    if (crc)
      value = *crc;
    else
      for (const auto& p : pieces) value = detail::crc32_update(value, p.span());
    w.info = write_entry(sink_, plan, value, pieces);
    offset_ = plan.end();
    report(size);
  } else if (crc) {
    // The CRC is known: the header goes first, in one write with the small
    // leading pieces, then the rest of the data.
    const auto [lead, lead_size] = lead_of(pieces);
    sink_.write(plan.local_offset, joined(plan.local_header(*crc), pieces, lead));
    offset_ = plan.data_offset + lead_size;
    report(lead_size);
    append_data(
        std::vector<Bytes>(pieces.begin() + static_cast<std::ptrdiff_t>(lead), pieces.end()),
        size - lead_size, nullptr);
    w.info = plan.info(*crc);
  } else {
    // The header's range reserved; each chunk is queued for the CRC worker
    // just before it is written (the small leading pieces joined into one);
    // the header is written with the CRC: at once where the sink holds the
    // reserved range (its CRC is then at most the last chunks away), else
    // by finish().
    sink_.reserve(io::ByteRange{plan.local_offset, plan.header_size()});
    offset_ = plan.data_offset;
    w.crc_slot = crc_queue_.new_slot();
    const auto [lead, lead_size] = lead_of(pieces);
    std::vector<Bytes> data;
    if (lead > 1) data.push_back(joined({}, pieces, lead));
    data.insert(data.end(), pieces.begin() + static_cast<std::ptrdiff_t>(lead > 1 ? lead : 0),
                pieces.end());
    append_data(data, size, &w.crc_slot);
    if (sink_.holds_reserved())
      w.info = finish_entry(sink_, plan, crc_queue_.result(w.crc_slot));
    else
      w.pending = std::move(plan);
  }
  entries_.push_back(std::move(w));
}

void StreamZipWriter::add_stored_streamed(const std::string& name, std::uint64_t size,
                                          const std::function<void(const PieceSink&)>& produce) {
  EntryWriter entry(sink_, plan_stored(name, offset_, size));
  offset_ = entry.plan().data_offset;
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
    entry.write_copy(written, piece);
    written += piece.size();
    offset_ += piece.size();
    report(piece.size());
  });
  if (written != size)
    throw Error(ErrorCode::io,
                "the entry's data ended after " + std::to_string(written) + " of its announced " +
                    std::to_string(size) + " bytes",
                ErrorContext{.archive = file_name_, .entry = name});
  entries_.push_back(Written{.info = entry.finish(crc), .zip64_local = entry.plan().zip64});
}

void StreamZipWriter::add_deflated(const std::string& name, const std::vector<Bytes>& pieces,
                                   int level) {
  std::uint64_t uncompressed = 0;
  for (const auto& p : pieces) uncompressed += p.size();
  EntryWriter entry(sink_, plan_deflated(name, offset_, uncompressed));
  offset_ = entry.plan().data_offset;
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
  entries_.push_back(
      Written{.info = entry.finish(crc, offset_ - data_start), .zip64_local = entry.plan().zip64});
}

void StreamZipWriter::add_raw(const std::string& name, const EntryInfo& e,
                              const Bytes& compressed) {
  const EntryPlan plan = plan_copy(name, e, offset_);
  // The CRC is known: the header goes first, then the data as it is.
  sink_.write(plan.local_offset, Bytes::take(plan.local_header(e.crc32)));
  offset_ = plan.data_offset;
  append_data({compressed}, compressed.size(), nullptr);
  entries_.push_back(Written{.info = plan.info(e.crc32), .zip64_local = plan.zip64});
}

void StreamZipWriter::add_kept(const std::string& name, const EntryInfo& e,
                               std::span<const std::byte> old_file) {
  const EntryPlan plan = plan_copy(name, e, offset_);
  std::vector<std::byte> header = plan.local_header(e.crc32);
  const std::uint64_t old_header = e.data_offset - e.local_header_offset;
  const bool same =
      header.size() == old_header &&
      detail::range_fits(e.local_header_offset, old_header, old_file.size()) &&
      std::equal(header.begin(), header.end(),
                 old_file.begin() + static_cast<std::ptrdiff_t>(e.local_header_offset));
  if (same) {
    sink_.keep(plan.local_offset,
               io::ByteRange{e.local_header_offset, old_header + e.compressed_size});
  } else {
    sink_.write(plan.local_offset, Bytes::take(std::move(header)));
    sink_.keep(plan.data_offset, io::ByteRange{e.data_offset, e.compressed_size});
  }
  offset_ = plan.data_offset + e.compressed_size;
  report(e.compressed_size);
  entries_.push_back(Written{.info = plan.info(e.crc32), .zip64_local = plan.zip64});
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
  if (!own_sink_ || direct_) return;
  own_sink_->route_through(
      io::SharedFileWriter::reopen(own_sink_->fd(), ErrorContext{.archive = file_name_}, false),
      false);
  direct_ = true;
}

void StreamZipWriter::append_data(const std::vector<Bytes>& pieces, std::uint64_t size,
                                  const std::size_t* crc_slot) {
  if (!direct_ || size <= kInlineUpTo) {
    for (const Bytes& c : chunks_of(pieces)) {
      if (crc_slot) crc_queue_.push(*crc_slot, c);
      sink_.write(offset_, c);
      offset_ += c.size();
      report(c.size());
    }
    return;
  }
  // Blocks allocated first (best effort), and routed to direct writes.
  // Runs end at multiples of kChunk in the file (a multiple of the direct
  // writer's 2 MiB stretches), so that consecutive runs are written
  // directly across their joints; each run is one progress report (and
  // chance to cancel).
  sink_.expect(io::ByteRange{offset_, size});
  for (const Bytes& piece : pieces) {
    for (std::size_t off = 0; off < piece.size();) {
      const std::size_t n = static_cast<std::size_t>(
          std::min<std::uint64_t>(piece.size() - off, kChunk - offset_ % kChunk));
      const Bytes run = piece.slice(off, n);
      if (crc_slot) crc_queue_.push(*crc_slot, run);
      sink_.write(offset_, run);
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
  for (const Written& entry : entries) {
    const EntryInfo& w = entry.info;
    const std::uint64_t local_extra = w.data_offset - w.local_header_offset - 30 - w.name.size();
    const bool big_u = w.uncompressed_size >= k32, big_c = w.compressed_size >= k32,
               big_o = w.local_header_offset >= k32;
    const std::uint16_t zip64_extra =
        static_cast<std::uint16_t>((big_u || big_c || big_o) ? 4 + 8 * (big_u + big_c + big_o) : 0);
    // A padding field repeats the local header's extra bytes other than its
    // ZIP64 field (which holds both sizes when they need it): zipinfo
    // computes where an entry ends from the central header's lengths, with
    // the central ZIP64 field swapped for the local one (FORMAT.md section
    // 1).
    const std::uint64_t local_zip64 = (big_u || big_c) ? 20 : 0;
    const std::uint64_t filler = local_extra >= local_zip64 + 4u ? local_extra - local_zip64 : 0;
    const auto extra = static_cast<std::uint16_t>(zip64_extra + filler);
    const bool zip64 = zip64_extra != 0 || entry.zip64_local;
    cd.put<std::uint32_t>(kCentralSignature);
    cd.put<std::uint16_t>(0x0300 | 45);  // made by: Unix, zip 4.5
    cd.put<std::uint16_t>(zip64 ? 45 : 20);
    cd.put<std::uint16_t>(w.flags);
    cd.put<std::uint16_t>(w.method);
    cd.put<std::uint16_t>(kDosTime);
    cd.put<std::uint16_t>(kDosDate);
    cd.put<std::uint32_t>(w.crc32);
    cd.put<std::uint32_t>(big_c ? 0xFFFFFFFFu : static_cast<std::uint32_t>(w.compressed_size));
    cd.put<std::uint32_t>(big_u ? 0xFFFFFFFFu : static_cast<std::uint32_t>(w.uncompressed_size));
    cd.put<std::uint16_t>(static_cast<std::uint16_t>(w.name.size()));
    cd.put<std::uint16_t>(extra);
    cd.put<std::uint16_t>(0);  // comment
    cd.put<std::uint16_t>(0);  // disk
    cd.put<std::uint16_t>(0);  // internal attributes
    cd.put<std::uint32_t>(0100644u << 16);
    cd.put<std::uint32_t>(big_o ? 0xFFFFFFFFu : static_cast<std::uint32_t>(w.local_header_offset));
    cd.put_text(w.name);
    if (zip64_extra) {
      cd.put<std::uint16_t>(0x0001);
      cd.put<std::uint16_t>(static_cast<std::uint16_t>(zip64_extra - 4));
      if (big_u) cd.put<std::uint64_t>(w.uncompressed_size);
      if (big_c) cd.put<std::uint64_t>(w.compressed_size);
      if (big_o) cd.put<std::uint64_t>(w.local_header_offset);
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
  EntryPlan plan = plan_copy(name, e, at);
  plan.flags = e.flags;  // as it was
  std::vector<std::byte> out = plan.local_header(e.crc32);
  out.insert(out.end(), compressed.data(), compressed.data() + compressed.size());
  std::vector<Written> entries = entries_;
  entries.push_back(Written{.info = plan.info(e.crc32), .zip64_local = plan.zip64});
  auto [central, end] = directory_bytes(entries, at + out.size());
  out.insert(out.end(), central.begin(), central.end());
  out.insert(out.end(), end.begin(), end.end());
  return out;
}

std::uint64_t StreamZipWriter::finish(const std::function<void()>& before_end_record) {
  progress_.finish();  // the last chance to cancel
  const std::vector<std::uint32_t> crcs = crc_queue_.finish();
  for (Written& w : entries_)
    if (w.pending) {
      w.info = finish_entry(sink_, *w.pending, crcs[w.crc_slot]);
      w.pending.reset();
    }
  auto [central, end] = directory_bytes(entries_, offset_);
  append(central.data(), central.size());
  sink_.barrier();  // e.g. the direct writes waited for, before anything depends on them
  if (before_end_record) before_end_record();
  append(end.data(), end.size());
  sink_.set_end(offset_);
  sink_.finish();
  return offset_;
}

}  // namespace modelzip::zip
