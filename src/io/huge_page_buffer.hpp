// Anonymous memory aligned to 2 MiB with transparent huge pages asked for
// (madvise; where they are off, ordinary pages): few page faults to fill,
// few physically contiguous segments to write from. Used for the bounce
// buffers of direct writes (io/shared_file_writer) and the staging memory of
// background saves (checkpoint/staging_area).
//
// Ownership: the unique_ptr owns the whole mapping, of which the buffer is
// the aligned part; destroying it unmaps.
#pragma once

#include <cstddef>
#include <memory>

namespace modelzip::io {

struct HugePageUnmapper {
  void* mapping = nullptr;
  std::size_t length = 0;
  void operator()(std::byte*) const noexcept;
};
using HugePageBuffer = std::unique_ptr<std::byte, HugePageUnmapper>;

// A buffer of at least `size` bytes (0 allowed). Throws std::bad_alloc when
// the system refuses the memory.
HugePageBuffer huge_page_buffer(std::size_t size);

}  // namespace modelzip::io
