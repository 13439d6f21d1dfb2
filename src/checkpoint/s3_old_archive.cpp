#include "checkpoint/s3_old_archive.hpp"

#include <algorithm>
#include <vector>

#include "checkpoint/archive_impl.hpp"
#include "modelzip/error.hpp"
#include "remote/s3_multipart.hpp"
#include "zip/free_range.hpp"

namespace modelzip::checkpoint {

Archive S3OldArchive::as_archive() const {
  return Archive::Impl::wrap(archive);
}

namespace {

std::optional<S3OldArchive> read_old(const std::string& url) {
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

}  // namespace

std::optional<S3OldArchive> open_s3_old(const std::string& url) {
  try {
    return read_old(url);
  } catch (const Error& e) {
    // A read stopped by an interrupt ("read cancelled (SIGINT): ...") said
    // nothing of the save, which has not begun.
    if (e.code() != ErrorCode::cancelled) throw;
    throw remote::save_cancelled(e, "reading the archive's current version",
                                 "the archive is unchanged");
  }
}

std::size_t keep_in_place(io::ByteSink& sink, const S3OldArchive& old,
                          const std::set<const zip::EntryInfo*>& kept, std::uint64_t tail) {
  const std::span<const std::byte> file = old.archive->reader.file().span();
  std::vector<zip::ByteRange> covered;
  covered.reserve(kept.size());
  for (const zip::EntryInfo* e : kept) covered.push_back(zip::entry_extent(*e));
  std::uint64_t at = 0;
  std::size_t headers = 0;
  for (const zip::ByteRange& gap : zip::gaps_between(std::move(covered), tail)) {
    if (!zip::is_freed_range(file, gap) || zip::is_free_entry(file, gap)) continue;
    std::vector<std::byte> header = zip::free_entry_header(file, gap, old.opened.source.get());
    sink.keep(io::ByteRange{at, gap.offset - at});
    at = gap.offset + header.size();
    sink.write(gap.offset, Bytes::take(std::move(header)));
    ++headers;
  }
  sink.keep(io::ByteRange{at, tail - at});
  return headers;
}

}  // namespace modelzip::checkpoint
