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
#include <span>
#include <string>
#include <vector>

#include "io/byte_source.hpp"
#include "modelzip/bytes.hpp"
#include "modelzip/limits.hpp"
#include "modelzip/progress.hpp"
#include "zip/crc32.hpp"
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
// ByteSource, if it has one (remote archives; io/byte_source.hpp).
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
  std::shared_ptr<LibzipArchive> libzip() const;

 private:
  Bytes file_;
  Limits limits_;
  std::shared_ptr<const io::ByteSource> source_;
  mutable std::once_flag libzip_once_;
  mutable std::shared_ptr<LibzipArchive> libzip_;
};

}  // namespace modelzip::zip
