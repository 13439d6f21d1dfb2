#include "checkpoint/private_views.hpp"

#include <algorithm>

#include "checkpoint/data_ranges.hpp"
#include "core/crc32.hpp"
#include "io/mapped_file.hpp"
#include "modelzip/error.hpp"

namespace modelzip {

std::uint64_t PrivateViews::mappable_offset(const Archive::Impl& archive, const zip::EntryInfo& e) {
  return file_data_offset(archive, e);
}

Bytes PrivateViews::checked(const zip::EntryInfo& e, Bytes data, bool check_crc) {
  if (check_crc && detail::crc32_of(data.span()) != e.crc32)
    throw Error(ErrorCode::corrupt, "CRC-32 mismatch: the entry data is damaged",
                ErrorContext{.entry = e.name});
  return data;
}

PrivateViews::PrivateViews(const Archive::Impl& archive,
                           std::span<const zip::EntryInfo* const> entries)
    : archive_(archive), begin_(UINT64_MAX) {
  for (const zip::EntryInfo* e : entries) {
    const std::uint64_t offset = mappable_offset(archive, *e);
    if (offset == 0) continue;
    begin_ = std::min(begin_, offset);
    end_ = std::max(end_, offset + e->compressed_size);  // mappable: no overflow
  }
}

Bytes PrivateViews::read(const zip::EntryInfo& e, bool check_crc) {
  const std::uint64_t offset = mappable_offset(archive_, e);
  if (offset == 0) return archive_.reader.read_owned(e);
  if (!handed_out_.insert(&e).second) {
    if (e.compressed_size < kOwnMappingBytes)
      return checked(e, Bytes::copy_of(archive_.reader.read(e, false).span()), check_crc);
    return read_one(archive_, e, check_crc);
  }
  if (whole_.empty())
    whole_ = io::map_private_writable(archive_.snapshot_file.fd->get(), begin_, end_ - begin_,
                                      archive_.name);
  return checked(e, whole_.slice(offset - begin_, e.compressed_size), check_crc);
}

Bytes PrivateViews::read_one(const Archive::Impl& archive, const zip::EntryInfo& e,
                             bool check_crc) {
  const std::uint64_t offset = mappable_offset(archive, e);
  if (offset == 0) return archive.reader.read_owned(e);
  return checked(e,
                 io::map_private_writable(archive.snapshot_file.fd->get(), offset,
                                          e.compressed_size, archive.name),
                 check_crc);
}

}  // namespace modelzip
