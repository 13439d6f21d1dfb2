// Reading one entry front to back in the caller's buffers: each read
// continues where the last one ended, so a deflated entry is decompressed
// once however many reads it takes (EntryReader::stream decompresses from
// the start each time it is called). Memory stays bounded: the caller's
// buffer and zlib's state.
//
// Thread safety: one thread at a time (a read moves the position). Errors:
// Error(corrupt) naming the entry (bad deflate data, wrong size, CRC-32
// mismatch), as zip::stream_entry reports them; after one, every read
// throws it again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "modelzip/error.hpp"
#include "zip/entry_stream.hpp"
#include "zip/zip_directory.hpp"
#include "zip/zip_reader.hpp"

namespace modelzip::zip {

class EntryCursor {
 public:
  // A cursor at the start of `entry`, read through `reader`, which must
  // outlive it. A deflated entry of a remote archive is fetched whole here
  // (as EntryReader::stream fetches it); a stored one part by part, as read.
  EntryCursor(const EntryReader& reader, const EntryInfo& entry);

  // Copies the next bytes of the entry into `out` and returns how many:
  // out.size(), or fewer at the end of the entry, 0 once it is read. The
  // read that returns the entry's last bytes checks its size and CRC-32
  // (and that a deflate stream ends there) before returning.
  std::size_t read(std::span<std::byte> out);
  // Bytes read so far.
  std::uint64_t position() const noexcept { return position_; }
  const EntryInfo& entry() const noexcept { return entry_; }

 private:
  const EntryReader* reader_;
  EntryInfo entry_;
  std::uint64_t position_ = 0;
  std::uint32_t crc_ = 0;                  // stored entries: of the bytes read
  bool checked_ = false;                   // the end was reached and checked
  std::optional<EntryInflater> inflater_;  // deflated entries
  std::optional<Error> failure_;

  std::size_t read_next(std::span<std::byte> out);
};

}  // namespace modelzip::zip
