// Opening the ARCHIVE argument of the read-only commands: a local path or an
// http://, https:// or s3:// URL (modelzip/remote.hpp), with a progress bar
// on a terminal while a remote read fetches many bytes; and the options of
// the commands that modify an archive.
#pragma once

#include <cstdint>
#include <string>

#include "modelzip/archive.hpp"
#include "modelzip/writer.hpp"

namespace modelzip::cli {

Archive open_archive(const std::string& path_or_url);

// The ARCHIVE argument of a command that changes it: throws Error
// ("remote archives are read-only: URL") for a URL, before any work.
void require_writable(const std::string& path);

// require_writable, then Error(not_found, "no such archive ...") naming
// `path` unless it exists (Error(io, "is a folder, not a file") for a
// folder): for the commands that modify an archive but
// never create one (rm-tag, gc, meta), where the Writer would start an
// empty archive. An s3:// archive is looked up on the server.
void require_existing_archive(const std::string& path);

// The size of the archive at `path` (a local file, or an s3:// object).
std::uint64_t archive_size(const std::string& path);

// WriterOptions for modifying `path` with `progress`: a commit that has to
// wait for another writer says so once on standard error ("modelzip:
// waiting for the writer of PATH...", also when not a terminal) instead of
// hanging silently.
WriterOptions writer_options(const std::string& path, ProgressCallback progress = {});

}  // namespace modelzip::cli
