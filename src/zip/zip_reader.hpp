// Reading entry contents of a parsed archive: stored entries as zero-copy
// slices of the archive bytes, deflated entries decompressed by libzip (which
// checks the CRC), both with optional CRC-32 verification.
//
// Thread safety: all member functions may be called from several threads at
// once (the libzip handle is guarded by a mutex).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/crc32.hpp"
#include "io/byte_source.hpp"
#include "modelzip/bytes.hpp"
#include "modelzip/limits.hpp"
#include "modelzip/progress.hpp"
#include "zip/zip_directory.hpp"

struct zip;

namespace modelzip::zip {

// libzip's view of an archive held in Bytes (kept alive).
class LibzipArchive {
 public:
  explicit LibzipArchive(Bytes file);
  ~LibzipArchive();
  LibzipArchive(const LibzipArchive&) = delete;
  LibzipArchive& operator=(const LibzipArchive&) = delete;

  // libzip's index of `entry`, found by name. Throws Error(corrupt).
  std::uint64_t index_of(const EntryInfo& entry) const;
  // The first `length` bytes of the uncompressed entry (length <= size).
  // Reading to the end checks the CRC. Throws Error(corrupt) naming the entry.
  Bytes read(const EntryInfo& entry, std::uint64_t length) const;
  struct zip* handle() const noexcept {
    return za_;
  }
  std::mutex& mutex() const noexcept { return mutex_; }

 private:
  Bytes file_;
  struct zip* za_ = nullptr;
  mutable std::mutex mutex_;
};

// Every read first ensures the bytes it touches with the archive's
// ByteSource, if it has one (remote archives; io/byte_source.hpp). The
// directory of a remote archive is parsed without local headers
// (parse_directory): the first read of an entry fetches its local header in
// the same request as its data (the range from the header through the data
// wanted, with up to kLocalExtraGuess bytes for its extra fields, or up to
// the next entry when that adds at most kTrailingOverRead bytes), checks it
// with check_local_header and remembers the data offset; the data is used
// only after that check.
class EntryReader {
 public:
  EntryReader(Bytes file, Limits limits, std::shared_ptr<const io::ByteSource> source = {})
      : file_(std::move(file)), limits_(limits), source_(std::move(source)) {}

  const Bytes& file() const noexcept { return file_; }
  // Null for a local archive.
  const io::ByteSource* source() const noexcept { return source_.get(); }
  // Ensures the data of `entries` (at most the first `prefix` bytes of each
  // stored one; deflated ones whole, with their local header) in one batch,
  // so that a remote archive fetches them with requests in flight together.
  // No-op without a source.
  void prefetch(std::span<const EntryInfo* const> entries, std::uint64_t prefix = UINT64_MAX) const;
  // The whole entry. Stored: a slice of the file (CRC checked if
  // `check_crc`); deflated: decompressed into owned memory, CRC checked.
  Bytes read(const EntryInfo& entry, bool check_crc) const;
  // The whole entry in owned memory, CRC checked. Stored entries are copied
  // and checksummed in one pass (large ones on two threads).
  Bytes read_owned(const EntryInfo& entry) const;
  // read_owned() of every entry (the result is parallel to `entries`), the
  // stored ones copied and checksummed in 4 MiB jobs that the calling thread
  // and (from 16 MiB in all) one helper thread share. `progress`, if set,
  // runs on the calling thread only, once per entry in order (bytes of entry
  // data as stored), and once at the end if there are no entries. Errors:
  // Error(corrupt) naming the first failing entry in the order given;
  // Error(cancelled) when `progress` returns false (no thread is left
  // running after any throw).
  std::vector<Bytes> read_owned_all(std::span<const EntryInfo* const> entries,
                                    const ProgressCallback& progress = {}) const;
  // The first `length` bytes (no CRC check unless the whole entry is read).
  Bytes read_prefix(const EntryInfo& entry, std::uint64_t length) const;
  // `length` bytes of an entry's data from byte `offset`. Stored: a slice of
  // the file with no CRC check; a remote archive fetches the local header
  // and that range only. Deflated: inflate_part (zip/entry_stream.hpp) into
  // owned memory of `length` bytes, checked when the range ends the entry
  // (not value-initialised, as LibzipArchive::read: declared sizes are
  // checked against deflate's ratio at open, and pages no data reaches are
  // never touched). Requires offset + length <= entry.uncompressed_size
  // (checked without overflow: Error(invalid_argument) otherwise).
  Bytes read_range(const EntryInfo& entry, std::uint64_t offset, std::uint64_t length) const;
  // zip::stream_entry of `entry` (zip/entry_stream.hpp), fetched first (a
  // stored entry's first `until` bytes, a deflated one whole).
  void stream(const EntryInfo& entry, const std::function<void(std::span<const std::byte>)>& sink,
              std::uint64_t until) const;
  void stream(const EntryInfo& entry,
              const std::function<void(std::span<const std::byte>)>& sink) const;
  // Where `entry`'s data begins: entry.data_offset, or for an entry whose
  // local header was not read yet (kDataOffsetUnknown) the offset found by
  // reading and checking it (fetching it if needed). Throws Error(corrupt).
  std::uint64_t data_offset(const EntryInfo& entry) const;

  static constexpr std::uint64_t kLocalExtraGuess = 256;
  static constexpr std::uint64_t kTrailingOverRead = std::uint64_t{16} << 10;
  std::shared_ptr<LibzipArchive> libzip() const;

 private:
  Bytes file_;
  Limits limits_;
  std::shared_ptr<const io::ByteSource> source_;
  // The checked data offsets of lazily read local headers, by local header
  // offset (guarded by data_offsets_mutex_).
  std::optional<std::uint64_t> known_data_offset(const EntryInfo& entry) const;
  mutable std::mutex data_offsets_mutex_;
  mutable std::unordered_map<std::uint64_t, std::uint64_t> data_offsets_;
  mutable std::once_flag libzip_once_;
  mutable std::shared_ptr<LibzipArchive> libzip_;
};

}  // namespace modelzip::zip
