// Anonymous memory aligned to 2 MiB, optionally with transparent huge pages
// asked for (madvise; where they are off, ordinary pages). Huge pages make a
// buffer few physically contiguous segments to write from (the bounce
// buffers of direct writes, io/shared_file_writer), but the first touch of a
// large one can stall in memory compaction, so the staging memory of
// background saves (checkpoint/staging_area) asks for ordinary pages.
//
// Ownership: the unique_ptr owns the whole mapping, of which the buffer is
// the aligned part; destroying it unmaps.
#pragma once

#include <cstddef>
#include <memory>

namespace modelzip::io {

struct AnonymousUnmapper {
  void* mapping = nullptr;
  std::size_t length = 0;
  void operator()(std::byte*) const noexcept;
};
using AnonymousBuffer = std::unique_ptr<std::byte, AnonymousUnmapper>;

// A buffer of at least `size` bytes (0 allowed). Throws std::bad_alloc when
// the system refuses the memory.
AnonymousBuffer anonymous_buffer(std::size_t size, bool huge_pages);

}  // namespace modelzip::io
