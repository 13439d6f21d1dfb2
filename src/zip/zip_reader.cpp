#include "zip/zip_reader.hpp"

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

#include "core/crc32.hpp"
#include "core/fail.hpp"
#include "core/progress_tracker.hpp"
#include "modelzip/error.hpp"
#include "zip/entry_stream.hpp"

namespace modelzip::zip {
namespace {

using modelzip::detail::fail_corrupt;

// Copies `src` to `dst` and returns the CRC-32 of the bytes, in one pass:
// each chunk is checksummed right after it is copied, while it is in cache.
std::uint32_t copy_and_crc(const std::byte* src, std::byte* dst, std::size_t size) noexcept {
  constexpr std::size_t chunk = std::size_t{256} << 10;
  uLong crc = ::crc32(0L, Z_NULL, 0);
  for (std::size_t done = 0; done < size;) {
    std::size_t n = std::min(chunk, size - done);
    std::memcpy(dst + done, src + done, n);
    crc = detail::crc32_update(static_cast<std::uint32_t>(crc), {dst + done, n});
    done += n;
  }
  return static_cast<std::uint32_t>(crc);
}

// Stored data is copied in jobs of this size, the unit of work shared
// between the two threads.
constexpr std::size_t kJobBytes = std::size_t{4} << 20;
// Below this many bytes in all, one thread does everything.
constexpr std::uint64_t kParallelFrom = std::uint64_t{16} << 20;

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
  if (i < 0) fail_corrupt("libzip does not find the entry", {.entry = entry.name});
  return static_cast<std::uint64_t>(i);
}

Bytes LibzipArchive::read(const EntryInfo& entry, std::uint64_t length) const {
  std::lock_guard lock(mutex_);
  zip_file_t* f = zip_fopen_index(za_, index_of(entry), 0);
  if (!f)
    fail_corrupt(std::string("cannot open entry: ") + zip_strerror(za_), {.entry = entry.name});
  // Not value-initialised: the pages no data reaches are never touched, so
  // an entry that declares more than it holds (within deflate's ratio)
  // costs address space, not memory.
  std::shared_ptr<std::byte[]> out = std::make_shared_for_overwrite<std::byte[]>(length);
  std::uint64_t done = 0;
  std::string failure;
  while (done < length) {
    zip_int64_t n =
        zip_fread(f, out.get() + done, std::min<std::uint64_t>(length - done, 1u << 30));
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
  if (!failure.empty()) fail_corrupt("cannot read entry: " + failure, {.entry = entry.name});
  const std::byte* data = out.get();
  return Bytes::borrow({data, static_cast<std::size_t>(length)}, std::move(out));
}

std::shared_ptr<LibzipArchive> EntryReader::libzip() const {
  std::call_once(libzip_once_, [&] { libzip_ = std::make_shared<LibzipArchive>(file_); });
  return libzip_;
}

std::optional<std::uint64_t> EntryReader::known_data_offset(const EntryInfo& entry) const {
  if (entry.data_offset != kDataOffsetUnknown) return entry.data_offset;
  std::lock_guard lock(data_offsets_mutex_);
  auto it = data_offsets_.find(entry.local_header_offset);
  if (it == data_offsets_.end()) return std::nullopt;
  return it->second;
}

std::uint64_t EntryReader::data_offset(const EntryInfo& entry) const {
  if (auto known = known_data_offset(entry)) return *known;
  const EntryInfo* one[] = {&entry};
  prefetch(one, 0);  // reads and checks the local header
  if (auto known = known_data_offset(entry)) return *known;
  fail_corrupt("internal error: the local header was not read", {.entry = entry.name});
}

void EntryReader::prefetch(std::span<const EntryInfo* const> entries, std::uint64_t prefix) const {
  if (!source_) return;
  std::vector<io::ByteRange> ranges;
  ranges.reserve(entries.size());
  struct Unread {
    const EntryInfo* entry;
    std::uint64_t want;     // data bytes needed
    std::uint64_t fetched;  // end of the range fetched
  };
  std::vector<Unread> unread;
  for (const EntryInfo* e : entries) {
    // Stored: the prefix asked for; deflated: everything (libzip reads the
    // local header, then the compressed data).
    const std::uint64_t want =
        e->stored() ? std::min(prefix, e->compressed_size) : e->compressed_size;
    const std::uint64_t lh = e->local_header_offset;
    if (auto d = known_data_offset(*e)) {
      if (e->stored())
        ranges.push_back({*d, want});
      else
        ranges.push_back({lh, *d - lh + want});
      continue;
    }
    // The parse checked lh + header + compressed size <= area_end.
    const std::uint64_t header = kLocalHeaderFixedSize + e->name.size();
    const std::uint64_t room = e->area_end - lh;
    std::uint64_t length = std::min(room, header + kLocalExtraGuess + want);
    if (want == e->compressed_size && room - header - want <= kTrailingOverRead) length = room;
    ranges.push_back({lh, length});
    unread.push_back({e, want, lh + length});
  }
  source_->ensure(ranges);
  if (unread.empty()) return;
  // Check the local headers before their data is used; fetch the data that
  // longer extra fields pushed past the first range.
  ranges.clear();
  for (const Unread& u : unread) {
    const std::uint64_t d = check_local_header(file_.span(), *u.entry, u.entry->area_end);
    {
      std::lock_guard lock(data_offsets_mutex_);
      data_offsets_.emplace(u.entry->local_header_offset, d);
    }
    if (d + u.want > u.fetched) ranges.push_back({u.fetched, d + u.want - u.fetched});
  }
  if (!ranges.empty()) source_->ensure(ranges);
}

Bytes EntryReader::read(const EntryInfo& entry, bool check_crc) const {
  const EntryInfo* one[] = {&entry};
  prefetch(one);
  if (entry.stored()) {
    Bytes b = file_.slice(data_offset(entry), entry.compressed_size);
    if (check_crc && detail::crc32_of(b.span()) != entry.crc32)
      fail_corrupt("CRC-32 mismatch: the entry data is damaged", {.entry = entry.name});
    return b;
  }
  return libzip()->read(entry, entry.uncompressed_size);
}

Bytes EntryReader::read_owned(const EntryInfo& entry) const {
  const EntryInfo* one[] = {&entry};
  return std::move(read_owned_all(one).front());
}

std::vector<Bytes> EntryReader::read_owned_all(std::span<const EntryInfo* const> entries,
                                               const ProgressCallback& progress) const {
  // Plan: memory for every stored entry, and its data cut into jobs (the
  // jobs of one entry are consecutive).
  struct Job {
    std::size_t entry;
    const std::byte* src;
    std::byte* dst;
    std::size_t size;
    std::uint32_t crc = 0;
  };
  prefetch(entries);
  const std::size_t n = entries.size();
  std::vector<std::shared_ptr<std::byte[]>> memory(n);
  std::vector<std::size_t> first_job(n, 0);
  std::vector<Job> jobs;
  std::uint64_t total = 0, stored_total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const EntryInfo& e = *entries[i];
    total += e.compressed_size;
    first_job[i] = jobs.size();
    if (!e.stored()) continue;
    const Bytes src = file_.slice(data_offset(e), e.compressed_size);
    // Fresh memory: its page faults are taken by the thread that copies.
    memory[i] = std::make_shared_for_overwrite<std::byte[]>(src.size());
    stored_total += src.size();
    for (std::size_t off = 0; off < src.size(); off += kJobBytes)
      jobs.push_back(
          Job{i, src.data() + off, memory[i].get() + off, std::min(kJobBytes, src.size() - off)});
  }
  std::unique_ptr<std::atomic<std::size_t>[]> remaining(new std::atomic<std::size_t>[n]);
  for (std::size_t i = 0; i < n; ++i)
    remaining[i].store((i + 1 < n ? first_job[i + 1] : jobs.size()) - first_job[i],
                       std::memory_order_relaxed);

  // Both threads take jobs in order until none are left or `stop` is set.
  std::atomic<std::size_t> next_job{0};
  std::atomic<bool> stop{false};
  auto run_one = [&]() noexcept {
    if (stop.load(std::memory_order_relaxed)) return false;
    const std::size_t k = next_job.fetch_add(1, std::memory_order_relaxed);
    if (k >= jobs.size()) return false;
    Job& j = jobs[k];
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
  detail::ProgressTracker tracker(progress, "load");
  tracker.set_total(total);
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
          crc = k == first_job[i] ? jobs[k].crc
                                  : detail::crc32_concat(crc, jobs[k].crc, jobs[k].size);
        if (crc != e.crc32)
          fail_corrupt("CRC-32 mismatch: the entry data is damaged", {.entry = e.name});
        const std::byte* data = memory[i].get();
        out[i] = Bytes::borrow({data, e.compressed_size}, std::move(memory[i]));
      } else {
        out[i] = libzip()->read(e, e.uncompressed_size);
      }
      tracker.advance(e.compressed_size);
    }
  };
  while (run_one()) finish_ready(false);
  finish_ready(true);
  tracker.finish();
  return out;
}

Bytes EntryReader::read_prefix(const EntryInfo& entry, std::uint64_t length) const {
  length = std::min(length, entry.uncompressed_size);
  const EntryInfo* one[] = {&entry};
  prefetch(one, length);
  if (entry.stored()) return file_.slice(data_offset(entry), length);
  return libzip()->read(entry, length);
}

Bytes EntryReader::read_range(const EntryInfo& entry, std::uint64_t offset,
                              std::uint64_t length) const {
  if (offset > entry.uncompressed_size || length > entry.uncompressed_size - offset)
    throw Error(ErrorCode::invalid_argument, "internal error: a range read outside an entry's data",
                {.entry = entry.name});
  if (!entry.stored()) {
    const EntryInfo* one[] = {&entry};
    prefetch(one, offset + length);
    const std::uint64_t d = data_offset(entry);
    if (d > file_.size() || entry.compressed_size > file_.size() - d)
      fail_corrupt("entry data beyond the end of the archive", {.entry = entry.name});
    if (entry.method != kMethodDeflate)
      fail_corrupt("unsupported compression method", {.entry = entry.name});
    std::shared_ptr<std::byte[]> out =
        std::make_shared_for_overwrite<std::byte[]>(static_cast<std::size_t>(length));
    inflate_part(file_.span().subspan(d, entry.compressed_size), entry, offset,
                 {out.get(), static_cast<std::size_t>(length)});
    const std::byte* bytes = out.get();
    return Bytes::borrow({bytes, static_cast<std::size_t>(length)}, std::move(out));
  }
  const std::uint64_t d = data_offset(entry);  // the local header read and checked
  if (source_) source_->ensure(d + offset, length);
  return file_.slice(d + offset, length);
}

void EntryReader::stream(const EntryInfo& entry,
                         const std::function<void(std::span<const std::byte>)>& sink,
                         std::uint64_t until) const {
  const EntryInfo* one[] = {&entry};
  prefetch(one, until);
  if (entry.data_offset != kDataOffsetUnknown) return stream_entry(file_, entry, sink, until);
  EntryInfo checked = entry;
  checked.data_offset = data_offset(entry);
  stream_entry(file_, checked, sink, until);
}

void EntryReader::stream(const EntryInfo& entry,
                         const std::function<void(std::span<const std::byte>)>& sink) const {
  stream(entry, sink, UINT64_MAX);
}

}  // namespace modelzip::zip
