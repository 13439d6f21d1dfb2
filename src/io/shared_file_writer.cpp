#include "io/shared_file_writer.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <utility>

#ifdef __linux__
#include <linux/aio_abi.h>
#include <sys/syscall.h>
#endif

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

// The file is mapped a window at a time (aligned to its size, a multiple
// of the 2 MiB stretches): few mmap calls, bounded address space.
constexpr std::uint64_t kWindow = 1ull << 30;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

// Asynchronous direct writes in flight at once.
constexpr int kDepth = 4;

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

#ifdef __linux__
struct SharedFileWriter::Async {
  struct Slot {
    iocb cb{};
    AlignedBuffer bounce;
    const std::byte* data = nullptr;  // the caller's bytes (to write again after a refusal)
    const std::byte* from = nullptr;  // what the disk reads: `data` or `bounce`
    std::uint64_t size = 0;           // the caller's bytes of this write
    std::uint64_t submitted = 0;      // bytes submitted (fewer after an injected short write)
    bool busy = false;
  };
  aio_context_t ctx = 0;
  std::array<Slot, kDepth> slots;
  int in_flight = 0;

  // A context from the idle one of this process, or a new one; false if
  // AIO is unavailable (no AIO in this kernel, or its limit reached).
  bool start() noexcept {
    {
      const std::lock_guard lock(idle_mutex);
      if (idle_ctx && idle_pid == ::getpid()) ctx = std::exchange(idle_ctx, 0);
    }
    return ctx || ::syscall(SYS_io_setup, kDepth, &ctx) == 0;
  }

  // With writes in flight, destroys the context, which waits for them (the
  // kernel cannot cancel them), so that no buffer is freed under the disk.
  // Else keeps it as the process's idle context for the next writer:
  // destroying one waits for the kernel's next RCU grace period.
  ~Async() {
    if (!ctx) return;
    if (in_flight == 0) {
      const std::lock_guard lock(idle_mutex);
      if (!idle_ctx || idle_pid != ::getpid()) {
        // (A context left by the parent of a forked process is not this
        // process's: only forgotten.)
        idle_ctx = ctx;
        idle_pid = ::getpid();
        return;
      }
    }
    ::syscall(SYS_io_destroy, ctx);
  }

  static inline std::mutex idle_mutex;
  static inline aio_context_t idle_ctx = 0;  // guarded by idle_mutex
  static inline pid_t idle_pid = 0;          // guarded by idle_mutex
};
#else
struct SharedFileWriter::Async {};
#endif

SharedFileWriter::AlignedBuffer SharedFileWriter::aligned_buffer() const {
  return anonymous_buffer(chunk_, true);
}

const std::byte* SharedFileWriter::page_aligned(const std::byte* data, std::size_t size,
                                                AlignedBuffer& buffer) const {
  if (reinterpret_cast<std::uintptr_t>(data) % page_ == 0) return data;
  if (!buffer) buffer = aligned_buffer();
  std::memcpy(buffer.get(), data, size);
  return buffer.get();
}

SharedFileWriter::SharedFileWriter(const std::filesystem::path& path, ErrorContext context,
                                   std::size_t chunk_bytes)
    : context_(std::move(context)), page_(direct_alignment()) {
  chunk_ = static_cast<std::size_t>(std::max<std::uint64_t>(chunk_bytes / page_ * page_, page_));
  file_ = UniqueFd(sys::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!file_.valid()) throw errno_error("cannot open for writing", context_);
#ifdef O_DIRECT
  const int direct = sys::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (direct >= 0) direct_ = UniqueFd(direct);  // else no O_DIRECT here: the page cache only
#endif
#ifdef __linux__
  if (direct_.valid()) {
    auto async = std::make_unique<Async>();
    if (async->start()) async_ = std::move(async);  // else synchronous writes
  }
#endif
}

std::unique_ptr<SharedFileWriter> SharedFileWriter::reopen(int fd, ErrorContext context,
                                                           bool map_cached) {
  struct stat given {};
  if (::fstat(fd, &given) != 0 || !S_ISREG(given.st_mode)) return nullptr;
  std::unique_ptr<SharedFileWriter> w;
  try {
    w = std::make_unique<SharedFileWriter>("/proc/self/fd/" + std::to_string(fd),
                                           std::move(context));
  } catch (const Error&) {
    return nullptr;  // no /proc, or no permission to read the file
  }
  struct stat opened {};
  if (::fstat(w->file_.get(), &opened) != 0 || opened.st_dev != given.st_dev ||
      opened.st_ino != given.st_ino)
    return nullptr;
  w->unmappable_ = !map_cached;
  return w;
}

SharedFileWriter::~SharedFileWriter() {
  unmap();
}

void SharedFileWriter::fail(int error, std::uint64_t offset) const {
  errno = error;
  ErrorContext c = context_;
  c.offset = offset;
  throw errno_error("cannot write", std::move(c));
}

std::uint64_t SharedFileWriter::stretch() const noexcept {
  return page_ * kFolioPages;
}

void SharedFileWriter::unmap() noexcept {
  if (window_) ::munmap(window_, kWindow);
  window_ = nullptr;
  ready_ = ready_end_ = 0;
  unpopulatable_ = kNone;
}

bool SharedFileWriter::mapped_ready(std::uint64_t offset, std::uint64_t size) noexcept {
  if (offset >= ready_ && offset + size <= ready_end_) return true;
  if (unmappable_) return false;
  const std::uint64_t base = offset / kWindow * kWindow;
  if (!window_ || window_offset_ != base) {
    unmap();
    // Pages of the window beyond the end of the file are never touched
    // (populating them fails first).
    void* m = ::mmap(nullptr, kWindow, PROT_READ | PROT_WRITE, MAP_SHARED, file_.get(),
                     static_cast<off_t>(base));
    if (m == MAP_FAILED) {
      unmappable_ = true;
      return false;
    }
    window_ = static_cast<std::byte*>(m);
    window_offset_ = base;
  }
  const auto populate = [&](std::uint64_t from, std::uint64_t to) {
    int r;
    do r = ::madvise(window_ + (from - base), to - from, MADV_POPULATE_WRITE);
    while (r != 0 && errno == EINTR);
    if (r != 0) return false;
    ready_ = from;
    ready_end_ = to;
    return true;
  };
  // The whole stretch (one call for all the pieces in it), else (at the
  // end of the file) just the range's pages; a stretch that failed once is
  // not tried again for every piece in it.
  const std::uint64_t from = offset / stretch() * stretch();
  if (from != unpopulatable_ && populate(from, from + stretch())) return true;
  unpopulatable_ = from;
  return populate(offset / page_ * page_, (offset + size + page_ - 1) / page_ * page_);
}

void SharedFileWriter::buffered(const std::byte* data, std::uint64_t size, std::uint64_t offset) {
  if (size == 0) return;
  pwrite_full(file_.get(), data, size, offset, context_);
  cached_bytes_ += size;
}

void SharedFileWriter::cached(const std::byte* data, std::uint64_t size, std::uint64_t offset) {
  while (size > 0) {
    const std::uint64_t n = std::min(size, (offset / stretch() + 1) * stretch() - offset);
    if (!mapped_ready(offset, n)) {
      buffered(data, n, offset);
    } else {
      std::byte* to = window_ + (offset - window_offset_);
      for (std::uint64_t done = 0; done < n;) {  // (a short write: injected)
        const ssize_t w = sys::mapped_write(file_.get(), to + done, data + done, n - done,
                                            static_cast<off_t>(offset + done));
        if (w < 0) fail(errno, offset + done);
        if (w == 0) fail(ENOSPC, offset + done);
        done += static_cast<std::uint64_t>(w);
      }
      cached_bytes_ += n;
    }
    data += n;
    offset += n;
    size -= n;
  }
}

std::size_t SharedFileWriter::direct_sync(const std::byte* data, std::size_t size,
                                          std::uint64_t offset) {
  const std::byte* from = page_aligned(data, size, bounce_);
  for (;;) {
    const ssize_t w = sys::pwrite(direct_.get(), from, size, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL) {  // O_DIRECT (or its alignment) refused here
      refused_ = true;
      return 0;
    }
    if (w < 0) fail(errno, offset);
    if (w == 0) fail(ENOSPC, offset);
    direct_bytes_ += static_cast<std::uint64_t>(w);
    return static_cast<std::size_t>(w);
  }
}

void SharedFileWriter::direct(const std::byte* data, std::uint64_t size, std::uint64_t offset) {
  std::uint64_t done = 0;
  while (done < size && !refused_) {
    const std::uint64_t pos = offset + done;
    if (pos % page_ != 0) {  // a short write stopped mid-page
      const std::uint64_t n = std::min(size - done, page_ - pos % page_);
      buffered(data + done, n, pos);
      done += n;
      continue;
    }
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_, size - done));
    if (async_) {
      submit(data + done, n, pos);
      done += n;
    } else {
      done += direct_sync(data + done, n, pos);
    }
  }
  buffered(data + done, size - done, offset + done);  // after a refusal: the rest
}

#ifdef __linux__
void SharedFileWriter::submit(const std::byte* data, std::size_t size, std::uint64_t offset) {
  Async& a = *async_;
  // (A completion may submit the rest of a short write, so: while.)
  while (a.in_flight == kDepth) reap(1);
  if (refused_) return buffered(data, size, offset);
  auto slot = std::find_if(a.slots.begin(), a.slots.end(), [](const auto& s) { return !s.busy; });
  std::size_t len = size;
  if (!sys::async_write_allowed(&len)) {
    if (errno == EINVAL) {
      refused_ = true;
      return buffered(data, size, offset);
    }
    fail(errno, offset);
  }
  slot->data = data;
  slot->from = page_aligned(data, len, slot->bounce);
  slot->size = size;
  slot->submitted = len;
  slot->cb = iocb{};
  slot->cb.aio_data = static_cast<std::uint64_t>(slot - a.slots.begin());
  slot->cb.aio_lio_opcode = IOCB_CMD_PWRITE;
  slot->cb.aio_fildes = static_cast<std::uint32_t>(direct_.get());
  slot->cb.aio_buf = reinterpret_cast<std::uint64_t>(slot->from);
  slot->cb.aio_nbytes = len;
  slot->cb.aio_offset = static_cast<std::int64_t>(offset);
  iocb* list[1] = {&slot->cb};
  long r;
  do r = ::syscall(SYS_io_submit, a.ctx, 1, list);
  while (r < 0 && errno == EINTR);
  if (r != 1) {
    if (r < 0 && errno == EINVAL) {  // refused at submission
      refused_ = true;
      return buffered(data, size, offset);
    }
    fail(r < 0 ? errno : EAGAIN, offset);
  }
  slot->busy = true;
  ++a.in_flight;
}

void SharedFileWriter::reap(int min) {
  Async& a = *async_;
  io_event events[kDepth];
  long got;
  do got = ::syscall(SYS_io_getevents, a.ctx, min, kDepth, events, nullptr);
  while (got < 0 && errno == EINTR);
  if (got < 0) throw errno_error("cannot wait for a write", context_);
  int error = 0;
  std::uint64_t error_offset = 0;
  // Bytes to write again (refused) or on (after a short write), once every
  // completed slot is free again.
  struct Rest {
    const std::byte* data;
    std::uint64_t size, offset;
  };
  std::array<Rest, kDepth> rest;
  std::size_t rests = 0;
  for (long i = 0; i < got; ++i) {
    auto& s = a.slots[static_cast<std::size_t>(events[i].data)];
    s.busy = false;
    --a.in_flight;
    const auto offset = static_cast<std::uint64_t>(s.cb.aio_offset);
    const long long res = events[i].res;
    if (res == -EINVAL) {  // O_DIRECT refused: these bytes, and all after, through the cache
      refused_ = true;
      rest[rests++] = {s.data, s.size, offset};
    } else if (res < 0 || (res == 0 && s.size > 0)) {
      if (!error) {
        error = res < 0 ? static_cast<int>(-res) : ENOSPC;
        error_offset = offset;
      }
    } else {
      const auto n = static_cast<std::uint64_t>(res);
      direct_bytes_ += n;
      sys::async_write_done(direct_.get(), s.from, static_cast<std::size_t>(n),
                            static_cast<off_t>(offset));
      if (n < s.size) rest[rests++] = {s.data + n, s.size - n, offset + n};
    }
  }
  if (error) fail(error, error_offset);
  // A short write goes on as any run (from mid-page through the cache);
  // after a refusal direct() writes through the cache.
  for (std::size_t i = 0; i < rests; ++i) direct(rest[i].data, rest[i].size, rest[i].offset);
}
#else
void SharedFileWriter::submit(const std::byte*, std::size_t, std::uint64_t) {}
void SharedFileWriter::reap(int) {}
#endif

void SharedFileWriter::finish() {
  while (async_ && async_->in_flight > 0) reap(async_->in_flight);
  unmap();
}

void SharedFileWriter::write(const std::byte* data, std::uint64_t size, std::uint64_t offset) {
  const std::uint64_t end = offset + size;
  // Direct writes cover whole stretches only: see kFolioPages.
  const std::uint64_t first = (offset + stretch() - 1) / stretch() * stretch();
  const std::uint64_t last = end / stretch() * stretch();
  // A short range goes through the page cache whole: a direct write waits
  // for the disk, which for a few pages costs more than the copy it saves.
  if (!direct_.valid() || refused_ || first >= last || last - first < kMinDirect)
    return cached(data, size, offset);
  buffered(data, first - offset, offset);  // the edge before
  direct(data + (first - offset), last - first, first);
  buffered(data + (last - offset), end - last, last);  // the edge after
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
