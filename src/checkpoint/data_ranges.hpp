// Where a loaded tensor's raw data lies in the archive file, for readers that
// read() it themselves (the read() staging source of the Python package's
// device loads) instead of touching a mapping.
//
// Only entries a read of the file can serve exactly qualify: stored (not
// deflated), in the stable prefix of a local archive's file (zip::
// SnapshotFile: no append can overwrite them), of a dense tensor. Their zip
// structure, local header, blob header and sizes were validated by the
// archive (at open, and by the blob decode here), so the range lies inside
// the file and holds exactly the tensor's bytes. Remote and in-memory
// archives have no such file.
//
// Thread safety: pure functions of an immutable Archive::Impl. Errors: those
// of decoding the blob header (Error(corrupt), naming the entry).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/archive_impl.hpp"

namespace modelzip {

struct DataRange {
  std::uint64_t offset = 0;  // in the file, of the tensor's first data byte
  std::uint64_t nbytes = 0;  // of raw tensor data
  // For checking the data's CRC-32 without reading the rest of the entry:
  // the entry's CRC-32 (central directory) is crc32_concat(crc32_concat(
  // crc_before, crc(data), nbytes), crc_after, after_bytes).
  std::uint32_t entry_crc = 0;
  std::uint32_t crc_before = 0;  // of the entry's bytes before the data (blob header, padding)
  std::uint32_t crc_after = 0;   // of the entry's bytes after the data
  std::uint64_t after_bytes = 0;
};

// The file offset of stored entry `e`'s data when a read of the archive's
// file can serve it (see above), else 0 (no stored entry's data starts at
// offset 0).
std::uint64_t file_data_offset(const Archive::Impl& archive, const zip::EntryInfo& e);

// The data range of tensor blob entry `e`, or nullopt when it does not
// qualify (deflated, remote, past the stable prefix, not a dense tensor).
std::optional<DataRange> tensor_data_range(const Archive::Impl& archive, const zip::EntryInfo& e);

}  // namespace modelzip
