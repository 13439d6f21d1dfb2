// The memory of ReadMode::private_view reads: entry data that is the
// caller's alone to write, without copying where the archive allows it.
//
// Stored entries in the stable prefix of a local archive's file
// (zip::SnapshotFile) are views of a private, writable copy-on-write mapping
// of that file, made for this reader, of the range its entries span: what the caller writes stays
// in these pages, never reaching the file, the archive's own mapping, other readers or other
// entries. An entry handed out a second time (two parameters that deduplication stored as one blob)
// gets its own pages: a mapping of its range alone, or an owned copy when it is smaller than
// kOwnMappingBytes. Every other entry (deflated, in a remote archive or one read from memory, past
// the stable prefix) is read into owned memory, CRC-checked.
//
// Ownership: the Bytes returned keep their mapping or memory alive; the
// reader itself may be dropped at any time. Not thread-safe (one per load).
// Errors: Error(io) when a mapping fails, Error(corrupt) for a CRC mismatch
// (only checked when asked for, or for entries that are read); the entry
// is named by the caller's context.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_set>

#include "checkpoint/archive_impl.hpp"
#include "modelzip/bytes.hpp"

namespace modelzip {

class PrivateViews {
 public:
  static constexpr std::uint64_t kOwnMappingBytes = std::uint64_t{64} << 10;

  // A reader of `entries` (of `archive`): the private mapping, made at the
  // first read, covers the file range from the first to the last of them.
  PrivateViews(const Archive::Impl& archive, std::span<const zip::EntryInfo* const> entries);

  // The whole data of entry `e` (one of the entries). With `check_crc`, its
  // CRC-32 is compared with the central directory's before it is returned.
  Bytes read(const zip::EntryInfo& e, bool check_crc);

  // The same for one entry read on its own: a mapping of its range only.
  static Bytes read_one(const Archive::Impl& archive, const zip::EntryInfo& e, bool check_crc);

 private:
  // The entry's data offset when it can be mapped from the file, else 0
  // (no stored entry's data starts at offset 0).
  static std::uint64_t mappable_offset(const Archive::Impl& archive, const zip::EntryInfo& e);
  static Bytes checked(const zip::EntryInfo& e, Bytes data, bool check_crc);

  const Archive::Impl& archive_;
  std::uint64_t begin_ = 0, end_ = 0;  // the file range of the mappable entries
  Bytes whole_;                        // the private mapping of [begin_, end_), made at first use
  std::unordered_set<const zip::EntryInfo*> handed_out_;
};

}  // namespace modelzip
