#include "remote/s3_upload_sink.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "modelzip/error.hpp"
#include "remote/stale_uploads.hpp"

namespace modelzip::remote {
namespace {

// Given bytes at or beyond the cursor, not yet taken into a part.
struct Segment {
  bool keep = false;
  Bytes data;              // !keep: data.span().subspan(from, length)
  std::uint64_t from = 0;  // keep: offset in the old object
  std::uint64_t length = 0;
  bool skip = false;    // uploaded by another sink (S3UploadSink::skip)
  int next_number = 0;  // skip: the number of the part after it
};

struct Part {
  int number = 0;
  std::uint64_t start = 0;
  std::vector<std::byte> bytes;  // [start, start + bytes.size()) of the result
  std::uint64_t missing = 0;     // reserved bytes of it not yet written
};

struct Job {
  int number = 0;
  std::vector<std::byte> bytes;  // an UploadPart body, or
  bool copy = false;             // an UploadPartCopy of [first, first + length)
  std::uint64_t first = 0, length = 0;
};

// The largest copy part a kept range is cut into where the range allows
// several (a server copies one part per request: parts copy in parallel).
constexpr std::uint64_t kCopyPart = std::uint64_t{64} << 20;

std::string range_text(std::uint64_t offset, std::uint64_t length) {
  return "[" + std::to_string(offset) + ", " + std::to_string(offset + length) + ")";
}

}  // namespace

S3UploadStart::S3UploadStart(std::shared_ptr<const S3Multipart> client,
                             std::optional<std::chrono::seconds> abort_stale_after)
    : s3_(std::move(client)) {
  id_ = std::async(std::launch::async, [s3 = s3_, abort_stale_after] {
    std::future<std::vector<S3PendingUpload>> stale;
    if (abort_stale_after)
      stale = std::async(std::launch::async,
                         [&] { return list_stale_uploads(*s3, *abort_stale_after); });
    std::string id = s3->create();  // a throw waits for the listing (future)
    if (stale.valid()) abort_uploads(*s3, stale.get(), id);
    return id;
  });
}

S3UploadStart::~S3UploadStart() {
  if (!id_.valid()) return;  // taken
  try {
    s3_->abort(id_.get());
  } catch (...) {  // not created, or listed and aborted by the next writer
  }
}

std::string S3UploadStart::take() {
  return id_.get();  // a second call: std::future_error
}

struct S3UploadSink::Impl {
  std::shared_ptr<const S3Multipart> s3;
  S3UploadOptions o;
  std::string upload_id;

  std::mutex m;
  std::condition_variable cv;
  std::deque<Job> queue;
  int running = 0;
  bool stopping = false;
  std::vector<std::thread> workers;
  std::exception_ptr error;
  std::vector<S3Part> done;

  std::uint64_t cursor = 0;  // every byte below it is in a part
  std::map<std::uint64_t, Segment> ahead;
  std::map<std::uint64_t, std::uint64_t> reserved;  // at or beyond the cursor
  std::map<std::uint64_t, std::uint64_t> holes;     // reserved, behind the cursor
  Part open;                                        // ends at the cursor
  std::map<std::uint64_t, Part> held;               // closed, with holes
  std::set<std::uint64_t> skip_starts;              // where skipped ranges begin
  std::vector<S3Part> foreign;                      // add_parts()
  int next_number = 1;
  std::optional<std::uint64_t> end;
  bool flushing = false;  // finish(): kept ranges at the end are taken too
  bool finished = false, committed = false;
  std::string etag;
  std::atomic<std::uint64_t> uploaded{0}, copied{0};
  // Bytes in part buffers (filling, held, queued, being uploaded), and the
  // most at once; guarded by m.
  std::uint64_t buffered = 0, peak_buffered = 0;

  [[noreturn]] void fail(ErrorCode code, const std::string& message) const {
    remote::fail(code, s3->url(), message);
  }

  void check_error() const {
    if (error) std::rethrow_exception(error);
  }

  void work() {
    std::unique_lock lock(m);
    for (;;) {
      cv.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) return;
      Job job = std::move(queue.front());
      queue.pop_front();
      ++running;
      lock.unlock();
      std::optional<S3Part> part;
      std::exception_ptr failure;
      try {
        if (job.copy) {
          part = s3->upload_part_copy(upload_id, job.number, o.old_key, job.first, job.length,
                                      o.old_etag);
          copied += job.length;
        } else {
          part = s3->upload_part(upload_id, job.number, job.bytes, o.parallel);
          uploaded += job.bytes.size();
        }
      } catch (...) {
        failure = std::current_exception();
      }
      const std::uint64_t body = job.bytes.size();
      job.bytes = {};
      lock.lock();
      buffered -= body;
      --running;
      if (failure && !error) {
        error = failure;
        queue.clear();
      }
      if (part) done.push_back(std::move(*part));
      cv.notify_all();
    }
  }

  // Asks o.keep_going (without the lock); throws Error(cancelled) if it
  // says stop.
  void ask_keep_going(std::unique_lock<std::mutex>& lock) {
    if (!o.keep_going) return;
    lock.unlock();
    const bool go = o.keep_going();
    lock.lock();
    if (!go)
      throw Error(ErrorCode::cancelled, "save cancelled", ErrorContext{.archive = s3->url()});
  }

  // Waits until `ready`, asking o.keep_going about every 100 ms meanwhile.
  template <class Pred>
  void wait_for_parts(std::unique_lock<std::mutex>& lock, Pred ready) {
    while (!cv.wait_for(lock, std::chrono::milliseconds(100), ready)) ask_keep_going(lock);
  }

  void enqueue(std::unique_lock<std::mutex>& lock, Job job) {
    if (workers.empty())
      for (int i = 0; i < o.parallel; ++i) workers.emplace_back([this] { work(); });
    wait_for_parts(lock, [&] {
      return error || queue.size() + static_cast<std::size_t>(running) <
                          static_cast<std::size_t>(o.parallel);
    });
    check_error();
    queue.push_back(std::move(job));
    cv.notify_all();
  }

  int number_next() {
    if (next_number > kS3MaxParts)
      fail(ErrorCode::limit_exceeded,
           "more than 10000 parts of " + std::to_string(o.part_size) +
               " bytes: use a larger part size for an object this large");
    return next_number++;
  }

  // A new, empty part to fill at the cursor, its buffer allocated once.
  void open_part() {
    open = Part{0, cursor, {}, 0};
    open.bytes.reserve(o.part_size);
  }

  // `n` more bytes in open.bytes.
  void grew(std::uint64_t n) {
    buffered += n;
    peak_buffered = std::max(peak_buffered, buffered);
  }

  void close_open(std::unique_lock<std::mutex>& lock) {
    Part part = std::move(open);
    open_part();
    part.number = number_next();
    if (part.missing > 0) {
      held.emplace(part.start, std::move(part));
      return;
    }
    enqueue(lock, Job{part.number, std::move(part.bytes)});
  }

  // The size the open part closes at: part_size, or up to the next skipped
  // range (or a joined sink's end) where the rest would be under 5 MiB.
  std::uint64_t part_limit() const {
    std::optional<std::uint64_t> boundary;
    if (auto f = skip_starts.upper_bound(open.start); f != skip_starts.end()) boundary = *f;
    if (!o.join_upload.empty() && end && *end > open.start && (!boundary || *end < *boundary))
      boundary = *end;
    if (boundary && *boundary - open.start < o.part_size + kS3MinPart)
      return std::max<std::uint64_t>(*boundary - open.start, 1);
    return o.part_size;
  }
  std::uint64_t room() const { return part_limit() - open.bytes.size(); }

  // Bytes of the old object for a part. A fetch stopped by an interrupt
  // (Ctrl-C, modelzip::request_cancel()) cancels the save, which has not
  // happened: o.keep_going is asked first, so that a caller that noticed
  // the interrupt itself (Python) stops in its own terms; else
  // Error(cancelled) says so.
  Bytes fetch(std::unique_lock<std::mutex>& lock, std::uint64_t from, std::uint64_t length) {
    if (!o.old_source || from > o.old_file.size() || length > o.old_file.size() - from)
      fail(ErrorCode::invalid_argument,
           "kept range " + range_text(from, length) + " is not in the existing object");
    try {
      o.old_source->ensure(from, length);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::cancelled) throw;
      ask_keep_going(lock);
      throw save_cancelled(e, "fetching bytes of the old object to upload",
                           "its upload is aborted, the archive unchanged");
    }
    return Bytes::copy_of(o.old_file.span().subspan(from, length));
  }

  // The kept range at the cursor: copied server-side where it makes parts
  // of at least kS3MinPart, else fetched and put back as data.
  void take_kept(std::unique_lock<std::mutex>& lock, Segment s) {
    if (!open.bytes.empty() && open.bytes.size() < kS3MinPart) {
      const std::uint64_t t = std::min(s.length, kS3MinPart - open.bytes.size());
      if (t < s.length) ahead[cursor + t] = Segment{true, {}, s.from + t, s.length - t};
      ahead[cursor] = Segment{false, fetch(lock, s.from, t), 0, t};
      return;
    }
    if (s.length < kS3MinPart) {
      ahead[cursor] = Segment{false, fetch(lock, s.from, s.length), 0, s.length};
      return;
    }
    if (!open.bytes.empty()) close_open(lock);
    ask_keep_going(lock);  // a copy may be long: none starts after a cancel
    // Equal copies (see the header): at least 5 MiB, at most 5 GiB.
    const std::uint64_t wanted =
        std::min<std::uint64_t>({(s.length + kCopyPart - 1) / kCopyPart, s.length / kS3MinPart,
                                 2 * static_cast<std::uint64_t>(o.parallel)});
    const std::uint64_t n = std::max((s.length + kS3MaxPart - 1) / kS3MaxPart, wanted);
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t a = s.length * i / n, b = s.length * (i + 1) / n;
      enqueue(lock, Job{number_next(), {}, true, s.from + a, b - a});
    }
    cursor += s.length;
    open_part();
  }

  // Whether bytes are given or reserved at `offset`.
  bool followed(std::uint64_t offset) const {
    return ahead.count(offset) > 0 || reserved.count(offset) > 0;
  }

  // Takes every given or reserved byte at the cursor into parts. A kept
  // range is taken only once something follows it (or at finish()), so
  // that kept ranges given one after the other, contiguous in the old
  // object too, become copies of one range instead of a part each.

  void advance(std::unique_lock<std::mutex>& lock) {
    for (;;) {
      if (auto it = ahead.find(cursor); it != ahead.end()) {
        if (it->second.keep && !flushing && !followed(cursor + it->second.length))
          return;  // held: a contiguous kept range may follow (keep() merges it)
        Segment s = std::move(it->second);
        ahead.erase(it);
        if (s.skip) {
          if (!open.bytes.empty() || open.missing > 0) close_open(lock);
          if (next_number > s.next_number)
            fail(ErrorCode::invalid_argument, "part " + std::to_string(next_number) + " before " +
                                                  range_text(cursor, s.length) +
                                                  " overlaps the parts numbered after it");
          cursor += s.length;
          next_number = s.next_number;
          open_part();
          continue;
        }
        if (s.keep) {
          take_kept(lock, std::move(s));
          continue;
        }
        const std::uint64_t take = std::min(s.length, room());
        const auto* p = s.data.data() + s.from;
        open.bytes.insert(open.bytes.end(), p, p + take);
        grew(take);
        cursor += take;
        if (take < s.length)
          ahead[cursor] = Segment{false, std::move(s.data), s.from + take, s.length - take};
      } else if (auto r = reserved.find(cursor); r != reserved.end()) {
        const std::uint64_t length = r->second;
        reserved.erase(r);
        const std::uint64_t take = std::min(length, room());
        open.bytes.resize(open.bytes.size() + take);
        grew(take);
        open.missing += take;
        holes[cursor] = take;
        cursor += take;
        if (take < length) reserved[cursor] = length - take;
      } else {
        return;
      }
      if (open.bytes.size() == part_limit()) close_open(lock);
    }
  }

  // Bytes for reserved holes behind the cursor.
  void fill_holes(std::unique_lock<std::mutex>& lock, std::uint64_t offset,
                  std::span<const std::byte> data) {
    while (!data.empty()) {
      auto h = holes.upper_bound(offset);
      if (h == holes.begin() || (--h, offset >= h->first + h->second))
        fail(ErrorCode::invalid_argument,
             "bytes " + range_text(offset, data.size()) +
                 " were given twice or were not reserved before later bytes");
      const std::uint64_t take =
          std::min<std::uint64_t>(data.size(), h->first + h->second - offset);
      const auto [hole_at, hole_length] = *h;
      holes.erase(h);
      if (offset > hole_at) holes[hole_at] = offset - hole_at;
      if (offset + take < hole_at + hole_length)
        holes[offset + take] = hole_at + hole_length - offset - take;
      Part* part = &open;
      auto hp = held.end();
      if (offset < open.start) {
        hp = std::prev(held.upper_bound(offset));
        part = &hp->second;
      }
      std::memcpy(part->bytes.data() + (offset - part->start), data.data(), take);
      part->missing -= take;
      if (hp != held.end() && part->missing == 0) {
        Job job{part->number, std::move(part->bytes)};
        held.erase(hp);
        enqueue(lock, std::move(job));
      }
      offset += take;
      data = data.subspan(take);
    }
  }

  void no_overlap_ahead(std::uint64_t offset, std::uint64_t length) const {
    auto next = ahead.lower_bound(offset);
    bool overlap = next != ahead.end() && next->first < offset + length;
    if (next != ahead.begin()) {
      auto prev = std::prev(next);
      overlap = overlap || prev->first + prev->second.length > offset;
    }
    if (overlap)
      fail(ErrorCode::invalid_argument, "bytes " + range_text(offset, length) + " given twice");
  }

  // Removes [offset, offset + length) from the reserved ranges ahead.
  void unreserve(std::uint64_t offset, std::uint64_t length) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> overlapping;
    auto it = reserved.upper_bound(offset);
    if (it != reserved.begin()) --it;
    for (; it != reserved.end() && it->first < offset + length; ++it)
      if (it->first + it->second > offset) overlapping.push_back(*it);
    for (auto [at, n] : overlapping) {
      reserved.erase(at);
      if (at < offset) reserved[at] = offset - at;
      if (at + n > offset + length) reserved[offset + length] = at + n - offset - length;
    }
  }
};

S3UploadSink::S3UploadSink(std::shared_ptr<const S3Multipart> client, S3UploadOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->s3 = std::move(client);
  impl_->o = std::move(options);
  const auto& o = impl_->o;
  if (o.part_size < kS3MinPart || o.part_size > kS3MaxPart || o.parallel < 1 || o.parallel > 64)
    impl_->fail(ErrorCode::invalid_argument,
                "S3 part size must be 5 MiB to 5 GiB and parts in flight 1 to 64 (got " +
                    std::to_string(o.part_size) + " bytes, " + std::to_string(o.parallel) + ")");
  if (!o.join_upload.empty())
    impl_->upload_id = o.join_upload;
  else
    impl_->upload_id =
        o.started ? o.started->take() : S3UploadStart(impl_->s3, o.abort_stale_after).take();
  impl_->open_part();
}

S3UploadSink::~S3UploadSink() {
  {
    std::lock_guard lock(impl_->m);
    impl_->stopping = true;
    impl_->queue.clear();
  }
  impl_->cv.notify_all();
  for (auto& t : impl_->workers) t.join();
  if (!impl_->committed && impl_->o.join_upload.empty()) {
    try {
      impl_->s3->abort(impl_->upload_id);
    } catch (...) {  // listed and aborted by the next writer (see header)
    }
  }
}

void S3UploadSink::write(std::uint64_t offset, const Bytes& data) {
  std::unique_lock lock(impl_->m);
  auto& s = *impl_;
  s.check_error();
  if (data.empty()) return;
  std::span<const std::byte> bytes = data.span();
  if (offset < s.cursor) {
    const std::uint64_t behind = std::min<std::uint64_t>(bytes.size(), s.cursor - offset);
    s.fill_holes(lock, offset, bytes.first(behind));
    bytes = bytes.subspan(behind);
    offset += behind;
    if (bytes.empty()) return;
  }
  const std::uint64_t from = data.size() - bytes.size();
  s.no_overlap_ahead(offset, bytes.size());
  s.unreserve(offset, bytes.size());
  s.ahead[offset] = Segment{false, data, from, bytes.size()};
  s.advance(lock);
}

void S3UploadSink::keep(std::uint64_t offset, io::ByteRange source) {
  std::unique_lock lock(impl_->m);
  auto& s = *impl_;
  s.check_error();
  if (source.length == 0) return;
  if (s.o.old_key.empty() || !s.o.old_source || source.offset > s.o.old_file.size() ||
      source.length > s.o.old_file.size() - source.offset)
    s.fail(ErrorCode::invalid_argument, "cannot keep " + range_text(source.offset, source.length) +
                                            ": not a range of an existing object");
  if (offset < s.cursor)
    s.fail(ErrorCode::invalid_argument,
           "kept range at " + std::to_string(offset) + " is behind bytes already given");
  s.no_overlap_ahead(offset, source.length);
  if (auto prev = s.ahead.lower_bound(offset); prev != s.ahead.begin()) {
    --prev;
    Segment& p = prev->second;
    if (p.keep && prev->first + p.length == offset && p.from + p.length == source.offset) {
      p.length += source.length;  // one range of the old object, moved as a whole
      s.advance(lock);
      return;
    }
  }
  s.ahead[offset] = Segment{true, {}, source.offset, source.length};
  s.advance(lock);
}

void S3UploadSink::reserve(io::ByteRange range) {
  std::unique_lock lock(impl_->m);
  auto& s = *impl_;
  s.check_error();
  if (range.length == 0) return;
  if (range.offset < s.cursor)
    s.fail(ErrorCode::invalid_argument, "reserved range " + range_text(range.offset, range.length) +
                                            " is behind bytes already given");
  s.reserved[range.offset] = range.length;
  s.advance(lock);
}

void S3UploadSink::set_end(std::uint64_t size) {
  std::lock_guard lock(impl_->m);
  impl_->end = size;
}

void S3UploadSink::finish() {
  std::unique_lock lock(impl_->m);
  auto& s = *impl_;
  s.check_error();
  s.flushing = true;
  s.advance(lock);
  if (!s.ahead.empty() || !s.reserved.empty() || !s.holes.empty() || s.open.missing > 0) {
    std::uint64_t first = s.cursor;
    if (!s.holes.empty()) first = s.holes.begin()->first;
    s.fail(ErrorCode::invalid_argument,
           "bytes from offset " + std::to_string(first) + " of the result were never given");
  }
  if (s.end && *s.end != s.cursor)
    s.fail(ErrorCode::invalid_argument, "the result's size is " + std::to_string(*s.end) +
                                            " bytes but " + std::to_string(s.cursor) +
                                            " were given");
  if (!s.open.bytes.empty() || (s.next_number == 1 && s.o.join_upload.empty()))
    s.close_open(lock);  // the last part
  s.wait_for_parts(lock, [&] { return s.error || (s.queue.empty() && s.running == 0); });
  s.check_error();
  s.finished = true;
}

void S3UploadSink::commit() {
  auto& s = *impl_;
  if (!s.finished) s.fail(ErrorCode::invalid_argument, "commit() before finish()");
  if (!s.o.join_upload.empty())
    s.fail(ErrorCode::invalid_argument, "commit() of a sink that joined another's upload");
  s.done.insert(s.done.end(), s.foreign.begin(), s.foreign.end());
  std::sort(s.done.begin(), s.done.end(),
            [](const S3Part& a, const S3Part& b) { return a.number < b.number; });
  s.etag = s.s3->complete(s.upload_id, s.done, s.o.condition, s.cursor);
  s.committed = true;
}

void S3UploadSink::skip(io::ByteRange range, int next_number) {
  std::unique_lock lock(impl_->m);
  auto& s = *impl_;
  s.check_error();
  if (range.offset < s.cursor)
    s.fail(ErrorCode::invalid_argument, "skipped range " + range_text(range.offset, range.length) +
                                            " is behind bytes already given");
  if (next_number < 1 || next_number > kS3MaxParts)
    s.fail(ErrorCode::invalid_argument,
           "part number " + std::to_string(next_number) + " is not in 1..10000");
  if (s.o.part_size > kS3MaxPart - kS3MinPart)  // a stretched part would pass 5 GiB
    s.fail(ErrorCode::invalid_argument,
           "S3 part size of a shared upload must be at most 5 GiB "
           "less 5 MiB");
  s.no_overlap_ahead(range.offset, std::max<std::uint64_t>(range.length, 1));
  s.ahead[range.offset] = Segment{false, {}, 0, range.length, true, next_number};
  s.skip_starts.insert(range.offset);
  s.advance(lock);
}

void S3UploadSink::add_parts(const std::vector<S3Part>& parts) {
  std::lock_guard lock(impl_->m);
  impl_->foreign.insert(impl_->foreign.end(), parts.begin(), parts.end());
}

std::vector<S3Part> S3UploadSink::parts() const {
  std::lock_guard lock(impl_->m);
  return impl_->done;
}

std::uint64_t shared_part_count(std::uint64_t length, std::uint64_t part_size) noexcept {
  return length < kS3MinPart + part_size ? 1 : (length - kS3MinPart) / part_size + 1;
}

const std::string& S3UploadSink::etag() const noexcept {
  return impl_->etag;
}
std::uint64_t S3UploadSink::uploaded_bytes() const noexcept {
  return impl_->uploaded.load();
}
std::uint64_t S3UploadSink::copied_bytes() const noexcept {
  return impl_->copied.load();
}
const std::string& S3UploadSink::upload_id() const noexcept {
  return impl_->upload_id;
}
std::uint64_t S3UploadSink::peak_buffered_bytes() const {
  std::lock_guard lock(impl_->m);
  return impl_->peak_buffered;
}

}  // namespace modelzip::remote
