#include "io/shared_file_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "io/syscalls.hpp"

namespace modelzip::io {
namespace {

// Ranges with fewer whole pages than this are written through the page
// cache (the short pieces of a strided shard, small tensors).
constexpr std::uint64_t kMinDirect = 1u << 20;

// The page cache may hold a file's pages in folios of up to a PMD (512
// pages; 2 MiB with 4 KiB pages), aligned to their size, for instance after
// a reader's readahead. A direct write and another process's cached write
// must never touch one folio: the kernel could not drop the folio the
// other process dirtied after the direct write, and writing that folio
// back later would put its stale copy of the directly written pages over
// them. So direct writes cover only whole PMD-aligned stretches of a
// range; the edges go through the page cache.
constexpr std::uint64_t kFolioPages = 512;

// Direct writes are aligned (file offset, length and source address) to
// 4 KiB or the page size if larger: no disk or file system in use asks for
// more, ext4 keeps its lock shared only for writes aligned to its blocks,
// and a page written directly must not share a cached page with anybody
// else's bytes. A file system that asks for more refuses with EINVAL, and
// the writer falls back to the page cache.
std::uint64_t direct_alignment() noexcept {
  const long page = ::sysconf(_SC_PAGESIZE);
  return std::max<std::uint64_t>(4096, page > 0 ? static_cast<std::uint64_t>(page) : 0);
}

}  // namespace

void SharedFileWriter::FreeDeleter::operator()(std::byte* p) const noexcept {
  std::free(p);
}

SharedFileWriter::SharedFileWriter(const std::filesystem::path& path, ErrorContext context,
                                   std::size_t chunk_bytes)
    : context_(std::move(context)), page_(direct_alignment()) {
  chunk_ = static_cast<std::size_t>(std::max<std::uint64_t>(chunk_bytes / page_ * page_, page_));
  file_ = UniqueFd(sys::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!file_.valid()) throw errno_error("cannot open for writing", context_);
#ifdef O_DIRECT
  const int direct = sys::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (direct >= 0) direct_ = UniqueFd(direct);  // else no O_DIRECT here: the page cache only
#endif
}

SharedFileWriter::~SharedFileWriter() = default;

void SharedFileWriter::cached(const std::byte* data, std::uint64_t size, std::uint64_t offset) {
  if (size == 0) return;
  pwrite_full(file_.get(), data, size, offset, context_);
  cached_bytes_ += size;
}

std::size_t SharedFileWriter::try_direct(const std::byte* data, std::size_t size,
                                         std::uint64_t offset) {
  for (;;) {
    const ssize_t w = sys::pwrite(direct_.get(), data, size, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL) {  // O_DIRECT (or its alignment) refused here
      direct_ = UniqueFd();
      return 0;
    }
    if (w <= 0) {
      if (w == 0) errno = ENOSPC;
      ErrorContext c = context_;
      c.offset = offset;
      throw errno_error("cannot write", std::move(c));
    }
    direct_bytes_ += static_cast<std::uint64_t>(w);
    return static_cast<std::size_t>(w);
  }
}

void SharedFileWriter::write(const std::byte* data, std::uint64_t size, std::uint64_t offset) {
  const std::uint64_t end = offset + size;
  // Direct writes cover whole folios only: see kFolioPages.
  const std::uint64_t guard = page_ * kFolioPages;
  const std::uint64_t first = (offset + guard - 1) / guard * guard;
  const std::uint64_t last = end / guard * guard;
  // A short range goes through the page cache whole: a direct write waits
  // for the disk, which for a few pages costs more than the copy it saves.
  if (!direct_.valid() || first >= last || last - first < kMinDirect)
    return cached(data, size, offset);
  cached(data, first - offset, offset);  // the edge before
  std::uint64_t pos = first;
  while (pos < last && direct_.valid()) {
    if (pos % page_ != 0) {  // a short direct write stopped mid-page
      const std::uint64_t to = std::min(last, (pos / page_ + 1) * page_);
      cached(data + (pos - offset), to - pos, pos);
      pos = to;
      continue;
    }
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_, last - pos));
    const std::byte* from = data + (pos - offset);
    if (reinterpret_cast<std::uintptr_t>(from) % page_ != 0) {
      if (!bounce_) {
        void* p = std::aligned_alloc(page_, chunk_);
        if (!p) throw std::bad_alloc();
        bounce_.reset(static_cast<std::byte*>(p));
      }
      std::memcpy(bounce_.get(), from, n);
      from = bounce_.get();
    }
    pos += try_direct(from, n, pos);
  }
  // The edge after; after O_DIRECT was refused, all the rest.
  cached(data + (pos - offset), end - pos, pos);
}

bool preallocate(int fd, std::uint64_t offset, std::uint64_t length) noexcept {
  if (length == 0) return true;
#ifdef __linux__
  int r;
  do r = ::fallocate(fd, 0, static_cast<off_t>(offset), static_cast<off_t>(length));
  while (r != 0 && errno == EINTR);
  return r == 0;
#else
  (void)fd;
  (void)offset;
  return false;
#endif
}

}  // namespace modelzip::io
