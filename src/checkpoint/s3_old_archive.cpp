#include "checkpoint/s3_old_archive.hpp"

#include <algorithm>
#include <vector>

#include "checkpoint/archive_impl.hpp"
#include "modelzip/error.hpp"
#include "zip/free_range.hpp"

namespace modelzip::checkpoint {

Archive S3OldArchive::as_archive() const {
  return Archive::Impl::wrap(archive);
}

std::optional<S3OldArchive> open_s3_old(const std::string& url) {
  remote::Opened opened;
  try {
    opened = remote::open(url, RemoteOptions{}, remote::MissingObject::expected);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::not_found) return std::nullopt;  // a new archive
    throw;
  }
  auto archive =
      std::make_shared<Archive::Impl>(url, opened.file, OpenOptions{}, std::nullopt, opened.source);
  // Planning and the new central directory need every entry's data offset:
  // the local headers, fetched together.
  std::vector<const zip::EntryInfo*> entries;
  for (const auto& e : archive->directory.entries) entries.push_back(&e);
  archive->reader.prefetch(entries, 0);
  for (auto& e : archive->directory.entries) e.data_offset = archive->reader.data_offset(e);
  // And the first bytes of every range no entry covers (free entries'
  // headers), which appendable() and the free ranges of an in-place
  // commit read.
  std::vector<zip::ByteRange> covered;
  for (const auto& e : archive->directory.entries) covered.push_back(zip::entry_extent(e));
  for (const zip::ByteRange& gap :
       zip::gaps_between(std::move(covered), archive->directory.central_directory_offset))
    opened.source->ensure(gap.offset, std::min<std::uint64_t>(gap.size, 256));
  return S3OldArchive{std::move(opened), std::move(archive)};
}

}  // namespace modelzip::checkpoint
