// ByteSource: the seam between the readers and where an archive's bytes come
// from. Readers work on one Bytes view of the whole file (a mapping); before
// they touch a part of it they call ensure() on the archive's ByteSource, if
// it has one. A local file has none: its mapping holds every byte already.
// A remote archive (src/remote/) maps a sparse local cache file whose ranges
// are filled by ensure() from the server, at the same offsets.
//
// Contract: after ensure(ranges) returns, every byte of those ranges (clipped
// to the file size) in the mapping holds the archive's content, and keeps it
// for the lifetime of the mapping. Ranges may overlap, be unsorted, empty or
// reach past the end. Implementations are thread-safe (an Archive is used
// from several threads). Errors: modelzip::Error (io for transport failures,
// corrupt when the source changed while being read).
#pragma once

#include <cstdint>
#include <span>

namespace modelzip::io {

struct ByteRange {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual void ensure(std::span<const ByteRange> ranges) const = 0;
  void ensure(std::uint64_t offset, std::uint64_t length) const {
    const ByteRange one{offset, length};
    ensure(std::span<const ByteRange>(&one, 1));
  }
};

}  // namespace modelzip::io
