// SharedFileWriter: one process's writer of byte ranges of a file that
// several processes write at the same time (the ranks of a collective
// commit), each its own disjoint ranges.
//
// Why not plain pwrite: buffered writes of several processes into one file
// do not run in parallel (ext4 holds the file's lock exclusively while it
// copies a buffered write into the page cache), and every byte is copied
// twice, into the cache and from it to the disk. So:
//  - the middle of a long range, from its first to its last boundary of
//    512 pages (2 MiB with 4 KiB pages, the largest folio of the page
//    cache), is written with O_DIRECT: into allocated blocks
//    (preallocate()) direct writes run under a shared lock, straight to
//    the disk, as fast as each process writing a file of its own;
//  - the edges of a range, and short ranges (less than 1 MiB between such
//    boundaries: the pieces of a strided shard, small tensors) are written
//    through the page cache, with pwrite. (A shared mapping instead was
//    measured slower here, and its writes would escape io::sys.)
//
// Contract for the processes sharing a file: their ranges (and any other
// bytes written into the file meanwhile) are disjoint. Then a folio of the
// page cache (at most 512 pages, aligned to its size) that holds bytes of
// two ranges lies in the edges of both and is only ever written through
// the page cache, where both writes land in the same cached folio; a
// folio in a directly written stretch holds bytes of one range only, so
// nobody dirties a cached copy of it (which the kernel could not drop
// after the direct write, and would later write back over it). Pages are
// 4 KiB or the system's page size if larger.
//
// Memory: direct writes need 4 KiB-aligned sources; other sources go
// through one aligned bounce buffer of chunk_bytes, owned by the writer.
//
// Fallback: where O_DIRECT is refused (a file system without it: the open
// or a write fails with EINVAL), whole pages go through the page cache too;
// the bytes in the file are the same either way. Durability is the
// caller's: fsync the file afterwards (direct writes into preallocated
// blocks change extent metadata that only an fsync makes durable). Every
// write goes through io::sys (fault injection sees it).
//
// Errors: Error(io) with the context given at construction and the failing
// offset. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "io/posix_file.hpp"
#include "modelzip/error.hpp"

namespace modelzip::io {

class SharedFileWriter {
 public:
  // Opens `path` (which must exist) twice: for the page cache and with
  // O_DIRECT. Throws Error(io) if it cannot be opened for writing.
  SharedFileWriter(const std::filesystem::path& path, ErrorContext context,
                   std::size_t chunk_bytes = 4u << 20);
  ~SharedFileWriter();
  SharedFileWriter(const SharedFileWriter&) = delete;
  SharedFileWriter& operator=(const SharedFileWriter&) = delete;

  // Writes `size` bytes from `data` at `offset`.
  void write(const std::byte* data, std::uint64_t size, std::uint64_t offset);

  // Bytes written directly and through the page cache so far.
  std::uint64_t direct_bytes() const noexcept { return direct_bytes_; }
  std::uint64_t cached_bytes() const noexcept { return cached_bytes_; }

 private:
  // Through the page cache.
  void cached(const std::byte* data, std::uint64_t size, std::uint64_t offset);
  // Writes directly; returns the bytes written, fewer than `size` after a
  // short write or when the file system refused O_DIRECT (EINVAL: then
  // direct writes stop).
  std::size_t try_direct(const std::byte* data, std::size_t size, std::uint64_t offset);

  struct FreeDeleter {
    void operator()(std::byte* p) const noexcept;
  };
  UniqueFd file_;    // through the page cache
  UniqueFd direct_;  // O_DIRECT, while direct writes work
  ErrorContext context_;
  std::uint64_t page_;  // the alignment of direct writes
  std::size_t chunk_;
  std::unique_ptr<std::byte, FreeDeleter> bounce_;
  std::uint64_t direct_bytes_ = 0, cached_bytes_ = 0;
};

// Allocates the blocks of [offset, offset + length) of the open file `fd`
// (fallocate, extending the file's size when the range ends beyond it), so
// that direct writes into the range need no allocation. False when the
// file system cannot (the writes then allocate as they go); the bytes of
// the range read as zeros until written. Never throws.
bool preallocate(int fd, std::uint64_t offset, std::uint64_t length) noexcept;

}  // namespace modelzip::io
