// ByteSink: the seam between the writers and where an archive's bytes go,
// mirroring io::ByteSource on the read side. A writer (zip::EntryWriter,
// zip::StreamZipWriter, a rank of the collective commit) places every byte
// of the result at its final offset; the sink takes them there:
//  - io::FileSink (io/file_sink.hpp): a local file, written in place with
//    pwrite, the long stretches of large entries optionally with direct
//    I/O (io::SharedFileWriter), also for one rank's disjoint ranges of the
//    shared file of a collective commit (one sink per rank);
//  - an S3 multipart upload (src/remote): parts uploaded as they fill,
//    ranges of the old object copied server-side, nothing visible before
//    commit().
//
// Contract for the writer (what every implementation may rely on):
//  - Offsets are absolute offsets in the result. Every byte of the result a
//    sink is responsible for is given exactly once, by write() or keep();
//    ranges given to one sink never overlap (a collective commit gives each
//    rank's sink its own ranges of one result).
//  - Order is free: writes may come at any offsets in any order, but a
//    streaming sink (multipart) uploads a stretch only once every byte of it
//    has been given, so a writer that leaves a hole behind it for long
//    (a local header whose CRC is known only after the entry's data) says so
//    first with reserve(): then the sink holds back only what surrounds the
//    hole (at most one part) and goes on with what follows it; where
//    holds_reserved(), the writer fills the hole as soon as it can.
//  - Lifetime of written bytes: write() keeps a copy of the Bytes it is given
//    (sharing its keeper) as long as it needs it; a Bytes borrowed with a
//    null keeper must stay valid until finish() returns or the sink is
//    destroyed. write_copy() copies what the sink still needs before it
//    returns (the caller's buffer is free at once).
//  - finish() once, after the last write: every byte given is out (written
//    to the file, uploaded), errors surfaced. commit() after finish() makes
//    the result durable and, where the sink decides that, visible (fsync;
//    CompleteMultipartUpload). A sink destroyed without commit() leaves no
//    visible result where its destination can promise that (multipart:
//    AbortMultipartUpload); a local file keeps what was written (the
//    callers' journal or temporary file makes that harmless).
//  - set_end(size) states the size of the whole result (the local file is cut
//    to it; an upload checks that it covered [0, size)). A sink that holds
//    only some ranges of the result (one rank's) is never given it.
//
// Thread safety: write(), write_copy(), keep(), reserve() and expect() may
// be called from several threads at once (disjoint ranges); barrier(),
// finish(), commit() and set_end() from one thread after all of them returned. Errors:
// modelzip::Error (io for the destination's failures, naming it and the
// offset; invalid_argument for a range the sink cannot take, e.g. a keep()
// with a source where there is no existing archive). After an error the
// sink is unusable but for destruction.
#pragma once

#include <cstdint>
#include <span>

#include "io/byte_source.hpp"
#include "modelzip/bytes.hpp"

namespace modelzip::io {

class ByteSink {
 public:
  virtual ~ByteSink() = default;

  // The bytes of `data` at `offset` of the result (lifetime: see above).
  virtual void write(std::uint64_t offset, const Bytes& data) = 0;
  // The same for bytes the caller reuses at once: copied where the sink does
  // not take them out before returning.
  virtual void write_copy(std::uint64_t offset, std::span<const std::byte> data) {
    write(offset, Bytes::copy_of(data));
  }

  // [offset, offset + source.length) of the result is `source` of the
  // existing archive this result replaces (an append keeps the prefix in
  // place: source.offset == offset; a rewrite moves ranges). The local file
  // of an append has nothing to do for a range kept in place; a multipart
  // upload copies it server-side (UploadPartCopy) where it can cut it into
  // parts of at least its minimum, else uploads it.
  virtual void keep(std::uint64_t offset, ByteRange source) = 0;
  void keep(ByteRange in_place) { keep(in_place.offset, in_place); }

  // `range` will be given by write() later, after bytes beyond it (a local
  // header completed once its entry's CRC is known): a streaming sink
  // holds back the part that holds it until then and goes on with what
  // follows. A sink that writes in place has nothing to do.
  virtual void reserve(ByteRange range) = 0;
  // Whether a reserved range costs memory until it is written (a streaming
  // sink holds the part around it): a writer then writes it as soon as it
  // can, even if that means waiting for a checksum, so that at most one
  // reserved range is outstanding per writer. False (a file written in
  // place): a writer may leave reserved ranges until its end.
  virtual bool holds_reserved() const noexcept { return false; }

  // A hint: `range` is about to be written with large writes (a stored
  // entry's data); a local file allocates its blocks. No effect on bytes.
  virtual void expect(ByteRange range) { (void)range; }

  // Ordering point for durability: every byte given so far reaches stable
  // storage before any byte given later does (the end record never becomes
  // durable before what it points to). A durable local file waits for its
  // writes and fsyncs; a sink whose result is invisible until commit()
  // (multipart) has nothing to do. Not concurrent with writes.
  virtual void barrier() = 0;

  // The result's total size (see above).
  virtual void set_end(std::uint64_t size) = 0;

  // Every byte given is out; throws the first error of any write.
  virtual void finish() = 0;
  // Durable (and visible, for sinks that publish): fsync, or
  // CompleteMultipartUpload. After finish().
  virtual void commit() = 0;
};

}  // namespace modelzip::io
