// FileSink: io::ByteSink onto a local file, written in place.
//
// Writes go out with pwrite through the descriptor given, unless routed
// through an io::SharedFileWriter onto the same file (route_through()):
// then every write (a rank's share of a collective commit's file), or only
// those inside ranges announced with expect() (the data of large stored
// entries of a durable save), go through it: direct I/O for the middle of
// long ranges, the page cache for the rest (see there, and its contract
// for several processes writing one file, which the callers keep).
//
// ByteSink operations on a local file: keep() of a range in place has
// nothing to do; a range moved from elsewhere is copied from the existing
// archive's bytes given at construction (none: Error(invalid_argument)).
// reserve() has nothing to do (a hole in a file is harmless until the end
// record is written). expect() allocates the range's blocks (best effort).
// barrier() waits for the direct writes in flight and, when durable,
// fsyncs; commit() fsyncs when durable. set_end() cuts or extends the file.
//
// Lifetime: the descriptor is borrowed and must outlive the sink; the
// existing archive's bytes are shared. Written Bytes are kept (shared) while
// a direct write may still read them, until finish() or destruction, which
// waits for the writes in flight. Thread safety: as ByteSink says (writes
// are serialized where they go through the SharedFileWriter). Errors:
// Error(io) with the context given and the failing offset.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "io/byte_sink.hpp"
#include "io/shared_file_writer.hpp"
#include "modelzip/error.hpp"

namespace modelzip::io {

class FileSink final : public ByteSink {
 public:
  FileSink(int fd, ErrorContext context, bool durable, Bytes existing = {});
  ~FileSink() override;
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  // Routes writes through `writer` (onto the same file; null: nothing
  // changes): all of them with `all`, else those inside expect()ed ranges.
  void route_through(std::unique_ptr<SharedFileWriter> writer, bool all);

  void write(std::uint64_t offset, const Bytes& data) override;
  void write_copy(std::uint64_t offset, std::span<const std::byte> data) override;
  void keep(std::uint64_t offset, ByteRange source) override;
  using ByteSink::keep;
  void reserve(ByteRange) override {}
  void expect(ByteRange range) override;
  void barrier() override;
  void set_end(std::uint64_t size) override;
  void finish() override;
  void commit() override;

  int fd() const noexcept { return fd_; }

 private:
  // Whether [offset, offset + size) goes through shared_.
  bool routed(std::uint64_t offset, std::uint64_t size) const noexcept;
  // Writes through shared_ (`keep`: the Bytes to hold while a direct write
  // may read them, or null for a synchronous write).
  void write_shared(const std::byte* data, std::uint64_t size, std::uint64_t offset,
                    const Bytes* keep);
  void sync();

  int fd_;
  ErrorContext context_;
  bool durable_;
  Bytes existing_;
  std::mutex mutex_;  // shared_, held_, expected_
  std::map<std::uint64_t, std::uint64_t> expected_;  // offset -> length
  bool route_all_ = false;
  // Declared after what they borrow from, so destroyed first: the shared
  // writer waits for its writes in flight, which read the held Bytes.
  std::vector<Bytes> held_;
  std::unique_ptr<SharedFileWriter> shared_;
};

}  // namespace modelzip::io
