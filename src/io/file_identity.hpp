// What identifies the contents of a file without reading it: device, inode,
// size, modification and change times. Two equal identities taken at
// different moments mean the file was neither replaced (rename, new inode)
// nor written, truncated or appended to in between (each of which moves the
// change time, which no user call can set back; the stat() that took the
// first identity makes the kernel give the next change a distinguishable
// timestamp). Used to reuse an archive parsed earlier instead of parsing it
// again.
//
// Thread safety: free functions on values. Errors: identity_of returns
// nullopt when the path does not exist; other stat failures throw
// Error(io) naming the path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

namespace modelzip::io {

struct FileIdentity {
  std::uint64_t device = 0, inode = 0, size = 0;
  std::int64_t modified_ns = 0, changed_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

std::optional<FileIdentity> identity_of(const std::filesystem::path& path);

}  // namespace modelzip::io
