// Read-only access to whole files: memory-mapped (zero-copy) or read into
// owned memory. This is the single entry point through which modelzip reads
// files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "modelzip/bytes.hpp"

namespace modelzip::io {

// Maps `path` read-only and privately. The returned Bytes keeps the mapping
// alive (it is unmapped when the last view is gone) and reports is_mapped().
// An empty file gives empty Bytes. Throws Error(io) naming the path.
Bytes map_file(const std::filesystem::path& path);

// One contiguous, read-only region holding the first `prefix` bytes of the
// open file `fd` (mapped: zero-copy, except the part of the last page that
// `prefix` cuts, which is copied) followed by a copy of `tail`. Used for
// archive snapshots whose tail may be overwritten in the file meanwhile
// (FORMAT.md section 8.3): later changes of the file at or after `prefix`
// never show through, changes before `prefix` would. The Bytes keeps the
// region alive and reports is_mapped(). Throws Error(io) naming `path`
// (also when the file is shorter than `prefix`).
Bytes map_prefix_with_tail(int fd, const std::filesystem::path& path, std::uint64_t prefix,
                           std::span<const std::byte> tail);
// Maps the first `length` bytes of the open file `fd` read-only and shared,
// so that later writes to the file (pwrite by the same process) show in the
// mapping: remote archives fill their sparse cache file this way. `fd` may
// be closed afterwards. `name` is used in errors. Throws Error(io).
Bytes map_shared(int fd, std::uint64_t length, const std::string& name);

// Maps bytes [offset, offset + length) of the open file `fd` privately and
// writable (copy-on-write): the caller may write through the returned Bytes
// (const in its type, as every Bytes), and what it writes stays in this
// mapping's pages, never reaching the file or any other mapping of it. The
// mapping starts at the page below `offset`; the Bytes views exactly the
// range asked for, keeps the mapping alive and reports is_mapped(). `fd` may
// be closed afterwards. `name` is used in errors. Throws Error(io).
Bytes map_private_writable(int fd, std::uint64_t offset, std::uint64_t length,
                           const std::string& name);

// Reads `path` into owned memory. Throws Error(io) naming the path.
Bytes read_file(const std::filesystem::path& path);

enum class Access { normal, sequential, random, will_need };
// Advises the kernel how a mapped range will be used (no-op for unmapped
// bytes). Never throws.
void advise(const Bytes& bytes, Access access) noexcept;

}  // namespace modelzip::io
