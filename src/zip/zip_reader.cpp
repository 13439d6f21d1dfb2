#include "zip/zip_reader.hpp"

#include <sys/mman.h>
#include <unistd.h>
#include <zip.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

#include "modelzip/error.hpp"

namespace modelzip::zip {
namespace {

[[noreturn]] void corrupt(const EntryInfo& e, const std::string& what) {
  throw Error(ErrorCode::corrupt, what, ErrorContext{.entry = e.name});
}

// Copies `src` to `dst` and returns the CRC-32 of the bytes, in one pass:
// each chunk is checksummed right after it is copied, while it is in cache.
std::uint32_t copy_and_crc(const std::byte* src, std::byte* dst, std::size_t size) noexcept {
  constexpr std::size_t chunk = std::size_t{256} << 10;
  uLong crc = ::crc32(0L, Z_NULL, 0);
  for (std::size_t done = 0; done < size;) {
    std::size_t n = std::min(chunk, size - done);
    std::memcpy(dst + done, src + done, n);
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(dst + done), static_cast<uInt>(n));
    done += n;
  }
  return static_cast<std::uint32_t>(crc);
}

constexpr std::size_t kHugePage = std::size_t{2} << 20;
// Copies of at least this size go to their own anonymous mapping.
constexpr std::size_t kMapFrom = kHugePage;
// Stored data is copied in jobs of this size (the unit of sharing between
// threads, and of populating page tables in bulk).
constexpr std::size_t kJobBytes = std::size_t{4} << 20;
// Below this many bytes in all, one thread does everything.
constexpr std::uint64_t kParallelFrom = std::uint64_t{16} << 20;

// Best-effort madvise of [p, p + n) widened to whole pages (advice is a
// hint: failures, e.g. an older kernel without MADV_POPULATE_*, are ignored).
void advise_range(const void* p, std::size_t n, int advice) noexcept {
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  if (n == 0) return;
  const auto begin = reinterpret_cast<std::uintptr_t>(p) / page * page;
  const auto end = reinterpret_cast<std::uintptr_t>(p) + n;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

// A private anonymous mapping, unmapped when the last owner goes.
class AnonymousMapping {
 public:
  AnonymousMapping(void* base, std::size_t length) noexcept : base_(base), length_(length) {}
  AnonymousMapping(const AnonymousMapping&) = delete;
  AnonymousMapping& operator=(const AnonymousMapping&) = delete;
  ~AnonymousMapping() { ::munmap(base_, length_); }

 private:
  void* base_;
  std::size_t length_;
};

// Writable memory for an owned copy of `size` bytes, kept alive by `keeper`.
// Large copies get a mapping of their own whose start is 2 MiB aligned and
// advised for transparent huge pages (a page fault per 2 MiB instead of per
// 4 KiB; freed to the system at once when dropped); `populate` then says
// that prefaulting in bulk is worthwhile. Throws std::bad_alloc.
struct OwnedMemory {
  std::byte* data = nullptr;
  std::shared_ptr<const void> keeper;
  bool populate = false;
};

OwnedMemory allocate_owned(std::size_t size) {
  if (size >= kMapFrom && size <= SIZE_MAX - kHugePage) {
    const std::size_t length = size + kHugePage;
    void* base =
        ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base != MAP_FAILED) {
      std::shared_ptr<const void> keeper;
      try {
        keeper = std::make_shared<const AnonymousMapping>(base, length);
      } catch (...) {
        ::munmap(base, length);
        throw;
      }
      const auto aligned =
          (reinterpret_cast<std::uintptr_t>(base) + kHugePage - 1) / kHugePage * kHugePage;
      auto* data = reinterpret_cast<std::byte*>(aligned);
      ::madvise(data, size, MADV_HUGEPAGE);
      return {data, std::move(keeper), true};
    }
  }
  std::shared_ptr<std::byte[]> owned = std::make_shared_for_overwrite<std::byte[]>(size);
  std::byte* data = owned.get();
  return {data, std::move(owned), false};
}

// Sets `stop` and joins `thread` (if it runs) when the scope ends, however.
struct JoinOnExit {
  std::atomic<bool>& stop;
  std::thread& thread;
  ~JoinOnExit() {
    stop.store(true, std::memory_order_relaxed);
    if (thread.joinable()) thread.join();
  }
};

}  // namespace

std::uint32_t crc32_of(std::span<const std::byte> data) noexcept {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(data.data());
  std::size_t left = data.size();
  while (left > 0) {
    auto n = static_cast<uInt>(std::min<std::size_t>(left, 1u << 30));
    crc = ::crc32(crc, p, n);
    p += n;
    left -= n;
  }
  return static_cast<std::uint32_t>(crc);
}

std::uint32_t crc32_concat(std::uint32_t crc_a, std::uint32_t crc_b,
                           std::uint64_t length_b) noexcept {
  return static_cast<std::uint32_t>(
      ::crc32_combine64(crc_a, crc_b, static_cast<z_off64_t>(length_b)));
}

LibzipArchive::LibzipArchive(Bytes file) : file_(std::move(file)) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* src = zip_source_buffer_create(file_.data(), file_.size(), 0, &error);
  if (src) {
    za_ = zip_open_from_source(src, ZIP_RDONLY, &error);
    if (!za_) zip_source_free(src);
  }
  if (!za_) {
    std::string msg = zip_error_strerror(&error);
    zip_error_fini(&error);
    throw Error(ErrorCode::corrupt, "libzip cannot open the archive: " + msg);
  }
  zip_error_fini(&error);
}

LibzipArchive::~LibzipArchive() {
  if (za_) zip_discard(za_);
}

std::uint64_t LibzipArchive::index_of(const EntryInfo& entry) const {
  zip_int64_t i = zip_name_locate(za_, entry.name.c_str(), ZIP_FL_ENC_RAW);
  if (i < 0) corrupt(entry, "libzip does not find the entry");
  return static_cast<std::uint64_t>(i);
}

Bytes LibzipArchive::read(const EntryInfo& entry, std::uint64_t length) const {
  std::lock_guard lock(mutex_);
  zip_file_t* f = zip_fopen_index(za_, index_of(entry), 0);
  if (!f) corrupt(entry, std::string("cannot open entry: ") + zip_strerror(za_));
  std::vector<std::byte> out(length);
  std::uint64_t done = 0;
  std::string failure;
  while (done < length) {
    zip_int64_t n =
        zip_fread(f, out.data() + done, std::min<std::uint64_t>(length - done, 1u << 30));
    if (n < 0) {
      failure = zip_error_strerror(zip_file_get_error(f));
      break;
    }
    if (n == 0) {
      failure =
          "data ends after " + std::to_string(done) + " of " + std::to_string(length) + " bytes";
      break;
    }
    done += static_cast<std::uint64_t>(n);
  }
  if (failure.empty() && length == entry.uncompressed_size) {
    // Read past the end so that libzip checks the CRC and the true size.
    std::byte extra;
    zip_int64_t n = zip_fread(f, &extra, 1);
    if (n < 0)
      failure = zip_error_strerror(zip_file_get_error(f));
    else if (n > 0)
      failure = "entry holds more data than its declared size";
  }
  zip_fclose(f);
  if (!failure.empty()) corrupt(entry, "cannot read entry: " + failure);
  return Bytes::take(std::move(out));
}

std::shared_ptr<LibzipArchive> EntryReader::libzip() const {
  std::call_once(libzip_once_, [&] { libzip_ = std::make_shared<LibzipArchive>(file_); });
  return libzip_;
}

Bytes EntryReader::read(const EntryInfo& entry, bool check_crc) const {
  if (entry.stored()) {
    Bytes b = file_.slice(entry.data_offset, entry.compressed_size);
    if (check_crc && crc32_of(b.span()) != entry.crc32)
      corrupt(entry, "CRC-32 mismatch: the entry data is damaged");
    return b;
  }
  return libzip()->read(entry, entry.uncompressed_size);
}

Bytes EntryReader::read_owned(const EntryInfo& entry) const {
  const EntryInfo* one[] = {&entry};
  return std::move(read_owned_all(one).front());
}

std::vector<Bytes> EntryReader::read_owned_all(std::span<const EntryInfo* const> entries,
                                               const ReadProgress& progress) const {
  // Plan: memory for every stored entry, and its data cut into jobs (the
  // jobs of one entry are consecutive).
  struct Job {
    std::size_t entry;
    const std::byte* src;
    std::byte* dst;
    std::size_t size;
    bool populate;
    std::uint32_t crc = 0;
  };
  const std::size_t n = entries.size();
  std::vector<OwnedMemory> memory(n);
  std::vector<std::size_t> first_job(n, 0);
  std::vector<Job> jobs;
  std::uint64_t total = 0, stored_total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const EntryInfo& e = *entries[i];
    total += e.compressed_size;
    first_job[i] = jobs.size();
    if (!e.stored()) continue;
    const Bytes src = file_.slice(e.data_offset, e.compressed_size);
    memory[i] = allocate_owned(src.size());
    stored_total += src.size();
    for (std::size_t off = 0; off < src.size(); off += kJobBytes)
      jobs.push_back(Job{i, src.data() + off, memory[i].data + off,
                         std::min(kJobBytes, src.size() - off), memory[i].populate});
  }
  std::unique_ptr<std::atomic<std::size_t>[]> remaining(new std::atomic<std::size_t>[n]);
  for (std::size_t i = 0; i < n; ++i)
    remaining[i].store((i + 1 < n ? first_job[i + 1] : jobs.size()) - first_job[i],
                       std::memory_order_relaxed);

  // Both threads take jobs in order until none are left or `stop` is set.
  const bool populate_src = file_.is_mapped();
  std::atomic<std::size_t> next_job{0};
  std::atomic<bool> stop{false};
  auto run_one = [&]() noexcept {
    if (stop.load(std::memory_order_relaxed)) return false;
    const std::size_t k = next_job.fetch_add(1, std::memory_order_relaxed);
    if (k >= jobs.size()) return false;
    Job& j = jobs[k];
    if (populate_src) advise_range(j.src, j.size, MADV_POPULATE_READ);
    if (j.populate) advise_range(j.dst, j.size, MADV_POPULATE_WRITE);
    j.crc = copy_and_crc(j.src, j.dst, j.size);
    remaining[j.entry].fetch_sub(1, std::memory_order_release);
    return true;
  };
  std::thread helper;
  JoinOnExit join{stop, helper};
  if (stored_total >= kParallelFrom && jobs.size() > 1 && std::thread::hardware_concurrency() > 1) {
    try {
      helper = std::thread([&] {
        while (run_one()) {
        }
      });
    } catch (const std::system_error&) {
      // No second thread: the calling thread does every job.
    }
  }

  // On the calling thread, in entry order: check each completed entry's
  // CRC, read deflated entries, report progress.
  std::vector<Bytes> out(n);
  std::size_t finished = 0;
  std::uint64_t done = 0;
  auto finish_ready = [&](bool wait) {
    for (; finished < n; ++finished) {
      const std::size_t i = finished;
      const EntryInfo& e = *entries[i];
      if (e.stored()) {
        if (remaining[i].load(std::memory_order_acquire) != 0) {
          if (!wait) return;
          while (run_one()) {
          }
          stop.store(true, std::memory_order_relaxed);
          if (helper.joinable()) helper.join();
        }
        const std::size_t end = i + 1 < n ? first_job[i + 1] : jobs.size();
        std::uint32_t crc = 0;
        for (std::size_t k = first_job[i]; k < end; ++k)
          crc = k == first_job[i] ? jobs[k].crc : crc32_concat(crc, jobs[k].crc, jobs[k].size);
        if (crc != e.crc32) corrupt(e, "CRC-32 mismatch: the entry data is damaged");
        out[i] = Bytes::borrow({memory[i].data, e.compressed_size}, std::move(memory[i].keeper));
      } else {
        out[i] = libzip()->read(e, e.uncompressed_size);
      }
      done += e.compressed_size;
      if (progress && !progress(done, total)) throw Error(ErrorCode::cancelled, "load cancelled");
    }
  };
  while (run_one()) finish_ready(false);
  finish_ready(true);
  return out;
}

Bytes EntryReader::read_prefix(const EntryInfo& entry, std::uint64_t length) const {
  length = std::min(length, entry.uncompressed_size);
  if (entry.stored()) return file_.slice(entry.data_offset, length);
  return libzip()->read(entry, length);
}

}  // namespace modelzip::zip
