// Writing a whole file through a std::ostream so that the file is replaced
// all at once: the bytes go to a temporary file beside the target (see
// io::TempFile in durable_file.hpp), which is renamed over the target only
// after every byte was written and the file closed without error. For the
// writers that produce a file through a stream (embeddings, npy,
// safetensors, BTF, text formats); checkpoint archives have their own
// commit (checkpoint/writer.cpp).
//
// Errors: Error(io) whose context names the user's `path` (never the
// temporary file); errors thrown by the writer callback get `path` as their
// archive context when they have none. On any error the target is unchanged
// and the temporary file removed. Thread safety: no shared state.
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>

namespace modelzip::io {

// Writes a new version of `path` through `write` (given a binary stream on a
// temporary file beside `path`), flushes and closes it, then renames it over
// `path`, fsyncing the file and its folder when `durable` (TempFile::commit).
// Temporary files of `path` that writers which no longer run left behind
// are deleted first (remove_stale_temp_files).
// Every write, the close and the commit go through io::sys (fault
// injection sees them). Creation failures read like io::fail_to_create
// ("cannot create <name> in <folder>/: ..."); a failed write is "cannot
// write: <strerror>" at its offset (the system's reason, even when `write`
// then threw its own stream error), a failed close "cannot write file:
// <strerror>" (OutputFile::close).
// A cancellation (modelzip::request_cancel(), the CLI's Ctrl-C) stops the
// write before its next piece and before the rename: Error(cancelled)
// naming `path`, which stays unchanged, and no temporary file is left.
void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(std::ostream&)>& write, bool durable);

}  // namespace modelzip::io
