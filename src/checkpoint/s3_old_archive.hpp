// The object an s3:// writer commits over: pinned at open (its ETag) and
// parsed as an archive whose every entry's data offset is known (the local
// headers fetched together), as the planning of an append or a rewrite
// and the new central directory need. Shared by the single-process Writer
// and the collective commit (dist/s3_commit.hpp).
// Immutable once made; errors: remote::open's (Error(io), naming the URL).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "io/byte_sink.hpp"
#include "modelzip/archive.hpp"
#include "remote/remote_source.hpp"
#include "zip/zip_directory.hpp"

namespace modelzip::checkpoint {

struct S3OldArchive {
  remote::Opened opened;  // the bytes (filled on demand), their source, the ETag
  std::shared_ptr<const Archive::Impl> archive;
  // The same state as a public Archive (shares it).
  Archive as_archive() const;
};

// nullopt: no object at `url` (a new archive). A read cancelled by an
// interrupt throws Error(cancelled) saying that the save did not happen.
std::optional<S3OldArchive> open_s3_old(const std::string& url);

// An in-place commit's bytes before the old tail `tail` (the first byte of
// tags.txt's local header), given to `sink` in offset order: the old
// object's bytes kept (sink.keep: copied server-side by an S3 upload), and
// over the first bytes of each range that no entry of `kept` (entries of
// `old`) covers and that is freed but not yet a free entry, that free
// entry's local header written (zip::free_entry_header, FORMAT.md section
// 8.5), so the result is what a local in-place commit leaves there once it
// formats its free ranges. Returns the number of headers written.
std::size_t keep_in_place(io::ByteSink& sink, const S3OldArchive& old,
                          const std::set<const zip::EntryInfo*>& kept, std::uint64_t tail);

}  // namespace modelzip::checkpoint
