// Streaming the contents of one entry: the uncompressed bytes in order, in
// chunks, with the size and CRC-32 checked at the end, whatever the entry's
// size, in bounded memory (one chunk buffer for deflated entries; stored
// entries are slices of the archive bytes, which are usually a read-only
// file mapping: page cache, not anonymous memory).
//
// Thread safety: a free function on immutable inputs; several streams may
// run at once. Errors: Error(corrupt) naming the entry (bad deflate data,
// wrong size, CRC-32 mismatch); exceptions thrown by the sink propagate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "modelzip/bytes.hpp"
#include "zip/zip_directory.hpp"

namespace modelzip::zip {

inline constexpr std::size_t kStreamChunk = std::size_t{4} << 20;

// Calls `sink` with consecutive pieces (at most kStreamChunk bytes each) of
// the uncompressed entry. The check happens after the last piece: a sink
// that writes out what it gets has written damaged data by the time the
// error is thrown (callers that write a file make it appear only after
// stream_entry returned). With `until` below the entry's size, the stream
// stops after the piece that reaches byte `until` (a stored entry's ends
// there, a deflated one's may go beyond it), without the check: a deflated
// entry is then decompressed only that far.
void stream_entry(const Bytes& file, const EntryInfo& entry,
                  const std::function<void(std::span<const std::byte>)>& sink, std::uint64_t until);
void stream_entry(const Bytes& file, const EntryInfo& entry,
                  const std::function<void(std::span<const std::byte>)>& sink);

// The buffer inflate_part decompresses the bytes before a part into (and
// drops).
inline constexpr std::size_t kSkipChunk = std::size_t{64} << 10;

// Bytes [offset, offset + out.size()) of a deflated entry whose compressed
// bytes are `data`, decompressed into `out`: the entry is decompressed from
// its start to the part's end and no further, the bytes before `offset`
// through one buffer of at most kSkipChunk bytes. A part that ends the entry
// is checked (size and CRC-32, and no data beyond); a shorter one cannot be
// (its CRC-32 is not computed). Error(corrupt) naming the entry for invalid
// deflate data or data that ends before the part does. Requires
// offset + out.size() <= entry.uncompressed_size.
void inflate_part(std::span<const std::byte> data, const EntryInfo& entry, std::uint64_t offset,
                  std::span<std::byte> out);

// Decompresses one deflated entry's data in steps, each continuing where the
// last one stopped, with stream_entry's checks: Error(corrupt) naming the
// entry for invalid deflate data, data that ends early or more bytes than
// the entry's size, and, from check() once the deflate stream ended, a size
// or CRC-32 other than the entry's. `data` (the entry's compressed bytes)
// must outlive the inflater. One thread at a time.
class EntryInflater {
 public:
  // `crc` false: the CRC-32 is not computed, and check() checks the size only.
  EntryInflater(std::span<const std::byte> data, const EntryInfo& entry, bool crc = true);
  ~EntryInflater();
  EntryInflater(const EntryInflater&) = delete;
  EntryInflater& operator=(const EntryInflater&) = delete;

  // Decompresses into `out` until it is full or the deflate stream ends;
  // returns how many bytes it wrote (0 once ended()).
  std::size_t inflate(std::span<std::byte> out);
  // Whether the deflate stream ended.
  bool ended() const noexcept { return ended_; }
  // Checks the size and CRC-32 of what an ended stream gave.
  void check() const;
  // Bytes decompressed so far.
  std::uint64_t produced() const noexcept { return total_; }

 private:
  struct Zlib;
  std::unique_ptr<Zlib> zlib_;
  std::span<const std::byte> data_;
  std::uint64_t size_;
  std::uint32_t expected_crc_;
  std::string name_;
  std::uint64_t consumed_ = 0;  // bytes of data_ given to zlib
  std::uint64_t total_ = 0;
  std::uint32_t crc_ = 0;
  bool compute_crc_;
  bool ended_ = false;
};

}  // namespace modelzip::zip
