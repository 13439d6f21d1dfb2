// The object an s3:// writer commits over: pinned at open (its ETag) and
// parsed as an archive whose every entry's data offset is known (the local
// headers fetched together), as the planning of an append or a rewrite
// and the new central directory need. Shared by the single-process Writer
// and the collective commit (dist/s3_commit.hpp).
// Immutable once made; errors: remote::open's (Error(io), naming the URL).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "modelzip/archive.hpp"
#include "remote/remote_source.hpp"

namespace modelzip::checkpoint {

struct S3OldArchive {
  remote::Opened opened;  // the bytes (filled on demand), their source, the ETag
  std::shared_ptr<const Archive::Impl> archive;
  // The same state as a public Archive (shares it).
  Archive as_archive() const;
};

// nullopt: no object at `url` (a new archive).
std::optional<S3OldArchive> open_s3_old(const std::string& url);

}  // namespace modelzip::checkpoint
