#include "zip/entry_stream.hpp"

#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <memory>

#include "core/crc32.hpp"
#include "core/fail.hpp"
#include "modelzip/error.hpp"

namespace modelzip::zip {
namespace {

using modelzip::detail::fail_corrupt;

// Asks the kernel to start reading `range` of a file mapping (a hint:
// failures are ignored).
void will_need(std::span<const std::byte> range) {
  static const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(range.data()) & ~(page - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(range.data()) + range.size();
  (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
}

}  // namespace

void stream_entry(const Bytes& file, const EntryInfo& entry,
                  const std::function<void(std::span<const std::byte>)>& sink,
                  std::uint64_t until) {
  if (entry.data_offset > file.size() || entry.compressed_size > file.size() - entry.data_offset)
    fail_corrupt("entry data beyond the end of the archive", {.entry = entry.name});
  const std::span<const std::byte> data =
      file.span().subspan(entry.data_offset, entry.compressed_size);
  std::uint32_t crc = 0;
  std::uint64_t total = 0;
  if (entry.stored()) {
    if (entry.compressed_size != entry.uncompressed_size)
      fail_corrupt("a stored entry whose sizes differ", {.entry = entry.name});
    const std::uint64_t stop = std::min<std::uint64_t>(data.size(), until);
    for (std::uint64_t at = 0; at < stop; at += kStreamChunk) {
      auto piece = data.subspan(at, std::min<std::uint64_t>(kStreamChunk, stop - at));
      if (file.is_mapped() && at + piece.size() < stop)  // read ahead the next piece
        will_need(data.subspan(at + piece.size(),
                               std::min<std::uint64_t>(kStreamChunk, stop - at - piece.size())));
      crc = detail::crc32_update(crc, piece);
      sink(piece);
    }
    if (stop < data.size()) return;
    total = data.size();
  } else {
    if (entry.method != kMethodDeflate)
      fail_corrupt("unsupported compression method", {.entry = entry.name});
    EntryInflater inflater(data, entry);
    const std::size_t buffer_size = static_cast<std::size_t>(
        std::min<std::uint64_t>(kStreamChunk, std::max<std::uint64_t>(entry.uncompressed_size, 1)));
    auto buffer = std::make_unique<std::byte[]>(buffer_size);
    while (!inflater.ended()) {
      const std::size_t produced = inflater.inflate({buffer.get(), buffer_size});
      if (produced) sink(std::span<const std::byte>(buffer.get(), produced));
      if (inflater.produced() >= until && until < entry.uncompressed_size) return;
    }
    inflater.check();
    return;
  }
  if (total != entry.uncompressed_size)
    fail_corrupt("less data than the entry's size", {.entry = entry.name});
  if (crc != entry.crc32)
    fail_corrupt("CRC-32 mismatch: the entry data is damaged", {.entry = entry.name});
}

void stream_entry(const Bytes& file, const EntryInfo& entry,
                  const std::function<void(std::span<const std::byte>)>& sink) {
  stream_entry(file, entry, sink, UINT64_MAX);
}

// A raw inflate stream, ended however the inflater's scope is left.
struct EntryInflater::Zlib {
  z_stream zs{};
  Zlib() {
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK)
      throw Error(ErrorCode::io, "cannot start decompression (zlib)");
  }
  ~Zlib() { inflateEnd(&zs); }
  Zlib(const Zlib&) = delete;
  Zlib& operator=(const Zlib&) = delete;
};

EntryInflater::EntryInflater(std::span<const std::byte> data, const EntryInfo& entry, bool crc)
    : zlib_(std::make_unique<Zlib>()),
      data_(data),
      size_(entry.uncompressed_size),
      expected_crc_(entry.crc32),
      name_(entry.name),
      compute_crc_(crc) {}

EntryInflater::~EntryInflater() = default;

std::size_t EntryInflater::inflate(std::span<std::byte> out) {
  z_stream& zs = zlib_->zs;
  std::size_t filled = 0;
  while (filled < out.size() && !ended_) {
    if (zs.avail_in == 0) {
      const std::uint64_t n = std::min<std::uint64_t>(data_.size() - consumed_, UINT_MAX);
      zs.next_in = const_cast<Bytef*>(reinterpret_cast<const Bytef*>(data_.data() + consumed_));
      zs.avail_in = static_cast<uInt>(n);
      consumed_ += n;
    }
    const std::size_t room = std::min<std::size_t>(out.size() - filled, UINT_MAX);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + filled);
    zs.avail_out = static_cast<uInt>(room);
    const int rc = ::inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_NEED_DICT || rc == Z_DATA_ERROR || rc == Z_MEM_ERROR)
      fail_corrupt(std::string("invalid deflate data") +
                       (zs.msg ? std::string(" (") + zs.msg + ")" : std::string()),
                   {.entry = name_});
    const std::size_t produced = room - zs.avail_out;
    if (rc == Z_BUF_ERROR && produced == 0 && zs.avail_in == 0 && consumed_ == data_.size())
      fail_corrupt("the deflate data ends early", {.entry = name_});
    if (produced > size_ - total_)
      fail_corrupt("more data than the entry's size", {.entry = name_});
    if (compute_crc_) crc_ = detail::crc32_update(crc_, out.subspan(filled, produced));
    total_ += produced;
    filled += produced;
    if (rc == Z_STREAM_END) ended_ = true;
  }
  return filled;
}

void EntryInflater::check() const {
  if (total_ != size_) fail_corrupt("less data than the entry's size", {.entry = name_});
  if (compute_crc_ && crc_ != expected_crc_)
    fail_corrupt("CRC-32 mismatch: the entry data is damaged", {.entry = name_});
}

void inflate_part(std::span<const std::byte> data, const EntryInfo& entry, std::uint64_t offset,
                  std::span<std::byte> out) {
  const bool to_end = offset + out.size() == entry.uncompressed_size;
  EntryInflater inflater(data, entry, to_end);
  // Each inflate() below returns less than asked only once the stream ended.
  auto fill = [&](std::span<std::byte> into) {
    if (inflater.inflate(into) < into.size()) inflater.check();  // throws: less data
  };
  if (offset > 0) {
    const auto skip_size = static_cast<std::size_t>(std::min<std::uint64_t>(kSkipChunk, offset));
    const auto skip = std::make_unique_for_overwrite<std::byte[]>(skip_size);
    for (std::uint64_t left = offset; left > 0;) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(skip_size, left));
      fill({skip.get(), n});
      left -= n;
    }
  }
  fill(out);
  if (!to_end) return;
  std::byte beyond[1];  // none comes: inflate() refuses more than the entry's size
  while (!inflater.ended()) (void)inflater.inflate(beyond);
  inflater.check();
}

}  // namespace modelzip::zip
