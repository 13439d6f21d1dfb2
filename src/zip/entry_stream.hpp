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
#include <span>

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

}  // namespace modelzip::zip
