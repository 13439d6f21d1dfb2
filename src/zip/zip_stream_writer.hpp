// Writes a zip archive sequentially into an io::ByteSink (a file
// descriptor: an io::FileSink of its own) with large writes straight from
// the callers' buffers, every entry placed and finished through
// zip/entry_writer.hpp:
// - small stored entries (up to 256 KiB) are checksummed first and written
//   with their complete local header in one write;
// - larger stored entries are written in 4 MiB chunks while a CrcQueue
//   checksums the same chunks on a second thread; their local headers are
//   reserved in the sink and written with the CRC (sizes are known up
//   front, no data descriptors): right after the entry's data where the
//   sink holds reserved ranges in memory (io::ByteSink::holds_reserved, an
//   upload: so at most one part is held for a header), else by finish();
//   a larger entry whose CRC the caller gives is written header first;
// - deflated entries are compressed and checksummed on the calling thread,
//   then their local header written with CRC and sizes.
// The data of every stored entry starts at a 64-byte aligned offset
// (local-only padding extra field 0x7A6D); ZIP64 records are used where
// sizes or offsets need them.
//
// Writing starts at `start_offset`: 0 for a new archive, or the end of the
// existing data for the append path (entries kept from before are listed
// with keep() so that the new central directory covers them; declaring
// their bytes to the sink, io::ByteSink::keep, is the caller's). The local
// headers of large stored entries may be missing until finish(): the
// result is a valid archive only once finish() returns. finish() does not commit
// the sink (io::ByteSink::commit is the caller's).
//
// Lifetime: add_stored() keeps (shared copies of) the Bytes of entries over
// 256 KiB until finish() returns or the writer is destroyed; memory
// borrowed with a null keeper must stay valid that long. Other Bytes are
// only used during the call. Not thread-safe. Errors: Error(io) naming the
// file; Error(cancelled) when the progress callback returns false.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/progress_tracker.hpp"
#include "io/byte_sink.hpp"
#include "io/file_sink.hpp"
#include "modelzip/bytes.hpp"
#include "modelzip/progress.hpp"
#include "zip/crc_queue.hpp"
#include "zip/entry_writer.hpp"
#include "zip/zip_directory.hpp"

namespace modelzip::zip {

class StreamZipWriter {
 public:
  // Writes into `sink` (which must outlive the writer).
  StreamZipWriter(io::ByteSink& sink, std::string file_name, std::uint64_t start_offset,
                  std::uint64_t expected_bytes = 0, ProgressCallback progress = {});
  // Writes into the file open as `fd` (an io::FileSink of its own, not
  // durable: the caller fsyncs).
  StreamZipWriter(int fd, std::string file_name, std::uint64_t start_offset,
                  std::uint64_t expected_bytes = 0, ProgressCallback progress = {});
  ~StreamZipWriter();
  StreamZipWriter(const StreamZipWriter&) = delete;
  StreamZipWriter& operator=(const StreamZipWriter&) = delete;

  // From now on, the data of stored entries over 256 KiB (add_stored,
  // add_raw) is written with io::SharedFileWriter through a second opening
  // of the file: the middle of each entry with direct I/O, straight from
  // the caller's bytes to the disk, the rest through the page cache; the
  // blocks of each such entry are allocated before it is written. Where the
  // file cannot be opened again (no /proc), everything goes through `fd`
  // as before. The bytes in the file are the same either way. For durable
  // writes only: a direct write waits for the disk, where a write that is
  // not to be fsynced would only wait for the page cache. What does not go
  // directly is written with pwrite (only this process writes the file).
  // Everything this writer writes other than that data lies outside the
  // directly written stretches (SharedFileWriter's contract), because
  // those lie inside one entry's data. Durability is still the caller's
  // fsync of `fd` (after finish() has waited for the direct writes); the
  // Bytes given are kept until finish() or the writer's destruction, which
  // waits for the direct writes in flight. Only for the writer of a file
  // descriptor (no effect on one given a sink).
  void write_large_data_directly();

  // Lists an entry already in the file (append path) in the new directory.
  void keep(const EntryInfo& entry);
  // Moves the write position forward to `offset` (>= offset()): the bytes
  // in between were written by someone else (e.g. another process of a
  // collective append) and must be covered by entries listed with keep().
  void skip_to(std::uint64_t offset);
  // A new entry holding the concatenation of `pieces`, stored (aligned) or
  // deflated (zlib level `level`). A stored entry whose CRC-32 the caller
  // already knows (`crc`: that of the concatenation, trusted as is) is
  // written without checksumming its bytes again.
  void add_stored(const std::string& name, const std::vector<Bytes>& pieces,
                  std::optional<std::uint32_t> crc = std::nullopt);
  void add_deflated(const std::string& name, const std::vector<Bytes>& pieces, int level = 6);
  // A new stored (aligned) entry of exactly `size` bytes that `produce`
  // writes piece by piece into the sink it is given: nothing is kept after
  // a piece is written (memory stays bounded whatever the size), the CRC is
  // computed on the calling thread and patched in afterwards. Error(io)
  // naming the entry if `produce` writes more or fewer than `size` bytes.
  using PieceSink = std::function<void(std::span<const std::byte>)>;
  void add_stored_streamed(const std::string& name, std::uint64_t size,
                           const std::function<void(const PieceSink&)>& produce);
  // A copy of an entry of another archive: its compressed bytes as they are,
  // with its method, CRC and sizes (nothing is recompressed or re-hashed).
  void add_raw(const std::string& name, const EntryInfo& entry, const Bytes& compressed);
  // The same for an entry of the archive this one replaces, declared kept
  // (io::ByteSink::keep) instead of written: the sink takes its bytes from
  // the old archive (an upload copies them server-side). The whole entry is
  // kept where its new local header equals the old one in `old_file` (same
  // name, same alignment), else the new header is written and the data
  // kept. `old_file` must hold the entry's local header.
  void add_kept(const std::string& name, const EntryInfo& entry,
                std::span<const std::byte> old_file);
  // The archive comment written after the end record (at most 65535 bytes;
  // default none). Writers carry an archive's comment across rewrites.
  void set_comment(std::string comment);
  // Writes the local headers still missing and the central directory,
  // passes the sink's barrier() (direct writes waited for), calls
  // `before_end_record` (e.g. to fsync, so that the end record never
  // becomes durable before what it points to), then writes the end records,
  // sets the sink's end and finishes it. Returns the result's size.
  std::uint64_t finish(const std::function<void()>& before_end_record = {});

  // The bytes of a complete tail written at `at` (nothing is written): the
  // entry `name` (local header and `compressed`, with `e`'s method, flags,
  // CRC and sizes; aligned if stored), the central directory of every
  // entry listed so far plus it, and the end records with the comment.
  // The append path writes such a copy of the old tail beyond the new
  // entries (AppendSession::protect).
  std::vector<std::byte> render_tail(const std::string& name, const EntryInfo& e,
                                     const Bytes& compressed, std::uint64_t at) const;

  std::uint64_t offset() const noexcept { return offset_; }

 private:
  struct Written;
  // `size` bytes of `data` at offset_ (copied where the sink needs to),
  // moving offset_ past them.
  void append(const void* data, std::size_t size);
  void report(std::uint64_t bytes);
  std::pair<std::vector<std::byte>, std::vector<std::byte>> directory_bytes(
      const std::vector<Written>& entries, std::uint64_t cd_offset) const;
  // Writes the `size` bytes of `pieces` of an entry planned at offset_'s
  // data through the sink in chunks, queuing their CRC in `crc_slot` unless
  // null. Directly (write_large_data_directly): blocks allocated first,
  // chunks ending at multiples of kChunk in the file.
  void append_data(const std::vector<Bytes>& pieces, std::uint64_t size,
                   const std::size_t* crc_slot);

  std::unique_ptr<io::FileSink> own_sink_;  // the fd constructor's
  io::ByteSink& sink_;
  bool direct_ = false;
  std::string file_name_;
  std::uint64_t offset_;
  detail::ProgressTracker progress_;  // bytes of entry data against expected_bytes
  std::vector<Written> entries_;
  std::string comment_;
  CrcQueue crc_queue_;
};

}  // namespace modelzip::zip
