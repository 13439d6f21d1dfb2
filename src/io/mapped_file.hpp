// Read-only access to whole files: memory-mapped (zero-copy) or read into
// owned memory. This is the single entry point through which modelzip reads
// files.
#pragma once

#include <filesystem>

#include "modelzip/bytes.hpp"

namespace modelzip::io {

// Maps `path` read-only and privately. The returned Bytes keeps the mapping
// alive (it is unmapped when the last view is gone) and reports is_mapped().
// An empty file gives empty Bytes. Throws Error(io) naming the path.
Bytes map_file(const std::filesystem::path& path);

// Reads `path` into owned memory. Throws Error(io) naming the path.
Bytes read_file(const std::filesystem::path& path);

enum class Access { normal, sequential, random, will_need };
// Advises the kernel how a mapped range will be used (no-op for unmapped
// bytes). Never throws.
void advise(const Bytes& bytes, Access access) noexcept;

}  // namespace modelzip::io
