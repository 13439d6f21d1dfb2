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
//  - the edges of a long range go through the page cache with one pwrite
//    each: it holds the file's lock exclusively, but only twice per range,
//    and it fills only the pages of the edge (a page it covers whole is
//    not zeroed first, as a mapping's would be);
//  - short ranges (less than 1 MiB between such boundaries: the pieces of
//    a strided shard, small tensors) go through the page cache too, copied
//    into a shared mapping of the file, whose page faults hold the file's
//    lock shared, so that ranks copy in parallel and a strided piece costs
//    a memcpy, not a buffered write that waits for the lock (one rank at
//    a time).
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
// Direct writes are asynchronous (Linux AIO): up to 4 are in flight at
// once, so the disk works on several while the caller goes on (and ext4's
// lock is held only while a write is submitted, not while the disk writes
// it). Where AIO is unavailable they are synchronous. A writer that ends
// with no write in flight leaves its AIO context to the next writer of the
// same process (destroying one waits for an RCU grace period); that one
// idle context lives until the process exits.
//
// The mapping: before the first copy into a 2 MiB stretch (aligned), its
// pages are made present and writable (MADV_POPULATE_WRITE) in one call.
// Every page of such a stretch is only ever written through the page
// cache (the contract above), so dirtying all of them is harmless (a page
// nobody writes, such as old data before the range, is written back
// unchanged), and a range the file cannot hold (beyond its end, no space)
// is an error of that call, never a SIGBUS: such a range is written with
// pwrite instead, which extends the file or reports the real error (as is
// everything where the kernel cannot map the file). The caller must not
// let the file shrink under the writer (another process truncating it
// meanwhile could still cause a SIGBUS): the collective commit
// preallocates the planned range and holds the archive's lock. Copies go
// through io::sys (sys::mapped_write), so fault injection sees them like
// pwrites. What a direct write leaves over (after a short write or a
// refusal of O_DIRECT) goes out with pwrite, never the mapping: its
// stretch may still have direct writes in flight.
//
// Memory: direct writes need 4 KiB-aligned sources; other sources are
// copied into aligned buffers of chunk_bytes (one per write in flight),
// owned by the writer, in transparent huge pages where the system has them
// (see AlignedBuffer). Lifetime: the bytes given to write() are borrowed
// until finish() returns (a direct write may still read them, and a failed
// one is written again from them).
//
// Fallback: where O_DIRECT is refused (a file system without it: the open
// or a write fails with EINVAL), the rest goes through the page cache; the
// bytes in the file are the same either way. Durability is the caller's:
// fsync the file after finish() (direct writes into preallocated blocks
// change extent metadata that only an fsync makes durable). Every write
// goes through io::sys (fault injection sees it; an asynchronous one when
// it is submitted).
//
// Errors: Error(io) with the context given at construction and the failing
// offset, from write() or finish(). Destroying a writer without finish()
// (after an error) waits for the writes in flight and ignores their
// outcome. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "io/anonymous_buffer.hpp"
#include "io/posix_file.hpp"
#include "modelzip/error.hpp"

namespace modelzip::io {

class SharedFileWriter {
 public:
  // Opens `path` (which must exist) twice: for the page cache (reading and
  // writing: a shared writable mapping needs both) and with O_DIRECT.
  // Throws Error(io) if it cannot be opened so.
  SharedFileWriter(const std::filesystem::path& path, ErrorContext context,
                   std::size_t chunk_bytes = 4u << 20);
  ~SharedFileWriter();
  SharedFileWriter(const SharedFileWriter&) = delete;
  SharedFileWriter& operator=(const SharedFileWriter&) = delete;

  // A writer of the file open as `fd` (opened again through
  // /proc/self/fd), or null where it cannot be opened so or the name no
  // longer leads to the same file: then the caller writes with `fd`.
  // Without `map_cached`, what goes through the page cache is written with
  // pwrite, never the mapping: for a file only this process writes, where
  // there is no lock to share and mapped pages would only count against
  // the process's resident memory.
  static std::unique_ptr<SharedFileWriter> reopen(int fd, ErrorContext context, bool map_cached);

  // Writes `size` bytes from `data` at `offset` (borrowed until finish()).
  void write(const std::byte* data, std::uint64_t size, std::uint64_t offset);
  // Waits for the direct writes in flight; throws the first that failed.
  void finish();

  // Bytes written directly and through the page cache so far.
  std::uint64_t direct_bytes() const noexcept { return direct_bytes_; }
  std::uint64_t cached_bytes() const noexcept { return cached_bytes_; }

 private:
  struct Async;  // the AIO context and the writes in flight
  // A buffer of chunk_ bytes for copies of unaligned sources: an anonymous
  // mapping aligned to 2 MiB and asking for transparent huge pages, so that
  // a direct write from it is a few physically contiguous segments (a disk
  // that takes few segments per request, as virtio-blk's 254, splits a
  // write from 4 KiB pages into requests of 1 MiB). Where huge pages are
  // off, ordinary pages.
  using AlignedBuffer = AnonymousBuffer;
  AlignedBuffer aligned_buffer() const;  // throws std::bad_alloc
  // `data` if page-aligned, else a copy of its `size` (<= chunk_) bytes in
  // `buffer` (allocated on first use).
  const std::byte* page_aligned(const std::byte* data, std::size_t size,
                                AlignedBuffer& buffer) const;

  // Through the page cache: the mapping, else buffered(). Only for the
  // edges and short ranges of write(), whose 2 MiB stretches nobody writes
  // directly (the mapping populates whole stretches).
  void cached(const std::byte* data, std::uint64_t size, std::uint64_t offset);
  // Through the page cache with pwrite, which touches only the pages of the
  // range: for what a direct write leaves over (the rest of a page after a
  // short write, everything after a refusal), in stretches whose other
  // pages may still be written directly.
  void buffered(const std::byte* data, std::uint64_t size, std::uint64_t offset);
  // Makes [offset, offset + size) (within one 2 MiB stretch) writable in
  // the mapping; false where it cannot (then pwrite).
  bool mapped_ready(std::uint64_t offset, std::uint64_t size) noexcept;
  void unmap() noexcept;
  // Bytes in a folio-sized stretch (kFolioPages pages), the unit of the
  // direct/cached split and of populating the mapping.
  std::uint64_t stretch() const noexcept;
  // Whole pages [offset, offset + size) directly, or through the page
  // cache once O_DIRECT is refused.
  void direct(const std::byte* data, std::uint64_t size, std::uint64_t offset);
  // One synchronous direct write; returns the bytes written, fewer than
  // `size` after a short write, 0 when the file system refused O_DIRECT
  // (EINVAL: then refused_ is set).
  std::size_t direct_sync(const std::byte* data, std::size_t size, std::uint64_t offset);
  // Submits one asynchronous direct write of at most chunk_ bytes.
  void submit(const std::byte* data, std::size_t size, std::uint64_t offset);
  // Handles at least `min` completed asynchronous writes.
  void reap(int min);
  [[noreturn]] void fail(int error, std::uint64_t offset) const;

  UniqueFd file_;         // through the page cache
  UniqueFd direct_;       // O_DIRECT
  bool refused_ = false;  // O_DIRECT refused: the page cache from then on
  ErrorContext context_;
  std::uint64_t page_;  // the alignment of direct writes
  std::size_t chunk_;
  AlignedBuffer bounce_;  // synchronous direct writes
  std::unique_ptr<Async> async_;
  std::uint64_t direct_bytes_ = 0, cached_bytes_ = 0;
  std::byte* window_ = nullptr;  // the mapping of [window_offset_, + 1 GiB), or null
  std::uint64_t window_offset_ = 0;
  bool unmappable_ = false;                  // mmap refused, or not wanted (reopen): pwrite
  std::uint64_t ready_ = 0, ready_end_ = 0;  // populated bytes of the window
  static constexpr std::uint64_t kNone = ~std::uint64_t{0};
  std::uint64_t unpopulatable_ = kNone;  // start of a stretch that failed to populate whole
};

// Allocates the blocks of [offset, offset + length) of the open file `fd`
// (fallocate, extending the file's size when the range ends beyond it), so
// that direct writes into the range need no allocation. False when the
// file system cannot (the writes then allocate as they go); the bytes of
// the range read as zeros until written. Never throws.
bool preallocate(int fd, std::uint64_t offset, std::uint64_t length) noexcept;

}  // namespace modelzip::io
