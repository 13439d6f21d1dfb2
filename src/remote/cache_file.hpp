// CacheFile: the local file that holds a remote object's fetched bytes at
// their own offsets (sparse: unfetched parts take no space), mapped read-only
// and shared so that readers view it like a local archive.
//
// On disk (cache folder): <key>.bytes (the sparse file, as long as the
// object) and <key>.ranges (which ranges it holds), where <key> is a hash of
// the URL and the object's version (ETag or Last-Modified, and size): a new
// version never reuses old bytes. The ranges file is written as soon as
// the bytes file is created (empty), after each fetch (RemoteSource calls
// record()) and when the CacheFile is destroyed, always after the bytes it
// claims were written and through a rename: a process killed at any point
// leaves a record that claims only bytes that are there, and loses at most
// the fetch it was doing (its `.ranges.tmp<pid>`, if any, is removed by the
// next process that opens the folder). It names the inode of its bytes
// file, so a bytes file replaced by another process is not trusted, and the
// kernel's boot id: the bytes are not synced (a sync would bound a cold
// read by the disk's write speed), and every process of the same boot sees
// them in the page cache, but after a reboot unsynced bytes may never have
// reached the disk, so a record of an earlier boot is ignored (the object
// is fetched again). Where the boot id cannot be read, the bytes are synced
// before the record is written and the record says so.
// Opening and closing remove least recently used objects until the folder
// holds at most `limit` bytes (allocated blocks); an object larger than the
// limit on its own is removed when closed. In memory mode (no cache) the bytes live in an
// anonymous memory file and nothing is kept.
//
// Not thread-safe (RemoteSource guards it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "modelzip/bytes.hpp"
#include "remote/range_set.hpp"

namespace modelzip::remote {

class CacheFile {
 public:
  // `folder` empty: memory mode. `identity` distinguishes objects and
  // versions; `name` (the URL) is used in errors. Throws Error(io).
  CacheFile(const std::filesystem::path& folder, std::uint64_t limit, const std::string& identity,
            std::uint64_t size, const std::string& name);
  ~CacheFile();
  CacheFile(const CacheFile&) = delete;
  CacheFile& operator=(const CacheFile&) = delete;

  const Bytes& mapping() const noexcept { return mapping_; }
  const RangeSet& present() const noexcept { return present_; }
  // Stores `data` at `offset` (not yet marked present). Throws Error(io).
  void write(std::uint64_t offset, const void* data, std::size_t length);
  // Marks [offset, offset + length) as holding the object's bytes.
  void mark_present(std::uint64_t offset, std::uint64_t length);
  // Writes the ranges file now if ranges were marked since it was last
  // written (no-op in memory mode). Errors are ignored: the record is a
  // cache's, and is written again at the next call.
  void record() noexcept { save(); }
  bool on_disk() const noexcept { return !folder_.empty(); }

 private:
  void save() noexcept;
  void evict(const std::string& keep) noexcept;

  std::filesystem::path folder_;
  std::uint64_t limit_;
  std::uint64_t size_;
  std::string name_;
  std::string key_;
  int fd_ = -1;
  std::uint64_t inode_ = 0;
  Bytes mapping_;
  RangeSet present_;
  bool dirty_ = false;
};

}  // namespace modelzip::remote
