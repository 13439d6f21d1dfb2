#include "zip/entry_cursor.hpp"

#include <algorithm>
#include <cstring>

#include "core/crc32.hpp"
#include "core/fail.hpp"

namespace modelzip::zip {

using modelzip::detail::fail_corrupt;

EntryCursor::EntryCursor(const EntryReader& reader, const EntryInfo& entry)
    : reader_(&reader), entry_(entry) {
  if (entry_.stored()) {
    if (entry_.compressed_size != entry_.uncompressed_size)
      fail_corrupt("a stored entry whose sizes differ", {.entry = entry_.name});
    return;
  }
  if (entry_.method != kMethodDeflate)
    fail_corrupt("unsupported compression method", {.entry = entry_.name});
  const EntryInfo* one[] = {&entry};
  reader.prefetch(one);
  entry_.data_offset = reader.data_offset(entry);
  const Bytes& file = reader.file();
  if (entry_.data_offset > file.size() || entry_.compressed_size > file.size() - entry_.data_offset)
    fail_corrupt("entry data beyond the end of the archive", {.entry = entry_.name});
  inflater_.emplace(file.span().subspan(entry_.data_offset, entry_.compressed_size), entry_);
}

std::size_t EntryCursor::read(std::span<std::byte> out) {
  if (failure_) throw *failure_;
  try {
    return read_next(out);
  } catch (const Error& e) {
    failure_ = e;
    throw;
  }
}

std::size_t EntryCursor::read_next(std::span<std::byte> out) {
  const std::uint64_t size = entry_.uncompressed_size;
  if (inflater_) {
    const std::size_t n = inflater_->inflate(out);
    position_ = inflater_->produced();
    // At the declared size, the deflate stream must end: decompress on
    // until it does (more data than the size throws), so that this read
    // returns the last bytes checked.
    std::byte rest[1];
    while (position_ == size && !inflater_->ended()) inflater_->inflate(rest);
    if (inflater_->ended()) inflater_->check();
    return n;
  }
  const std::size_t n =
      static_cast<std::size_t>(std::min<std::uint64_t>(out.size(), size - position_));
  if (n > 0) {
    const Bytes part = reader_->read_range(entry_, position_, n);
    std::memcpy(out.data(), part.data(), n);
    crc_ = detail::crc32_update(crc_, part.span());
    position_ += n;
  }
  if (position_ == size && !checked_) {
    if (crc_ != entry_.crc32)
      fail_corrupt("CRC-32 mismatch: the entry data is damaged", {.entry = entry_.name});
    checked_ = true;
  }
  return n;
}

}  // namespace modelzip::zip
